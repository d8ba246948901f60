package settlement_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// TestSettleMaintainsSpendRollupsExactlyOnce: records settled through the service reach the spend rollups
// (migration 0014's trigger: spend_delta, then the five rollups when folded) in the same transaction, and a
// batch redelivered before or after the fold adds nothing to them.
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
	settle := func(recs []*settlementv1.SettlementRecord) {
		if _, err := b.svc.Settle(ctx, &settlementv1.SettleRequest{Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	sums := func(table string) (int64, string) {
		var n int64
		var cost string
		if err := b.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(requests), 0)::bigint, trim_scale(coalesce(sum(cost), 0))::text FROM `+table).Scan(&n, &cost); err != nil {
			t.Fatal(err)
		}
		return n, cost
	}
	rollups := []string{"spend_hour", "spend_day", "spend_key_day", "spend_team_hour", "spend_team_day"}
	settle(recs)
	settle(recs)
	settle(recs[10:20])
	if n, cost := sums("spend_delta"); n != 30 || cost != "0.00369" {
		t.Errorf("spend_delta: %d requests costing %s, want 30 costing 0.00369", n, cost)
	}
	for _, table := range rollups {
		if n, _ := sums(table); n != 0 {
			t.Errorf("%s: %d requests before the fold, want 0", table, n)
		}
	}
	// Fold (as the first settlement statement of the next UTC hour does), then redeliver again.
	if _, err := b.db.Pool.Exec(ctx, `SELECT spend_rollup_fold()`); err != nil {
		t.Fatal(err)
	}
	settle(recs[5:25])
	for _, table := range rollups {
		if n, cost := sums(table); n != 30 || cost != "0.00369" {
			t.Errorf("%s: %d requests costing %s, want 30 costing 0.00369", table, n, cost)
		}
	}
	if n, _ := sums("spend_delta"); n != 0 {
		t.Errorf("spend_delta: %d requests after the fold and a redelivery, want 0", n)
	}
	// A fold due: the next settlement statement folds before appending its own rows.
	if _, err := b.db.Pool.Exec(ctx, `UPDATE spend_fold SET folded_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	settle([]*settlementv1.SettlementRecord{record("roll-late", 1, 2, 3, "1")})
	var foldedAt time.Time
	if err := b.db.Pool.QueryRow(ctx, `SELECT folded_at FROM spend_fold`).Scan(&foldedAt); err != nil {
		t.Fatal(err)
	}
	if time.Since(foldedAt) > time.Minute {
		t.Errorf("the settlement statement did not fold: last fold at %s", foldedAt)
	}
	if n, cost := sums("spend_delta"); n != 1 || cost != "1" {
		t.Errorf("spend_delta: %d requests costing %s after the statement that folded, want its own 1 costing 1", n, cost)
	}
}

// BenchmarkSettleIngestRollups measures ingest without the spend rollups (the trigger disabled: the figure
// before issue 18; the rollup migrations leave usages as it was) and with them, in one run: two databases, and
// every iteration settles one batch into each, in alternating order, so both see the same machine load. It
// reports the median milliseconds per batch of each and the throughput with rollups as a percentage of the
// throughput without. Records are BenchmarkSettleIngest's (one org, team, key and model) or varied ones (12
// models and 600 keys: a batch of 100 sums to about 100 rollup rows), created now, or, for "late", varied and
// two hours old (the path of records settled after their hour; with 0012 it wrote five rollups, with 0014 it
// is the same as any other). Every statement appends to spend_delta (migration 0014); no fold is due during
// the run (the last fold is the migration's), so after it the benchmark times one fold of everything the run
// appended and reports it per batch (fold-ms/batch): the fold's share of each batch's cost, paid once every
// hour by one settlement statement.
func BenchmarkSettleIngestRollups(b *testing.B) {
	type kind struct {
		name         string
		varied, late bool
		sizes        []int
	}
	for _, k := range []kind{{"varied=false", false, false, []int{1, 100, 1000}}, {"varied=true", true, false, []int{1, 100, 1000}},
		{"late", true, true, []int{100, 1000}}} {
		for _, size := range k.sizes {
			varied := k.varied
			b.Run("batch="+strconv.Itoa(size)+"/"+k.name, func(b *testing.B) {
				ctx := context.Background()
				off, on := setup(b), setup(b)
				if _, err := off.db.Pool.Exec(ctx, `ALTER TABLE usages DISABLE TRIGGER usages_spend_rollup`); err != nil {
					b.Fatal(err)
				}
				n := 0
				batch := func() []*settlementv1.SettlementRecord {
					recs := make([]*settlementv1.SettlementRecord, size)
					for i := range recs {
						n++
						recs[i] = record("b"+strconv.Itoa(n), 1, 2, 3, "0.000123")
						if varied {
							recs[i].LogicalModel = "model-" + strconv.Itoa(n%12)
							recs[i].UpstreamModel = "up-" + strconv.Itoa(n%12)
							recs[i].ApiKeyId = int64(1 + n%600)
						}
						if k.late {
							recs[i].CreatedAt = timestamppb.New(time.Now().Add(-2 * time.Hour))
						}
					}
					return recs
				}
				settle := func(bb *bundle) time.Duration {
					recs := batch()
					t := time.Now()
					if _, err := bb.svc.Settle(ctx, &settlementv1.SettleRequest{Records: recs}); err != nil {
						b.Fatal(err)
					}
					return time.Since(t)
				}
				var offT, onT []time.Duration
				it := 0
				b.ResetTimer()
				for b.Loop() {
					if it%2 == 0 {
						offT = append(offT, settle(off))
						onT = append(onT, settle(on))
					} else {
						onT = append(onT, settle(on))
						offT = append(offT, settle(off))
					}
					it++
				}
				b.StopTimer()
				t0 := time.Now()
				if _, err := on.db.Pool.Exec(ctx, `SELECT spend_rollup_fold()`); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(time.Since(t0).Microseconds())/1000/float64(len(onT)), "fold-ms/batch")
				mOff, mOn := median(offT), median(onT)
				b.ReportMetric(float64(mOff.Microseconds())/1000, "off-ms/batch")
				b.ReportMetric(float64(mOn.Microseconds())/1000, "on-ms/batch")
				b.ReportMetric(100*float64(mOff)/float64(mOn), "on-throughput-%")
			})
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
