package settlement_test

import (
	"context"
	"strconv"
	"testing"

	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// TestSettleMaintainsSpendRollupsExactlyOnce: records settled through the service reach the spend rollups
// (migration 0011's trigger) in the same transaction, and a redelivered batch adds nothing to them.
func TestSettleMaintainsSpendRollupsExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var recs []*settlementv1.SettlementRecord
	for i := range 30 {
		r := record("roll-"+strconv.Itoa(i), 1, 2, 3, "0.000123")
		r.LogicalModel = "m" + strconv.Itoa(i%3)
		recs = append(recs, r)
	}
	for range 2 {
		if _, err := b.svc.Settle(ctx, &settlementv1.SettleRequest{Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.svc.Settle(ctx, &settlementv1.SettleRequest{Records: recs[10:20]}); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"spend_hour", "spend_day", "spend_team_hour", "spend_team_day"} {
		var n int64
		var cost string
		if err := b.db.Pool.QueryRow(ctx, `SELECT sum(requests)::bigint, trim_scale(sum(cost))::text FROM `+table).Scan(&n, &cost); err != nil {
			t.Fatal(err)
		}
		if n != 30 || cost != "0.00369" {
			t.Errorf("%s: %d requests costing %s, want 30 costing 0.00369", table, n, cost)
		}
	}
}

// BenchmarkSettleIngestRollups measures ingest with the spend rollup trigger off (the figure before issue
// 18) and on, in one run, on BenchmarkSettleIngest's records (one org, team, key and model: every batch
// updates the same rollup rows) and on varied ones (12 models and 600 keys: a batch writes many rollup rows).
func BenchmarkSettleIngestRollups(b *testing.B) {
	for _, size := range []int{1, 100, 1000} {
		for _, varied := range []bool{false, true} {
			for _, on := range []bool{false, true} {
				name := "batch=" + strconv.Itoa(size) + "/varied=" + strconv.FormatBool(varied) + "/rollups=" + strconv.FormatBool(on)
				b.Run(name, func(b *testing.B) {
					bb := setup(b)
					ctx := context.Background()
					if !on {
						if _, err := bb.db.Pool.Exec(ctx, `ALTER TABLE usages DISABLE TRIGGER usages_spend_rollup`); err != nil {
							b.Fatal(err)
						}
					}
					n := 0
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						recs := make([]*settlementv1.SettlementRecord, size)
						for i := range recs {
							n++
							recs[i] = record("b"+strconv.Itoa(n), 1, 2, 3, "0.000123")
							if varied {
								recs[i].LogicalModel = "model-" + strconv.Itoa(n%12)
								recs[i].UpstreamModel = "up-" + strconv.Itoa(n%12)
								recs[i].ApiKeyId = int64(1 + n%600)
							}
						}
						if _, err := bb.svc.Settle(ctx, &settlementv1.SettleRequest{Records: recs}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
				})
			}
		}
	}
}
