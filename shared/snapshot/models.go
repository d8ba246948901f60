package snapshot

import (
	"errors"
	"fmt"
	"strings"
)

// Unpriced-model policies (config.v1.Provider.unpriced_policy, config.v1.ModelPolicy.unpriced_policy).
const (
	UnpricedAllow = "allow"
	UnpricedDeny  = "deny"
)

// Bounds of a key's allowed_models: how many entries, how long each, how many '*' in a pattern. They keep
// MatchModel's worst case (len(pattern) × len(model)) small on the request path.
const (
	MaxAllowedModels  = 256
	MaxModelPattern   = 256
	MaxPatternStars   = 4
	modelPatternStars = "*"
)

// CheckUnpricedPolicy validates an unpriced-model policy: "allow", "deny", or "" (allow).
func CheckUnpricedPolicy(policy string) error {
	switch policy {
	case "", UnpricedAllow, UnpricedDeny:
		return nil
	}
	return fmt.Errorf(`must be "allow" or "deny", got %q`, policy)
}

// IsModelPattern reports whether an allowed_models entry is a pattern (contains '*') rather than a name.
func IsModelPattern(s string) bool { return strings.Contains(s, modelPatternStars) }

// CheckModelPattern validates one allowed_models entry: a model name, or a glob where '*' matches any run
// of characters (none included, '/' included) and every other character matches itself — "gpt-4o*",
// "*-mini", "openai/*", "*". Non-empty, at most MaxModelPattern bytes and MaxPatternStars stars.
func CheckModelPattern(p string) error {
	switch {
	case p == "":
		return errors.New("must not be empty")
	case len(p) > MaxModelPattern:
		return fmt.Errorf("must be at most %d bytes, got %d", MaxModelPattern, len(p))
	case strings.Count(p, modelPatternStars) > MaxPatternStars:
		return fmt.Errorf("must contain at most %d '*', got %d", MaxPatternStars, strings.Count(p, modelPatternStars))
	}
	return nil
}

// MatchModel reports whether model matches pattern (CheckModelPattern's syntax; a pattern without '*'
// matches only itself). Matching is byte-wise and case-sensitive, like model names everywhere else.
func MatchModel(pattern, model string) bool {
	// Iterative glob with one backtrack point: the last '*' seen and the model position it resumes from.
	p, m := 0, 0
	star, resume := -1, 0
	for m < len(model) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, resume = p, m
			p++
		case p < len(pattern) && pattern[p] == model[m]:
			p++
			m++
		case star >= 0:
			p = star + 1
			resume++
			m = resume
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
