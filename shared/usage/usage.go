// Package usage owns Tollgate's canonical token usage: seven disjoint token categories plus the
// service tier the upstream reports, and the extraction of that usage from every dialect's
// response bodies and streams (alpha chat/responses/images/embeddings/rerank, beta messages,
// gamma generateContent/embeddings). It is pure: no I/O, no pricing.
//
// Semantics (see docs/pricing.md): the categories never overlap, so cached and cache-written
// prompt tokens that alpha and gamma report inside their prompt counts are subtracted from
// Input (clamped at 0); streamed usage is cumulative, so a stream's billing never adds events together:
// alpha and beta keep the latest value per field, gamma the latest usageMetadata snapshot whole.
package usage

import "math"

// Usage is the canonical usage of one request. The seven token categories are disjoint:
// Input is the uncached input, Output excludes ImageOutput.
type Usage struct {
	Input            int64
	Output           int64
	CacheRead        int64
	CacheCreation5m  int64
	CacheCreation30m int64
	CacheCreation1h  int64
	ImageOutput      int64
	// ReportedTier is the service tier the upstream says it served, cleaned (lower-case, gamma enum
	// prefix removed) but not mapped to synonyms; "" when the upstream said nothing.
	ReportedTier string
}

// PromptTokens is input + cache read + the three cache creations (every token of the prompt: what a
// prompt-size price tier is chosen by), saturating at
// math.MaxInt64; negative counts contribute 0.
func (u Usage) PromptTokens() int64 {
	return satSum(u.Input, u.CacheRead, u.CacheCreation5m, u.CacheCreation30m, u.CacheCreation1h)
}

// TotalTokens is the sum of all seven categories, saturating at math.MaxInt64.
func (u Usage) TotalTokens() int64 {
	return satSum(u.Input, u.Output, u.CacheRead, u.CacheCreation5m, u.CacheCreation30m,
		u.CacheCreation1h, u.ImageOutput)
}

// IsZero reports whether every token category is zero (the reported tier is ignored).
func (u Usage) IsZero() bool {
	return u.Input == 0 && u.Output == 0 && u.CacheRead == 0 && u.CacheCreation5m == 0 &&
		u.CacheCreation30m == 0 && u.CacheCreation1h == 0 && u.ImageOutput == 0
}

// Counts returns the seven categories in the order input, output, cache read, cache creation
// 5m, 30m, 1h, image output (the order of the spec's "Token categories").
func (u Usage) Counts() [7]int64 {
	return [7]int64{u.Input, u.Output, u.CacheRead, u.CacheCreation5m, u.CacheCreation30m,
		u.CacheCreation1h, u.ImageOutput}
}

func satSum(vs ...int64) int64 {
	var s int64
	for _, v := range vs {
		if v <= 0 {
			continue
		}
		if s > math.MaxInt64-v {
			return math.MaxInt64
		}
		s += v
	}
	return s
}
