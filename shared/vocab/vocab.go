// Package vocab owns the provider-neutral vocabulary shared by both planes: operations, wire kinds,
// routing implementations, channel types, quota scopes and settlement end states, plus the
// classification of an inbound HTTP request into an operation key.
package vocab

// Operation is a provider-neutral operation: what a request does, whatever dialect it arrived in.
type Operation string

const (
	OpListModels            Operation = "list_models"
	OpGetModel              Operation = "get_model"
	OpCountTokens           Operation = "count_tokens"
	OpGenerateContent       Operation = "generate_content"
	OpStreamGenerateContent Operation = "stream_generate_content"
	OpCreateImage           Operation = "create_image"
	OpEditImage             Operation = "edit_image"
	OpRerank                Operation = "rerank"
	OpCreateEmbedding       Operation = "create_embedding"
	OpCompactContent        Operation = "compact_content"
	OpCreateConversation    Operation = "create_conversation"
)

// Operations lists every operation in a stable order.
var Operations = []Operation{
	OpListModels, OpGetModel, OpCountTokens, OpGenerateContent, OpStreamGenerateContent,
	OpCreateImage, OpEditImage, OpRerank, OpCreateEmbedding, OpCompactContent, OpCreateConversation,
}

// IsGeneration reports whether op is a content-generation operation.
func (op Operation) IsGeneration() bool {
	return op == OpGenerateContent || op == OpStreamGenerateContent
}

// Valid reports whether op is in the vocabulary.
func (op Operation) Valid() bool {
	for _, o := range Operations {
		if o == op {
			return true
		}
	}
	return false
}

// Kind is an inbound or destination wire kind.
type Kind string

const (
	KindAlphaChatCompletions Kind = "alpha_chat_completions"
	KindAlphaResponses       Kind = "alpha_responses"
	KindBetaMessages         Kind = "beta_messages"
	KindGammaGenerateContent Kind = "gamma_generate_content"

	KindAlpha Kind = "alpha"
	KindBeta  Kind = "beta"
	KindGamma Kind = "gamma"
)

// GenerationKinds are the content-generation kinds; FamilyKinds are the provider-family kinds.
var (
	GenerationKinds = []Kind{KindAlphaChatCompletions, KindAlphaResponses, KindBetaMessages, KindGammaGenerateContent}
	FamilyKinds     = []Kind{KindAlpha, KindBeta, KindGamma}
)

// IsGeneration reports whether k is a content-generation kind.
func (k Kind) IsGeneration() bool {
	for _, g := range GenerationKinds {
		if g == k {
			return true
		}
	}
	return false
}

// IsFamily reports whether k is a provider-family kind.
func (k Kind) IsFamily() bool { return k == KindAlpha || k == KindBeta || k == KindGamma }

// Family returns the dialect family of a kind: alpha, beta or gamma.
func (k Kind) Family() Kind {
	switch k {
	case KindAlphaChatCompletions, KindAlphaResponses, KindAlpha:
		return KindAlpha
	case KindBetaMessages, KindBeta:
		return KindBeta
	case KindGammaGenerateContent, KindGamma:
		return KindGamma
	}
	return ""
}

// KindFits reports whether kind k may be used with operation op in a routing cell: a generation operation
// takes a generation kind, every other operation a dialect family.
func KindFits(op Operation, k Kind) bool {
	if op.IsGeneration() {
		return k.IsGeneration()
	}
	return k.IsFamily()
}

// Implementation says how a routing cell is served.
type Implementation string

const (
	ImplPassthrough Implementation = "passthrough"
	ImplTransformTo Implementation = "transform_to"
	ImplLocal       Implementation = "local"
	ImplUnsupported Implementation = "unsupported"
)

// Valid reports whether i is a known implementation.
func (i Implementation) Valid() bool {
	switch i {
	case ImplPassthrough, ImplTransformTo, ImplLocal, ImplUnsupported:
		return true
	}
	return false
}

// ChannelType is a provider's channel type.
type ChannelType string

const (
	ChannelAlpha  ChannelType = "alpha"
	ChannelBeta   ChannelType = "beta"
	ChannelGamma  ChannelType = "gamma"
	ChannelCustom ChannelType = "custom"
	ChannelRouter ChannelType = "router"

	// The cloud-hosted channel types (docs/providers.md): a cloud is a way of addressing,
	// authenticating and framing the dialects its models speak.
	ChannelAWSBedrock  ChannelType = "aws_bedrock"
	ChannelGCPVertex   ChannelType = "gcp_vertex"
	ChannelAzureOpenAI ChannelType = "azure_openai"
)

// ChannelTypes lists every channel type.
var ChannelTypes = []ChannelType{ChannelAlpha, ChannelBeta, ChannelGamma, ChannelCustom, ChannelRouter,
	ChannelAWSBedrock, ChannelGCPVertex, ChannelAzureOpenAI}

// Valid reports whether c is a known channel type.
func (c ChannelType) Valid() bool {
	for _, t := range ChannelTypes {
		if t == c {
			return true
		}
	}
	return false
}

// Cloud reports whether c is a cloud-hosted channel type (aws_bedrock, gcp_vertex, azure_openai).
func (c ChannelType) Cloud() bool {
	return c == ChannelAWSBedrock || c == ChannelGCPVertex || c == ChannelAzureOpenAI
}

// Scope is a quota-bearing scope.
type Scope string

const (
	ScopeOrg  Scope = "org"
	ScopeTeam Scope = "team"
	ScopeUser Scope = "user"
	// ScopeKey is an API key's own budget (docs/budgets.md).
	ScopeKey Scope = "key"
)

// EndState is how a dispatched request ended; every settlement record carries one.
type EndState string

const (
	EndCompleted           EndState = "completed"
	EndUpstreamError       EndState = "upstream_error"
	EndUpstreamInterrupted EndState = "upstream_interrupted"
	EndClientDropped       EndState = "client_dropped"
	EndRejected            EndState = "rejected"
)

// UsageSource says where a settlement record's token counts came from.
type UsageSource string

const (
	SourceUpstream  UsageSource = "upstream"
	SourceLocal     UsageSource = "local"
	SourceEstimated UsageSource = "estimated"
	SourceNone      UsageSource = "none"
)
