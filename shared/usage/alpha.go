package usage

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/shared/vocab"
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

// generation converts alpha chat/responses usage: cached and cache-written tokens leave Input; the
// cache-written ones are 30-minute cache creation (alpha's prompt cache has one lifetime, 30 minutes: its
// request option's only value is "30m"); the completion image_tokens subset is ImageOutput, the rest
// Output. With imageOp (a dedicated image operation) aggregate output tokens without an image_tokens
// detail are ImageOutput.
func (f *alphaFields) generation(imageOp bool) Usage {
	u := Usage{
		CacheRead:        f.cached.v,
		CacheCreation30m: f.cacheWrite.v,
		ReportedTier:     f.tier(),
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

func (f *alphaFields) tier() string { return PickTier(f.speed.s, f.topTier.s, f.usageTier.s) }

// alphaBodyJSON is any alpha response body: chat, responses, images, embeddings, rerank.
type alphaBodyJSON struct {
	ServiceTier tierName        `json:"service_tier"`
	Usage       *alphaUsageJSON `json:"usage"`
}

func decodeAlpha(body []byte, what string) (alphaFields, bool, error) {
	if f, found, ok := decodeAlphaFast(body); ok {
		return f, found, nil
	}
	return decodeAlphaFull(body, what)
}

// decodeAlphaFull decodes the whole body with encoding/json: the reference decodeAlphaFast must agree
// with.
func decodeAlphaFull(body []byte, what string) (alphaFields, bool, error) {
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

// decodeAlphaFast is decodeAlphaFull without reflecting over the whole body (choices, output, data…):
// one validity pass, one scan of the top-level members, and a decode of the usage object alone. ok is
// false whenever its answer could differ from decodeAlphaFull's — invalid JSON, not an object, a
// usage or service_tier member that is repeated, or a key that encoding/json would match
// case-insensitively or after unescaping, any decode error — and the caller then takes the full path.
func decodeAlphaFast(body []byte) (f alphaFields, found, ok bool) {
	if !json.Valid(body) {
		return f, false, false
	}
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return f, false, false
	}
	var usageRaw, tierRaw []byte
	i = skipWS(body, i+1)
	for i < len(body) && body[i] == '"' { // valid JSON: the structure is known to be well formed
		ke, err := skipString(body, i)
		if err != nil {
			return f, false, false
		}
		key := body[i+1 : ke-1]
		i = skipWS(body, skipWS(body, ke)+1) // past ':'
		vs := i
		if i, err = skipValue(body, i); err != nil {
			return f, false, false
		}
		switch {
		case string(key) == "usage":
			if usageRaw != nil {
				return f, false, false
			}
			usageRaw = body[vs:i]
		case string(key) == "service_tier":
			if tierRaw != nil {
				return f, false, false
			}
			tierRaw = body[vs:i]
		case bytes.IndexByte(key, '\\') >= 0 || bytes.EqualFold(key, []byte("usage")) || bytes.EqualFold(key, []byte("service_tier")):
			return f, false, false
		}
		i = skipWS(body, i)
		if i < len(body) && body[i] == ',' {
			i = skipWS(body, i+1)
		}
	}
	if tierRaw != nil {
		if err := f.topTier.UnmarshalJSON(tierRaw); err != nil {
			return alphaFields{}, false, false
		}
	}
	if isNull(usageRaw) {
		return f, false, true
	}
	var u alphaUsageJSON
	if !decodeAlphaUsageFast(usageRaw, &u) {
		return alphaFields{}, false, false
	}
	f.mergeUsage(&u)
	return f, true, true
}

// decodeAlphaUsageFast decodes a usage object (already known to be valid JSON) into u as encoding/json
// would, calling the same UnmarshalJSON methods on the same raw values; false for anything it cannot
// prove identical (see decodeAlphaFast).
func decodeAlphaUsageFast(raw []byte, u *alphaUsageJSON) bool {
	if raw[0] != '{' {
		return false
	}
	var details [4][]byte // prompt, input, completion, output _tokens_details
	var seen uint16
	ok := true
	err := vocab.Members(raw, func(k, v []byte) bool {
		var dst interface{ UnmarshalJSON([]byte) error }
		bit := -1
		switch string(k) {
		case "prompt_tokens":
			dst, bit = &u.PromptTokens, 0
		case "completion_tokens":
			dst, bit = &u.CompletionTokens, 1
		case "input_tokens":
			dst, bit = &u.InputTokens, 2
		case "output_tokens":
			dst, bit = &u.OutputTokens, 3
		case "total_tokens":
			dst, bit = &u.TotalTokens, 4
		case "service_tier":
			dst, bit = &u.ServiceTier, 5
		case "speed":
			dst, bit = &u.Speed, 6
		case "prompt_tokens_details":
			bit = 7
		case "input_tokens_details":
			bit = 8
		case "completion_tokens_details":
			bit = 9
		case "output_tokens_details":
			bit = 10
		default:
			ok = !foldedVariant(k, alphaUsageKeys)
			return ok
		}
		if seen&(1<<bit) != 0 {
			ok = false
			return false
		}
		seen |= 1 << bit
		if dst == nil {
			details[bit-7] = v
			return true
		}
		ok = dst.UnmarshalJSON(v) == nil
		return ok
	})
	if err != nil || !ok {
		return false
	}
	if u.PromptTokensDetails, ok = decodeInDetails(details[0]); !ok {
		return false
	}
	if u.InputTokensDetails, ok = decodeInDetails(details[1]); !ok {
		return false
	}
	if u.CompletionTokensDetails, ok = decodeOutDetails(details[2]); !ok {
		return false
	}
	u.OutputTokensDetails, ok = decodeOutDetails(details[3])
	return ok
}

var (
	alphaUsageKeys = []string{"prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "total_tokens",
		"service_tier", "speed", "prompt_tokens_details", "input_tokens_details", "completion_tokens_details",
		"output_tokens_details"}
	alphaInDetailKeys  = []string{"cached_tokens", "cache_write_tokens"}
	alphaOutDetailKeys = []string{"image_tokens"}
)

// foldedVariant reports whether key is escaped or matches one of names only case-insensitively: a key
// encoding/json would map to a field where an exact comparison would not.
func foldedVariant(key []byte, names []string) bool {
	if bytes.IndexByte(key, '\\') >= 0 {
		return true
	}
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// decodeInDetails decodes a prompt/input details value (nil: absent or null → nil pointer).
func decodeInDetails(v []byte) (*alphaInDetailsJSON, bool) {
	if isNull(v) {
		return nil, true
	}
	if v[0] != '{' {
		return nil, false
	}
	d := &alphaInDetailsJSON{}
	var seen uint8
	ok := true
	err := vocab.Members(v, func(k, val []byte) bool {
		var dst *count
		var bit uint8
		switch string(k) {
		case "cached_tokens":
			dst, bit = &d.CachedTokens, 1
		case "cache_write_tokens":
			dst, bit = &d.CacheWriteTokens, 2
		default:
			ok = !foldedVariant(k, alphaInDetailKeys)
			return ok
		}
		if seen&bit != 0 {
			ok = false
			return false
		}
		seen |= bit
		ok = dst.UnmarshalJSON(val) == nil
		return ok
	})
	return d, ok && err == nil
}

// decodeOutDetails decodes a completion/output details value (nil: absent or null → nil pointer).
func decodeOutDetails(v []byte) (*alphaOutDetailsJSON, bool) {
	if isNull(v) {
		return nil, true
	}
	if v[0] != '{' {
		return nil, false
	}
	d := &alphaOutDetailsJSON{}
	seen := false
	ok := true
	err := vocab.Members(v, func(k, val []byte) bool {
		switch {
		case string(k) == "image_tokens":
			if seen {
				ok = false
				return false
			}
			seen = true
			ok = d.ImageTokens.UnmarshalJSON(val) == nil
		default:
			ok = !foldedVariant(k, alphaOutDetailKeys)
		}
		return ok
	})
	return d, ok && err == nil
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
