package redisbatch

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestCallersBoundedByOwnTimeoutUnderLoad: under steady load on a frozen Redis, no caller waits much
// longer than its own timeout — the leader of a batch included, which used to wait for the latest deadline
// among the callers it carried (up to twice the timeout: a caller promoted just before its deadline then
// led callers that had queued up to a timeout later). Each of 32 callers sends EVALSHA after EVALSHA, each
// bounded by timeout, for several timeouts; the slowest must return within 1.5 × timeout.
func TestCallersBoundedByOwnTimeoutUnderLoad(t *testing.T) {
	srv, rdb, _ := hungSetup(t)
	ctx := context.Background()
	incr := redisScript()
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	const timeout = 500 * time.Millisecond
	srv.Stop()
	var slowest atomic.Int64
	var calls atomic.Int64
	stop := time.Now().Add(6 * timeout)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				start := time.Now()
				err := incr.Run(cctx, rdb, []string{"k:load"}, "x").Err()
				d := time.Since(start)
				cancel()
				if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrNotSent) && !isTimeout(err) {
					t.Errorf("call on a frozen Redis: %v, want its deadline", err)
					return
				}
				calls.Add(1)
				for {
					s := slowest.Load()
					if int64(d) <= s || slowest.CompareAndSwap(s, int64(d)) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	srv.Cont()
	t.Logf("%d calls, slowest %v (timeout %v)", calls.Load(), time.Duration(slowest.Load()), timeout)
	if got := time.Duration(slowest.Load()); got > timeout*3/2 {
		t.Fatalf("slowest call took %v with a %v timeout, want at most %v", got, timeout, timeout*3/2)
	}
}

func redisScript() *redis.Script {
	return redis.NewScript(`redis.call("INCR", KEYS[1]) return ARGV[1]`)
}

// isTimeout reports a network timeout (go-redis's socket deadline, set from the context's).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
