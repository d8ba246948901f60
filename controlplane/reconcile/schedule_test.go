package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/deploy/mockupstream"
)

func TestScheduleRunsYesterdayOnceAndAgainAfterTheLateWindow(t *testing.T) {
	g := newGateway(t)
	ctx := context.Background()
	day := days(2)
	g.traffic(day)
	runsOf := func() []store.ReconcileRun {
		t.Helper()
		runs, err := store.ListReconcileRuns(ctx, g.pool, store.ReconcileRunFilter{From: &day, To: ptr(day.Add(Day))})
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	now := day.Add(Day + 2*time.Hour) // 02:00 the next day: day is yesterday, within its 24 h late window
	r := NewRunner(g.pool, g.box, nil, Options{Now: func() time.Time { return now }})
	for range 2 {
		if err := r.ScheduleOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runs := runsOf()
	if len(runs) != 2 || !runs[0].Provisional || !runs[1].Provisional || runs[0].Trigger != TriggerSchedule {
		t.Fatalf("within the late window: %+v; want one provisional scheduled run per provider", runs)
	}
	now = day.Add(2*Day + time.Hour) // the late window has passed
	for range 2 {
		if err := r.ScheduleOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runs = runsOf()
	if len(runs) != 4 {
		t.Fatalf("after the late window: %d runs of the day, want one final run more per provider", len(runs))
	}
	for _, run := range runs[:2] {
		if run.Provisional || run.Status != "ok" || run.ImportCount != 2 || run.LedgerTokens == 0 {
			t.Fatalf("final run %+v: want complete, ok, the day's second import", run)
		}
	}
}

// TestScheduleSkipsADayRunOnDemand: a day an operator reconciled on demand after its late window has its
// final run; the schedule does not run it again (a second run would replace the operator's on the drift
// view), while a day run on demand within its late window is still run once the window has passed.
func TestScheduleSkipsADayRunOnDemand(t *testing.T) {
	g := newGateway(t)
	ctx := context.Background()
	late, early := days(3), days(2)
	g.traffic(late)
	g.traffic(early)
	now := early.Add(Day + 2*time.Hour) // late's window has passed, early's has not
	r := NewRunner(g.pool, g.box, nil, Options{Now: func() time.Time { return now }})
	providers, err := store.ListReconcileProviders(ctx, g.pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range providers {
		for _, day := range []time.Time{late, early} {
			if _, err := r.Reconcile(ctx, p.ProviderID, day, TriggerManual, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(day time.Time) (n int) {
		t.Helper()
		runs, err := store.ListReconcileRuns(ctx, g.pool, store.ReconcileRunFilter{From: &day, To: ptr(day.Add(Day))})
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range runs {
			if run.Trigger == TriggerSchedule {
				n++
			}
		}
		return n
	}
	if err := r.ScheduleOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n, m := count(late), count(early); n != 0 || m != 0 {
		t.Fatalf("scheduled runs behind the operator's: %d of the final day, %d of the provisional one; want none", n, m)
	}
	now = early.Add(2*Day + time.Hour) // early's window has passed too
	if err := r.ScheduleOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n, m := count(late), count(early); n != 0 || m != len(providers) {
		t.Fatalf("after early's window: %d scheduled runs of the final day, %d of early; want 0 and one per provider", n, m)
	}
}

func ptr[T any](v T) *T { return &v }

// csvProvider turns the alpha provider into a file provider and imports the fake provider's billing export
// of day (its completions, with the drift switches ctl in force).
func (g *gateway) csvProvider(r *Runner, day time.Time, ctl mockupstream.ReconcileControls) {
	g.t.Helper()
	ctx := context.Background()
	if _, err := store.PutReconcileProvider(ctx, g.pool, store.ReconcileProvider{ProviderID: g.provider["alpha"], Kind: KindCSV,
		Enabled: true, BucketBy: "end", LateHours: 0}, nil); err != nil {
		g.t.Fatal(err)
	}
	g.p.mock.SetReconcile(ctl)
	defer g.p.mock.SetReconcile(mockupstream.ReconcileControls{})
	export, err := g.p.mock.BillingCSV(day, day.Add(Day), mockupstream.EndpointCompletions)
	if err != nil {
		g.t.Fatal(err)
	}
	rep, err := ParseCSV(bytes.NewReader(export))
	if err != nil {
		g.t.Fatalf("billing export %s: %v", export, err)
	}
	if _, err := r.ImportFile(ctx, g.provider["alpha"], rep); err != nil {
		g.t.Fatal(err)
	}
}

func TestFileImportReconcilesACSVProvider(t *testing.T) {
	g := newGateway(t)
	ctx := context.Background()
	day := days(3)
	g.traffic(day)
	r := NewRunner(g.pool, g.box, nil, Options{})
	g.csvProvider(r, day, mockupstream.ReconcileControls{})
	run, err := r.Reconcile(ctx, g.provider["alpha"], day, TriggerManual, true)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != "ok" || run.LedgerTokens == 0 || run.LedgerTokens != run.ProviderTokens || run.LedgerCost != run.ProviderCost {
		t.Fatalf("file reconciliation: %+v", run)
	}
	// The file keeps the alpha cache writes as what they are, 30-minute writes, on both sides.
	var cache30m int64
	for _, l := range run.Lines {
		if l.Kind == "tokens" {
			if l.Provider == nil || *l.Provider != l.Ledger || l.Ledger.Cache5m != 0 || l.Ledger.Cache1h != 0 {
				t.Fatalf("line %+v: want both sides equal, with no 5-minute or 1-hour writes", l)
			}
			cache30m += l.Ledger.Cache30m
		}
	}
	if cache30m == 0 {
		t.Fatal("the traffic's cached requests wrote no 30-minute cache: the check above proves nothing")
	}
	// A day without an imported file is a failed run, stored.
	if run, err := r.Reconcile(ctx, g.provider["alpha"], days(20), TriggerManual, true); err == nil || run.Status != "failed" || run.ID == 0 {
		t.Fatalf("day without a file: %+v, %v", run, err)
	}
}

// Only the 30-minute cache writes under-reported in a billing export: found on the line that has them and
// attributed to cache_creation_30m alone; the cost agrees (the provider billed what it served).
func TestFileImportFindsUnderReported30MinuteCacheWrites(t *testing.T) {
	g := newGateway(t)
	ctx := context.Background()
	day := days(3)
	g.traffic(day)
	r := NewRunner(g.pool, g.box, nil, Options{})
	g.csvProvider(r, day, mockupstream.ReconcileControls{UnderReport: &mockupstream.UnderReport{Category: "cache_creation_30m", Percent: 50}})
	full, err := r.Reconcile(ctx, g.provider["alpha"], day, TriggerManual, true)
	if err != nil {
		t.Fatal(err)
	}
	run, err := store.GetReconcileRun(ctx, g.pool, full.ID)
	if err != nil {
		t.Fatal(err)
	}
	var drifting int
	for _, l := range run.Lines {
		switch {
		case l.Kind == "cost":
			if l.Cause != CauseNone || l.LedgerCost != l.ProviderCost {
				t.Fatalf("cost line %+v: the cost was not under-reported", l)
			}
		case l.Ledger.Cache30m == 0:
			if l.Cause != CauseNone {
				t.Fatalf("line without 30-minute writes drifts: %+v", l)
			}
		default:
			drifting++
			want := l.Ledger // every category as in the ledger, the 30-minute writes halved (rounded down)
			want.Cache30m = l.Ledger.Cache30m - l.Ledger.Cache30m/2
			if l.Cause != CauseTokens || l.Provider == nil || *l.Provider != want || l.Detail != fmt.Sprintf("provider − ledger: cache_creation_30m %+d", -l.Ledger.Cache30m/2) {
				t.Fatalf("under-reported 30-minute writes: %+v, provider %+v", l, *l.Provider)
			}
		}
	}
	if drifting == 0 || run.Status != "drift" || run.LedgerTokens-run.ProviderTokens <= 0 {
		t.Fatalf("run %+v: want the 30-minute drift found", run)
	}
}

// The admin keys of reconciliation are never in the snapshot data planes receive.
func TestSnapshotCarriesNoAdminKey(t *testing.T) {
	g := newGateway(t)
	ctx := context.Background()
	snap, err := store.ReadSnapshot(ctx, g.pool, g.box)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("sk-a")) {
		t.Fatal("the inference key is not in the snapshot: the check below would prove nothing")
	}
	for kind := range g.provider {
		p, err := store.GetReconcileProvider(ctx, g.pool, g.provider[kind])
		if err != nil {
			t.Fatal(err)
		}
		if len(p.SealedAdminKey) == 0 || bytes.Contains(raw, p.SealedAdminKey) {
			t.Fatalf("%s: sealed admin key missing or in the snapshot", kind)
		}
		// Stored sealed with the credentials' key, not in clear.
		if bytes.Contains(p.SealedAdminKey, []byte("sk-admin")) {
			t.Fatalf("%s: the admin key is stored in clear", kind)
		}
		if plain, err := g.box.Open(p.SealedAdminKey); err != nil || string(plain) != "sk-admin" {
			t.Fatalf("%s: the sealed admin key opens to %q, %v", kind, plain, err)
		}
	}
	if bytes.Contains(raw, []byte("sk-admin")) {
		t.Fatal("the admin key is in the snapshot")
	}
}
