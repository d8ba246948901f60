package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
)

// TestHungRedisBoundUnderLoad: with Redis frozen (a redis-server of the test's own, SIGSTOPped) and 16
// clients sending plain and streamed requests back to back (keep-alive connections, as SDKs do) to a
// 300 ms upstream, no request waits for Redis longer than the settings allow (docs/operations.md): one
// admission call (TOLLGATE_REDIS_TIMEOUT) and one settlement append (its 1 s budget) — a stream's own, or
// for a plain answer, which is whole at the client before its append, the append of the previous request
// on the same connection, which the next request waits for. The bound asserted is that plus the upstream's
// latency plus a second of slack for a loaded machine (-race, two cores): generous, computed from the
// settings.
func TestHungRedisBoundUnderLoad(t *testing.T) {
	t.Parallel()
	const (
		redisTimeout   = 300 * time.Millisecond
		appendBudget   = time.Second // settle's spill budget
		upstreamDelay  = 300 * time.Millisecond
		slack          = time.Second
		clients        = 16
		frozenFor      = 5 * time.Second
		upstreamMillis = "300"
	)
	bound := redisTimeout + appendBudget + upstreamDelay + slack
	s := newStack(t)
	srv := admissiontest.StartServer(t)
	s.dpRedisURL = srv.URL()
	s.dpEnv = map[string]string{"TOLLGATE_REDIS_TIMEOUT": redisTimeout.String(), "TOLLGATE_ADMISSION_ON_REDIS_FAILURE": "open"}
	_ = s.dp.stop()
	s.dp = s.startDP("dp-bound")
	s.rdb.Close()
	s.rdb = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	stSeed(t, s)
	ten := s.tenant(t, "bound", "1000")
	s.sync(t)
	s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)

	srv.Stop()
	defer func() {
		if srv.Stopped() {
			srv.Cont()
		}
	}()
	start := time.Now()
	var mu sync.Mutex
	slowest := map[string]time.Duration{}
	n, failed := 0, 0
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			path, body, name := "/v1/chat/completions", stChat, "plain"
			if i%2 == 1 {
				body, name = stChatStream, "stream"
			}
			for time.Since(start) < frozenFor {
				t0 := time.Now()
				r := s.send(context.Background(), "POST", path, body, stAlpha(ten, "x-mock-latency-ms", upstreamMillis)...)
				d := time.Since(t0)
				mu.Lock()
				n++
				if r.err != nil || r.status != 200 {
					failed++
				}
				slowest[name] = max(slowest[name], d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if !srv.Stopped() {
		t.Fatal("Redis continued before the load ended")
	}
	srv.Cont()
	t.Logf("%d requests while Redis was frozen; slowest plain %v, stream %v; bound %v", n, slowest["plain"], slowest["stream"], bound)
	if failed > 0 {
		t.Errorf("%d of %d requests failed, want every one served (policy open)", failed, n)
	}
	for name, d := range slowest {
		if d > bound {
			t.Errorf("slowest %s request took %v, want at most %v (TOLLGATE_REDIS_TIMEOUT %v + append budget %v + upstream %v + slack %v)",
				name, d, bound, redisTimeout, appendBudget, upstreamDelay, slack)
		}
	}
}
