package beta

import (
	"github.com/tollgate/tollgate/dataplane/canon"
)

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

func (b *betaUsage) canonical() canon.Usage {
	if b == nil {
		return canon.Usage{}
	}
	u := canon.Usage{Known: true, InputTotal: b.InputTokens + b.CacheCreationInputTokens + b.CacheReadInputTokens,
		CacheRead: b.CacheReadInputTokens, CacheWrite: b.CacheCreationInputTokens, OutputTotal: b.OutputTokens}
	if b.CacheCreation != nil {
		u.CacheWrite5m, u.CacheWrite1h = b.CacheCreation.Ephemeral5m, b.CacheCreation.Ephemeral1h
	}
	if b.OutputTokensDetails != nil {
		u.Reasoning = b.OutputTokensDetails.ThinkingTokens
	}
	return u
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
