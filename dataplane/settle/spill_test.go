package settle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// outageRedis is a client of the real Redis through a proxy the test can take down, with short timeouts
// so an outage is noticed quickly.
func outageRedis(t *testing.T) (*redis.Client, *admissiontest.Proxy) {
	t.Helper()
	p := admissiontest.NewProxy(t)
	opts, err := redis.ParseURL(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	opts.MaxRetries = 1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb, p
}

// TestRedisOutageSpillsThenSettles: records Redis refuses are kept in memory and delivered straight to
// the control plane — one usage row each — and the hold of a request admitted before the outage is
// refunded once Redis is back, with the cost_used mirror refreshed.
func TestRedisOutageSpillsThenSettles(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	direct, prefix := admissiontest.Redis(t) // for the test's own checks
	rdb, proxy := outageRedis(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 10)`); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, db)
	spill := settle.NewSpill(0)
	dp := newDataPlane(t, rdb, prefix, "dp-spill", cp, admission.Options{}, settle.ForwarderOptions{Spill: spill, ControlPlane: cpclient.Options{BackoffMax: 100 * time.Millisecond}})
	dp.rec.SpillTo(spill)
	keys := admission.Keys{Prefix: prefix}
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 10_000_000}}

	hold, err := dp.adm.Admit(ctx, admission.Request{KeyID: 1, EstimateMicros: 700, Scopes: scopes})
	if err != nil || hold.Micros != 700 {
		t.Fatalf("admit before the outage: %+v, %v", hold, err)
	}
	proxy.Down()
	// The admitted request ends during the outage, and five more (admitted without a reservation).
	if err := dp.rec.Append(ctx, outcomeRecord("sp-0", 1, 0, 3, 500, vocab.EndCompleted), hold); err != nil {
		t.Fatalf("Record during the outage = %v, want it spilled", err)
	}
	for i := 1; i <= 5; i++ {
		if err := dp.rec.Append(ctx, outcomeRecord(id("sp-", i), 1, 0, 3, 100, vocab.EndCompleted), admission.Hold{}); err != nil {
			t.Fatalf("Record %d during the outage = %v", i, err)
		}
	}
	if n := spill.Len(); n != 6 {
		t.Fatalf("spill holds %d records, want 6", n)
	}
	dp.start()
	defer dp.stop()
	rows := func() (n int64) {
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages WHERE request_id LIKE 'sp-%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testkit.WaitWithin(t, 10*time.Second, "spilled records not delivered during the outage", func() bool { return rows() == 6 })
	if spill.Len() != 0 {
		t.Fatalf("spill still holds %d records after delivery", spill.Len())
	}
	pending := func() int64 { v, _ := direct.Get(ctx, keys.Pending(vocab.ScopeOrg, 1)).Int64(); return v }
	if v := pending(); v != 700 {
		t.Fatalf("pending %d during the outage, want the 700 still held (Redis cannot refund it)", v)
	}

	proxy.Up()
	testkit.WaitWithin(t, 10*time.Second, "the hold not refunded after Redis came back", func() bool { return pending() == 0 })
	testkit.WaitWithin(t, 10*time.Second, "owed refunds left", func() bool { return spill.Owed() == 0 })
	assertPendingZero(t, direct, prefix)
	if v, err := direct.Get(ctx, keys.Used(vocab.ScopeOrg, 1)).Int64(); err != nil || v != 1000 {
		t.Errorf("cost_used mirror %d, %v; want 1000 micros (500 + 5×100)", v, err)
	}
	if rows() != 6 {
		t.Errorf("%d usage rows, want exactly 6", rows())
	}
	assertLedgerConsistent(t, db)
	// Redis is back: once the one-second spill pause after the last failed append has passed, records go
	// to the outbox again.
	time.Sleep(1100 * time.Millisecond)
	if err := dp.rec.Append(ctx, outcomeRecord("sp-after", 1, 0, 3, 100, vocab.EndCompleted), admission.Hold{}); err != nil {
		t.Fatal(err)
	}
	if spill.Len() != 0 {
		t.Errorf("a record after the outage was spilled")
	}
	testkit.WaitWithin(t, 10*time.Second, "the record after the outage not settled", func() bool { return rows() == 7 })
}

// TestFlushDeliversSpill: at shutdown the spill goes straight to the control plane; with the control
// plane down too, Flush reports how many records it could not deliver and keeps them.
func TestFlushDeliversSpill(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	_, prefix := admissiontest.Redis(t)
	rdb, proxy := outageRedis(t)
	ctx := context.Background()
	cp := startControlPlane(t, db)
	spill := settle.NewSpill(3)
	dp := newDataPlane(t, rdb, prefix, "dp-spill-flush", cp, admission.Options{}, settle.ForwarderOptions{Spill: spill})
	dp.rec.SpillTo(spill)
	proxy.Down()
	for i := range 3 {
		if err := dp.rec.Append(ctx, outcomeRecord(id("sf-", i), 1, 0, 3, 100, vocab.EndCompleted), admission.Hold{}); err != nil {
			t.Fatal(err)
		}
	}
	// The spill is bounded: a fourth record is refused (and the caller logs it lost).
	if err := dp.rec.Append(ctx, outcomeRecord("sf-3", 1, 0, 3, 100, vocab.EndCompleted), admission.Hold{}); err == nil ||
		!strings.Contains(err.Error(), "spill full") {
		t.Fatalf("Record into a full spill = %v, want a spill-full error", err)
	}
	cp.stop()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := dp.fwd.Flush(short)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "3 spilled records undelivered") {
		t.Fatalf("Flush with the control plane down = %v, want 3 undelivered", err)
	}
	if spill.Len() != 3 {
		t.Fatalf("spill holds %d after the failed flush, want 3", spill.Len())
	}
	cp.restart()
	flushCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := dp.fwd.Flush(flushCtx); err == nil || !strings.Contains(err.Error(), "flush") {
		// Delivery succeeds; the outbox part then fails because Redis is still down.
		t.Fatalf("Flush with Redis down = %v, want the outbox error after delivering the spill", err)
	}
	var n int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages WHERE request_id LIKE 'sf-%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 || spill.Len() != 0 {
		t.Fatalf("%d usage rows and %d spilled after flush; want 3 and 0", n, spill.Len())
	}
}
