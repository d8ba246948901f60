// Package backoff is the one retry delay of both planes: the data plane's reconnects and retries to the
// control plane (Watch and Settle), its retries of an outbox append, and the control plane's reconnects of
// its change listener.
//
// The delay for the n-th consecutive failure doubles from a base up to a cap and is drawn uniformly from
// [d/2, d] ("equal jitter"): never less than half the nominal delay, so a flapping peer is not hammered,
// and spread enough that many data planes losing one control plane at once do not come back in step.
//
// It is a pure function of the failure count rather than a library's stateful timer (such as
// github.com/cenkalti/backoff, already in the module graph through the OTLP exporters): every caller
// already counts its failures and resets the count its own way (an established stream, a new batch), and
// that library's randomisation is symmetric around the interval and its ExponentialBackOff stops after an
// elapsed time unless told otherwise, so getting [d/2, d] from it takes rescaled parameters that hide the
// policy. Ten lines here say it plainly.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay is the wait after the n-th consecutive failure (n >= 1; lower counts as 1): base doubled n-1
// times, capped at max, drawn uniformly from [d/2, d]. A max below base is raised to base.
func Delay(n int, base, max time.Duration) time.Duration {
	max = maxOf(max, base)
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + rand.N(d/2+1)
}

func maxOf(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
