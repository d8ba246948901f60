package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/controlplane/store"
)

func TestPriceRuleCRUDKeepsDecimalsAsGiven(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.provider(t, "alpha-1", "alpha")
	tiers := []any{
		map[string]any{"min_prompt_tokens": 200000, "multiplier": "2.0"},
		map[string]any{"service_tier": "priority", "multiplier": "1.80", "output_price": "12.500"},
	}
	rev := b.revision(t)
	var created store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("provider_id", pid, "pricing_tiers_json", tiers), &created)
	if got := b.revision(t); got != rev+1 {
		t.Errorf("revision after create = %d, want %d", got, rev+1)
	}
	var got store.PriceRule
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/price-rules/%d", created.ID), nil, &got)
	want := []struct{ name, got, want string }{
		{"input_price", got.InputPrice, "1.50"}, {"output_price", got.OutputPrice, "6.000"},
		{"cache_read_price", got.CacheReadPrice, "0.15"}, {"cache_creation_5m_price", got.CacheCreation5mPrice, "1.875"},
		{"cache_creation_30m_price", got.CacheCreation30mPrice, "2.5"}, {"cache_creation_1h_price", got.CacheCreation1hPrice, "3"},
		{"image_output_price", got.ImageOutputPrice, "0.000001"},
	}
	for _, w := range want {
		if w.got != w.want {
			t.Errorf("%s = %q, want %q", w.name, w.got, w.want)
		}
	}
	if got.ProviderID == nil || *got.ProviderID != pid {
		t.Errorf("provider_id = %v, want %d", got.ProviderID, pid)
	}
	var gotTiers []map[string]any
	if err := json.Unmarshal(got.PricingTiersJSON, &gotTiers); err != nil || len(gotTiers) != 2 {
		t.Fatalf("pricing_tiers_json = %s (%v), want a 2-element array", got.PricingTiersJSON, err)
	}
	if gotTiers[1]["multiplier"] != "1.80" || gotTiers[1]["output_price"] != "12.500" || gotTiers[1]["service_tier"] != "priority" {
		t.Errorf("tier 1 = %v, want the values as written", gotTiers[1])
	}

	// Global rule: provider_id is null in the JSON.
	r := b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "gpt", "match_type", "contains"), nil)
	if !strings.Contains(string(r.raw), `"provider_id":null`) || !strings.Contains(string(r.raw), `"pricing_tiers_json":[]`) {
		t.Errorf("global rule JSON = %s, want provider_id null and pricing_tiers_json []", r.raw)
	}

	// PUT replaces.
	var updated store.PriceRule
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", created.ID), rule("input_price", "2.250", "enabled", false), &updated)
	if updated.InputPrice != "2.250" || updated.Enabled || updated.ProviderID != nil {
		t.Errorf("after PUT: %+v", updated)
	}

	// POST with an id upserts under that id; the sequence moves past it.
	var up store.PriceRule
	b.must(t, http.StatusOK, "POST", "/admin/price-rules", rule("id", 5000, "model_match", "m-5000"), &up)
	if up.ID != 5000 {
		t.Fatalf("upsert id = %d, want 5000", up.ID)
	}
	b.must(t, http.StatusOK, "POST", "/admin/price-rules", rule("id", 5000, "model_match", "m-5000b"), &up)
	if up.ModelMatch != "m-5000b" {
		t.Errorf("second upsert model_match = %q", up.ModelMatch)
	}
	var next store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "after"), &next)
	if next.ID <= 5000 {
		t.Errorf("create after upsert got id %d, want > 5000", next.ID)
	}

	// DELETE, then 404.
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/price-rules/%d", created.ID), nil, nil)
	if r := b.call(t, "GET", fmt.Sprintf("/admin/price-rules/%d", created.ID), nil); r.status != http.StatusNotFound || r.apiError(t).Error.Code != "not_found" {
		t.Errorf("GET deleted = %d %s, want 404 not_found", r.status, r.raw)
	}
	if r := b.call(t, "DELETE", fmt.Sprintf("/admin/price-rules/%d", created.ID), nil); r.status != http.StatusNotFound {
		t.Errorf("DELETE deleted = %d, want 404", r.status)
	}
}

func TestPriceRuleListPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", fmt.Sprintf("m-%d", i)), nil)
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		var p struct {
			Items      []store.PriceRule `json:"items"`
			NextCursor string            `json:"next_cursor"`
		}
		b.must(t, http.StatusOK, "GET", "/admin/price-rules?limit=2&cursor="+cursor, nil, &p)
		for _, r := range p.Items {
			seen = append(seen, r.ModelMatch)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if got := strings.Join(seen, ","); got != "m-0,m-1,m-2,m-3,m-4" {
		t.Errorf("paged rules = %s", got)
	}
	for _, q := range []string{"?limit=0", "?limit=-1", "?limit=abc", "?limit=100000", "?cursor=***", "?cursor=bm9wZQ"} {
		if r := b.call(t, "GET", "/admin/price-rules"+q, nil); r.status != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", q, r.status)
		}
	}
}

// TestPriceRuleBadInput covers every bad-input class: each case is refused with the right status
// and field, and nothing in the database changes.
func TestPriceRuleBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.provider(t, "alpha-1", "alpha")
	var existing store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("provider_id", pid), &existing)
	path := fmt.Sprintf("/admin/price-rules/%d", existing.ID)
	bigBody := `{"model_match":"` + strings.Repeat("x", 2<<20) + `"}`
	tests := []struct {
		name         string
		method, path string
		body         any
		status       int
		code         string
		field        string
		tier         int
	}{
		{"malformed JSON", "POST", "/admin/price-rules", `{"model_match": "a",`, 400, "invalid_request", "", -1},
		{"not JSON", "POST", "/admin/price-rules", `hello`, 400, "invalid_request", "", -1},
		{"empty body", "POST", "/admin/price-rules", ``, 400, "invalid_request", "", -1},
		{"trailing data", "POST", "/admin/price-rules", `{} {}`, 400, "invalid_request", "", -1},
		{"array body", "POST", "/admin/price-rules", `[]`, 400, "invalid_request", "", -1},
		{"price as number", "POST", "/admin/price-rules", rule("input_price", json.Number("1.5")), 400, "invalid_request", "input_price", -1},
		{"enabled as string", "POST", "/admin/price-rules", rule("enabled", "yes"), 400, "invalid_request", "enabled", -1},
		{"provider_id as string", "POST", "/admin/price-rules", rule("provider_id", "1"), 400, "invalid_request", "provider_id", -1},
		{"id as float", "POST", "/admin/price-rules", rule("id", json.Number("1.5")), 400, "invalid_request", "id", -1},
		{"unknown field", "POST", "/admin/price-rules", rule("colour", "red"), 400, "invalid_request", "colour", -1},
		{"oversized body", "POST", "/admin/price-rules", bigBody, 413, "body_too_large", "", -1},
		{"malformed decimal exponent", "POST", "/admin/price-rules", rule("input_price", "1e5"), 422, "validation_failed", "input_price", -1},
		{"malformed decimal text", "POST", "/admin/price-rules", rule("output_price", "abc"), 422, "validation_failed", "output_price", -1},
		{"malformed decimal comma", "POST", "/admin/price-rules", rule("cache_read_price", "1,5"), 422, "validation_failed", "cache_read_price", -1},
		{"negative price", "POST", "/admin/price-rules", rule("image_output_price", "-1"), 422, "validation_failed", "image_output_price", -1},
		{"missing price", "POST", "/admin/price-rules", rule("cache_creation_1h_price", deleteKey), 422, "validation_failed", "cache_creation_1h_price", -1},
		{"missing enabled", "POST", "/admin/price-rules", rule("enabled", deleteKey), 422, "validation_failed", "enabled", -1},
		{"bad match_type", "POST", "/admin/price-rules", rule("match_type", "regex"), 422, "validation_failed", "match_type", -1},
		{"empty model_match", "POST", "/admin/price-rules", rule("model_match", ""), 422, "validation_failed", "model_match", -1},
		{"tiers not an array", "POST", "/admin/price-rules", rule("pricing_tiers_json", map[string]any{}), 422, "validation_failed", "pricing_tiers_json", -1},
		{"tier malformed multiplier", "POST", "/admin/price-rules", rule("pricing_tiers_json", []any{
			map[string]any{"min_prompt_tokens": 10}, map[string]any{"service_tier": "priority", "multiplier": "x2"}}),
			422, "validation_failed", "multiplier", 1},
		{"tier unknown field", "POST", "/admin/price-rules", rule("pricing_tiers_json", []any{
			map[string]any{"min_prompt_tokens": 10, "discount": "1"}}), 422, "validation_failed", "discount", 0},
		{"tier negative threshold", "POST", "/admin/price-rules", rule("pricing_tiers_json", []any{
			map[string]any{"min_prompt_tokens": -1}}), 422, "validation_failed", "min_prompt_tokens", 0},
		{"negative id", "POST", "/admin/price-rules", rule("id", -3), 422, "validation_failed", "id", -1},
		{"negative provider_id", "POST", "/admin/price-rules", rule("provider_id", -1), 422, "validation_failed", "provider_id", -1},
		{"zero provider_id", "POST", "/admin/price-rules", rule("provider_id", 0), 422, "validation_failed", "provider_id", -1},
		{"nonexistent provider", "POST", "/admin/price-rules", rule("provider_id", 999999), 422, "validation_failed", "provider_id", -1},
		{"nonexistent provider on upsert", "POST", "/admin/price-rules", rule("id", existing.ID, "provider_id", 999999), 422, "validation_failed", "provider_id", -1},
		{"PUT malformed decimal", "PUT", path, rule("input_price", "1..0"), 422, "validation_failed", "input_price", -1},
		{"PUT id mismatch", "PUT", path, rule("id", existing.ID+1), 422, "validation_failed", "id", -1},
		{"PUT unknown rule", "PUT", "/admin/price-rules/987654", rule(), 404, "not_found", "", -1},
		{"PUT unknown field", "PUT", path, rule("extra", 1), 400, "invalid_request", "extra", -1},
		{"path id not a number", "GET", "/admin/price-rules/abc", nil, 400, "invalid_request", "", -1},
		{"path id negative", "DELETE", "/admin/price-rules/-1", nil, 400, "invalid_request", "", -1},
		{"path id zero", "PUT", "/admin/price-rules/0", rule(), 400, "invalid_request", "", -1},
		{"delete unknown", "DELETE", "/admin/price-rules/987654", nil, 404, "not_found", "", -1},
		{"quote malformed", "POST", "/admin/price-rules/quote", `{"model":`, 400, "invalid_request", "", -1},
		{"quote negative tokens", "POST", "/admin/price-rules/quote", map[string]any{"model": "m", "usage": map[string]any{"input_tokens": -1}}, 422, "validation_failed", "usage.input_tokens", -1},
		{"quote unknown usage field", "POST", "/admin/price-rules/quote", map[string]any{"model": "m", "usage": map[string]any{"tokens": 1}}, 400, "invalid_request", "tokens", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.state(t)
			r := b.call(t, tt.method, tt.path, tt.body)
			if r.status != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, r.status, r.raw, tt.status)
			}
			e := r.apiError(t)
			if e.Error.Code != tt.code {
				t.Errorf("code = %q, want %q (%s)", e.Error.Code, tt.code, r.raw)
			}
			if tt.field != "" && !e.hasField(tt.field, tt.tier) {
				t.Errorf("details do not name field %q tier %d: %s", tt.field, tt.tier, r.raw)
			}
			if after := b.state(t); after != before {
				t.Errorf("state changed by a refused request")
			}
		})
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.provider(t, "alpha-1", "alpha")
	var global, scoped store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "model", "match_type", "contains",
		"input_price", "1", "output_price", "2"), &global)
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("provider_id", pid, "model_match", "model-x",
		"input_price", "3.00", "output_price", "15.00", "pricing_tiers_json", []any{
			map[string]any{"min_prompt_tokens": 1000, "multiplier": "2"},
			map[string]any{"service_tier": "priority", "multiplier": "1.5"},
		}), &scoped)
	type quote struct {
		PriceRuleID int64             `json:"price_rule_id"`
		Cost        string            `json:"cost"`
		CostMicros  int64             `json:"cost_micros"`
		Rates       map[string]string `json:"rates"`
		PromptTier  int               `json:"prompt_tier"`
		ServiceTier int               `json:"service_tier"`
	}
	tests := []struct {
		name string
		req  map[string]any
		want quote
	}{
		{"scoped exact beats global contains", map[string]any{"provider_id": pid, "model": "model-x",
			"usage": map[string]any{"input_tokens": 100, "output_tokens": 10}},
			quote{PriceRuleID: scoped.ID, Cost: "0.00045", CostMicros: 450, PromptTier: -1, ServiceTier: -1}},
		{"prompt tier and fast→priority", map[string]any{"provider_id": pid, "model": "model-x", "service_tier": "fast",
			"usage": map[string]any{"input_tokens": 1000, "output_tokens": 1000}},
			// input 3×2×1.5 = 9, output 15×2×1.5 = 45 per million: 0.009 + 0.045
			quote{PriceRuleID: scoped.ID, Cost: "0.054", CostMicros: 54000, PromptTier: 0, ServiceTier: 1}},
		{"global for another provider", map[string]any{"provider_id": pid + 100, "model": "model-x",
			"usage": map[string]any{"input_tokens": 1000000}},
			quote{PriceRuleID: global.ID, Cost: "1", CostMicros: 1000000, PromptTier: -1, ServiceTier: -1}},
		{"no match costs nothing", map[string]any{"provider_id": nil, "model": "other",
			"usage": map[string]any{"input_tokens": 5}},
			quote{PriceRuleID: 0, Cost: "0", CostMicros: 0, PromptTier: -1, ServiceTier: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got quote
			b.must(t, http.StatusOK, "POST", "/admin/price-rules/quote", tt.req, &got)
			if got.PriceRuleID != tt.want.PriceRuleID || got.Cost != tt.want.Cost || got.CostMicros != tt.want.CostMicros ||
				got.PromptTier != tt.want.PromptTier || got.ServiceTier != tt.want.ServiceTier {
				t.Errorf("Quote(%v) = %+v, want %+v", tt.req, got, tt.want)
			}
			if len(got.Rates) != 7 {
				t.Errorf("rates = %v, want 7 categories", got.Rates)
			}
		})
	}
	// A rule change is seen by the next quote (the cached index follows config_revision).
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", global.ID), rule("model_match", "model",
		"match_type", "contains", "input_price", "4", "output_price", "2"), nil)
	var got quote
	b.must(t, http.StatusOK, "POST", "/admin/price-rules/quote", map[string]any{"model": "model-q",
		"usage": map[string]any{"input_tokens": 1000000}}, &got)
	if got.Cost != "4" {
		t.Errorf("quote after update cost = %s, want 4", got.Cost)
	}
}

// TestPriceRuleTierThresholdOutOfRange: a min_prompt_tokens beyond the accepted bound (or beyond
// int64) is a 422 on pricing_tiers_json[i].min_prompt_tokens whose message names the field and the
// allowed range; the bound itself is accepted. Nothing changes on refusal.
func TestPriceRuleTierThresholdOutOfRange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ok store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("pricing_tiers_json", []any{
		map[string]any{"min_prompt_tokens": json.RawMessage("999999999999999"), "multiplier": "2"}}), &ok)
	if !strings.Contains(string(ok.PricingTiersJSON), `"min_prompt_tokens": 999999999999999`) &&
		!strings.Contains(string(ok.PricingTiersJSON), `"min_prompt_tokens":999999999999999`) {
		t.Errorf("stored tiers = %s, want the bound kept", ok.PricingTiersJSON)
	}
	for _, v := range []string{"1000000000000000", "9223372036854775807", "9223372036854775808", "123456789012345678901234567890", `"1000000000000000"`} {
		for _, target := range []struct{ method, path string }{
			{"POST", "/admin/price-rules"}, {"PUT", fmt.Sprintf("/admin/price-rules/%d", ok.ID)},
		} {
			before := b.state(t)
			r := b.call(t, target.method, target.path, rule("pricing_tiers_json", []any{
				map[string]any{"min_prompt_tokens": 10},
				map[string]any{"min_prompt_tokens": json.RawMessage(v), "multiplier": "2"}}))
			if r.status != http.StatusUnprocessableEntity {
				t.Fatalf("%s min_prompt_tokens %s = %d %s, want 422", target.method, v, r.status, r.raw)
			}
			e := r.apiError(t)
			if e.Error.Code != "validation_failed" || len(e.Error.Details) != 1 || !e.hasField("min_prompt_tokens", 1) {
				t.Fatalf("%s min_prompt_tokens %s: body %s, want one detail on min_prompt_tokens tier 1", target.method, v, r.raw)
			}
			want := "min_prompt_tokens is too large: must be an integer between 0 and 999999999999999, got " + strings.Trim(v, `"`)[:10]
			if msg := e.Error.Details[0].Message; !strings.HasPrefix(msg, want) {
				t.Errorf("%s min_prompt_tokens %s: message %q, want it to start with %q", target.method, v, msg, want)
			}
			if b.state(t) != before {
				t.Errorf("%s min_prompt_tokens %s changed state", target.method, v)
			}
		}
	}
	// Import reports it with section and index too.
	before := b.state(t)
	r := b.call(t, "POST", "/admin/import", map[string]any{"price_rules": []any{rule(), rule("pricing_tiers_json", []any{
		map[string]any{"min_prompt_tokens": json.RawMessage("10000000000000000")}})}})
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("import = %d %s, want 422", r.status, r.raw)
	}
	e := r.apiError(t)
	if len(e.Error.Details) != 1 || e.Error.Details[0].Section != "price_rules" || e.Error.Details[0].Index == nil ||
		*e.Error.Details[0].Index != 1 || !e.hasField("min_prompt_tokens", 0) ||
		!strings.Contains(e.Error.Details[0].Message, "between 0 and 999999999999999") {
		t.Errorf("import body = %s, want price_rules[1] pricing_tiers_json[0].min_prompt_tokens with the range", r.raw)
	}
	if b.state(t) != before {
		t.Error("refused import changed state")
	}
}
