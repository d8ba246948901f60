package alpha

import (
	"github.com/tollgate/tollgate/dataplane/canon"
)

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

func toChatUsage(u canon.Usage) *chatUsage {
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

func toRespUsage(u canon.Usage) *respUsage {
	r := &respUsage{InputTokens: u.InputTotal, OutputTokens: u.OutputTotal, TotalTokens: u.InputTotal + u.OutputTotal}
	r.InputTokensDetails.CachedTokens = u.CacheRead
	r.InputTokensDetails.CacheWriteTokens = u.CacheWrite
	r.OutputTokensDetails.ReasoningTokens = u.Reasoning
	return r
}
