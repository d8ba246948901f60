package settle_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/settle"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestConcurrentAdmissionsStayWithinBound runs 500 concurrent requests against a small org quota through
// admission, the outbox, the forwarder and the real SettlementService, with actual costs from 0 to 3×
// the estimate. It asserts the documented bound: the settled total exceeds the limit by at most the sum
// of (actual − estimate)⁺ over the requests in flight at the last admission — computed here,
// conservatively, as the maximum over every admitted request k of that sum over the requests whose hold
// may have been live while k's script ran.
func TestConcurrentAdmissionsStayWithinBound(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	const limitMicros = 50_000 // $0.05 for the org
	if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 0.05), ('team', 2, 1)`); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, db)

	type req struct {
		est, actual                      int64
		admitted                         bool
		admitStart, admitEnd, refundedAt time.Time
	}
	const n = 500
	reqs := make([]req, n)
	var mu sync.Mutex
	index := map[string]int{}
	for i := range n {
		index[id("b", i)] = i
	}
	fo := settle.ForwarderOptions{BatchSize: 25, OnRefunded: func(ids []string) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, rid := range ids {
			reqs[index[rid]].refundedAt = now
		}
	}}
	dps := []*dataPlane{
		newDataPlane(t, rdb, prefix, "dp-a", cp, admission.Options{}, fo),
		newDataPlane(t, rdb, prefix, "dp-b", cp, admission.Options{}, fo),
	}
	for _, dp := range dps {
		dp.start()
		defer dp.stop()
	}
	scopes := []admission.ScopeQuota{
		{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: limitMicros},
		{Scope: vocab.ScopeTeam, ID: 2, LimitMicros: 1_000_000},
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dp := dps[i%2]
			est := 200 + int64(i%9)*50
			actual := rand.Int64N(3*est + 1)
			start := time.Now()
			h, err := dp.adm.Admit(ctx, admission.Request{KeyID: 1, EstimateMicros: est, Scopes: scopes})
			end := time.Now()
			mu.Lock()
			reqs[i].est, reqs[i].actual, reqs[i].admitStart, reqs[i].admitEnd = est, actual, start, end
			reqs[i].admitted = err == nil
			mu.Unlock()
			rec := outcomeRecord(id("b", i), 1, 2, 3, actual, vocab.EndCompleted)
			if err != nil {
				if !errors.Is(err, admission.ErrQuotaExceeded) {
					t.Errorf("Admit = %v", err)
				}
				rec = outcomeRecord(id("b", i), 1, 2, 3, 0, vocab.EndRejected)
				h = admission.Hold{}
			} else {
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // the upstream call
			}
			if err := dp.rec.Append(ctx, rec, h); err != nil {
				t.Errorf("Record = %v", err)
			}
		}()
	}
	wg.Wait()
	waitDrained(t, rdb, prefix, 30*time.Second)

	var total, admitted int64
	var bound int64
	for k := range reqs {
		if !reqs[k].admitted {
			continue
		}
		admitted++
		total += reqs[k].actual
		var b int64
		for i := range reqs {
			ri := &reqs[i]
			if ri.admitted && ri.admitStart.Before(reqs[k].admitEnd) && ri.refundedAt.After(reqs[k].admitStart) {
				b += max(0, ri.actual-ri.est)
			}
		}
		bound = max(bound, b)
	}
	var settled int64
	var usedText string
	if err := db.Pool.QueryRow(ctx, `SELECT (cost_used * 1000000)::bigint, cost_used::text FROM quotas WHERE scope='org' AND scope_id=1`).Scan(&settled, &usedText); err != nil {
		t.Fatal(err)
	}
	t.Logf("admitted %d of %d; settled %d micros against limit %d; overshoot %d; bound %d", admitted, n, settled, limitMicros, settled-limitMicros, bound)
	if settled != total {
		t.Errorf("org cost_used = %d micros, want the sum of admitted actual costs %d", settled, total)
	}
	if settled > limitMicros+bound {
		t.Errorf("settled %d exceeds limit %d by %d, more than the estimator-error bound %d", settled, limitMicros, settled-limitMicros, bound)
	}
	if admitted == n || settled < limitMicros/2 {
		t.Errorf("admitted %d, settled %d: the quota was not exercised", admitted, settled)
	}
	var rows int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(DISTINCT request_id) FROM usages`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != n {
		t.Errorf("usages has %d requests, want %d", rows, n)
	}
	assertPendingZero(t, rdb, prefix)
	assertLedgerConsistent(t, db)
}

// TestControlPlaneKilledDuringLoad stops the control plane abruptly in the middle of the load and starts
// it again on the same address: every request still ends with exactly one usages row, cost_used equals
// the sum of usages.cost per scope, and every hold is refunded.
func TestControlPlaneKilledDuringLoad(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 1000), ('team', 2, NULL), ('user', 3, 1000)`); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, db)
	dps := []*dataPlane{
		newDataPlane(t, rdb, prefix, "dp-a", cp, admission.Options{}, settle.ForwarderOptions{BatchSize: 10, RPCTimeout: 300 * time.Millisecond}),
		newDataPlane(t, rdb, prefix, "dp-b", cp, admission.Options{}, settle.ForwarderOptions{BatchSize: 10, RPCTimeout: 300 * time.Millisecond}),
	}
	for _, dp := range dps {
		dp.start()
		defer dp.stop()
	}
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1e9}, {Scope: vocab.ScopeUser, ID: 3, LimitMicros: 1e9}}
	const n = 400
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 3 * time.Millisecond) // ~1.2 s of load
			dp := dps[i%2]
			h, err := dp.adm.Admit(ctx, admission.Request{KeyID: 1, EstimateMicros: 500, Scopes: scopes})
			if err != nil {
				t.Errorf("Admit = %v", err)
				return
			}
			if err := dp.rec.Append(ctx, outcomeRecord(id("k", i), 1, 2, 3, int64(100+i), vocab.EndCompleted), h); err != nil {
				t.Errorf("Record = %v", err)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	cp.stop()
	time.Sleep(500 * time.Millisecond)
	cp.restart()
	time.Sleep(200 * time.Millisecond)
	cp.stop() // and once more, while batches are in flight
	time.Sleep(300 * time.Millisecond)
	cp.restart()
	wg.Wait()
	waitDrained(t, rdb, prefix, 30*time.Second)

	var rows, distinct int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT request_id) FROM usages`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n {
		t.Errorf("usages has %d rows (%d distinct), want exactly one per request: %d", rows, distinct, n)
	}
	assertLedgerConsistent(t, db)
	assertPendingZero(t, rdb, prefix)
	// The mirror holds the last answered total.
	var usedMicros int64
	if err := db.Pool.QueryRow(ctx, `SELECT (cost_used * 1000000)::bigint FROM quotas WHERE scope='org' AND scope_id=1`).Scan(&usedMicros); err != nil {
		t.Fatal(err)
	}
	if got, _ := rdb.Get(ctx, admission.Keys{Prefix: prefix}.Used(vocab.ScopeOrg, 1)).Int64(); got != usedMicros {
		t.Errorf("qu mirror = %d, want cost_used %d", got, usedMicros)
	}
}

// TestDeadDataPlane: a data plane that dies mid-request leaves a hold that expires with the pending TTL;
// one that dies after recording but before forwarding leaves entries that another data plane claims,
// settles and refunds. Nothing else leaks: every remaining key has a TTL.
func TestDeadDataPlane(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 10)`); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, db)
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 10_000_000}}
	keys := admission.Keys{Prefix: prefix}

	// Dead mid-request: admitted, never recorded.
	dead := newDataPlane(t, rdb, prefix, "dp-dead", cp, admission.Options{PendingTTL: time.Second}, settle.ForwarderOptions{})
	if _, err := dead.adm.Admit(ctx, admission.Request{KeyID: 1, RPMLimit: 100, EstimateMicros: 700, Scopes: scopes}); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, keys.Pending(vocab.ScopeOrg, 1)).Val(); ttl <= 0 || ttl > time.Second {
		t.Fatalf("pending TTL = %v, want (0, 1s]", ttl)
	}
	// Dead after recording: its forwarder read the entries (they are pending with it) and died.
	for i := range 5 {
		h, err := dead.adm.Admit(ctx, admission.Request{KeyID: 1, EstimateMicros: 100, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		if err := dead.rec.Append(ctx, outcomeRecord(id("d", i), 1, 0, 3, 90, vocab.EndCompleted), h); err != nil {
			t.Fatal(err)
		}
	}
	stream := settle.Streams{Prefix: prefix}.Outbox("")
	if err := rdb.XGroupCreateMkStream(ctx, stream, "tollgate-forwarders", "0").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "tollgate-forwarders", Consumer: "dp-dead", Streams: []string{stream, ">"}, Count: 100, Block: -1}).Result()
	if err != nil || len(got[0].Messages) != 5 {
		t.Fatalf("dead consumer read %v, %v; want 5 entries", got, err)
	}

	time.Sleep(1100 * time.Millisecond) // the pending TTL passes
	if n := rdb.Exists(ctx, keys.Pending(vocab.ScopeOrg, 1)).Val(); n != 0 {
		// The five recorded holds refreshed the TTL; it still expires a second after the last one.
		time.Sleep(time.Second)
	}
	if n := rdb.Exists(ctx, keys.Pending(vocab.ScopeOrg, 1)).Val(); n != 0 {
		t.Errorf("the dead data plane's hold did not expire with the TTL")
	}

	live := newDataPlane(t, rdb, prefix, "dp-live", cp, admission.Options{}, settle.ForwarderOptions{ClaimMinIdle: 200 * time.Millisecond})
	live.start()
	waitDrained(t, rdb, prefix, 10*time.Second)
	live.stop()
	var rows int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 5 {
		t.Errorf("usages has %d rows, want the 5 the dead data plane recorded", rows)
	}
	assertLedgerConsistent(t, db)
	assertPendingZero(t, rdb, prefix)
	pending, err := rdb.XPending(ctx, stream, "tollgate-forwarders").Result()
	if err != nil || pending.Count != 0 {
		t.Errorf("consumer group still has %v pending (%v)", pending, err)
	}
	for _, k := range admissiontest.Keys(t, rdb, prefix) {
		if k == stream {
			continue // empty; kept for the consumer group
		}
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %s has no TTL (%v): leaked", k, ttl)
		}
	}
}

// TestFlushDrainsAndSurvivesOutage: Flush delivers what the outbox holds; with the control plane down it
// gives up at its deadline and leaves every record in the stream.
func TestFlushDrainsAndSurvivesOutage(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	cp := startControlPlane(t, db)
	dp := newDataPlane(t, rdb, prefix, "dp-f", cp, admission.Options{}, settle.ForwarderOptions{BatchSize: 7})
	record := func(from, to int) {
		for i := from; i < to; i++ {
			if err := dp.rec.Append(ctx, outcomeRecord(id("f", i), 1, 0, 3, 5, vocab.EndClientDropped), admission.Hold{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(0, 30)
	cp.stop()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := dp.fwd.Flush(short)
	cancel()
	if err == nil {
		t.Fatal("Flush with the control plane down = nil, want a deadline error")
	}
	if n := rdb.XLen(ctx, settle.Streams{Prefix: prefix}.Outbox("")).Val(); n != 30 {
		t.Fatalf("outbox holds %d entries after a failed flush, want all 30", n)
	}
	cp.restart()
	record(30, 40)
	flushCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := dp.fwd.Flush(flushCtx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	var rows int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 40 {
		t.Errorf("usages has %d rows after flush, want 40", rows)
	}
	if n := rdb.XLen(ctx, settle.Streams{Prefix: prefix}.Outbox("")).Val(); n != 0 {
		t.Errorf("outbox holds %d entries after flush", n)
	}
}

// TestInvalidRecordIsDeadLettered: a record the control plane refuses does not block the others; it is
// moved to the dead-letter stream and its hold refunded.
func TestInvalidRecordIsDeadLettered(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	cp := startControlPlane(t, db)
	dp := newDataPlane(t, rdb, prefix, "dp-x", cp, admission.Options{}, settle.ForwarderOptions{})
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeUser, ID: 3, LimitMicros: 1e9}}
	for i := range 3 {
		h, err := dp.adm.Admit(ctx, admission.Request{EstimateMicros: 10, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		r := outcomeRecord(id("x", i), 1, 0, 3, 5, vocab.EndCompleted)
		if i == 1 {
			r.EndState = "exploded"
		}
		if err := dp.rec.Append(ctx, r, h); err != nil {
			t.Fatal(err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := dp.fwd.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	var rows int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Errorf("usages has %d rows, want the 2 valid records", rows)
	}
	if n := rdb.XLen(ctx, settle.Streams{Prefix: prefix}.Dead()).Val(); n != 1 {
		t.Errorf("dead-letter stream has %d entries, want 1", n)
	}
	assertPendingZero(t, rdb, prefix)
}

func TestRecordRejectsMissingRequestID(t *testing.T) {
	t.Parallel()
	rdb, prefix := admissiontest.Redis(t)
	if err := settle.NewRecorder(rdb, prefix).Append(context.Background(), &settlementv1.SettlementRecord{}, admission.Hold{}); err == nil {
		t.Error("Record without request_id = nil, want error")
	}
}

func TestRecordSanitizesText(t *testing.T) {
	t.Parallel()
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	rec := outcomeRecord("s1", 1, 0, 3, 5, vocab.EndCompleted)
	rec.LogicalModel = "bad\xffmodel\x00name"
	if err := settle.NewRecorder(rdb, prefix).Append(ctx, rec, admission.Hold{}); err != nil {
		t.Fatalf("Record = %v", err)
	}
	msgs, err := rdb.XRange(ctx, settle.Streams{Prefix: prefix}.Outbox(""), "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("outbox = %v, %v", msgs, err)
	}
	got, _, err := settle.DecodeEntry(msgs[0].Values)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLogicalModel() != "bad\uFFFDmodelname" {
		t.Errorf("stored model = %q, want invalid bytes replaced and NUL dropped", got.GetLogicalModel())
	}
}

// TestForwarderFailsOverEndpoints: with the first control-plane endpoint unreachable, records still reach
// the next one.
func TestForwarderFailsOverEndpoints(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	cp := startControlPlane(t, db)
	f, err := settle.NewForwarder(rdb, settle.ForwarderOptions{Prefix: prefix, NodeID: "dp-fo", ControlPlane: cpclient.Options{Token: dpToken,
		Endpoints: []string{"127.0.0.1:1", cp.addr}, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}, RPCTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := settle.NewRecorder(rdb, prefix)
	for i := range 5 {
		if err := rec.Append(ctx, outcomeRecord(id("fo", i), 1, 0, 3, 5, vocab.EndCompleted), admission.Hold{}); err != nil {
			t.Fatal(err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.Flush(fctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	var rows int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages`).Scan(&rows); err != nil || rows != 5 {
		t.Errorf("usages has %d rows (%v), want 5", rows, err)
	}
}
