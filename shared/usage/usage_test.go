package usage

import (
	"math"
	"testing"
)

func TestPromptTokens(t *testing.T) {
	t.Parallel()
	u := Usage{Input: 1, Output: 100, CacheRead: 2, CacheCreation5m: 4, CacheCreation30m: 8, CacheCreation1h: 16, ImageOutput: 1000}
	if got := u.PromptTokens(); got != 31 {
		t.Errorf("PromptTokens() = %d, want 31", got)
	}
	if got := u.TotalTokens(); got != 1131 {
		t.Errorf("TotalTokens() = %d, want 1131", got)
	}
	big := Usage{Input: math.MaxInt64, CacheRead: math.MaxInt64, CacheCreation5m: -5}
	if got := big.PromptTokens(); got != math.MaxInt64 {
		t.Errorf("PromptTokens(saturating) = %d, want MaxInt64", got)
	}
}
