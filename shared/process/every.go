package process

import (
	"context"
	"time"
)

// Every calls round at once and then every interval (measured from the end of the previous round) until ctx
// ends. It is the loop of the control plane's periodic jobs (usages partitions, spend folds).
func Every(ctx context.Context, interval time.Duration, round func()) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil { // both were ready and select chose the timer
			return
		}
		round()
		t.Reset(interval)
	}
}
