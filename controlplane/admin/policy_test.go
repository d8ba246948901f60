package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func TestModelPolicyReachesTheSnapshot(t *testing.T) {
	b := setup(t)
	strict := b.provider(t, "strict", "alpha")
	open := b.provider(t, "open", "alpha")
	_, _, user := b.tenants(t, "acme")
	plain := b.newKey(t, user, "plain")
	var direct keyJSON
	b.must(t, http.StatusCreated, "POST", "/admin/api-keys", map[string]any{"user_id": user, "allow_direct_addressing": true}, &direct)

	// Defaults: unpriced allowed everywhere, direct addressing on.
	c := b.compiled(t)
	if !c.DirectAddressing || c.Provider(strict).UnpricedDeny || !c.LookupKey(plain.Key).DirectAddressing() {
		t.Fatal("defaults: want direct addressing on and unpriced allowed")
	}

	b.must(t, http.StatusNoContent, "PUT", fmt.Sprintf("/admin/providers/%d/unpriced-policy", strict), map[string]any{"unpriced_policy": "deny"}, nil)
	var mp struct {
		UnpricedPolicy   string `json:"unpriced_policy"`
		DirectAddressing bool   `json:"direct_addressing"`
		Providers        []struct {
			ProviderID     int64  `json:"provider_id"`
			UnpricedPolicy string `json:"unpriced_policy"`
		} `json:"providers"`
	}
	b.must(t, http.StatusOK, "PUT", "/admin/model-policy", map[string]any{"direct_addressing": false}, &mp)
	if mp.UnpricedPolicy != "allow" || mp.DirectAddressing || len(mp.Providers) != 1 || mp.Providers[0].ProviderID != strict {
		t.Fatalf("policy = %+v", mp)
	}
	c = b.compiled(t)
	if c.DirectAddressing || !c.Provider(strict).UnpricedDeny || c.Provider(open).UnpricedDeny {
		t.Fatal("a provider's own policy or the direct-addressing switch did not reach the snapshot")
	}
	if c.LookupKey(plain.Key).DirectAddressing() || !c.LookupKey(direct.Key).DirectAddressing() {
		t.Fatal("with direct addressing off only the key allowing it may use it")
	}

	// The gateway default applies to providers without their own; clearing a provider's restores it.
	b.must(t, http.StatusOK, "PUT", "/admin/model-policy", map[string]any{"unpriced_policy": "deny"}, nil)
	b.must(t, http.StatusNoContent, "PUT", fmt.Sprintf("/admin/providers/%d/unpriced-policy", strict), map[string]any{"unpriced_policy": "allow"}, nil)
	c = b.compiled(t)
	if c.Provider(strict).UnpricedDeny || !c.Provider(open).UnpricedDeny {
		t.Fatal("gateway default deny / provider allow not applied")
	}
	b.must(t, http.StatusNoContent, "PUT", fmt.Sprintf("/admin/providers/%d/unpriced-policy", strict), `{"unpriced_policy": null}`, nil)
	if !b.compiled(t).Provider(strict).UnpricedDeny {
		t.Fatal("a cleared provider policy does not follow the gateway default")
	}

	b.refuses(t, []refusal{
		{"bad gateway policy", "PUT", "/admin/model-policy", map[string]any{"unpriced_policy": "maybe"}, 422, "unpriced_policy"},
		{"empty gateway policy", "PUT", "/admin/model-policy", map[string]any{"unpriced_policy": ""}, 422, "unpriced_policy"},
		{"bad provider policy", "PUT", fmt.Sprintf("/admin/providers/%d/unpriced-policy", open), map[string]any{"unpriced_policy": "x"}, 422, "unpriced_policy"},
		{"missing provider", "PUT", "/admin/providers/999999/unpriced-policy", map[string]any{"unpriced_policy": "deny"}, 404, ""},
	})

	// gRPC reads the same policy.
	cl, _ := b.grpcClient(t)
	got, err := cl.GetModelPolicy(withToken(bootstrapToken), &adminv1.GetModelPolicyRequest{})
	if err != nil || got.GetPolicy().GetUnpricedPolicy() != "deny" || got.GetPolicy().GetDirectAddressing() {
		t.Fatalf("GetModelPolicy = %v, %v", got, err)
	}
	if _, err := cl.SetModelPolicy(withToken(bootstrapToken), &adminv1.SetModelPolicyRequest{Policy: &configv1.ModelPolicy{
		UnpricedPolicy: "allow", DirectAddressing: true}}); err != nil {
		t.Fatal(err)
	}
	if !b.compiled(t).DirectAddressing {
		t.Fatal("SetModelPolicy over gRPC did not turn direct addressing back on")
	}
}

func TestUnpricedModelsListedForReview(t *testing.T) {
	b := setup(t)
	p := b.provider(t, "open", "alpha")
	ins := func(req, op, model, end string, rule *int64) {
		t.Helper()
		if _, err := b.db.Pool.Exec(context.Background(), `INSERT INTO usages (request_id, provider_id, upstream_model, operation,
			inbound_kind, price_rule_id, cost, source, end_state, created_at)
			VALUES ($1, $2, $3, $4, 'alpha_responses', $5, 0, 'upstream', $6, now())`, req, p, model, op, rule, end); err != nil {
			t.Fatal(err)
		}
	}
	one := int64(1)
	ins("a", "generate_content", "free-model", "completed", nil)
	ins("b", "stream_generate_content", "free-model", "completed", nil)
	ins("c", "generate_content", "other", "upstream_error", nil)
	ins("d", "generate_content", "priced", "completed", &one)  // priced: not listed
	ins("e", "count_tokens", "free-model-2", "completed", nil) // free operation: not listed
	ins("f", "generate_content", "refused", "rejected", nil)   // never served: not listed
	var out struct {
		Items []struct {
			ProviderID    int64  `json:"provider_id"`
			UpstreamModel string `json:"upstream_model"`
			Requests      int64  `json:"requests"`
		} `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", "/admin/unpriced-models", nil, &out)
	if got := fmt.Sprint(out.Items); got != fmt.Sprintf("[{%d free-model 2} {%d other 1}]", p, p) {
		t.Fatalf("unpriced models = %s", got)
	}
	b.must(t, http.StatusOK, "GET", "/admin/unpriced-models?since=2999-01-01T00:00:00Z", nil, &out)
	if len(out.Items) != 0 {
		t.Fatalf("since in the future = %+v", out.Items)
	}
	b.must(t, http.StatusBadRequest, "GET", "/admin/unpriced-models?since=yesterday", nil, nil)
}
