package admin

import (
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Cell is one declared default routing cell of a channel type: what a provider of that type does with an
// (operation, kind) until an operator changes it.
type Cell struct {
	Operation      vocab.Operation
	Kind           vocab.Kind
	Implementation vocab.Implementation
	// DestOperation and DestKind are set for transform_to cells only.
	DestOperation vocab.Operation
	DestKind      vocab.Kind
	// SortOrder is the cell's position in the table × 10, leaving room for operator rows between.
	SortOrder int32
}

var generationOps = []vocab.Operation{vocab.OpGenerateContent, vocab.OpStreamGenerateContent}

// cellTable builds cells in declaration order, numbering sort_order 10, 20, ….
type cellTable []Cell

func (t *cellTable) add(op vocab.Operation, kind vocab.Kind, impl vocab.Implementation, destKind vocab.Kind) {
	c := Cell{Operation: op, Kind: kind, Implementation: impl, SortOrder: int32(len(*t)+1) * 10}
	if impl == vocab.ImplTransformTo {
		c.DestOperation, c.DestKind = op, destKind
	}
	*t = append(*t, c)
}

// generation adds generate_content and stream_generate_content cells for each kind.
func (t *cellTable) generation(impl vocab.Implementation, destKind vocab.Kind, kinds ...vocab.Kind) {
	for _, k := range kinds {
		for _, op := range generationOps {
			t.add(op, k, impl, destKind)
		}
	}
}

// family adds cells of kind for each operation.
func (t *cellTable) family(impl vocab.Implementation, kind, destKind vocab.Kind, ops ...vocab.Operation) {
	for _, op := range ops {
		t.add(op, kind, impl, destKind)
	}
}

// models adds the local list_models and get_model cells for all three family kinds: the gateway
// answers model listing itself, so every dialect can list a provider's models whatever its channel.
func (t *cellTable) models() {
	for _, k := range vocab.FamilyKinds {
		t.family(vocab.ImplLocal, k, "", vocab.OpListModels, vocab.OpGetModel)
	}
}

// DefaultCells returns the declared default routing cells of a channel type, in a
// fresh slice; nil for an unknown channel type. Transform cells keep the inbound operation
// (dest_operation = operation): every channel's upstream streams natively.
func DefaultCells(ch vocab.ChannelType) []Cell {
	var t cellTable
	const (
		pass  = vocab.ImplPassthrough
		xform = vocab.ImplTransformTo
	)
	switch ch {
	case vocab.ChannelAlpha:
		t.generation(pass, "", vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses)
		t.family(pass, vocab.KindAlpha, "", vocab.OpCreateEmbedding, vocab.OpCreateImage, vocab.OpEditImage,
			vocab.OpCountTokens, vocab.OpCompactContent, vocab.OpCreateConversation)
		t.generation(xform, vocab.KindAlphaResponses, vocab.KindBetaMessages)
		t.generation(xform, vocab.KindAlphaChatCompletions, vocab.KindGammaGenerateContent)
	case vocab.ChannelBeta:
		t.generation(pass, "", vocab.KindBetaMessages)
		t.family(pass, vocab.KindBeta, "", vocab.OpCountTokens)
		t.generation(xform, vocab.KindBetaMessages, vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses,
			vocab.KindGammaGenerateContent)
	case vocab.ChannelGamma:
		t.generation(pass, "", vocab.KindGammaGenerateContent)
		t.family(pass, vocab.KindGamma, "", vocab.OpCountTokens, vocab.OpCreateEmbedding)
		t.generation(xform, vocab.KindGammaGenerateContent, vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses,
			vocab.KindBetaMessages)
		t.family(xform, vocab.KindAlpha, vocab.KindGamma, vocab.OpCreateEmbedding)
	case vocab.ChannelAWSBedrock:
		// The InvokeModel wire (beta body) of the Anthropic models; a model that is not an InvokeModel
		// model (settings invoke_model_prefixes) is served by these same cells through Converse
		// (docs/providers.md, "Cells and the model's wire").
		t.generation(pass, "", vocab.KindBetaMessages)
		t.family(pass, vocab.KindBeta, "", vocab.OpCountTokens)
		t.generation(xform, vocab.KindBetaMessages, vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses,
			vocab.KindGammaGenerateContent)
	case vocab.ChannelGCPVertex:
		// The generateContent wire (gamma) of the Gemini models; a model of publisher anthropic
		// (settings anthropic_model_prefixes) is served by these same cells through rawPredict (beta).
		t.generation(pass, "", vocab.KindGammaGenerateContent)
		t.family(pass, vocab.KindGamma, "", vocab.OpCountTokens)
		t.generation(xform, vocab.KindGammaGenerateContent, vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses,
			vocab.KindBetaMessages)
	case vocab.ChannelAzureOpenAI:
		// Azure OpenAI serves the alpha wire's chat completions, responses, embeddings and images.
		t.generation(pass, "", vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses)
		t.family(pass, vocab.KindAlpha, "", vocab.OpCreateEmbedding, vocab.OpCreateImage)
		t.generation(xform, vocab.KindAlphaResponses, vocab.KindBetaMessages)
		t.generation(xform, vocab.KindAlphaChatCompletions, vocab.KindGammaGenerateContent)
	case vocab.ChannelCustom, vocab.ChannelRouter:
		t.generation(pass, "", vocab.KindAlphaChatCompletions)
		t.family(pass, vocab.KindAlpha, "", vocab.OpCreateEmbedding, vocab.OpRerank)
		t.generation(xform, vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses, vocab.KindBetaMessages,
			vocab.KindGammaGenerateContent)
	default:
		return nil
	}
	t.models()
	return t
}

// defaultRows turns a channel's default cells into routing rows for a provider.
func defaultRows(providerID int64, ch vocab.ChannelType) []store.RoutingRule {
	cells := DefaultCells(ch)
	rows := make([]store.RoutingRule, len(cells))
	for i, c := range cells {
		rows[i] = store.RoutingRule{ProviderID: providerID, Operation: string(c.Operation), Kind: string(c.Kind),
			Implementation: string(c.Implementation), SortOrder: c.SortOrder, Enabled: true}
		if c.DestKind != "" {
			op, kind := string(c.DestOperation), string(c.DestKind)
			rows[i].DestOperation, rows[i].DestKind = &op, &kind
		}
	}
	return rows
}
