package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

type adjusted struct {
	Adjustment struct {
		ID             int64  `json:"id"`
		Amount         string `json:"amount"`
		CostUsedBefore string `json:"cost_used_before"`
		CostUsedAfter  string `json:"cost_used_after"`
		Reason         string `json:"reason"`
		ActorName      string `json:"actor_name"`
		ActorRole      string `json:"actor_role"`
	} `json:"adjustment"`
	Quota struct {
		CostUsed string `json:"cost_used"`
	} `json:"quota"`
}

// An operator corrects a scope's spend without SQL: each credit or debit is recorded with who, when,
// amount and reason in the same transaction, moves the config revision (the next snapshot carries the
// new cost_used to the data planes), and can never leave cost_used negative or beyond what admission
// carries. Viewers may list but not adjust; the audit rows cannot be edited.
func TestQuotaAdjustmentsAreAudited(t *testing.T) {
	b := setup(t)
	var org struct {
		ID int64 `json:"id"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/orgs", map[string]any{"name": "o"}, &org)
	base := fmt.Sprintf("/admin/quotas/org/%d", org.ID)
	b.must(t, http.StatusOK, "PUT", base, map[string]any{"cost_limit": "100"}, nil)
	// The runaway usage row's cost, as settlement would have added it.
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE quotas SET cost_used = 112500000000000 WHERE scope = 'org' AND scope_id = $1`, org.ID); err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "alice", "role": "admin"}, &tok)
	rev := b.revision(t)
	r := b.callAs(t, tok.Token, "POST", base+"/adjustments", map[string]any{"amount": "-112500000000000", "reason": "upstream reported 9e18 tokens (INC-42)"})
	if r.status != http.StatusCreated {
		t.Fatalf("credit = %d %s", r.status, r.raw)
	}
	var a adjusted
	r.json(t, &a)
	if a.Quota.CostUsed != "0" || a.Adjustment.CostUsedBefore != "112500000000000" || a.Adjustment.CostUsedAfter != "0" ||
		a.Adjustment.ActorName != "alice" || a.Adjustment.ActorRole != "admin" || a.Adjustment.Reason != "upstream reported 9e18 tokens (INC-42)" {
		t.Fatalf("credit answered %s", r.raw)
	}
	if b.revision(t) == rev {
		t.Error("an adjustment did not move the config revision: data planes would keep the old cost_used")
	}
	b.must(t, http.StatusCreated, "POST", base+"/adjustments", map[string]any{"amount": "2.5", "reason": "debit for a missed record"}, &a)
	if a.Quota.CostUsed != "2.5" || a.Adjustment.ActorName != "bootstrap" {
		t.Fatalf("debit = %+v", a)
	}

	b.refuses(t, []refusal{
		{"below zero", "POST", base + "/adjustments", map[string]any{"amount": "-3", "reason": "r"}, 422, "amount"},
		{"beyond carried", "POST", base + "/adjustments", map[string]any{"amount": "9007199254", "reason": "r"}, 422, "amount"},
		{"amount too large", "POST", base + "/adjustments", map[string]any{"amount": "9300000000000", "reason": "r"}, 422, "amount"},
		{"zero", "POST", base + "/adjustments", map[string]any{"amount": "0", "reason": "r"}, 422, "amount"},
		{"below a micro-dollar", "POST", base + "/adjustments", map[string]any{"amount": "0.0000001", "reason": "r"}, 422, "amount"},
		{"NaN", "POST", base + "/adjustments", map[string]any{"amount": "NaN", "reason": "r"}, 422, "amount"},
		{"exponent", "POST", base + "/adjustments", map[string]any{"amount": "1e3", "reason": "r"}, 422, "amount"},
		{"double sign", "POST", base + "/adjustments", map[string]any{"amount": "--1", "reason": "r"}, 422, "amount"},
		{"no reason", "POST", base + "/adjustments", map[string]any{"amount": "1"}, 422, "reason"},
		{"blank reason", "POST", base + "/adjustments", map[string]any{"amount": "1", "reason": "  "}, 422, "reason"},
		{"unknown scope", "POST", "/admin/quotas/galaxy/1/adjustments", map[string]any{"amount": "1", "reason": "r"}, 400, ""},
		{"missing org", "POST", "/admin/quotas/org/999/adjustments", map[string]any{"amount": "1", "reason": "r"}, 404, ""},
	})
	var viewer struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "v", "role": "viewer"}, &viewer)
	if r := b.callAs(t, viewer.Token, "POST", base+"/adjustments", map[string]any{"amount": "1", "reason": "r"}); r.status != http.StatusForbidden {
		t.Errorf("viewer adjusting = %d, want 403", r.status)
	}
	var list struct {
		Items []struct {
			Amount    string `json:"amount"`
			ActorName string `json:"actor_name"`
		} `json:"items"`
	}
	if r := b.callAs(t, viewer.Token, "GET", base+"/adjustments", nil); r.status != 200 {
		t.Fatalf("viewer listing = %d %s", r.status, r.raw)
	} else {
		r.json(t, &list)
	}
	if len(list.Items) != 2 || list.Items[0].Amount != "2.5" || list.Items[1].ActorName != "alice" {
		t.Errorf("adjustments = %+v, want the debit then alice's credit", list.Items)
	}
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE quota_adjustments SET amount = 1`); err == nil {
		t.Error("an audit row was edited")
	}

	// The gRPC twin.
	c, _ := b.grpcClient(t)
	out, err := c.AdjustQuota(withToken(tok.Token), &adminv1.AdjustQuotaRequest{Scope: "org", ScopeId: org.ID, Amount: "-0.5", Reason: "grpc credit"})
	if err != nil {
		t.Fatal(err)
	}
	if out.GetQuota().GetCostUsed() != "2.0" || out.GetAdjustment().GetActorName() != "alice" {
		t.Errorf("gRPC adjustment = %v", out)
	}
	_, err = c.AdjustQuota(withToken(viewer.Token), &adminv1.AdjustQuotaRequest{Scope: "org", ScopeId: org.ID, Amount: "1", Reason: "r"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("viewer gRPC adjustment = %v, want PermissionDenied", err)
	}
	_, err = c.AdjustQuota(withToken(tok.Token), &adminv1.AdjustQuotaRequest{Scope: "org", ScopeId: org.ID, Amount: "-5", Reason: "r"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC credit below zero = %v, want InvalidArgument", err)
	}
	l, err := c.ListQuotaAdjustments(withToken(viewer.Token), &adminv1.ListQuotaAdjustmentsRequest{Scope: "org", ScopeId: org.ID})
	if err != nil || len(l.GetItems()) != 3 {
		t.Errorf("gRPC list = %v, %v; want 3 adjustments", l, err)
	}
}
