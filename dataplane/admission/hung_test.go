package admission_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/redisbatch"
	"github.com/tollgate/tollgate/shared/vocab"
)

// frozenBundle is an Admitter on a redis-server of the test's own, through a client configured as the
// data plane's (context deadlines bound socket reads and writes, coalescing installed, no client
// retries) but with client-wide timeouts far beyond the test: only Admit's own deadline can end a call
// to a hung server.
func frozenBundle(t *testing.T, policy admission.FailurePolicy) (*admissiontest.Server, *redis.Client, *admission.Admitter) {
	t.Helper()
	srv := admissiontest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, ReadTimeout: time.Minute,
		WriteTimeout: time.Minute, PoolTimeout: time.Minute, MaxRetries: -1, PoolSize: 32})
	t.Cleanup(func() { rdb.Close() })
	redisbatch.Install(rdb, "evalsha", "eval")
	a := admission.New(rdb, admission.Options{Timeout: 300 * time.Millisecond, OnRedisFailure: policy})
	return srv, rdb, a
}

func pendingOf(t *testing.T, rdb *redis.Client, s vocab.Scope, id int64) int64 {
	t.Helper()
	v, err := rdb.Get(context.Background(), admission.Keys{}.Pending(s, id)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAdmitOnFrozenRedis freezes Redis (SIGSTOP) under concurrent admissions. Every Admit returns while
// Redis is still frozen (its deadline, not the outage, ends the wait), with the policy's answer: open
// gives a Redis error the caller admits on, closed gives ErrFailedClosed. A reservation that reaches the
// frozen server and runs once it is thawed — after its caller gave up — does not leak: it is released in
// the background as soon as Redis answers again, and the scope's pending counter ends holding exactly
// the reservations of the admissions that succeeded.
func TestAdmitOnFrozenRedis(t *testing.T) {
	for _, policy := range []admission.FailurePolicy{admission.FailOpen, admission.FailClosed} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			srv, rdb, a := frozenBundle(t, policy)
			ctx := context.Background()
			scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1 << 40}, {Scope: vocab.ScopeUser, ID: 3, LimitMicros: 1 << 40}}
			req := func(i int) admission.Request {
				return admission.Request{ID: fmt.Sprintf("req_%032d", i), KeyID: 1, EstimateMicros: 100, Scopes: scopes}
			}
			// Warm the pool: connections already open reach the frozen server's socket.
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					h, err := a.Admit(ctx, req(i))
					if err != nil || h.Micros != 100 || h.RequestID != req(i).ID {
						t.Errorf("admit %d before the freeze: %+v, %v", i, h, err)
					}
				})
			}
			wg.Wait()

			srv.Stop()
			const n = 24
			type out struct {
				err         error
				whileFrozen bool
			}
			outs := make(chan out, n)
			for i := range n {
				go func() {
					_, err := a.Admit(ctx, req(100+i))
					outs <- out{err, srv.Stopped()}
				}()
			}
			limit := time.After(20 * time.Second)
			for range n {
				var o out
				select {
				case o = <-outs:
				case <-limit:
					t.Fatal("admissions still waiting on the frozen Redis after 20s")
				}
				if !o.whileFrozen || o.err == nil {
					t.Fatalf("admit on a frozen Redis: %v (returned while frozen: %v), want an error while frozen", o.err, o.whileFrozen)
				}
				if got := errors.Is(o.err, admission.ErrFailedClosed); got != (policy == admission.FailClosed) {
					t.Fatalf("policy %s: admit error %v; ErrFailedClosed %v", policy, o.err, got)
				}
			}
			srv.Cont()
			// Once Redis answers again, admissions succeed, and whatever the abandoned calls reserved after
			// their callers left is released.
			deadline := time.Now().Add(15 * time.Second)
			for {
				if _, err := a.Admit(ctx, req(1000)); err == nil {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("admit after the thaw: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			const want = (16 + 1) * 100
			for {
				org, user := pendingOf(t, rdb, vocab.ScopeOrg, 1), pendingOf(t, rdb, vocab.ScopeUser, 3)
				if org == want && user == want && a.Abandoned() == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("pending org %d user %d (%d abandoned unreleased), want %d each: a late reservation leaked", org, user, a.Abandoned(), want)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestAbandonedReservationIsReleasedNotRepeated: a reservation released after its caller gave up is not
// made again by a late copy of the same call (the release leaves a tombstone), and refunding a hold is
// idempotent: a second refund of the same request's hold changes nothing.
func TestAbandonedReservationIsReleasedNotRepeated(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1 << 40}}
	r := admission.Request{ID: "req_a", KeyID: 1, EstimateMicros: 70, Scopes: scopes}
	h, err := b.a.Admit(ctx, r)
	if err != nil || h.RequestID != "req_a" {
		t.Fatalf("admit: %+v, %v", h, err)
	}
	// The same call again (a retried copy): no second reservation.
	if _, err := b.a.Admit(ctx, r); err != nil {
		t.Fatalf("repeated admit: %v", err)
	}
	if p := b.pending(t, vocab.ScopeOrg, 1); p != 70 {
		t.Fatalf("pending %d after a repeated call, want 70", p)
	}
	for range 2 {
		if err := b.a.Refund(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	other, err := b.a.Admit(ctx, admission.Request{ID: "req_b", KeyID: 1, EstimateMicros: 30, Scopes: scopes})
	if err != nil || other.Micros != 30 {
		t.Fatal(err)
	}
	if err := b.a.Refund(ctx, h); err != nil {
		t.Fatal(err)
	}
	if p := b.pending(t, vocab.ScopeOrg, 1); p != 30 {
		t.Fatalf("pending %d, want 30: refunding req_a again took req_b's hold", p)
	}
	// A late copy of a call whose hold was already refunded reserves nothing.
	if _, err := b.a.Admit(ctx, r); err == nil {
		t.Fatal("a late copy of a refunded admission was admitted again")
	}
	if p := b.pending(t, vocab.ScopeOrg, 1); p != 30 {
		t.Fatalf("pending %d, want 30", p)
	}
}
