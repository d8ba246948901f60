package settlement_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// TestAdjustmentEpochInSettleAnswersAndSnapshots: every audited adjustment raises the scope's
// adjustment epoch in its transaction, and both the snapshot and Settle's answers carry the epoch with
// the cost_used it belongs to (real Postgres), so the data planes' mirror can tell a credit from a late
// answer (docs/settlement.md, "Adjustment epochs").
func TestAdjustmentEpochInSettleAnswersAndSnapshots(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	answered := func(resp *settlementv1.SettleResponse, scope string) *configv1.Quota {
		t.Helper()
		for _, q := range resp.GetQuotas() {
			if q.GetScope() == scope {
				return q
			}
		}
		t.Fatalf("Settle answered no %s quota: %v", scope, resp.GetQuotas())
		return nil
	}
	snapped := func(scope string, id int64) *configv1.Quota {
		t.Helper()
		s, err := store.ReadSnapshot(ctx, b.db.Pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range s.GetQuotas() {
			if q.GetScope() == scope && q.GetScopeId() == id {
				return q
			}
		}
		t.Fatalf("snapshot has no quota %s/%d", scope, id)
		return nil
	}
	adjust := func(amount string) store.Quota {
		t.Helper()
		tx, err := b.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		_, q, err := store.AdjustQuota(ctx, tx, store.QuotaAdjustment{Scope: "org", ScopeID: 1, Amount: amount, Reason: "test",
			ActorName: "t", ActorRole: "admin"}, "9007199254", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return q
	}

	resp, err := b.svc.Settle(ctx, &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{record("e1", 1, 2, 3, "4")}})
	if err != nil {
		t.Fatal(err)
	}
	if q := answered(resp, "org"); q.GetCostUsed() != "4" || q.GetAdjustEpoch() != 0 {
		t.Errorf("before any adjustment: answered org %v, want used 4 at epoch 0", q)
	}
	if q := adjust("5"); q.CostUsed != "9" || q.AdjustEpoch != 1 {
		t.Errorf("debit 5: quota %+v, want used 9 at epoch 1", q)
	}
	if q := adjust("-8"); q.CostUsed != "1" || q.AdjustEpoch != 2 {
		t.Errorf("credit 8: quota %+v, want used 1 at epoch 2", q)
	}
	if q := snapped("org", 1); q.GetCostUsed() != "1" || q.GetAdjustEpoch() != 2 {
		t.Errorf("snapshot org quota %v, want used 1 at epoch 2", q)
	}
	if q := snapped("team", 2); q.GetAdjustEpoch() != 0 {
		t.Errorf("snapshot team quota %v, want epoch 0 (never adjusted)", q)
	}
	resp, err = b.svc.Settle(ctx, &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{record("e2", 1, 2, 3, "0.5")}})
	if err != nil {
		t.Fatal(err)
	}
	if q := answered(resp, "org"); q.GetCostUsed() != "1.5" || q.GetAdjustEpoch() != 2 {
		t.Errorf("after the credit: answered org %v, want used 1.5 at epoch 2", q)
	}
	if q := answered(resp, "team"); q.GetAdjustEpoch() != 0 {
		t.Errorf("answered team %v, want epoch 0", q)
	}
	// A redelivered batch answers the current totals with the current epoch.
	resp, err = b.svc.Settle(ctx, &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{record("e1", 1, 2, 3, "4")}})
	if err != nil {
		t.Fatal(err)
	}
	if q := answered(resp, "org"); q.GetCostUsed() != "1.5" || q.GetAdjustEpoch() != 2 {
		t.Errorf("redelivery: answered org %v, want used 1.5 at epoch 2", q)
	}
	got, err := store.GetQuota(ctx, b.db.Pool, "org", 1, time.Now())
	if err != nil || got.AdjustEpoch != 2 {
		t.Errorf("GetQuota = %+v, %v; want epoch 2", got, err)
	}
}
