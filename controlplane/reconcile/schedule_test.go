package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/deploy/mockupstream"
)

func countRuns(t *testing.T, g *gateway, trigger string) int {
	t.Helper()
	var n int
	if err := g.pool.QueryRow(context.Background(), `SELECT count(*) FROM reconcile_runs WHERE trigger = $1`, trigger).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

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

func ptr[T any](v T) *T { return &v }

func TestFileImportReconcilesACSVProvider(t *testing.T) {
	g := newGateway(t)
	ctx := context.Background()
	day := days(3)
	g.traffic(day)
	// Turn the alpha provider into a file provider and upload what the mock billed, as a billing export.
	if _, err := store.PutReconcileProvider(ctx, g.pool, store.ReconcileProvider{ProviderID: g.provider["alpha"], Kind: KindCSV,
		Enabled: true, BucketBy: "end", LateHours: 0}, nil); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("day,key_ref,project_ref,model,tier,input_tokens,output_tokens,cache_read_tokens,cache_creation_5m_tokens,requests,cost\n")
	for _, bill := range g.p.mock.Bills() {
		if bill.Endpoint != mockupstream.EndpointCompletions {
			continue
		}
		cost := zero()
		for _, c := range []struct {
			n     int64
			price string
		}{{bill.Input, "2"}, {bill.Output, "8"}, {bill.CacheRead, "0.5"}, {bill.Cache5m, "2.5"}} {
			x := decimalFromString(c.price)
			x.Mul(x, decimalInt(c.n))
			cost.Add(cost, x)
		}
		cost.Mul(cost, perMillion)
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%d,%d,%d,%d,1,%s\n", bill.At.Format(time.DateOnly), mockupstream.KeyID(bill.APIKey),
			mockupstream.ProjectID, bill.Model, bill.Tier, bill.Input, bill.Output, bill.CacheRead, bill.Cache5m, cost.String())
	}
	rep, err := ParseCSV(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(g.pool, g.box, nil, Options{})
	if _, err := r.ImportFile(ctx, g.provider["alpha"], rep); err != nil {
		t.Fatal(err)
	}
	run, err := r.Reconcile(ctx, g.provider["alpha"], day, TriggerManual, true)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != "ok" || run.LedgerTokens == 0 || run.LedgerTokens != run.ProviderTokens || run.LedgerCost != run.ProviderCost {
		t.Fatalf("file reconciliation: %+v", run)
	}
	// A day without an imported file is a failed run, stored.
	if run, err := r.Reconcile(ctx, g.provider["alpha"], days(20), TriggerManual, true); err == nil || run.Status != "failed" || run.ID == 0 {
		t.Fatalf("day without a file: %+v, %v", run, err)
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
