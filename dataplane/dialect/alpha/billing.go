package alpha

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// chatUsageIn is an alpha chat usage object as an upstream writes it: every count with whether it was
// reported (the responses names too, which some servers write in chat answers), the details and the tier.
// The canonical usage (canonical) and the billed usage (Billing) both come from this one reading.
type chatUsageIn struct {
	PromptTokens            jsonkit.Count `json:"prompt_tokens"`
	CompletionTokens        jsonkit.Count `json:"completion_tokens"`
	InputTokens             jsonkit.Count `json:"input_tokens"`
	OutputTokens            jsonkit.Count `json:"output_tokens"`
	TotalTokens             jsonkit.Count `json:"total_tokens"`
	PromptTokensDetails     *inDetailsIn  `json:"prompt_tokens_details"`
	InputTokensDetails      *inDetailsIn  `json:"input_tokens_details"`
	CompletionTokensDetails *outDetailsIn `json:"completion_tokens_details"`
	OutputTokensDetails     *outDetailsIn `json:"output_tokens_details"`
	ServiceTier             jsonkit.Name  `json:"service_tier"`
	Speed                   jsonkit.Name  `json:"speed"`
}

type inDetailsIn struct {
	CachedTokens     jsonkit.Count `json:"cached_tokens"`
	CacheWriteTokens jsonkit.Count `json:"cache_write_tokens"`
	AudioTokens      jsonkit.Count `json:"audio_tokens"`
	ImageTokens      jsonkit.Count `json:"image_tokens"`
	TextTokens       jsonkit.Count `json:"text_tokens"`
}

type outDetailsIn struct {
	ReasoningTokens jsonkit.Count `json:"reasoning_tokens"`
	ImageTokens     jsonkit.Count `json:"image_tokens"`
}

func (c *chatUsageIn) canonical() canon.Usage {
	if c == nil {
		return canon.Usage{}
	}
	// The chat names win over the responses names (input_tokens, …) when both are written, as in Billing.add.
	u := canon.Usage{Known: true, InputTotal: c.InputTokens.V, OutputTotal: c.OutputTokens.V}
	if c.PromptTokens.Set {
		u.InputTotal = c.PromptTokens.V
	}
	if c.CompletionTokens.Set {
		u.OutputTotal = c.CompletionTokens.V
	}
	if d := cmp.Or(c.PromptTokensDetails, c.InputTokensDetails); d != nil {
		u.CacheRead, u.CacheWrite = d.CachedTokens.V, d.CacheWriteTokens.V
		u.InputAudio, u.InputImage, u.InputText = d.AudioTokens.V, d.ImageTokens.V, d.TextTokens.V
	}
	if d := cmp.Or(c.CompletionTokensDetails, c.OutputTokensDetails); d != nil {
		u.Reasoning = d.ReasoningTokens.V
	}
	return u
}

// Billing is the billed usage of an alpha answer or stream (chat, responses, images), read from the
// translator's own decoding of it or from a relayed stream's members: the latest value of each count reported
// (stream usage is cumulative; never added) and the reported tier (each chunk's or response's top-level
// service_tier, the usage's service_tier and speed). The zero value bills chat; ResponsesBilling and
// ImageBilling return the others.
type Billing struct {
	prompt, cached, cacheWrite, completion, imageOut, total jsonkit.Count
	usageTier, speed, topTier                               string
	found                                                   bool
	of                                                      billed
}

// billed is what a Billing reads: where a relayed event's usage is and how output tokens divide.
type billed uint8

const (
	billChat      billed = iota // a chunk's top-level usage and service_tier
	billResponses               // the usage and service_tier of the response object response.* events carry
	billImages                  // an image event's top-level usage; output tokens are image output
)

// ResponsesBilling bills a responses stream (or answer): usage arrives in the response object of the
// terminal response.completed / response.incomplete / response.failed event.
func ResponsesBilling() Billing { return Billing{of: billResponses} }

// ImageBilling bills an image generation or edit (stream or answer): usage arrives on the completed event;
// its output tokens are image output unless output_tokens_details.image_tokens gives the subset.
func ImageBilling() Billing { return Billing{of: billImages} }

// tier keeps a reported tier name, cleaned, when it says one.
func tier(dst *string, n jsonkit.Name) {
	if c := canon.CleanTier(n.S); n.Set && c != "" {
		*dst = c
	}
}

// top takes a chunk's or answer's top-level service_tier (s: the string, "" when absent). s may be a view
// of a reused buffer: it is copied only when it changes the tier.
func (b *Billing) top(s string) {
	if s == "" || s == b.topTier {
		return
	}
	tier(&b.topTier, jsonkit.Name{S: strings.Clone(s), Set: true})
}

// ObserveRelay bills one relayed (passthrough) event from the members its relay reader found (ReadChatRelay,
// ReadResponsesRelay): the last usage and service_tier, decoded alone, or for responses the last response
// object's. An event that is not a sound object, or a usage that does not decode, bills nothing.
func (b *Billing) ObserveRelay(r *jsonkit.Relay) {
	if !r.Whole {
		return
	}
	if b.of == billResponses {
		b.observeResponse(r.ResponseValue)
		return
	}
	var u *chatUsageIn
	if !jsonkit.IsNull(r.Usage) {
		u = new(chatUsageIn)
		if err := jsonkit.UnmarshalEvent(r.Usage, u); err != nil {
			return
		}
	}
	if text, ok := jsonkit.PlainString(r.Tier); ok {
		b.top(string(text)) // no copy unless the tier changes (every chunk repeats it)
	} else if t := r.Tier; t != nil {
		var n jsonkit.Name
		if n.UnmarshalJSON(t) == nil {
			tier(&b.topTier, n)
		}
	}
	b.add(u)
}

// observeResponse bills a responses event's response object (raw; nil or null: none).
func (b *Billing) observeResponse(raw []byte) {
	if jsonkit.IsNull(raw) {
		return
	}
	var c bodyIn
	if jsonkit.UnmarshalEvent(raw, &c) != nil {
		return
	}
	tier(&b.topTier, c.ServiceTier)
	b.add(c.Usage)
}

// add merges one usage object. The chat names win over the responses names when both appear in one object;
// prompt_tokens_details wins over input_tokens_details, completion_tokens_details over output_tokens_details.
func (b *Billing) add(u *chatUsageIn) {
	if u == nil {
		return
	}
	if u.PromptTokens.Set {
		b.prompt = u.PromptTokens
	} else {
		b.prompt.Merge(u.InputTokens)
	}
	if u.CompletionTokens.Set {
		b.completion = u.CompletionTokens
	} else {
		b.completion.Merge(u.OutputTokens)
	}
	b.total.Merge(u.TotalTokens)
	for _, d := range [...]*inDetailsIn{u.InputTokensDetails, u.PromptTokensDetails} {
		if d != nil {
			b.cached.Merge(d.CachedTokens)
			b.cacheWrite.Merge(d.CacheWriteTokens)
		}
	}
	for _, d := range [...]*outDetailsIn{u.OutputTokensDetails, u.CompletionTokensDetails} {
		if d != nil {
			b.imageOut.Merge(d.ImageTokens)
		}
	}
	tier(&b.usageTier, u.ServiceTier)
	tier(&b.speed, u.Speed)
	b.found = true
}

// Usage returns the billed usage; found is false while no usage object was read. Cached and cache-written
// tokens leave input; the cache-written ones are 30-minute cache creation (alpha's prompt cache has one
// lifetime, 30 minutes: its request option's only value is "30m"); the completion image_tokens subset is
// image output, the rest output.
func (b *Billing) Usage() (usage.Usage, bool) {
	u := usage.Usage{CacheRead: b.cached.V, CacheCreation30m: b.cacheWrite.V, ReportedTier: b.tier()}
	u.Input = max(max(b.prompt.V-b.cached.V, 0)-b.cacheWrite.V, 0)
	switch {
	case b.of == billImages && !b.imageOut.Set:
		u.ImageOutput = b.completion.V
	case b.completion.Set:
		u.ImageOutput = min(b.imageOut.V, b.completion.V)
		u.Output = b.completion.V - u.ImageOutput
	default:
		u.ImageOutput = b.imageOut.V
	}
	return u, b.found
}

func (b *Billing) tier() string { return canon.PickTier(b.speed, b.topTier, b.usageTier) }

// bodyIn is what billing reads of a buffered answer (chat completion, response, image, embedding, rerank)
// or of a responses event's response object.
type bodyIn struct {
	Usage       *chatUsageIn `json:"usage"`
	ServiceTier jsonkit.Name `json:"service_tier"`
}

// readBody bills a buffered answer's service_tier and usage members into a Billing of the kind of.
func readBody(body []byte, of billed, what string) (Billing, error) {
	var c bodyIn
	if err := jsonkit.UnmarshalEvent(body, &c); err != nil {
		return Billing{}, fmt.Errorf("decode %s usage: %w", what, err)
	}
	b := Billing{of: of}
	tier(&b.topTier, c.ServiceTier)
	b.add(c.Usage)
	return b, nil
}

// BillChatBody returns the billed usage of a buffered chat completion, reading only its service_tier and
// usage members; found is false when it reported no usage. A body that is not a JSON object is an error.
func BillChatBody(body []byte) (u usage.Usage, found bool, err error) {
	b, err := readBody(body, billChat, "chat completion")
	if err != nil {
		return usage.Usage{}, false, err
	}
	u, found = b.Usage()
	return u, found, nil
}

// BillBody returns the billed usage of a buffered alpha answer of kind and op, reading only its
// service_tier and usage members: chat completions and responses (BillChatBody's rules), images (output
// tokens are image output unless image_tokens gives the subset), embeddings (prompt_tokens, else
// input_tokens, else total_tokens, less cached, is input) and rerank (total_tokens, else prompt_tokens or
// input_tokens, is input; found only with one of them). found is false when it reported no usage, and for
// operations that are not billed; a body that is not a JSON object is an error.
func BillBody(kind vocab.Kind, op vocab.Operation, body []byte) (usage.Usage, bool, error) {
	switch {
	case kind == vocab.KindAlphaChatCompletions:
		return BillChatBody(body)
	case kind == vocab.KindAlphaResponses:
		return billBody(body, billResponses, "alpha responses")
	case op == vocab.OpCreateImage || op == vocab.OpEditImage:
		return billBody(body, billImages, "alpha image")
	case op == vocab.OpCreateEmbedding:
		b, err := readBody(body, billChat, "alpha embedding")
		if err != nil {
			return usage.Usage{}, false, err
		}
		in := b.prompt
		if !in.Set {
			in = b.total
		}
		return usage.Usage{Input: max(in.V-b.cached.V, 0), CacheRead: b.cached.V, ReportedTier: b.tier()}, b.found, nil
	case op == vocab.OpRerank:
		b, err := readBody(body, billChat, "rerank")
		if err != nil {
			return usage.Usage{}, false, err
		}
		in := b.total
		if !in.Set {
			in = b.prompt
		}
		return usage.Usage{Input: in.V, ReportedTier: b.tier()}, b.found && in.Set, nil
	}
	return usage.Usage{}, false, nil
}

func billBody(body []byte, of billed, what string) (usage.Usage, bool, error) {
	b, err := readBody(body, of, what)
	if err != nil {
		return usage.Usage{}, false, err
	}
	u, found := b.Usage()
	return u, found, nil
}
