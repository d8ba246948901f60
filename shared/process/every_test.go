package process

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestEveryRunsAtOnceRepeatsAndStops: the first round runs without waiting an interval, rounds repeat, and
// Every returns once ctx ends, with no round after that.
func TestEveryRunsAtOnceRepeatsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var rounds atomic.Int64
	first := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if rounds.Add(1) == 1 {
				close(first)
			}
		})
	}()
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("no round within 5 s of the start (want one at once)")
	}
	deadline := time.Now().Add(5 * time.Second)
	for rounds.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := rounds.Load(); n < 3 {
		t.Fatalf("%d rounds after 5 s at a 1 ms interval, want ≥ 3", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not return after ctx ended")
	}
	after := rounds.Load()
	time.Sleep(20 * time.Millisecond)
	if n := rounds.Load(); n != after {
		t.Fatalf("%d rounds ran after Every returned", n-after)
	}
}

// TestEveryNeverStartsWithACancelledContext: a context already ended runs no round.
func TestEveryNeverStartsWithACancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	Every(ctx, time.Hour, func() { ran = true })
	if ran {
		t.Fatal("a round ran with a cancelled context")
	}
}
