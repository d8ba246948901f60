package beta

import (
	"fmt"
	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
)

// usageIn is a usage object as an upstream writes it: every category with whether it was reported, and the
// tier. The canonical usage (canonical) and the billed usage (Billing) both come from this one reading.
type usageIn struct {
	InputTokens              jsonkit.Count `json:"input_tokens"`
	OutputTokens             jsonkit.Count `json:"output_tokens"`
	CacheCreationInputTokens jsonkit.Count `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     jsonkit.Count `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5m jsonkit.Count `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h jsonkit.Count `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokensDetails *struct {
		ThinkingTokens jsonkit.Count `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
	ServiceTier jsonkit.Name `json:"service_tier"`
	Speed       jsonkit.Name `json:"speed"`
}

func (b *usageIn) canonical() canon.Usage {
	if b == nil {
		return canon.Usage{}
	}
	u := canon.Usage{Known: true, InputTotal: b.InputTokens.V + b.CacheCreationInputTokens.V + b.CacheReadInputTokens.V,
		CacheRead: b.CacheReadInputTokens.V, CacheWrite: b.CacheCreationInputTokens.V, OutputTotal: b.OutputTokens.V}
	if b.CacheCreation != nil {
		u.CacheWrite5m, u.CacheWrite1h = b.CacheCreation.Ephemeral5m.V, b.CacheCreation.Ephemeral1h.V
	}
	if b.OutputTokensDetails != nil {
		u.Reasoning = b.OutputTokensDetails.ThinkingTokens.V
	}
	return u
}

// Billing is the billed usage of a messages answer or stream, read from the translator's own decoding of
// it: the latest value of each category reported (stream usage is cumulative: message_start's, then each
// message_delta's; never added), and the reported tier. The zero value is ready.
type Billing struct {
	input, output, cacheCreation, cacheRead, cc5m, cc1h jsonkit.Count
	usageTier, speed, topTier                           string
	found, final                                        bool
}

// tier keeps a reported tier name, cleaned, when it says one.
func tier(dst *string, n jsonkit.Name) {
	if c := canon.CleanTier(n.S); n.Set && c != "" {
		*dst = c
	}
}

// add merges one usage object; final says it is a top-level usage (message_delta's), which counts the
// output (message_start's output_tokens is a placeholder).
func (b *Billing) add(u *usageIn, final bool) {
	if u == nil {
		return
	}
	b.input.Merge(u.InputTokens)
	b.output.Merge(u.OutputTokens)
	b.cacheCreation.Merge(u.CacheCreationInputTokens)
	b.cacheRead.Merge(u.CacheReadInputTokens)
	if u.CacheCreation != nil {
		b.cc5m.Merge(u.CacheCreation.Ephemeral5m)
		b.cc1h.Merge(u.CacheCreation.Ephemeral1h)
	}
	tier(&b.usageTier, u.ServiceTier)
	tier(&b.speed, u.Speed)
	b.found = true
	b.final = b.final || final
}

// message merges a message object's usage and service tier (a buffered answer, or message_start's).
func (b *Billing) message(m *betaResponse) {
	tier(&b.topTier, m.ServiceTier)
	b.add(m.Usage, false)
}

// messageIn is what billing reads of a relayed message_start's message.
type messageIn struct {
	Usage       *usageIn     `json:"usage"`
	ServiceTier jsonkit.Name `json:"service_tier"`
}

// ObserveRelay bills one relayed (passthrough) event from the members its relay reader found (ReadRelay):
// the top-level usage (message_delta's) and message_start's message, the last of each. Only those values
// are decoded; an event that is not a sound object, or a value that does not decode, bills nothing.
func (b *Billing) ObserveRelay(r *jsonkit.Relay) {
	if !r.Whole {
		return
	}
	var msg messageIn
	var top *usageIn
	if !jsonkit.IsNull(r.MessageValue) {
		if err := jsonkit.UnmarshalEvent(r.MessageValue, &msg); err != nil {
			return
		}
	}
	if !jsonkit.IsNull(r.Usage) {
		top = new(usageIn)
		if err := jsonkit.UnmarshalEvent(r.Usage, top); err != nil {
			return
		}
	}
	if !jsonkit.IsNull(r.MessageValue) {
		tier(&b.topTier, msg.ServiceTier)
		b.add(msg.Usage, false)
	}
	b.add(top, true)
}

// Usage returns the billed usage; found is false while no usage object was read. input_tokens already
// excludes cache reads and writes; the cache_creation split gives 5m and 1h (without it the aggregate is
// 5m; an aggregate above the split bills the remainder as 5m).
func (b *Billing) Usage() (u usage.Usage, found bool) {
	u = usage.Usage{Input: b.input.V, Output: b.output.V, CacheRead: b.cacheRead.V,
		ReportedTier: canon.PickTier(b.speed, b.topTier, b.usageTier)}
	if b.cc5m.Set || b.cc1h.Set {
		u.CacheCreation5m, u.CacheCreation1h = b.cc5m.V, b.cc1h.V
		if split := (usage.Usage{CacheCreation5m: b.cc5m.V, CacheCreation1h: b.cc1h.V}).PromptTokens(); b.cacheCreation.V > split {
			u.CacheCreation5m += b.cacheCreation.V - split
		}
	} else {
		u.CacheCreation5m = b.cacheCreation.V
	}
	return u, b.found
}

// OutputReported reports whether the stream reported its output count (a top-level usage: message_delta).
func (b *Billing) OutputReported() bool { return b.final }

// betaUsage is the usage object the client encoders write.
type betaUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation,omitempty"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails *struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details,omitempty"`
	ServiceTier string `json:"service_tier,omitempty"`
}

func toBetaUsage(u canon.Usage) *betaUsage {
	in := u.InputTotal - u.CacheRead - u.CacheWrite
	if in < 0 {
		in = 0
	}
	b := &betaUsage{InputTokens: in, CacheCreationInputTokens: u.CacheWrite, CacheReadInputTokens: u.CacheRead, OutputTokens: u.OutputTotal}
	if u.CacheWrite5m != 0 || u.CacheWrite1h != 0 {
		b.CacheCreation = &struct {
			Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
			Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
		}{u.CacheWrite5m, u.CacheWrite1h}
	}
	if u.Reasoning > 0 { // the thinking share of output_tokens, as beta reports it
		b.OutputTokensDetails = &struct {
			ThinkingTokens int64 `json:"thinking_tokens"`
		}{u.Reasoning}
	}
	return b
}

// BillBody returns the billed usage of a buffered messages answer, reading only its service_tier and usage
// members; found is false when it reported no usage. A body that is not a JSON object is an error.
func BillBody(body []byte) (u usage.Usage, found bool, err error) {
	var m messageIn
	if err := jsonkit.UnmarshalEvent(body, &m); err != nil {
		return usage.Usage{}, false, fmt.Errorf("decode messages usage: %w", err)
	}
	var b Billing
	tier(&b.topTier, m.ServiceTier)
	b.add(m.Usage, false)
	u, found = b.Usage()
	return u, found, nil
}
