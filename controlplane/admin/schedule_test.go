package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

type scheduledList struct {
	Items []store.ScheduledPriceRule `json:"items"`
}

// TestScheduledPriceRuleREST: a write with effective_at schedules a version (202) and changes nothing
// now; it is listed, the quote at a future instant answers its price, the rule cannot be changed
// otherwise while it is pending (409), scheduling again replaces it, and cancelling frees the rule.
func TestScheduledPriceRuleREST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var r store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m1", "input_price", "1.50"), &r)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	path := fmt.Sprintf("/admin/price-rules/%d", r.ID)

	var sp store.ScheduledPriceRule
	b.must(t, http.StatusAccepted, "PUT", path, rule("model_match", "m1", "input_price", "2.25", "effective_at", at), &sp)
	if sp.PriceRuleID != r.ID || sp.Version != 2 || !sp.EffectiveAt.Equal(at) || sp.Rule.InputPrice != "2.25" || sp.CreatedBy != "admin:bootstrap" {
		t.Fatalf("scheduled = %+v", sp)
	}
	var now store.PriceRule
	b.must(t, http.StatusOK, "GET", path, nil, &now)
	if now.InputPrice != "1.50" {
		t.Errorf("the rule changed before its instant: input %s", now.InputPrice)
	}
	var l scheduledList
	b.must(t, http.StatusOK, "GET", "/admin/price-rules/scheduled", nil, &l)
	if len(l.Items) != 1 || l.Items[0].ID != sp.ID {
		t.Fatalf("scheduled list = %+v", l)
	}
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/price-rules/scheduled?price_rule_id=%d", r.ID+1), nil, &l)
	if len(l.Items) != 0 {
		t.Errorf("list of another rule = %+v, want none", l)
	}

	quote := func(at *time.Time) string {
		body := map[string]any{"model": "m1", "usage": map[string]any{"input_tokens": 1000000}}
		if at != nil {
			body["at"] = at
		}
		var q admin.QuoteResult
		b.must(t, http.StatusOK, "POST", "/admin/price-rules/quote", body, &q)
		return q.Cost
	}
	before, after := at.Add(-time.Microsecond), at
	if c := quote(nil); c != "1.5" {
		t.Errorf("quote now = %s, want 1.5", c)
	}
	if c := quote(&before); c != "1.5" {
		t.Errorf("quote just before the instant = %s, want 1.5", c)
	}
	if c := quote(&after); c != "2.25" {
		t.Errorf("quote at the instant = %s, want the scheduled 2.25", c)
	}

	// Pending: other changes are refused, naming the way out; the same content passes.
	r409 := b.call(t, "PUT", path, rule("model_match", "m1", "input_price", "9"))
	if r409.status != http.StatusConflict || !strings.Contains(string(r409.raw), "scheduled change pending") {
		t.Fatalf("immediate change while pending = %d %s, want 409 naming the scheduled change", r409.status, r409.raw)
	}
	b.must(t, http.StatusOK, "PUT", path, rule("model_match", "m1", "input_price", "1.50"), nil)

	// Scheduling again replaces the pending version (POST upsert with the id too).
	later := at.Add(time.Hour)
	var sp2 store.ScheduledPriceRule
	b.must(t, http.StatusAccepted, "POST", "/admin/price-rules", rule("id", r.ID, "model_match", "m1", "input_price", "3", "effective_at", later), &sp2)
	if sp2.ID != sp.ID || sp2.Version != 2 || !sp2.EffectiveAt.Equal(later) {
		t.Errorf("rescheduled = %+v, want id %d version 2 at %v", sp2, sp.ID, later)
	}

	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/price-rules/scheduled/%d", sp.ID), nil, nil)
	b.must(t, http.StatusNotFound, "DELETE", fmt.Sprintf("/admin/price-rules/scheduled/%d", sp.ID), nil, nil)
	b.must(t, http.StatusOK, "GET", "/admin/price-rules/scheduled", nil, &l)
	if len(l.Items) != 0 {
		t.Errorf("list after cancel = %+v", l)
	}
	b.must(t, http.StatusOK, "PUT", path, rule("model_match", "m1", "input_price", "9"), nil)
	if c := quote(&after); c != "9" {
		t.Errorf("quote at the cancelled instant = %s, want the current 9", c)
	}
	if h := b.history(t, r.ID); len(h.Items) != 2 {
		t.Errorf("history has %d versions, want 2 (a cancelled schedule leaves none)", len(h.Items))
	}
}

// TestScheduledPriceRuleValidation: decision — an effective_at in the past (or less than
// admin.MinScheduleLead ahead) is refused, not applied immediately: history is never back-dated, and
// omitting effective_at is how to change a rule now.
func TestScheduledPriceRuleValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var r store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m1"), &r)
	path := fmt.Sprintf("/admin/price-rules/%d", r.ID)
	soon := time.Now().Add(time.Hour)
	b.refuses(t, []refusal{
		{"past", "PUT", path, rule("model_match", "m1", "input_price", "2", "effective_at", time.Now().Add(-time.Minute)), http.StatusUnprocessableEntity, "effective_at"},
		{"too soon", "PUT", path, rule("model_match", "m1", "input_price", "2", "effective_at", time.Now().Add(admin.MinScheduleLead/2)), http.StatusUnprocessableEntity, "effective_at"},
		{"too far", "PUT", path, rule("model_match", "m1", "input_price", "2", "effective_at", time.Now().AddDate(11, 0, 0)), http.StatusUnprocessableEntity, "effective_at"},
		{"not a time", "PUT", path, rule("model_match", "m1", "input_price", "2", "effective_at", "tomorrow"), http.StatusBadRequest, ""},
		{"new rule", "POST", "/admin/price-rules", rule("model_match", "m2", "effective_at", soon), http.StatusUnprocessableEntity, "effective_at"},
		{"unknown rule", "PUT", "/admin/price-rules/999", rule("model_match", "m1", "input_price", "2", "effective_at", soon), http.StatusNotFound, ""},
		{"identical", "PUT", path, rule("model_match", "m1", "effective_at", soon), http.StatusUnprocessableEntity, "effective_at"},
		{"invalid price", "PUT", path, rule("model_match", "m1", "input_price", "1e3", "effective_at", soon), http.StatusUnprocessableEntity, "input_price"},
		{"cancel unknown", "DELETE", "/admin/price-rules/scheduled/12345", nil, http.StatusNotFound, ""},
		{"re-pricing rules take no effective_at", "POST", "/admin/price-rules/reprice", map[string]any{
			"from": soon.Add(-2 * time.Hour), "to": soon, "rules": []any{rule("effective_at", soon)}}, http.StatusUnprocessableEntity, "effective_at"},
	})
}

// TestScheduledPriceRuleImport: an import element with effective_at is a scheduled version of an
// existing rule (or of one the same import writes); a past one refuses the whole import.
func TestScheduledPriceRuleImport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	var res admin.ImportResult
	b.must(t, http.StatusOK, "POST", "/admin/import", map[string]any{"price_rules": []any{
		rule("id", 7, "model_match", "m7", "input_price", "1"),
		rule("id", 7, "model_match", "m7", "input_price", "1.75", "effective_at", at),
	}}, &res)
	if res.PriceRules != 1 || res.ScheduledPriceRules != 1 {
		t.Fatalf("import result %+v, want 1 rule and 1 scheduled", res)
	}
	var l scheduledList
	b.must(t, http.StatusOK, "GET", "/admin/price-rules/scheduled?price_rule_id=7", nil, &l)
	if len(l.Items) != 1 || l.Items[0].Rule.InputPrice != "1.75" || !l.Items[0].EffectiveAt.Equal(at) || l.Items[0].Version != 2 {
		t.Fatalf("scheduled after import = %+v", l)
	}
	b.refuses(t, []refusal{
		{"past", "POST", "/admin/import", map[string]any{"price_rules": []any{
			rule("id", 7, "model_match", "m7", "input_price", "4", "effective_at", time.Now().Add(-time.Hour))}}, http.StatusUnprocessableEntity, "effective_at"},
		{"missing rule", "POST", "/admin/import", map[string]any{"price_rules": []any{
			rule("id", 99, "model_match", "m99", "input_price", "4", "effective_at", at)}}, http.StatusUnprocessableEntity, "id"},
		{"pending rule changed now", "POST", "/admin/import", map[string]any{"price_rules": []any{
			rule("id", 7, "model_match", "m7", "input_price", "5")}}, http.StatusConflict, "effective_at"},
	})
}

// TestScheduledPriceRuleGRPC: the gRPC twins — Update with effective_at, List (a viewer may), Cancel.
func TestScheduledPriceRuleGRPC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var r store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m1", "input_price", "1.50"), &r)
	c, _ := b.grpcClient(t)
	ctx := withToken(bootstrapToken)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	pr := &configv1.PriceRule{Id: r.ID, MatchType: "exact", ModelMatch: "m1", InputPrice: "4", OutputPrice: "6",
		CacheReadPrice: "0", CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0",
		ImageOutputPrice: "0", Enabled: true}
	up, err := c.UpdatePriceRule(ctx, &adminv1.UpdatePriceRuleRequest{Rule: pr, EffectiveAt: timestamppb.New(at)})
	if err != nil {
		t.Fatal(err)
	}
	if up.GetRule() != nil || up.GetScheduled().GetRule().GetVersion() != 2 || !up.GetScheduled().GetEffectiveAt().AsTime().Equal(at) {
		t.Fatalf("UpdatePriceRule with effective_at = %v", up)
	}
	if _, err := c.UpdatePriceRule(ctx, &adminv1.UpdatePriceRuleRequest{Rule: pr, EffectiveAt: timestamppb.New(time.Now().Add(-time.Hour))}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("past effective_at over gRPC: %v, want InvalidArgument", err)
	}
	if _, err := c.UpdatePriceRule(ctx, &adminv1.UpdatePriceRuleRequest{Rule: pr}); status.Code(err) != codes.AlreadyExists && status.Code(err) != codes.FailedPrecondition && status.Code(err) != codes.Aborted {
		t.Errorf("immediate change while pending over gRPC: %v, want a conflict", err)
	}
	var viewer struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "v", "role": "viewer"}, &viewer)
	l, err := c.ListScheduledPriceRules(withToken(viewer.Token), &adminv1.ListScheduledPriceRulesRequest{})
	if err != nil || len(l.GetItems()) != 1 || l.GetItems()[0].GetRule().GetInputPrice() != "4" {
		t.Fatalf("ListScheduledPriceRules (viewer) = %v, %v", l, err)
	}
	q, err := c.QuotePrice(ctx, &adminv1.QuotePriceRequest{Model: "m1", Usage: &settlementv1.TokenCounts{Input: 1000000}, At: timestamppb.New(at)})
	if err != nil || q.GetCost() != "4" {
		t.Errorf("gRPC quote at the instant = %v, %v; want 4", q, err)
	}
	if _, err := c.CancelScheduledPriceRule(withToken(viewer.Token), &adminv1.CancelScheduledPriceRuleRequest{Id: l.GetItems()[0].GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("viewer cancel: %v, want PermissionDenied", err)
	}
	if _, err := c.CancelScheduledPriceRule(ctx, &adminv1.CancelScheduledPriceRuleRequest{Id: l.GetItems()[0].GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelScheduledPriceRule(ctx, &adminv1.CancelScheduledPriceRuleRequest{Id: l.GetItems()[0].GetId()}); status.Code(err) != codes.NotFound {
		t.Errorf("second cancel: %v, want NotFound", err)
	}
}

// TestScheduledCatalogApply: a catalog apply with effective_at changes nothing priced now — a changed
// rule gets a scheduled version, an added rule is created disabled with a scheduled version enabling it —
// and a past effective_at is refused.
func TestScheduledCatalogApply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.applyTiny(t, `[{"id":"acme","models":[{"id":"m1","match":{"equals":"m1"},"prices":{"input_mtok":1,"output_mtok":2}}]}]`)
	p := b.plan(t, tinyReq(`[{"id":"acme","models":[{"id":"m1","match":{"equals":"m1"},"prices":{"input_mtok":3,"output_mtok":6}},
		{"id":"m2","match":{"equals":"m2"},"prices":{"input_mtok":4,"output_mtok":8}}]}]`))
	b.refuses(t, []refusal{{"past", "POST", "/admin/price-catalogs/apply",
		map[string]any{"plan_id": p.ID, "effective_at": time.Now().Add(-time.Minute)}, http.StatusUnprocessableEntity, "effective_at"}})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	var res admin.CatalogApplyResult
	b.must(t, http.StatusOK, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID, "effective_at": at}, &res)
	if res.Added != 1 || res.Changed != 1 || res.Scheduled != 2 {
		t.Fatalf("apply result %+v, want 1 added, 1 changed, 2 scheduled", res)
	}
	quote := func(model string, at *time.Time) string {
		body := map[string]any{"model": model, "usage": map[string]any{"input_tokens": 1000000}}
		if at != nil {
			body["at"] = at
		}
		var q admin.QuoteResult
		b.must(t, http.StatusOK, "POST", "/admin/price-rules/quote", body, &q)
		return q.Cost
	}
	for _, c := range []struct {
		model string
		at    *time.Time
		want  string
	}{{"m1", nil, "1"}, {"m2", nil, "0"}, {"m1", &at, "3"}, {"m2", &at, "4"}} {
		if got := quote(c.model, c.at); got != c.want {
			t.Errorf("quote %s at %v = %s, want %s", c.model, c.at, got, c.want)
		}
	}
	var l scheduledList
	b.must(t, http.StatusOK, "GET", "/admin/price-rules/scheduled", nil, &l)
	if len(l.Items) != 2 || !strings.Contains(l.Items[0].CreatedBy, "catalog plan "+p.ID) {
		t.Errorf("scheduled after the apply = %+v, want 2 by the catalog plan", l.Items)
	}
}
