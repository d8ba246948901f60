package usage

import (
	"encoding/json"
	"fmt"
)

// alphaUsageJSON is the union of the alpha usage objects: chat (prompt/completion), responses
// and images (input/output), embeddings and rerank (prompt/total).
type alphaUsageJSON struct {
	PromptTokens            count                `json:"prompt_tokens"`
	CompletionTokens        count                `json:"completion_tokens"`
	InputTokens             count                `json:"input_tokens"`
	OutputTokens            count                `json:"output_tokens"`
	TotalTokens             count                `json:"total_tokens"`
	PromptTokensDetails     *alphaInDetailsJSON  `json:"prompt_tokens_details"`
	InputTokensDetails      *alphaInDetailsJSON  `json:"input_tokens_details"`
	CompletionTokensDetails *alphaOutDetailsJSON `json:"completion_tokens_details"`
	OutputTokensDetails     *alphaOutDetailsJSON `json:"output_tokens_details"`
	ServiceTier             tierName             `json:"service_tier"`
	Speed                   tierName             `json:"speed"`
}

type alphaInDetailsJSON struct {
	CachedTokens     count `json:"cached_tokens"`
	CacheWriteTokens count `json:"cache_write_tokens"`
}

type alphaOutDetailsJSON struct {
	ImageTokens count `json:"image_tokens"`
}

// alphaFields is the flattened alpha usage, merged field by field (latest wins).
type alphaFields struct {
	prompt, cached, cacheWrite, completion, imageOut, total count
	usageTier, speed, topTier                               tierName
}

func (f *alphaFields) mergeUsage(u *alphaUsageJSON) {
	// Chat names win over responses/images names when both appear in one object.
	if u.PromptTokens.set {
		f.prompt = u.PromptTokens
	} else {
		f.prompt.merge(u.InputTokens)
	}
	if u.CompletionTokens.set {
		f.completion = u.CompletionTokens
	} else {
		f.completion.merge(u.OutputTokens)
	}
	f.total.merge(u.TotalTokens)
	for _, d := range []*alphaInDetailsJSON{u.InputTokensDetails, u.PromptTokensDetails} {
		if d != nil {
			f.cached.merge(d.CachedTokens)
			f.cacheWrite.merge(d.CacheWriteTokens)
		}
	}
	for _, d := range []*alphaOutDetailsJSON{u.OutputTokensDetails, u.CompletionTokensDetails} {
		if d != nil {
			f.imageOut.merge(d.ImageTokens)
		}
	}
	f.usageTier.merge(u.ServiceTier)
	f.speed.merge(u.Speed)
}

// generation converts alpha chat/responses usage: cached and cache-written tokens leave Input;
// the completion image_tokens subset is ImageOutput, the rest Output. With imageOp (a dedicated
// image operation) aggregate output tokens without an image_tokens detail are ImageOutput.
func (f *alphaFields) generation(imageOp bool) Usage {
	u := Usage{
		CacheRead:       f.cached.v,
		CacheCreation5m: f.cacheWrite.v,
		ReportedTier:    f.tier(),
	}
	u.Input = sub(sub(f.prompt.v, f.cached.v), f.cacheWrite.v)
	switch {
	case imageOp && !f.imageOut.set:
		u.ImageOutput = f.completion.v
	case f.completion.set:
		u.ImageOutput = min(f.imageOut.v, f.completion.v)
		u.Output = f.completion.v - u.ImageOutput
	default:
		u.ImageOutput = f.imageOut.v
	}
	return u
}

func (f *alphaFields) tier() string { return pickTier(f.speed.s, f.topTier.s, f.usageTier.s) }

// alphaBodyJSON is any alpha response body: chat, responses, images, embeddings, rerank.
type alphaBodyJSON struct {
	ServiceTier tierName        `json:"service_tier"`
	Usage       *alphaUsageJSON `json:"usage"`
}

func decodeAlpha(body []byte, what string) (alphaFields, bool, error) {
	var b alphaBodyJSON
	if err := json.Unmarshal(body, &b); err != nil {
		return alphaFields{}, false, fmt.Errorf("decode %s usage: %w", what, err)
	}
	var f alphaFields
	f.topTier = b.ServiceTier
	if b.Usage == nil {
		return f, false, nil
	}
	f.mergeUsage(b.Usage)
	return f, true, nil
}

// FromAlphaChat extracts usage from a non-streaming alpha_chat_completions response body.
// found is false when the body has no usage object (the reported tier is still returned).
func FromAlphaChat(body []byte) (Usage, bool, error) {
	f, found, err := decodeAlpha(body, "alpha chat")
	if err != nil {
		return Usage{}, false, err
	}
	return f.generation(false), found, nil
}

// FromAlphaResponses extracts usage from a non-streaming alpha_responses (or responses compact)
// body.
func FromAlphaResponses(body []byte) (Usage, bool, error) {
	f, found, err := decodeAlpha(body, "alpha responses")
	if err != nil {
		return Usage{}, false, err
	}
	return f.generation(false), found, nil
}

// FromAlphaImage extracts usage from an alpha images generations/edits response body. Output
// tokens are image output unless output_tokens_details.image_tokens gives the subset.
// A body without usage (non token-billed model) yields zero usage and found=false.
func FromAlphaImage(body []byte) (Usage, bool, error) {
	f, found, err := decodeAlpha(body, "alpha image")
	if err != nil {
		return Usage{}, false, err
	}
	return f.generation(true), found, nil
}

// FromAlphaEmbedding extracts usage from an alpha embeddings response: prompt_tokens (else
// total_tokens, else input_tokens) are input.
func FromAlphaEmbedding(body []byte) (Usage, bool, error) {
	f, found, err := decodeAlpha(body, "alpha embedding")
	if err != nil {
		return Usage{}, false, err
	}
	in := f.prompt
	if !in.set {
		in = f.total
	}
	return Usage{Input: sub(in.v, f.cached.v), CacheRead: f.cached.v, ReportedTier: f.tier()}, found, nil
}

// FromRerank extracts usage from an alpha-shaped rerank response. total_tokens is preferred
// (rerank has no output, so every billed token is input), then prompt_tokens, then
// input_tokens. Responses with only search units (no tokens) yield found=false.
func FromRerank(body []byte) (Usage, bool, error) {
	f, found, err := decodeAlpha(body, "rerank")
	if err != nil {
		return Usage{}, false, err
	}
	var in count
	switch {
	case f.total.set:
		in = f.total
	case f.prompt.set:
		in = f.prompt
	}
	return Usage{Input: in.v, ReportedTier: f.tier()}, found && in.set, nil
}
