package backoff_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/backoff"
)

// TestDelay pins the delays the syncer and the snapshot builder used before they shared this package
// (their own tests' bounds), and that the delay is jittered.
func TestDelay(t *testing.T) {
	t.Parallel()
	const base, maxDelay = 200 * time.Millisecond, 10 * time.Second
	tests := []struct {
		n      int
		lo, hi time.Duration
	}{
		{n: 0, lo: 100 * time.Millisecond, hi: 200 * time.Millisecond},
		{n: 1, lo: 100 * time.Millisecond, hi: 200 * time.Millisecond},
		{n: 2, lo: 200 * time.Millisecond, hi: 400 * time.Millisecond},
		{n: 4, lo: 800 * time.Millisecond, hi: 1600 * time.Millisecond},
		{n: 7, lo: 5 * time.Second, hi: 10 * time.Second},
		{n: 1000, lo: 5 * time.Second, hi: 10 * time.Second},
	}
	for _, tt := range tests {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff.Delay(tt.n, base, maxDelay)
			if d < tt.lo || d > tt.hi {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", tt.n, d, tt.lo, tt.hi)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("Delay(%d) returned one value 200 times: no jitter", tt.n)
		}
	}
}

// TestDelayCapBelowBase: a cap below the base never yields more than the base (a misconfigured cap does
// not turn into a zero or negative delay).
func TestDelayCapBelowBase(t *testing.T) {
	t.Parallel()
	for n := range 5 {
		if d := backoff.Delay(n+1, time.Second, time.Millisecond); d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("Delay(%d, 1s, 1ms) = %v, want within [500ms, 1s]", n+1, d)
		}
	}
}
