package admin_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestBudgetBurn: GET /admin/budget-burn lists the limited quotas by the share of the limit spent in
// their current period (a zero limit first), exact decimal strings, spend of closed periods not counted,
// unlimited quotas left out, cut at limit.
func TestBudgetBurn(t *testing.T) {
	b := setup(t)
	id := func(path string, body map[string]any) int64 {
		var v struct {
			ID int64 `json:"id"`
		}
		b.must(t, http.StatusCreated, "POST", path, body, &v)
		return v.ID
	}
	orgA := id("/admin/orgs", map[string]any{"name": "acme"})
	orgB := id("/admin/orgs", map[string]any{"name": "globex"})
	team := id("/admin/teams", map[string]any{"org_id": orgA, "name": "research"})
	user := id("/admin/users", map[string]any{"org_id": orgA, "team_id": team, "name": "ada"})
	var key struct {
		ID     int64  `json:"id"`
		Prefix string `json:"prefix"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/api-keys", map[string]any{"user_id": user, "name": "ci"}, &key)

	set := func(scope string, sid int64, body map[string]any) {
		b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/quotas/%s/%d", scope, sid), body, nil)
	}
	debit := func(scope string, sid int64, amount string, at *time.Time) {
		body := map[string]any{"amount": amount, "reason": "test"}
		if at != nil {
			body["period_at"] = at.UTC().Format(time.RFC3339)
		}
		b.must(t, http.StatusCreated, "POST", fmt.Sprintf("/admin/quotas/%s/%d/adjustments", scope, sid), body, nil)
	}
	set("org", orgA, map[string]any{"cost_limit": "100.00", "period": "monthly", "time_zone": "Europe/Paris"})
	debit("org", orgA, "90.000001", nil)
	past := time.Now().AddDate(0, -2, 0)
	debit("org", orgA, "500", &past) // a closed period: not this month's burn
	set("org", orgB, map[string]any{"cost_limit": "10"})
	debit("org", orgB, "2.5", nil)
	set("team", team, map[string]any{"cost_limit": "0", "period": "daily"})
	set("user", user, map[string]any{"cost_limit": nil})
	debit("user", user, "7", nil)
	set("key", key.ID, map[string]any{"cost_limit": "3", "period": "weekly"})
	debit("key", key.ID, "3.3", nil)

	type item struct {
		Scope       string     `json:"scope"`
		ScopeID     int64      `json:"scope_id"`
		Name        string     `json:"name"`
		Period      string     `json:"period"`
		TimeZone    string     `json:"time_zone"`
		PeriodStart *time.Time `json:"period_start"`
		PeriodEnd   *time.Time `json:"period_end"`
		CostLimit   string     `json:"cost_limit"`
		CostUsed    string     `json:"cost_used"`
		Percent     *string    `json:"percent"`
	}
	var got struct{ Items []item }
	b.must(t, http.StatusOK, "GET", "/admin/budget-burn", nil, &got)
	pct := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	want := []string{
		fmt.Sprintf("team/%d research daily 0 0 -", team),
		fmt.Sprintf("key/%d ci (%s) weekly 3 3.3 110.00", key.ID, key.Prefix),
		fmt.Sprintf("org/%d acme monthly 100.00 90.000001 90.00", orgA),
		fmt.Sprintf("org/%d globex none 10 2.5 25.00", orgB),
	}
	if len(got.Items) != len(want) {
		t.Fatalf("got %d items, want %d: %+v", len(got.Items), len(want), got.Items)
	}
	for i, it := range got.Items {
		line := fmt.Sprintf("%s/%d %s %s %s %s %s", it.Scope, it.ScopeID, it.Name, it.Period, it.CostLimit, it.CostUsed, pct(it.Percent))
		if line != want[i] {
			t.Errorf("item %d = %q, want %q", i, line, want[i])
		}
	}
	if a := got.Items[2]; a.TimeZone != "Europe/Paris" || a.PeriodStart == nil || a.PeriodEnd == nil || !a.PeriodStart.Before(time.Now()) || !a.PeriodEnd.After(time.Now()) {
		t.Errorf("org period = %v %v %v, want the current Paris month", a.TimeZone, a.PeriodStart, a.PeriodEnd)
	}
	if o := got.Items[3]; o.PeriodStart != nil {
		t.Errorf("a lifetime quota has no period start, got %v", o.PeriodStart)
	}

	b.must(t, http.StatusOK, "GET", "/admin/budget-burn?limit=2", nil, &got)
	if len(got.Items) != 2 || got.Items[1].Scope != "key" {
		t.Errorf("limit=2: %+v", got.Items)
	}
	for _, q := range []string{"?limit=0", "?limit=501", "?limit=x", "?scope=org"} {
		if r := b.call(t, "GET", "/admin/budget-burn"+q, nil); r.status != http.StatusBadRequest && r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want a refusal", q, r.status)
		}
	}
}
