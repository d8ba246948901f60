package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	"github.com/tollgate/tollgate/shared/period"
)

type quotaJSON struct {
	Scope            string  `json:"scope"`
	CostLimit        *string `json:"cost_limit"`
	CostUsed         string  `json:"cost_used"`
	Period           string  `json:"period"`
	TimeZone         string  `json:"time_zone"`
	PeriodID         string  `json:"period_id"`
	Requests         *int64  `json:"requests"`
	RPMLimit         int32   `json:"rpm_limit"`
	TPMLimit         int64   `json:"tpm_limit"`
	LifetimeCostUsed string  `json:"lifetime_cost_used"`
}

// An operator gives a team a monthly budget in its time zone with team-wide rate limits and a key its own
// budget (scope "key"), through REST and gRPC; spend is reported per period, closed periods stay listed
// with limit, spend and requests, and an adjustment of a period shows in its history and in the usage
// listing as an adjustment row.
func TestPeriodicQuotasThroughTheAdminAPI(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	var org, team struct {
		ID int64 `json:"id"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/orgs", map[string]any{"name": "o"}, &org)
	b.must(t, http.StatusCreated, "POST", "/admin/teams", map[string]any{"name": "t", "org_id": org.ID}, &team)
	var user struct {
		ID int64 `json:"id"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/users", map[string]any{"name": "u", "org_id": org.ID, "team_id": team.ID}, &user)
	var key struct {
		ID int64 `json:"id"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/api-keys", map[string]any{"user_id": user.ID, "name": "k"}, &key)

	base := fmt.Sprintf("/admin/quotas/team/%d", team.ID)
	rev := b.revision(t)
	var q quotaJSON
	b.must(t, http.StatusOK, "PUT", base, map[string]any{"cost_limit": "50", "period": "monthly", "time_zone": "America/New_York",
		"rpm_limit": 600, "tpm_limit": 100000}, &q)
	now := time.Now()
	ny, _ := period.LoadZone("America/New_York")
	month := period.Of(period.Monthly, ny, now)
	if q.Period != "monthly" || q.TimeZone != "America/New_York" || q.PeriodID != month.ID() || q.CostUsed != "0" ||
		q.RPMLimit != 600 || q.TPMLimit != 100000 || q.Requests == nil || *q.Requests != 0 {
		t.Fatalf("set = %+v", q)
	}
	if b.revision(t) == rev {
		t.Error("setting a period did not move the config revision")
	}
	// Absent fields keep their values; the limit is always set.
	b.must(t, http.StatusOK, "PUT", base, map[string]any{"cost_limit": "60"}, &q)
	if q.Period != "monthly" || q.RPMLimit != 600 || *q.CostLimit != "60" {
		t.Fatalf("partial set = %+v", q)
	}
	b.refuses(t, []refusal{
		{"bad period", "PUT", base, map[string]any{"cost_limit": "1", "period": "yearly"}, 422, "period"},
		{"bad zone", "PUT", base, map[string]any{"cost_limit": "1", "time_zone": "Mars/Olympus"}, 422, "time_zone"},
		{"local zone", "PUT", base, map[string]any{"cost_limit": "1", "time_zone": "Local"}, 422, "time_zone"},
		{"negative rpm", "PUT", base, map[string]any{"cost_limit": "1", "rpm_limit": -1}, 422, "rpm_limit"},
		{"key rate limits", "PUT", fmt.Sprintf("/admin/quotas/key/%d", key.ID), map[string]any{"cost_limit": "1", "rpm_limit": 5}, 422, "rpm_limit"},
		{"missing key", "PUT", "/admin/quotas/key/999", map[string]any{"cost_limit": "1"}, 404, ""},
	})
	// A key's own daily budget.
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/quotas/key/%d", key.ID), map[string]any{"cost_limit": "2", "period": "daily"}, &q)
	if q.Scope != "key" || q.Period != "daily" || q.TimeZone != "UTC" {
		t.Fatalf("key quota = %+v", q)
	}

	// A closed period (last month) and the current one, as settlement leaves them.
	last := period.Of(period.Monthly, ny, month.Start.Add(-time.Hour))
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO quota_periods (scope, scope_id, period_start, period_end, period, time_zone,
		cost_limit, cost_used, requests) VALUES ('team', $1, $2, $3, 'monthly', 'America/New_York', 50, 49.5, 1234)`,
		team.ID, last.Start, last.End); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SettleUsages(ctx, b.db.Pool, []store.UsageRow{{RequestID: "req_1", TeamID: &team.ID, OrgID: &org.ID,
		UserID: &user.ID, APIKeyID: &key.ID, Operation: "generate_content", InboundKind: "alpha_chat_completions", Cost: "1.25",
		Source: "upstream", EndState: "completed", CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	// Correct last month by a credit: its history shows it; the current month is untouched.
	var a adjusted
	b.must(t, http.StatusCreated, "POST", base+"/adjustments", map[string]any{"amount": "-4.5", "reason": "outage credit",
		"period_at": last.Start.Add(time.Hour).Format(time.RFC3339)}, &a)
	if a.Adjustment.CostUsedBefore != "49.5" || a.Adjustment.CostUsedAfter != "45.0" || a.Quota.CostUsed != "1.25" {
		t.Fatalf("adjustment of last month = %+v", a)
	}
	var periods struct {
		Items []struct {
			PeriodID    string  `json:"period_id"`
			CostLimit   *string `json:"cost_limit"`
			CostUsed    string  `json:"cost_used"`
			Requests    int64   `json:"requests"`
			Adjustments string  `json:"adjustments"`
			Closed      bool    `json:"closed"`
		} `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", base+"/periods", nil, &periods)
	if len(periods.Items) != 2 {
		t.Fatalf("periods = %+v", periods.Items)
	}
	cur, old := periods.Items[0], periods.Items[1]
	if cur.PeriodID != month.ID() || cur.Closed || cur.CostUsed != "1.25" || cur.Requests != 1 || *cur.CostLimit != "60" {
		t.Errorf("current month = %+v", cur)
	}
	if old.PeriodID != last.ID() || !old.Closed || old.CostUsed != "45.0" || old.Requests != 1234 || old.Adjustments != "-4.5" || *old.CostLimit != "50" {
		t.Errorf("last month = %+v", old)
	}
	// The usage listing shows the adjustment as an adjustment row of the team.
	var usages struct {
		Items []struct {
			RequestID    string  `json:"request_id"`
			Kind         string  `json:"kind"`
			Cost         string  `json:"cost"`
			TeamID       *int64  `json:"team_id"`
			OrgID        *int64  `json:"org_id"`
			AdjustmentID *int64  `json:"adjustment_id"`
			Reason       *string `json:"reason"`
		} `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/usages?team_id=%d", team.ID), nil, &usages)
	if len(usages.Items) != 2 {
		t.Fatalf("usages = %+v", usages.Items)
	}
	adj := usages.Items[0]
	if adj.Kind != "adjustment" || adj.Cost != "-4.5" || adj.OrgID != nil || adj.AdjustmentID == nil || *adj.AdjustmentID != a.Adjustment.ID ||
		adj.Reason == nil || *adj.Reason != "outage credit" || usages.Items[1].Kind != "request" {
		t.Errorf("usage listing = %+v", usages.Items)
	}

	// The gRPC twins.
	c, _ := b.grpcClient(t)
	tok := withToken(bootstrapToken)
	rpm := int32(30)
	set, err := c.SetQuota(tok, &adminv1.SetQuotaRequest{Scope: "org", ScopeId: org.ID, RpmLimit: &rpm, Period: strp("weekly")})
	if err != nil || set.GetQuota().GetRpmLimit() != 30 || set.GetQuota().GetPeriod() != "weekly" || set.GetQuota().GetPeriodStart() == nil {
		t.Fatalf("gRPC SetQuota = %v, %v", set, err)
	}
	lp, err := c.ListQuotaPeriods(tok, &adminv1.ListQuotaPeriodsRequest{Scope: "team", ScopeId: team.ID, Limit: 1})
	if err != nil || len(lp.GetItems()) != 1 || lp.GetItems()[0].GetPeriodId() != month.ID() || lp.GetNextCursor() == "" {
		t.Fatalf("gRPC ListQuotaPeriods page 1 = %v, %v", lp, err)
	}
	lp, err = c.ListQuotaPeriods(tok, &adminv1.ListQuotaPeriodsRequest{Scope: "team", ScopeId: team.ID, Limit: 1, Cursor: lp.GetNextCursor()})
	if err != nil || len(lp.GetItems()) != 1 || !lp.GetItems()[0].GetClosed() || lp.GetItems()[0].GetRequests() != 1234 {
		t.Fatalf("gRPC ListQuotaPeriods page 2 = %v, %v", lp, err)
	}
	lu, err := c.ListUsages(tok, &adminv1.ListUsagesRequest{TeamId: &team.ID})
	if err != nil || len(lu.GetItems()) != 2 || lu.GetItems()[0].GetKind() != "adjustment" || lu.GetItems()[0].GetReason() != "outage credit" {
		t.Fatalf("gRPC ListUsages = %v, %v", lu, err)
	}
}
