package settlement_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/store"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/telemetry"
)

// The control plane never trusts a data plane's figures: a record whose tokens or cost are beyond the
// per-request bounds (or beyond what Postgres' column, int64 micro-dollars or the mirror can carry) is
// stored flagged with cost 0 — still exactly one usage row — and adds nothing to cost_used; honest
// records in the same batch are charged; a record the data plane flagged stays flagged and uncharged
// whatever cost it carries; a flag the control plane does not know is refused.
func TestSettleFlagsRecordsBeyondBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	svc := settlement.New(b.db.Pool, nil, reg).WithBounds(pricing.Bounds{MaxRequestTokens: 1_000_000, MaxRequestCostMicros: 100_000_000}) // $100
	huge := record("huge-cost", 1, 0, 3, "99999999999999999999999999999999999999")
	absurd := record("absurd-tokens", 1, 0, 3, "0.5")
	absurd.Tokens.Output = 9_000_000_000_000_000_000
	over := record("over-bound", 1, 0, 3, "100.000001")
	dpFlagged := record("dp-flagged", 1, 0, 3, "7")
	dpFlagged.BillingFlag, dpFlagged.FlagDetail = "usage_out_of_bounds", "reported 9e18 tokens"
	fine := record("fine", 1, 0, 3, "0.000000000000000000000000000001") // a quote's exact cost: 30 fraction digits
	honest := record("honest", 1, 0, 3, "100")
	res, err := svc.Settle(context.Background(), &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{huge, absurd, over, dpFlagged, fine, honest}})
	if err != nil {
		t.Fatalf("Settle = %v, want the batch stored", err)
	}
	for _, r := range res.GetResults() {
		if !r.GetInserted() {
			t.Errorf("%s not inserted: every dispatched request ends in exactly one usage row", r.GetRequestId())
		}
	}
	rows, err := b.db.Pool.Query(context.Background(), `SELECT request_id, cost::text, billing_flag, flag_detail FROM usages ORDER BY request_id`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][3]string{}
	for rows.Next() {
		var id, cost, flag, detail string
		if err := rows.Scan(&id, &cost, &flag, &detail); err != nil {
			t.Fatal(err)
		}
		got[id] = [3]string{cost, flag, detail}
	}
	rows.Close()
	for _, id := range []string{"huge-cost", "absurd-tokens", "over-bound", "dp-flagged"} {
		if g := got[id]; g[0] != "0" || g[1] != "usage_out_of_bounds" || g[2] == "" {
			t.Errorf("%s stored as %q, want cost 0, flagged, with a detail", id, g)
		}
	}
	if g := got["honest"]; g[0] != "100" || g[1] != "" {
		t.Errorf("honest stored as %q", g)
	}
	if g := got["fine"]; g[1] != "" {
		t.Errorf("a tiny exact cost was flagged: %q", g)
	}
	if used := b.used(t, "org", 1); !strings.HasPrefix(used, "100.000000000000000000000000000001") {
		t.Errorf("org cost_used = %s, want only the honest records (100.000…001)", used)
	}
	listed, err := store.ListUsages(context.Background(), b.db.Pool, store.UsageFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range listed {
		want := map[string]string{"huge-cost": "usage_out_of_bounds", "honest": ""}
		if w, ok := want[u.RequestID]; ok && (u.BillingFlag != w || (w != "" && u.FlagDetail == "")) {
			t.Errorf("usage listing: %s billing_flag %q detail %q, want %q", u.RequestID, u.BillingFlag, u.FlagDetail, w)
		}
	}
	m, err := telemetry.Text(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`tollgate_settlement_records_out_of_bounds_total{flagged_by="control_plane"} 3`,
		`tollgate_settlement_records_out_of_bounds_total{flagged_by="data_plane"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}

	bad := record("unknown-flag", 1, 0, 3, "1")
	bad.BillingFlag = "free_lunch"
	if _, err := svc.Settle(context.Background(), &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{bad}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown billing_flag: %v, want InvalidArgument", err)
	}
}
