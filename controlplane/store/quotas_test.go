package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/period"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

func settleRow(id string, key, org int64, cost string, admitted time.Time) store.UsageRow {
	return store.UsageRow{RequestID: id, APIKeyID: &key, OrgID: &org, Operation: "generate_content",
		InboundKind: "alpha_chat_completions", Cost: cost, Source: "upstream", EndState: "completed",
		CreatedAt: admitted.Add(time.Minute), AdmittedAt: &admitted}
}

// SettleUsages charges a periodic quota in the period of each row's admission time (not its creation),
// counts requests per period, answers one total per period, stays idempotent on redelivery, and charges
// a key's own quota; the snapshot carries the current period's spend and names the period.
func TestSettleChargesPeriodsByAdmissionTime(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	snapTestExec(t, db.Pool, `INSERT INTO orgs (id, name) VALUES (1, 'o')`)
	snapTestExec(t, db.Pool, `INSERT INTO users (id, org_id, name) VALUES (1, 1, 'u')`)
	snapTestExec(t, db.Pool, `INSERT INTO api_keys (id, user_id, name, key_hash, prefix) VALUES (5, 1, 'k', $1, 'tg-x')`, make([]byte, 32))
	snapTestExec(t, db.Pool, `INSERT INTO quotas (scope, scope_id, cost_limit, period, time_zone) VALUES
		('org', 1, 10, 'weekly', 'Asia/Tokyo'), ('key', 5, 1, 'none', 'UTC')`)
	tokyo, _ := period.LoadZone("Asia/Tokyo")
	now := time.Now()
	week := period.Of(period.Weekly, tokyo, now)
	lastWeek := period.Of(period.Weekly, tokyo, week.Start.Add(-time.Second))
	// The last row was admitted one second before this week began and created after it.
	rows := []store.UsageRow{
		settleRow("req_a", 5, 1, "0.5", week.Start.Add(time.Hour)),
		settleRow("req_b", 5, 1, "0.25", week.Start),
		settleRow("req_c", 5, 1, "2", week.Start.Add(-time.Second)),
	}
	res, err := store.SettleUsages(ctx, db.Pool, rows)
	if err != nil {
		t.Fatal(err)
	}
	totals := map[string]string{}
	for _, q := range res.Quotas {
		totals[q.Scope+"/"+q.Period.ID()] = q.CostUsed
	}
	want := map[string]string{"org/" + week.ID(): "0.75", "org/" + lastWeek.ID(): "2", "key/": "2.75"}
	if len(totals) != len(want) {
		t.Fatalf("answers %v, want %v", totals, want)
	}
	for k, v := range want {
		if totals[k] != v {
			t.Errorf("answer %s = %q, want %q (all: %v)", k, totals[k], v, totals)
		}
	}
	// Redelivered: nothing inserted, nothing added, the same periods answered.
	res, err = store.SettleUsages(ctx, db.Pool, rows)
	if err != nil || len(res.Inserted) != 0 || len(res.Quotas) != 3 {
		t.Fatalf("redelivery = %+v, %v", res, err)
	}
	ps, err := store.ListQuotaPeriods(ctx, db.Pool, "org", 1, time.Time{}, 10, now)
	if err != nil || len(ps) != 2 || ps[0].Requests != 2 || ps[1].Requests != 1 || ps[0].CostUsed != "0.75" || !ps[1].Closed || ps[0].Closed {
		t.Fatalf("periods = %+v, %v", ps, err)
	}
	q, err := store.GetQuota(ctx, db.Pool, "org", 1, now)
	if err != nil || q.CostUsed != "0.75" || q.LifetimeCostUsed != "2.75" || *q.Requests != 2 {
		t.Fatalf("quota = %+v, %v", q, err)
	}
	snap, err := store.ReadSnapshot(ctx, db.Pool, snapTestBox(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := snapshot.Compile(snap)
	if err != nil {
		t.Fatal(err)
	}
	org, _ := c.Quota(vocab.ScopeOrg, 1)
	if org.PeriodID != week.ID() || org.UsedMicros != 750_000 || org.Period != period.Weekly || org.Zone.String() != "Asia/Tokyo" {
		t.Errorf("snapshot org quota = %+v, want this week's 0.75", org)
	}
	if p, used := org.Current(week.End); p.ID() == week.ID() || used != 0 {
		t.Errorf("next week from this snapshot: %s, %d; want a new period at 0", p.ID(), used)
	}
	key, _ := c.Quota(vocab.ScopeKey, 5)
	if key.PeriodID != "" || key.UsedMicros != 2_750_000 {
		t.Errorf("snapshot key quota = %+v", key)
	}
}
