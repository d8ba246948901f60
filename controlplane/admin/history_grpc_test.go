package admin_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

// The gRPC twins of the price history and the re-pricing report answer what REST answers, to a
// viewer too (both are read-only), and refuse bad input with InvalidArgument naming the field.
func TestGRPCPriceRuleHistoryAndReprice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var r store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m1", "input_price", "1.50"), &r)
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", r.ID), rule("model_match", "m1", "input_price", "3"), nil)
	var tok struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "ro", "role": "viewer"}, &tok)
	c, _ := b.grpcClient(t)
	viewer := withToken(tok.Token)

	h, err := c.GetPriceRuleHistory(viewer, &adminv1.GetPriceRuleHistoryRequest{PriceRuleId: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	rest := b.history(t, r.ID)
	if len(h.GetItems()) != 2 || len(rest.Items) != 2 {
		t.Fatalf("history %v, REST %+v; want 2 versions", h.GetItems(), rest.Items)
	}
	for i, v := range h.GetItems() {
		rv := rest.Items[i]
		if v.GetVersion() != rv.Version || !v.GetValidFrom().AsTime().Equal(rv.ValidFrom) || v.GetChangedBy() != "admin:bootstrap" ||
			v.GetRule().GetId() != r.ID || v.GetRule().GetInputPrice() != []string{"1.50", "3"}[i] || v.GetRule().GetModelMatch() != "m1" {
			t.Errorf("version %d = %v, REST %+v", i+1, v, rv)
		}
	}
	if h.GetItems()[0].ValidTo == nil || !h.GetItems()[0].GetValidTo().AsTime().Equal(h.GetItems()[1].GetValidFrom().AsTime()) || h.GetItems()[1].ValidTo != nil {
		t.Errorf("time ranges %v", h.GetItems())
	}
	if _, err := c.GetPriceRuleHistory(viewer, &adminv1.GetPriceRuleHistoryRequest{PriceRuleId: 987654}); status.Code(err) != codes.NotFound {
		t.Errorf("history of an id that never existed: %v, want NotFound", err)
	}
	if _, err := c.GetPriceRuleHistory(viewer, &adminv1.GetPriceRuleHistoryRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("history of id 0: %v, want InvalidArgument", err)
	}
	if _, err := c.GetPriceRuleHistory(withToken("wrong-token-wrong-token"), &adminv1.GetPriceRuleHistoryRequest{PriceRuleId: r.ID}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("history with a wrong token: %v, want Unauthenticated", err)
	}

	v1 := h.GetItems()[0].GetValidFrom().AsTime()
	if _, err := b.db.Pool.Exec(t.Context(), `INSERT INTO usages (request_id, operation, inbound_kind, upstream_model, input_tokens,
		cost, source, end_state, created_at) VALUES ('grpc-rp', 'rerank', 'alpha', 'm1', 1000000, 1.5, 'upstream', 'completed', $1)`,
		v1.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	before := b.state(t)
	from, to := timestamppb.New(v1.Add(-time.Hour)), timestamppb.New(v1.Add(time.Hour))
	rep, err := c.RepricePriceRules(viewer, &adminv1.RepricePriceRulesRequest{From: from, To: to,
		Rules: []*configv1.PriceRule{protoRule("model_match", "m1", "input_price", "4.25")}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GetUsages() != 1 || rep.GetCharged() != "1.5" || rep.GetRepriced() != "4.25" || rep.GetDifference() != "2.75" ||
		rep.GetBasis() != "1 rules given" || !rep.GetFrom().AsTime().Equal(from.AsTime()) || len(rep.GetByModel()) != 1 ||
		rep.GetByModel()[0].GetModel() != "m1" || rep.GetByModel()[0].GetDifference() != "2.75" {
		t.Errorf("report under given rules: %v", rep)
	}
	rep, err = c.RepricePriceRules(viewer, &adminv1.RepricePriceRulesRequest{From: from, To: to, At: timestamppb.New(v1)})
	if err != nil || rep.GetRepriced() != "1.5" || rep.GetDifference() != "0" {
		t.Errorf("report under the rules in force at version 1: %v, %v", rep, err)
	}
	if b.state(t) != before {
		t.Error("the report changed the configuration")
	}
	for _, tc := range []struct {
		name  string
		req   *adminv1.RepricePriceRulesRequest
		field string
	}{
		{"no period", &adminv1.RepricePriceRulesRequest{At: timestamppb.New(v1)}, "from"},
		{"empty period", &adminv1.RepricePriceRulesRequest{From: from, To: from, At: timestamppb.New(v1)}, "to"},
		{"neither rules nor at", &adminv1.RepricePriceRulesRequest{From: from, To: to}, "rules"},
		{"bad rule", &adminv1.RepricePriceRulesRequest{From: from, To: to, Rules: []*configv1.PriceRule{protoRule("input_price", "1e3")}}, "rules[0].input_price"},
		{"invalid timestamp", &adminv1.RepricePriceRulesRequest{From: &timestamppb.Timestamp{Seconds: 1, Nanos: -5}, To: to, At: timestamppb.New(v1)}, "from"},
	} {
		_, err := c.RepricePriceRules(viewer, tc.req)
		if status.Code(err) != codes.InvalidArgument || !slices.Contains(fieldViolations(err), tc.field) {
			t.Errorf("%s: %v (fields %v), want InvalidArgument on %s", tc.name, err, fieldViolations(err), tc.field)
		}
	}
}
