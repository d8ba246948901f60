package alpha

import (
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
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
	u := canon.Usage{Known: true, InputTotal: c.PromptTokens.V, OutputTotal: c.CompletionTokens.V}
	if d := c.PromptTokensDetails; d != nil {
		u.CacheRead, u.CacheWrite = d.CachedTokens.V, d.CacheWriteTokens.V
		u.InputAudio, u.InputImage, u.InputText = d.AudioTokens.V, d.ImageTokens.V, d.TextTokens.V
	}
	if d := c.CompletionTokensDetails; d != nil {
		u.Reasoning = d.ReasoningTokens.V
	}
	return u
}

// Billing is the billed usage of an alpha chat answer or stream, read from the translator's own decoding
// of it: the latest value of each count reported (stream usage is cumulative; never added) and the
// reported tier (each chunk's top-level service_tier, the usage's service_tier and speed). The zero value
// is ready.
type Billing struct {
	prompt, cached, cacheWrite, completion, imageOut, total jsonkit.Count
	usageTier, speed, topTier                               string
	found                                                   bool
}

// tier keeps a reported tier name, cleaned, when it says one.
func tier(dst *string, n jsonkit.Name) {
	if c := usage.CleanTier(n.S); n.Set && c != "" {
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

// ObserveRelay bills one relayed (passthrough) chunk from the members its relay reader found
// (ReadChatRelay): the last usage and service_tier, decoded alone. A chunk that is not a sound object, or a
// usage that does not decode, bills nothing.
func (b *Billing) ObserveRelay(r *jsonkit.Relay) {
	if !r.Whole {
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
	u := usage.Usage{CacheRead: b.cached.V, CacheCreation30m: b.cacheWrite.V,
		ReportedTier: usage.PickTier(b.speed, b.topTier, b.usageTier)}
	u.Input = max(max(b.prompt.V-b.cached.V, 0)-b.cacheWrite.V, 0)
	if b.completion.Set {
		u.ImageOutput = min(b.imageOut.V, b.completion.V)
		u.Output = b.completion.V - u.ImageOutput
	} else {
		u.ImageOutput = b.imageOut.V
	}
	return u, b.found
}

// chatBodyIn is what billing reads of a buffered chat completion.
type chatBodyIn struct {
	Usage       *chatUsageIn `json:"usage"`
	ServiceTier jsonkit.Name `json:"service_tier"`
}

// BillChatBody returns the billed usage of a buffered chat completion, reading only its service_tier and
// usage members; found is false when it reported no usage. A body that is not a JSON object is an error.
func BillChatBody(body []byte) (u usage.Usage, found bool, err error) {
	var c chatBodyIn
	if err := jsonkit.UnmarshalEvent(body, &c); err != nil {
		return usage.Usage{}, false, fmt.Errorf("decode chat completion usage: %w", err)
	}
	var b Billing
	tier(&b.topTier, c.ServiceTier)
	b.add(c.Usage)
	u, found = b.Usage()
	return u, found, nil
}
