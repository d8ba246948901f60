package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/period"
)

// quietZone returns an IANA zone whose local time is at least an hour away from midnight, so a test on
// a daily budget never straddles a boundary on the real clock.
func quietZone(t *testing.T) string {
	t.Helper()
	for _, z := range []string{"UTC", "Asia/Tokyo", "America/New_York", "Asia/Kolkata", "Europe/Paris"} {
		loc, err := period.LoadZone(z)
		if err != nil {
			t.Fatal(err)
		}
		if h := time.Now().In(loc).Hour(); h >= 1 && h <= 22 {
			return z
		}
	}
	t.Fatal("no zone away from midnight")
	return ""
}

// TestDailyBudgetThroughTheGateway: an org's daily budget in its time zone, through the real control
// plane, Postgres, Redis, data plane and mock upstream: requests are charged to today's period (its row,
// its Redis mirror), the quota reports today's spend and request count, a debit of today exhausts it
// (402), and the usage listing shows the debit as an adjustment row (docs/budgets.md).
func TestDailyBudgetThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stSeed(t, s)
	ten := s.tenant(t, "daily", "1000")
	org := fmt.Sprintf("org/%d", ten.org)
	zone := quietZone(t)
	s.admin(t, "PUT", "/admin/quotas/"+org, map[string]any{"cost_limit": "1000", "period": "daily", "time_zone": zone}, nil)
	s.sync(t)
	loc, _ := period.LoadZone(zone)
	today := period.Of(period.Daily, loc, time.Now())

	a := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	b := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	rows := s.waitUsages(t, ten.keyID, 2)
	for _, r := range rows {
		if r.AdmittedAt == nil || r.AdmittedAt.Before(today.Start) || !r.AdmittedAt.Before(today.End) {
			t.Errorf("usage %s admitted_at %v, want today's period %s", r.RequestID, r.AdmittedAt, today.ID())
		}
	}
	stRow(t, rows, a.reqID)
	stRow(t, rows, b.reqID)
	s.waitAllPendingZero(t)
	waitMirror(t, s, s.prefix+"qu:org:"+fmt.Sprint(ten.org)+":"+today.ID(), func(string) bool { return true })

	var q struct {
		CostUsed string `json:"cost_used"`
		PeriodID string `json:"period_id"`
		Requests *int64 `json:"requests"`
	}
	s.admin(t, "GET", "/admin/quotas/"+org, nil, &q)
	var sum string
	if err := s.c.db.Pool.QueryRow(context.Background(), `SELECT sum(cost)::text FROM usages WHERE org_id = $1`, ten.org).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if q.PeriodID != today.ID() || q.Requests == nil || *q.Requests != 2 || q.CostUsed != sum {
		t.Fatalf("quota = %+v, want today's period %s with 2 requests and %s spent", q, today.ID(), sum)
	}

	// A debit of today's spend exhausts the day.
	s.admin(t, "POST", "/admin/quotas/"+org+"/adjustments", map[string]any{"amount": "1000", "reason": "charge for INC-9"}, nil)
	s.sync(t)
	r := s.send(context.Background(), "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	if r.err != nil || r.status != http.StatusPaymentRequired {
		t.Fatalf("after the debit: status %d %v, want 402; body %s", r.status, r.err, r.body)
	}
	var periods struct {
		Items []struct {
			PeriodID    string `json:"period_id"`
			Requests    int64  `json:"requests"`
			Adjustments string `json:"adjustments"`
			Closed      bool   `json:"closed"`
		} `json:"items"`
	}
	s.admin(t, "GET", "/admin/quotas/"+org+"/periods", nil, &periods)
	if len(periods.Items) != 1 || periods.Items[0].PeriodID != today.ID() || periods.Items[0].Adjustments != "1000" || periods.Items[0].Closed {
		t.Fatalf("periods = %+v", periods.Items)
	}
	var usages struct {
		Items []struct {
			Kind   string `json:"kind"`
			Cost   string `json:"cost"`
			Reason string `json:"reason"`
		} `json:"items"`
	}
	s.admin(t, "GET", fmt.Sprintf("/admin/usages?org_id=%d", ten.org), nil, &usages)
	if len(usages.Items) == 0 || usages.Items[0].Kind != "adjustment" || usages.Items[0].Cost != "1000" || usages.Items[0].Reason != "charge for INC-9" {
		t.Fatalf("usage listing = %+v, want the debit first as an adjustment", usages.Items)
	}
}
