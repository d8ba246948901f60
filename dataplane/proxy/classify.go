package proxy

import (
	"github.com/tollgate/tollgate/shared/vocab"
	"net/http"
	"strings"
)

// Class is the classification of one inbound request: its operation key and what the data plane needs
// to know about where the model and the stream flag live.
type Class struct {
	Op   vocab.Operation
	Kind vocab.Kind
	// Stream is set when the client asked for a streamed answer: generation requests (Op is then
	// OpStreamGenerateContent) and image requests with "stream": true.
	Stream bool
	// PathModel is the model named by the path (gamma's models/{model}:method, GET /v1/models/{model});
	// empty when the model is in the body or absent.
	PathModel string
	// ModelInBody says the model is the body's top-level "model" member (alpha and beta JSON bodies;
	// image edits carry it as a multipart form field).
	ModelInBody bool
	// Multipart says the body is multipart/form-data (image edits).
	Multipart bool
	// NoModel says the operation names no model (model listing, responses/conversations sub-resources).
	NoModel bool
	// GammaSSE says a gamma stream asked for the SSE framing (?alt=sse); without it gamma streams are one
	// JSON array delivered incrementally.
	GammaSSE bool
}

// Classify maps an inbound request to its class from its method, path, raw query and header (only
// anthropic-version is read); the body is not needed, so a request classifies (and its errors take the
// caller's dialect) before its body is read. Generation requests of alpha and beta classify as
// OpGenerateContent until WithStream applies the body's "stream" member. ok is false for a path or
// method the gateway does not serve (404).
//
// The gamma dialect is served under /v1/ as well as /v1beta/ (the official gamma SDK defaults to v1): a
// POST /v1/models/{model}:{method} is gamma, and so are GET /v1/models and /v1/models/{model} from a
// gamma client — one that authenticates the gamma way (x-goog-api-key, or a key= query parameter).
func Classify(method, path, rawQuery string, h http.Header) (c Class, ok bool) {
	beta := len(h["Anthropic-Version"]) > 0 && h["Anthropic-Version"][0] != ""
	gamma := !beta && (len(h["X-Goog-Api-Key"]) > 0 || queryHasKey(rawQuery, "key"))
	return classifyPath(method, path, rawQuery, beta, gamma)
}

// WithStream applies the body's stream flag (ParseRequest's Request.Stream, or a multipart form's stream
// field) to a class: generation requests with a model in the body become OpStreamGenerateContent, image
// requests stream.
func (c Class) WithStream(stream bool) Class {
	switch {
	case c.Op == vocab.OpGenerateContent && c.ModelInBody && stream:
		c.Op, c.Stream = vocab.OpStreamGenerateContent, true
	case c.Op == vocab.OpCreateImage || c.Op == vocab.OpEditImage:
		c.Stream = stream
	}
	return c
}

// ClassifyPath is Classify with the anthropic-version presence already read: betaVersion says the
// request carries it (it makes GET /v1/models beta-shaped).
func ClassifyPath(method, path, rawQuery string, betaVersion bool) (Class, bool) {
	return classifyPath(method, path, rawQuery, betaVersion, !betaVersion && queryHasKey(rawQuery, "key"))
}

// classifyPath is ClassifyPath; gammaClient says the request authenticates the gamma way.
func classifyPath(method, path, rawQuery string, betaVersion, gammaClient bool) (Class, bool) {
	if rest, ok := strings.CutPrefix(path, "/v1beta/"); ok {
		return classifyGamma(method, rest, rawQuery)
	}
	if path == "/rerank" || path == "/v2/rerank" {
		return post(method, Class{Op: vocab.OpRerank, Kind: vocab.KindAlpha, ModelInBody: true})
	}
	rest, ok := strings.CutPrefix(path, "/v1/")
	if !ok {
		return Class{}, false
	}
	if name, ok := strings.CutPrefix(rest, "models/"); ok && (gammaClient || (method == http.MethodPost && strings.IndexByte(name, ':') >= 0)) {
		return classifyGamma(method, rest, rawQuery) // gamma under /v1/ (alpha has no POST on a model)
	}
	if rest == "models" && gammaClient {
		return classifyGamma(method, rest, rawQuery)
	}
	switch rest {
	case "chat/completions":
		return post(method, Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaChatCompletions, ModelInBody: true})
	case "responses":
		return post(method, Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaResponses, ModelInBody: true})
	case "responses/compact":
		return post(method, Class{Op: vocab.OpCompactContent, Kind: vocab.KindAlpha, ModelInBody: true})
	case "responses/input_tokens":
		return post(method, Class{Op: vocab.OpCountTokens, Kind: vocab.KindAlpha, ModelInBody: true})
	case "embeddings":
		return post(method, Class{Op: vocab.OpCreateEmbedding, Kind: vocab.KindAlpha, ModelInBody: true})
	case "images/generations":
		return post(method, Class{Op: vocab.OpCreateImage, Kind: vocab.KindAlpha, ModelInBody: true})
	case "images/edits":
		return post(method, Class{Op: vocab.OpEditImage, Kind: vocab.KindAlpha, ModelInBody: true, Multipart: true})
	case "rerank":
		return post(method, Class{Op: vocab.OpRerank, Kind: vocab.KindAlpha, ModelInBody: true})
	case "messages":
		return post(method, Class{Op: vocab.OpGenerateContent, Kind: vocab.KindBetaMessages, ModelInBody: true})
	case "messages/count_tokens":
		return post(method, Class{Op: vocab.OpCountTokens, Kind: vocab.KindBeta, ModelInBody: true})
	case "conversations":
		return post(method, Class{Op: vocab.OpCreateConversation, Kind: vocab.KindAlpha, ModelInBody: true})
	case "models":
		return get(method, Class{Op: vocab.OpListModels, Kind: modelsKind(betaVersion), NoModel: true})
	}
	if id, ok := strings.CutPrefix(rest, "models/"); ok && id != "" {
		return get(method, Class{Op: vocab.OpGetModel, Kind: modelsKind(betaVersion), PathModel: id})
	}
	if sub, ok := strings.CutPrefix(rest, "responses/"); ok {
		return classifyResponseSub(method, sub)
	}
	if sub, ok := strings.CutPrefix(rest, "conversations/"); ok {
		return classifyConversationSub(method, sub)
	}
	return Class{}, false
}

func modelsKind(beta bool) vocab.Kind {
	if beta {
		return vocab.KindBeta
	}
	return vocab.KindAlpha
}

func post(method string, c Class) (Class, bool) { return c, method == http.MethodPost }
func get(method string, c Class) (Class, bool)  { return c, method == http.MethodGet }

// classifyResponseSub handles /v1/responses/{id}[/cancel|/input_items].
func classifyResponseSub(method, sub string) (Class, bool) {
	c := Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaResponses, NoModel: true}
	id, tail, _ := strings.Cut(sub, "/")
	if id == "" {
		return Class{}, false
	}
	switch tail {
	case "":
		return c, method == http.MethodGet || method == http.MethodDelete
	case "cancel":
		return c, method == http.MethodPost
	case "input_items":
		return c, method == http.MethodGet
	}
	return Class{}, false
}

// classifyConversationSub handles /v1/conversations/{id}[/items[/{item_id}]].
func classifyConversationSub(method, sub string) (Class, bool) {
	c := Class{Op: vocab.OpCreateConversation, Kind: vocab.KindAlpha, NoModel: true}
	parts := strings.Split(sub, "/")
	if parts[0] == "" {
		return Class{}, false
	}
	switch {
	case len(parts) == 1:
		return c, method == http.MethodGet || method == http.MethodPost || method == http.MethodDelete
	case len(parts) == 2 && parts[1] == "items":
		return c, method == http.MethodGet || method == http.MethodPost
	case len(parts) == 3 && parts[1] == "items" && parts[2] != "":
		return c, method == http.MethodGet || method == http.MethodDelete
	}
	return Class{}, false
}

// classifyGamma handles /v1beta/models and /v1beta/models/{model}[:method].
func classifyGamma(method, rest, rawQuery string) (Class, bool) {
	if rest == "models" {
		return get(method, Class{Op: vocab.OpListModels, Kind: vocab.KindGamma, NoModel: true})
	}
	name, ok := strings.CutPrefix(rest, "models/")
	if !ok || name == "" {
		return Class{}, false
	}
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return get(method, Class{Op: vocab.OpGetModel, Kind: vocab.KindGamma, PathModel: name})
	}
	model, verb := name[:i], name[i+1:]
	if model == "" {
		return Class{}, false
	}
	c := Class{Kind: vocab.KindGamma, PathModel: model}
	switch verb {
	case "generateContent":
		c.Op, c.Kind = vocab.OpGenerateContent, vocab.KindGammaGenerateContent
	case "streamGenerateContent":
		c.Op, c.Kind, c.Stream = vocab.OpStreamGenerateContent, vocab.KindGammaGenerateContent, true
		c.GammaSSE = queryHas(rawQuery, "alt", "sse")
	case "countTokens":
		c.Op = vocab.OpCountTokens
	case "embedContent", "batchEmbedContents":
		c.Op = vocab.OpCreateEmbedding
	default:
		return Class{}, false
	}
	return post(method, c)
}

// queryHasKey reports whether rawQuery has the parameter key (with any value).
func queryHasKey(rawQuery, key string) bool {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}

// queryHas reports whether rawQuery has key=value (compared unescaped only for plain ASCII values).
func queryHas(rawQuery, key, value string) bool {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k == key && v == value {
			return true
		}
	}
	return false
}
