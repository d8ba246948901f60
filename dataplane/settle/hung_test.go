package settle_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/redisbatch"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestRecordAndForwardOnFrozenRedis freezes the data plane's Redis (SIGSTOP) — a Redis that accepts
// connections and bytes but never answers — while requests end. The client is configured as the data
// plane's (context deadlines bound socket reads and writes, coalescing on, no client retries) but with
// client-wide timeouts far beyond the test, so only the settlement code's own deadlines can bound a call.
// Every Record returns while Redis is still frozen (the record spilled), the forwarder keeps running and
// delivers the spill straight to the control plane during the freeze (one usage row each), and once
// Redis is thawed every hold is refunded exactly once — also when an append that reached the frozen
// server lands late and the record is therefore both in the outbox and delivered from the spill — so
// the pending counter ends holding exactly the hold of the one request still in flight.
func TestRecordAndForwardOnFrozenRedis(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 1000)`); err != nil {
		t.Fatal(err)
	}
	srv := admissiontest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, ReadTimeout: time.Minute,
		WriteTimeout: time.Minute, PoolTimeout: time.Minute, MaxRetries: -1, PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	redisbatch.Install(rdb, "evalsha", "eval", "xadd")
	cp := startControlPlane(t, db)
	spill := settle.NewSpill(0)
	const timeout = 300 * time.Millisecond
	dp := newDataPlane(t, rdb, "", "dp-frozen", cp, admission.Options{Timeout: timeout},
		settle.ForwarderOptions{Spill: spill, RedisTimeout: timeout, ControlPlane: cpclient.Options{BackoffMax: 100 * time.Millisecond}})
	dp.rec.SpillTo(spill)
	dp.start()
	defer dp.stop()
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1 << 40}}
	const n = 20
	holds := make([]admission.Hold, n+1)
	for i := range holds {
		h, err := dp.adm.Admit(ctx, admission.Request{ID: fmt.Sprintf("req_fz%d", i), KeyID: 1, EstimateMicros: 100, Scopes: scopes})
		if err != nil || h.RequestID == "" {
			t.Fatalf("admit %d: %+v, %v", i, h, err)
		}
		holds[i] = h
	}
	pending := func() int64 { v, _ := rdb.Get(ctx, admission.Keys{}.Pending(vocab.ScopeOrg, 1)).Int64(); return v }
	if p := pending(); p != (n+1)*100 {
		t.Fatalf("pending %d before the freeze, want %d", p, (n+1)*100)
	}

	srv.Stop()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			err := dp.rec.Append(ctx, outcomeRecord(holds[i].RequestID, 1, 0, 3, 250, vocab.EndCompleted), holds[i])
			if !srv.Stopped() {
				err = fmt.Errorf("Record %d returned only after Redis was thawed (err %v)", i, err)
			}
			errs <- err
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Record calls still waiting on the frozen Redis after 20s")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Record on a frozen Redis: %v, want the record spilled", err)
		}
	}
	rows := func() (c int64) {
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages WHERE request_id LIKE 'req_fz%'`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	testkit.WaitWithin(t, 15*time.Second, "spilled records not delivered while Redis is frozen", func() bool { return srv.Stopped() && rows() == n })

	srv.Cont()
	// Every delivered request's hold is refunded once; the request still in flight keeps its 100.
	testkit.WaitWithin(t, 20*time.Second, "holds not refunded exactly once after the thaw", func() bool {
		return pending() == 100 && spill.Owed() == 0 && spill.Len() == 0
	})
	waitDrained(t, rdb, "", 20*time.Second) // appends that landed late are settled (as duplicates) too
	time.Sleep(300 * time.Millisecond)
	if p := pending(); p != 100 {
		t.Fatalf("pending %d after everything settled, want 100 (the in-flight request's hold): a hold was refunded twice", p)
	}
	if c := rows(); c != n {
		t.Fatalf("%d usage rows, want exactly %d", c, n)
	}
	assertLedgerConsistent(t, db)
	if err := dp.adm.Refund(ctx, holds[n]); err != nil {
		t.Fatal(err)
	}
	if p := pending(); p != 0 {
		t.Fatalf("pending %d after the last refund, want 0", p)
	}
}
