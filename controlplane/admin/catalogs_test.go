package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/catalog"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/testkit"
)

// shippedCatalogs is ../shared/catalogs beside the repository; missing catalogs fail the test.
func shippedCatalogs(t testing.TB) string {
	t.Helper()
	return filepath.Dir(filepath.Dir(testkit.Shared(t, "catalogs", "genai-prices", "data.json")))
}

func genaiDoc(t testing.TB) string {
	b, err := os.ReadFile(filepath.Join(shippedCatalogs(t), "genai-prices", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (b *testBundle) countRules(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM price_rules`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *testBundle) plan(t *testing.T, req map[string]any) admin.CatalogPlan {
	t.Helper()
	var p admin.CatalogPlan
	b.must(t, http.StatusCreated, "POST", "/admin/price-catalogs/plan", req, &p)
	return p
}

func (b *testBundle) ruleByMatch(t *testing.T, provider *int64, mt, match string) store.PriceRule {
	t.Helper()
	var exp admin.Bundle
	b.must(t, http.StatusOK, "GET", "/admin/export", nil, &exp)
	for _, r := range exp.PriceRules {
		if r.MatchType == mt && r.ModelMatch == match && ((provider == nil) == (r.ProviderID == nil)) &&
			(provider == nil || *provider == *r.ProviderID) {
			return r
		}
	}
	t.Fatalf("no %s rule %q", mt, match)
	return store.PriceRule{}
}

// The full genai-prices file: plan changes nothing, apply adds every mapped rule with provenance,
// a second plan finds nothing to do, and import → export → import changes nothing.
func TestCatalogGenAIPricesPlanApplyRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.provider(t, "openai-1", "alpha")
	doc := genaiDoc(t)
	req := map[string]any{"format": "genai-prices", "document": doc, "provider_map": map[string]int64{"openai": pid},
		"starts_with_as_contains": true, "at": "2026-08-01T00:00:00Z"}
	before := b.state(t)
	p := b.plan(t, req)
	if b.state(t) != before {
		t.Fatal("plan changed the rules")
	}
	if p.ID == "" || p.Entries != 1442 || len(p.Added) < 1000 || len(p.Changed) != 0 || len(p.Skipped) == 0 {
		t.Fatalf("plan: id %q entries %d added %d changed %d skipped %d", p.ID, p.Entries, len(p.Added), len(p.Changed), len(p.Skipped))
	}
	if p.Entries > len(p.Added)+len(p.Skipped) && len(p.Added)+len(p.Skipped) < p.Entries {
		t.Errorf("entries %d not all accounted (added %d, skipped %d)", p.Entries, len(p.Added), len(p.Skipped))
	}
	// The stored plan reads back.
	var stored admin.CatalogPlan
	b.must(t, http.StatusOK, "GET", "/admin/price-catalogs/plans/"+p.ID, nil, &stored)
	if len(stored.Added) != len(p.Added) {
		t.Errorf("stored plan has %d added, want %d", len(stored.Added), len(p.Added))
	}

	var res admin.CatalogApplyResult
	b.must(t, http.StatusOK, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID}, &res)
	if res.Added != len(p.Added) || b.countRules(t) != len(p.Added) {
		t.Fatalf("apply added %d (%d rules stored), want %d", res.Added, b.countRules(t), len(p.Added))
	}
	gpt := b.ruleByMatch(t, &pid, "exact", "gpt-4o")
	if gpt.InputPrice != "2.5" || gpt.OutputPrice != "10" || gpt.CacheReadPrice != "1.25" {
		t.Errorf("gpt-4o stored as %+v", gpt.RuleInput)
	}
	var prov store.Provenance
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/price-rules/%d/provenance", gpt.ID), nil, &prov)
	if prov.Catalog != "genai-prices" || prov.EntryID != "openai/gpt-4o#0" || prov.FileDigest != p.Digest || prov.PlanID != p.ID ||
		prov.ImportedBy != "bootstrap" || prov.ImportedAt.IsZero() {
		t.Errorf("provenance %+v", prov)
	}
	var list admin.Page[store.Provenance]
	b.must(t, http.StatusOK, "GET", "/admin/price-catalogs/provenance?limit=1000", nil, &list)
	if len(list.Items) != 1000 || list.NextCursor == "" {
		t.Errorf("provenance list: %d items, cursor %q", len(list.Items), list.NextCursor)
	}
	// Applied once only.
	if r := b.call(t, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID}); r.status != http.StatusConflict {
		t.Errorf("second apply = %d %s, want 409", r.status, r.raw)
	}

	again := b.plan(t, req)
	if len(again.Added) != 0 || len(again.Changed) != 0 || len(again.Unchanged) != len(p.Added) {
		t.Fatalf("re-plan after apply: added %d changed %d unchanged %d, want 0 0 %d", len(again.Added), len(again.Changed), len(again.Unchanged), len(p.Added))
	}

	// Round trip: export → import → export is identical, and the catalog still plans no change.
	exp := b.must(t, http.StatusOK, "GET", "/admin/export", nil, nil)
	b.must(t, http.StatusOK, "POST", "/admin/import", exp.raw, nil)
	if back := b.must(t, http.StatusOK, "GET", "/admin/export", nil, nil); string(back.raw) != string(exp.raw) {
		t.Fatal("export after import of the export differs")
	}
	third := b.plan(t, req)
	if len(third.Added) != 0 || len(third.Changed) != 0 || len(third.Unchanged) != len(p.Added) {
		t.Fatalf("plan after export/import: added %d changed %d unchanged %d", len(third.Added), len(third.Changed), len(third.Unchanged))
	}
	for _, u := range third.Unchanged {
		if u.ProvenanceOnly {
			t.Fatalf("rule %d lost its provenance in the round trip", u.PriceRuleID)
		}
	}
}

const tinyV1 = `[{"id":"acme","models":[
	{"id":"m1","match":{"equals":"m1"},"prices":{"input_mtok":1,"output_mtok":2}},
	{"id":"m2","match":{"equals":"m2"},"prices":{"input_mtok":3,"output_mtok":4}}]}]`

const tinyV2 = `[{"id":"acme","models":[
	{"id":"m1","match":{"equals":"m1"},"prices":{"input_mtok":1.5,"output_mtok":2}},
	{"id":"m2","match":{"equals":"m2"},"prices":{"input_mtok":3,"output_mtok":4.25e0}},
	{"id":"m3","match":{"equals":"m3"},"prices":{"input_mtok":5,"output_mtok":6}}]}]`

func tinyReq(doc string) map[string]any {
	return map[string]any{"format": "genai-prices", "document": doc}
}

func (b *testBundle) applyTiny(t *testing.T, doc string) {
	t.Helper()
	p := b.plan(t, tinyReq(doc))
	b.must(t, http.StatusOK, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID, "confirm_operator_edited": true}, nil)
}

func TestCatalogPlanListsChangesFieldByField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.applyTiny(t, tinyV1)
	p := b.plan(t, tinyReq(tinyV2))
	if len(p.Added) != 1 || p.Added[0].EntryID != "acme/m3" || len(p.Changed) != 2 || len(p.Unchanged) != 0 {
		t.Fatalf("plan %+v", p)
	}
	for _, c := range p.Changed {
		if c.OperatorEdited {
			t.Errorf("%s marked operator-edited", c.EntryID)
		}
		// Categories the catalog does not price follow the one that stands in for them.
		ch := func(f, o, n string) admin.FieldChange { return admin.FieldChange{Field: f, Old: o, New: n} }
		want := map[string][]admin.FieldChange{
			"acme/m1": {ch("input_price", "1", "1.5"), ch("cache_read_price", "1", "1.5"), ch("cache_creation_5m_price", "1", "1.5"),
				ch("cache_creation_30m_price", "1", "1.5"), ch("cache_creation_1h_price", "1", "1.5")},
			"acme/m2": {ch("output_price", "4", "4.25"), ch("image_output_price", "4", "4.25")},
		}[c.EntryID]
		if fmt.Sprint(c.Fields) != fmt.Sprint(want) {
			t.Errorf("%s fields %+v, want %+v", c.EntryID, c.Fields, want)
		}
	}
	// Apply with an exclusion: m2 keeps its price.
	b.must(t, http.StatusOK, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID, "exclude": []string{"acme/m2"}}, nil)
	if r := b.ruleByMatch(t, nil, "exact", "m1"); r.InputPrice != "1.5" {
		t.Errorf("m1 input %s, want 1.5", r.InputPrice)
	}
	if r := b.ruleByMatch(t, nil, "exact", "m2"); r.OutputPrice != "4" {
		t.Errorf("excluded m2 output %s, want 4", r.OutputPrice)
	}
}

func TestCatalogApplyRefusesStalePlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.applyTiny(t, tinyV1)
	p := b.plan(t, tinyReq(tinyV2))
	// An operator edits a rule the plan changes: the apply is refused and changes nothing.
	m2 := b.ruleByMatch(t, nil, "exact", "m2")
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", m2.ID), rule("model_match", "m2", "input_price", "9"), nil)
	before := b.state(t)
	r := b.call(t, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID, "confirm_operator_edited": true})
	if r.status != http.StatusConflict {
		t.Fatalf("stale apply = %d %s, want 409", r.status, r.raw)
	}
	if e := r.apiError(t); len(e.Error.Details) != 1 || e.Error.Details[0].ID != m2.ID {
		t.Errorf("details %+v, want rule %d", e.Error.Details, m2.ID)
	}
	if b.state(t) != before {
		t.Error("a refused apply changed the rules")
	}
	// A rule created since with the key of an added one also makes the plan stale.
	p2 := b.plan(t, tinyReq(tinyV2))
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m3"), nil)
	before = b.state(t)
	if r := b.call(t, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p2.ID, "confirm_operator_edited": true}); r.status != http.StatusConflict {
		t.Fatalf("apply over a new rule = %d %s, want 409", r.status, r.raw)
	}
	if b.state(t) != before {
		t.Error("a refused apply changed the rules")
	}
}

func TestCatalogOperatorEditedRulesAreListedAndNeedConfirmation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.applyTiny(t, tinyV1)
	m1 := b.ruleByMatch(t, nil, "exact", "m1")
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", m1.ID), rule("model_match", "m1", "input_price", "7"), nil)
	// An operator rule that was never imported is operator-edited too.
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m3", "input_price", "0.5"), nil)
	p := b.plan(t, tinyReq(tinyV2))
	edited := map[string]bool{}
	for _, c := range p.Changed {
		edited[c.EntryID] = c.OperatorEdited
	}
	if !edited["acme/m1"] || !edited["acme/m3"] || edited["acme/m2"] || p.Summary.OperatorEdited != 2 {
		t.Fatalf("operator_edited %v, summary %+v", edited, p.Summary)
	}
	before := b.state(t)
	r := b.call(t, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID})
	if r.status != http.StatusConflict || len(r.apiError(t).Error.Details) != 2 {
		t.Fatalf("apply without confirmation = %d %s, want 409 naming 2 rules", r.status, r.raw)
	}
	if b.state(t) != before {
		t.Error("refused apply changed the rules")
	}
	b.must(t, http.StatusOK, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID, "exclude": []string{"acme/m1", "acme/m3"}}, nil)
	if r := b.ruleByMatch(t, nil, "exact", "m1"); r.InputPrice != "7" {
		t.Errorf("operator's m1 input %s, want 7 (excluded)", r.InputPrice)
	}
	if r := b.ruleByMatch(t, nil, "exact", "m2"); r.OutputPrice != "4.25" {
		t.Errorf("m2 output %s, want 4.25", r.OutputPrice)
	}
}

func TestCatalogModelsDevPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	files, err := catalog.ReadTree(filepath.Join(shippedCatalogs(t), "models.dev"))
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]string{}
	for p, f := range files {
		text[p] = string(f)
	}
	pid := b.provider(t, "beta-1", "beta")
	p := b.plan(t, map[string]any{"format": "models.dev", "files": text, "provider_map": map[string]int64{"anthropic": pid}, "only_mapped": true})
	if len(p.Added) < 20 || p.Entries < 90 || len(p.Added)+len(p.Skipped) < p.Entries {
		t.Fatalf("added %d, skipped %d, entries %d", len(p.Added), len(p.Skipped), p.Entries)
	}
	for _, a := range p.Added {
		if a.Rule.ProviderID == nil || *a.Rule.ProviderID != pid {
			t.Fatalf("%s not scoped to provider %d", a.EntryID, pid)
		}
	}
	b.must(t, http.StatusOK, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID}, nil)
	if r := b.ruleByMatch(t, &pid, "exact", "claude-opus-4-6"); r.InputPrice != "5" || r.CacheCreation5mPrice != "6.25" {
		t.Errorf("claude-opus-4-6 %+v", r.RuleInput)
	}
}

func TestCatalogBadRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.applyTiny(t, tinyV1)
	p := b.plan(t, tinyReq(tinyV2))
	b.refuses(t, []refusal{
		{"unknown format", "POST", "/admin/price-catalogs/plan", map[string]any{"format": "litellm", "document": "{}"}, 422, "format"},
		{"no document", "POST", "/admin/price-catalogs/plan", map[string]any{"format": "genai-prices"}, 422, "document"},
		{"not a catalog", "POST", "/admin/price-catalogs/plan", tinyReq(`{"a":1}`), 422, "document"},
		{"files for genai", "POST", "/admin/price-catalogs/plan", map[string]any{"format": "genai-prices", "document": tinyV1, "files": map[string]string{"a": "b"}}, 422, "files"},
		{"no files", "POST", "/admin/price-catalogs/plan", map[string]any{"format": "models.dev"}, 422, "files"},
		{"unknown provider", "POST", "/admin/price-catalogs/plan", map[string]any{"format": "genai-prices", "document": tinyV1, "provider_map": map[string]int64{"acme": 999}}, 422, "provider_map.acme"},
		{"negative provider", "POST", "/admin/price-catalogs/plan", map[string]any{"format": "genai-prices", "document": tinyV1, "provider_map": map[string]int64{"acme": -1}}, 422, "provider_map.acme"},
		{"unknown field", "POST", "/admin/price-catalogs/plan", map[string]any{"format": "genai-prices", "document": tinyV1, "dry": true}, 400, "dry"},
		{"unknown plan", "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": "plan_nope"}, 404, ""},
		{"no plan id", "POST", "/admin/price-catalogs/apply", map[string]any{}, 422, "plan_id"},
		{"unknown exclusion", "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID, "exclude": []string{"acme/zz"}}, 422, "exclude"},
		{"provenance of a non-imported rule", "GET", "/admin/price-rules/99999/provenance", nil, 404, ""},
	})
	// A viewer may read but not plan.
	var tok struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "v", "role": "viewer"}, &tok)
	if r := b.callAs(t, tok.Token, "POST", "/admin/price-catalogs/plan", tinyReq(tinyV1)); r.status != http.StatusForbidden {
		t.Errorf("viewer plan = %d, want 403", r.status)
	}
	if r := b.callAs(t, tok.Token, "GET", "/admin/price-catalogs/plans/"+p.ID, nil); r.status != http.StatusOK {
		t.Errorf("viewer reads plan = %d, want 200", r.status)
	}
}

// BenchmarkCatalogGenAIPrices measures planning and applying the full shipped genai-prices file
// (POST plan over loopback HTTP: decode, map every entry exactly, compare with the stored rules,
// store the plan; then POST apply: one transaction of bulk writes and provenance) into an emptied
// price_rules table each iteration. The two halves are reported apart (plan-ms, apply-ms).
func BenchmarkCatalogGenAIPrices(b *testing.B) {
	tb := setup(b)
	req := map[string]any{"format": "genai-prices", "document": genaiDoc(b), "starts_with_as_contains": true, "at": "2026-08-01T00:00:00Z"}
	ctx := context.Background()
	var planNS, applyNS int64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if _, err := tb.db.Pool.Exec(ctx, `DELETE FROM price_rules`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		r := tb.callB(b, "POST", "/admin/price-catalogs/plan", req)
		var p admin.CatalogPlan
		if err := json.Unmarshal(r, &p); err != nil || len(p.Added) < 1000 {
			b.Fatalf("plan: %v %.200s", err, r)
		}
		mid := time.Now()
		tb.callB(b, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID})
		planNS += mid.Sub(start).Nanoseconds()
		applyNS += time.Since(mid).Nanoseconds()
	}
	b.ReportMetric(float64(planNS)/float64(b.N)/1e6, "plan-ms")
	b.ReportMetric(float64(applyNS)/float64(b.N)/1e6, "apply-ms")
}

func (b *testBundle) callB(tb testing.TB, method, path string, body any) []byte {
	raw, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	req, _ := http.NewRequest(method, b.srv.URL+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		tb.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, out)
	}
	return out
}
