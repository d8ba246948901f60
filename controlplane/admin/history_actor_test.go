package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

// Every price-rule write through the admin API records the admin token's role and name as the
// author of the version it makes, whichever door it came through (REST, gRPC, import).
func TestPriceRuleHistoryNamesTheAdminToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var tok struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "alice", "role": "admin"}, &tok)
	const alice = "admin:alice"
	as := func(want int, method, path string, body, v any) {
		t.Helper()
		r := b.callAs(t, tok.Token, method, path, body)
		if r.status != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, want)
		}
		if v != nil {
			r.json(t, v)
		}
	}
	authors := func(id int64) []string {
		t.Helper()
		var out []string
		for _, v := range b.history(t, id).Items {
			out = append(out, v.ChangedBy)
		}
		return out
	}

	// REST create, update, delete.
	var r store.PriceRule
	as(http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "rest", "input_price", "1"), &r)
	as(http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", r.ID), rule("model_match", "rest", "input_price", "2"), nil)
	as(http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/price-rules/%d", r.ID), nil, nil)
	if got := authors(r.ID); fmt.Sprint(got) != fmt.Sprint([]string{alice, alice}) {
		t.Errorf("REST writes recorded as %q, want %q twice", got, alice)
	}
	var ended bool
	if err := b.db.Pool.QueryRow(t.Context(), `SELECT valid_to IS NOT NULL FROM price_rule_versions
		WHERE price_rule_id = $1 AND version = 2`, r.ID).Scan(&ended); err != nil || !ended {
		t.Errorf("deleted rule's last version still open (%v)", err)
	}

	// gRPC create, update, delete.
	c, _ := b.grpcClient(t)
	ctx := withToken(tok.Token)
	cr, err := c.CreatePriceRule(ctx, &adminv1.CreatePriceRuleRequest{Rule: protoRule("model_match", "grpc", "input_price", "1")})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.GetRule().GetId()
	up := protoRule("model_match", "grpc", "input_price", "2")
	up.Id = id
	if _, err := c.UpdatePriceRule(ctx, &adminv1.UpdatePriceRuleRequest{Rule: up}); err != nil {
		t.Fatal(err)
	}
	up.InputPrice = "3"
	if _, err := c.UpdatePriceRule(withToken(bootstrapToken), &adminv1.UpdatePriceRuleRequest{Rule: up}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeletePriceRule(ctx, &adminv1.DeletePriceRuleRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	if got := authors(id); fmt.Sprint(got) != fmt.Sprint([]string{alice, alice, "admin:bootstrap"}) {
		t.Errorf("gRPC writes recorded as %q", got)
	}

	// gRPC import.
	imp := protoRule("model_match", "grpc-imported", "input_price", "5")
	imp.Id = 778
	if _, err := c.Import(ctx, &adminv1.ImportRequest{PriceRules: []*configv1.PriceRule{imp}}); err != nil {
		t.Fatal(err)
	}
	if got := authors(778); fmt.Sprint(got) != fmt.Sprint([]string{alice}) {
		t.Errorf("gRPC import recorded as %q", got)
	}

	// JSON import (what the console's import uses too).
	bundle := map[string]any{"price_rules": []any{rule("id", 777, "model_match", "imported", "input_price", "4")}}
	raw, _ := json.Marshal(bundle)
	as(http.StatusOK, "POST", "/admin/import", json.RawMessage(raw), nil)
	if got := authors(777); fmt.Sprint(got) != fmt.Sprint([]string{alice}) {
		t.Errorf("import recorded as %q", got)
	}
}
