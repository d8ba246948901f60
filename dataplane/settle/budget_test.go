package settle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/settle"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/period"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestBudgetPeriodBoundaryWithSettlementInFlight: a daily quota (Europe/Paris) across midnight with an
// injected clock, real Redis and the real SettlementService on Postgres. A request admitted at 23:59:58
// whose record is created after midnight and settles after midnight, together with a request admitted
// after midnight, in one batch: each is charged to the day it was admitted in, the Redis mirror and the
// pending counters are per day and agree with Postgres, the new day started from zero, and the closed day
// stays queryable with its limit, spend and requests.
func TestBudgetPeriodBoundaryWithSettlementInFlight(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	paris, err := period.LoadZone("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	day1 := period.Of(period.Daily, paris, time.Date(2026, 11, 27, 12, 0, 0, 0, paris))
	var clock atomic.Pointer[time.Time]
	at := day1.End.Add(-2 * time.Second)
	clock.Store(&at)
	now := func() time.Time { return *clock.Load() }

	// Day 1 already spent 0.0009 of its 0.002 limit (settled earlier that day).
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limit, daily, zone := "0.002", "daily", "Europe/Paris"
	if _, err := store.SetQuota(ctx, tx, store.QuotaSettings{Scope: "org", ScopeID: 1, CostLimit: &limit, Period: &daily, TimeZone: &zone}, at); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, db)
	early := outcomeRecord("req_earlier", 1, 0, 3, 900, vocab.EndCompleted)
	early.CreatedAt = timestamppb.New(day1.Start.Add(time.Hour))
	seed := newDataPlane(t, rdb, prefix, "dp-seed", cp, admission.Options{}, settle.ForwarderOptions{})
	if err := seed.rec.Append(ctx, early, admission.Hold{}); err != nil {
		t.Fatal(err)
	}
	seed.start()
	waitDrained(t, rdb, prefix, 10*time.Second)
	seed.stop()

	snap, err := snapshot.Compile(&snapshotv1.Snapshot{Version: 1, Quotas: []*configv1.Quota{{Scope: "org", ScopeId: 1, CostLimit: &limit,
		CostUsed: "0.0009", Period: "daily", TimeZone: "Europe/Paris", PeriodId: day1.ID()}}})
	if err != nil {
		t.Fatal(err)
	}
	dp := newDataPlane(t, rdb, prefix, "dp-1", cp, admission.Options{Now: now, Snapshot: func() *snapshot.Compiled { return snap }}, settle.ForwarderOptions{})
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 2000}}

	// 23:59:58: admitted on day 1 (900 used + 1000 held ≤ 2000).
	hA, err := dp.adm.Admit(ctx, admission.Request{ID: "req_straddle", KeyID: 1, EstimateMicros: 1000, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	// Day 1 is now full: 900 + 1000 + 200 > 2000.
	if _, err := dp.adm.Admit(ctx, admission.Request{ID: "req_refused", KeyID: 1, EstimateMicros: 200, Scopes: scopes}); err == nil {
		t.Fatal("day 1 admitted past its limit")
	}
	// 00:00:01 Paris: day 2 starts from zero although day 1's request is still in flight.
	after := day1.End.Add(time.Second)
	clock.Store(&after)
	day2 := period.Of(period.Daily, paris, after)
	hB, err := dp.adm.Admit(ctx, admission.Request{ID: "req_day2", KeyID: 1, EstimateMicros: 1500, Scopes: scopes})
	if err != nil {
		t.Fatalf("first request of day 2 = %v, want admitted", err)
	}
	// The straddling request ends (and its record is created) after midnight; both settle in one batch.
	recA := outcomeRecord("req_straddle", 1, 0, 3, 1200, vocab.EndCompleted)
	recA.CreatedAt = timestamppb.New(after)
	recB := outcomeRecord("req_day2", 1, 0, 3, 700, vocab.EndCompleted)
	recB.CreatedAt = timestamppb.New(after)
	if err := dp.rec.Append(ctx, recA, hA); err != nil {
		t.Fatal(err)
	}
	if err := dp.rec.Append(ctx, recB, hB); err != nil {
		t.Fatal(err)
	}
	dp.start()
	waitDrained(t, rdb, prefix, 10*time.Second)
	dp.stop()

	periods, err := store.ListQuotaPeriods(ctx, db.Pool, "org", 1, time.Time{}, 10, after)
	if err != nil {
		t.Fatal(err)
	}
	if len(periods) != 2 {
		t.Fatalf("periods %+v, want day 2 and day 1", periods)
	}
	d2, d1 := periods[0], periods[1]
	if d1.PeriodID != day1.ID() || !d1.Closed || d1.CostUsed != "0.002100" || d1.Requests != 2 || d1.CostLimit == nil || *d1.CostLimit != "0.002" {
		t.Errorf("day 1 = %+v, want closed, 0.0021 spent by 2 requests (the straddling one included), limit 0.002", d1)
	}
	if d2.PeriodID != day2.ID() || d2.Closed || d2.CostUsed != "0.000700" || d2.Requests != 1 {
		t.Errorf("day 2 = %+v, want open, 0.0007 spent by 1 request", d2)
	}
	q, err := store.GetQuota(ctx, db.Pool, "org", 1, after)
	if err != nil {
		t.Fatal(err)
	}
	if q.CostUsed != "0.000700" || q.PeriodID != day2.ID() || q.LifetimeCostUsed != "0.002800" {
		t.Errorf("quota now = %+v, want day 2's 0.0007 (lifetime 0.0028)", q)
	}
	keys := admission.Keys{Prefix: prefix}
	for _, c := range []struct {
		period, want string
	}{{day1.ID(), "2100"}, {day2.ID(), "700"}} {
		if got := rdb.Get(ctx, keys.UsedIn(vocab.ScopeOrg, 1, c.period)).Val(); got != c.want {
			t.Errorf("mirror of %s = %q, want %q", c.period, got, c.want)
		}
	}
	assertPendingZero(t, rdb, prefix)
	assertLedgerConsistent(t, db)
	// Day 2 after settlement: 700 used, so 1300 more fits and 1400 does not.
	if _, err := dp.adm.Admit(ctx, admission.Request{ID: "req_fit", KeyID: 1, EstimateMicros: 1300, Scopes: scopes}); err != nil {
		t.Errorf("day 2 with 700 settled: 1300 = %v, want admitted", err)
	}
	if _, err := dp.adm.Admit(ctx, admission.Request{ID: "req_over", KeyID: 1, EstimateMicros: 1, Scopes: scopes}); err == nil {
		t.Error("day 2 admitted past its limit")
	}
}
