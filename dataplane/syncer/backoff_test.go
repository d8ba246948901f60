package syncer

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	const base, maxDelay = 200 * time.Millisecond, 10 * time.Second
	tests := []struct {
		n      int
		lo, hi time.Duration
	}{
		{n: 1, lo: 100 * time.Millisecond, hi: 200 * time.Millisecond},
		{n: 2, lo: 200 * time.Millisecond, hi: 400 * time.Millisecond},
		{n: 4, lo: 800 * time.Millisecond, hi: 1600 * time.Millisecond},
		{n: 7, lo: 5 * time.Second, hi: 10 * time.Second},
		{n: 1000, lo: 5 * time.Second, hi: 10 * time.Second},
	}
	for _, tt := range tests {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(tt.n, base, maxDelay)
			if d < tt.lo || d > tt.hi {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", tt.n, d, tt.lo, tt.hi)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("backoff(%d) returned one value 200 times: no jitter", tt.n)
		}
	}
}
