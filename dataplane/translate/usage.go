package translate

// Usage conversions. Each dialect's wire struct converts to and from the canonical usage.

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
		AudioTokens      int64 `json:"audio_tokens,omitempty"`
		ImageTokens      int64 `json:"image_tokens,omitempty"`
		TextTokens       int64 `json:"text_tokens,omitempty"`
	} `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}

func (c *chatUsage) canonical() usage {
	if c == nil {
		return usage{}
	}
	u := usage{Known: true, InputTotal: c.PromptTokens, OutputTotal: c.CompletionTokens}
	if d := c.PromptTokensDetails; d != nil {
		u.CacheRead, u.CacheWrite = d.CachedTokens, d.CacheWriteTokens
		u.InputAudio, u.InputImage, u.InputText = d.AudioTokens, d.ImageTokens, d.TextTokens
	}
	if d := c.CompletionTokensDetails; d != nil {
		u.Reasoning = d.ReasoningTokens
	}
	return u
}

func toChatUsage(u usage) *chatUsage {
	c := &chatUsage{PromptTokens: u.InputTotal, CompletionTokens: u.OutputTotal, TotalTokens: u.InputTotal + u.OutputTotal}
	c.PromptTokensDetails = &struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
		AudioTokens      int64 `json:"audio_tokens,omitempty"`
		ImageTokens      int64 `json:"image_tokens,omitempty"`
		TextTokens       int64 `json:"text_tokens,omitempty"`
	}{CachedTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite, AudioTokens: u.InputAudio, ImageTokens: u.InputImage, TextTokens: u.InputText}
	c.CompletionTokensDetails = &struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	}{ReasoningTokens: u.Reasoning}
	return c
}

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

func (r *respUsage) canonical() usage {
	if r == nil {
		return usage{}
	}
	return usage{Known: true, InputTotal: r.InputTokens, CacheRead: r.InputTokensDetails.CachedTokens,
		CacheWrite: r.InputTokensDetails.CacheWriteTokens, OutputTotal: r.OutputTokens,
		Reasoning: r.OutputTokensDetails.ReasoningTokens}
}

func toRespUsage(u usage) *respUsage {
	r := &respUsage{InputTokens: u.InputTotal, OutputTokens: u.OutputTotal, TotalTokens: u.InputTotal + u.OutputTotal}
	r.InputTokensDetails.CachedTokens = u.CacheRead
	r.InputTokensDetails.CacheWriteTokens = u.CacheWrite
	r.OutputTokensDetails.ReasoningTokens = u.Reasoning
	return r
}

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

func (b *betaUsage) canonical() usage {
	if b == nil {
		return usage{}
	}
	u := usage{Known: true, InputTotal: b.InputTokens + b.CacheCreationInputTokens + b.CacheReadInputTokens,
		CacheRead: b.CacheReadInputTokens, CacheWrite: b.CacheCreationInputTokens, OutputTotal: b.OutputTokens}
	if b.CacheCreation != nil {
		u.CacheWrite5m, u.CacheWrite1h = b.CacheCreation.Ephemeral5m, b.CacheCreation.Ephemeral1h
	}
	if b.OutputTokensDetails != nil {
		u.Reasoning = b.OutputTokensDetails.ThinkingTokens
	}
	return u
}

func toBetaUsage(u usage) *betaUsage {
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

type modalityCount struct {
	Modality   string `json:"modality"`
	TokenCount int64  `json:"tokenCount"`
}

type gammaUsage struct {
	PromptTokenCount        int64           `json:"promptTokenCount,omitempty"`
	CachedContentTokenCount int64           `json:"cachedContentTokenCount,omitempty"`
	CandidatesTokenCount    int64           `json:"candidatesTokenCount,omitempty"`
	ToolUsePromptTokenCount int64           `json:"toolUsePromptTokenCount,omitempty"`
	ThoughtsTokenCount      int64           `json:"thoughtsTokenCount,omitempty"`
	TotalTokenCount         int64           `json:"totalTokenCount,omitempty"`
	PromptTokensDetails     []modalityCount `json:"promptTokensDetails,omitempty"`
}

func (g *gammaUsage) canonical() usage {
	if g == nil {
		return usage{}
	}
	u := usage{Known: true, InputTotal: g.PromptTokenCount + g.ToolUsePromptTokenCount, CacheRead: g.CachedContentTokenCount,
		OutputTotal: g.CandidatesTokenCount + g.ThoughtsTokenCount, Reasoning: g.ThoughtsTokenCount, ToolPrompt: g.ToolUsePromptTokenCount}
	for _, m := range g.PromptTokensDetails {
		switch m.Modality {
		case "TEXT":
			u.InputText += m.TokenCount
		case "IMAGE":
			u.InputImage += m.TokenCount
		case "AUDIO":
			u.InputAudio += m.TokenCount
		}
	}
	return u
}

func toGammaUsage(u usage) *gammaUsage {
	cand := u.OutputTotal - u.Reasoning
	if cand < 0 {
		cand = 0
	}
	return &gammaUsage{PromptTokenCount: u.InputTotal - u.ToolPrompt, CachedContentTokenCount: u.CacheRead, CandidatesTokenCount: cand,
		ToolUsePromptTokenCount: u.ToolPrompt, ThoughtsTokenCount: u.Reasoning, TotalTokenCount: u.InputTotal + u.OutputTotal}
}
