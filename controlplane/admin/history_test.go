package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

type history struct {
	Items []store.PriceRuleVersion `json:"items"`
}

func (b *testBundle) history(t *testing.T, id int64) history {
	t.Helper()
	var h history
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/price-rules/%d/history", id), nil, &h)
	return h
}

func price(t *testing.T, v store.PriceRuleVersion, f string) string {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytesReader(v.Rule))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(m[f])
}

// Every change of a rule (admin write, import, catalog apply, delete) keeps the previous version
// with the time range it was in force and who changed it; writes that change nothing add no version.
func TestPriceRuleHistoryKeepsEveryVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var r store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m1", "input_price", "1.50"), &r)
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", r.ID), rule("model_match", "m1", "input_price", "2"), nil)
	// An import that rewrites the same content makes no version.
	exp := b.must(t, http.StatusOK, "GET", "/admin/export", nil, nil)
	b.must(t, http.StatusOK, "POST", "/admin/import", exp.raw, nil)
	// A catalog apply names its writer.
	p := b.plan(t, tinyReq(`[{"id":"acme","models":[{"id":"m1","match":{"equals":"m1"},"prices":{"input_mtok":3,"output_mtok":6}}]}]`))
	b.must(t, http.StatusOK, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID, "confirm_operator_edited": true}, nil)
	h := b.history(t, r.ID)
	if len(h.Items) != 3 {
		t.Fatalf("history %+v, want 3 versions", h.Items)
	}
	for i, want := range []string{"1.50", "2", "3"} {
		v := h.Items[i]
		if v.Version != int32(i+1) || price(t, v, "input_price") != want {
			t.Errorf("version %d: %+v, want input_price %s", i+1, v, want)
		}
		if i < 2 && (v.ValidTo == nil || !v.ValidTo.Equal(h.Items[i+1].ValidFrom)) {
			t.Errorf("version %d in force until %v, want until version %d from %v", i+1, v.ValidTo, i+2, h.Items[i+1].ValidFrom)
		}
	}
	if h.Items[2].ValidTo != nil {
		t.Errorf("current version closed at %v", h.Items[2].ValidTo)
	}
	if got := h.Items[2].ChangedBy; got != "admin:bootstrap (catalog plan "+p.ID+")" {
		t.Errorf("catalog apply recorded as %q", got)
	}
	// After a delete the history stays, with the last version closed.
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/price-rules/%d", r.ID), nil, nil)
	h = b.history(t, r.ID)
	if len(h.Items) != 3 || h.Items[2].ValidTo == nil {
		t.Errorf("history after delete %+v", h.Items)
	}
	if r := b.call(t, "GET", "/admin/price-rules/987654/history", nil); r.status != http.StatusNotFound {
		t.Errorf("history of a rule that never existed = %d", r.status)
	}
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM price_rule_versions WHERE valid_to IS NULL AND price_rule_id = $1`, r.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d open versions after delete (%v)", n, err)
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// The quote endpoint prices at a past time with the rules then in force, and the re-pricing report
// sets a period's charged spend beside its spend under other rules, changing nothing.
func TestQuoteAtAndRepriceReport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var r store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m1", "input_price", "1.50"), &r)
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", r.ID), rule("model_match", "m1", "input_price", "3"), nil)
	h := b.history(t, r.ID)
	v1 := h.Items[0].ValidFrom
	quote := func(at any) admin.QuoteResult {
		body := map[string]any{"model": "m1", "usage": map[string]any{"input_tokens": 1000000}}
		if at != nil {
			body["at"] = at
		}
		var q admin.QuoteResult
		b.must(t, http.StatusOK, "POST", "/admin/price-rules/quote", body, &q)
		return q
	}
	if q := quote(nil); q.Cost != "3" {
		t.Errorf("quote now = %s, want 3", q.Cost)
	}
	if q := quote(v1); q.Cost != "1.5" || q.PriceRuleID != r.ID {
		t.Errorf("quote at version 1 = %+v, want 1.5 under rule %d", q, r.ID)
	}
	if q := quote(v1.Add(-time.Hour)); q.Cost != "0" || q.PriceRuleID != 0 {
		t.Errorf("quote before the rule existed = %+v, want no rule, cost 0", q)
	}
	// The gRPC twin takes the same time.
	c, _ := b.grpcClient(t)
	gq, err := c.QuotePrice(withToken(bootstrapToken), &adminv1.QuotePriceRequest{Model: "m1",
		Usage: &settlementv1.TokenCounts{Input: 1000000}, At: timestamppb.New(v1)})
	if err != nil || gq.GetCost() != "1.5" {
		t.Errorf("gRPC quote at version 1 = %v, %v; want 1.5", gq, err)
	}

	ctx := context.Background()
	for i, cost := range []string{"1.5", "1.5", "0.000000000000000000000000000001"} {
		model := "m1"
		if i == 2 {
			model = "other"
		}
		if _, err := b.db.Pool.Exec(ctx, `INSERT INTO usages (request_id, operation, inbound_kind, upstream_model, input_tokens,
			cost, source, end_state, created_at) VALUES ($1, 'rerank', 'alpha', $2, 1000000, $3::numeric, 'upstream', 'completed', $4)`,
			fmt.Sprintf("rp-%d", i), model, cost, v1.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	before := b.state(t)
	var usagesBefore string
	if err := b.db.Pool.QueryRow(ctx, `SELECT md5(string_agg(u::text, ',' ORDER BY id)) FROM usages u`).Scan(&usagesBefore); err != nil {
		t.Fatal(err)
	}
	period := map[string]any{"from": v1.Add(-time.Hour), "to": v1.Add(time.Hour)}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range period {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	var rep admin.RepriceReport
	b.must(t, http.StatusOK, "POST", "/admin/price-rules/reprice", with("rules", []any{rule("model_match", "m1", "input_price", "3")}), &rep)
	if rep.Usages != 3 || rep.Charged != "3.000000000000000000000000000001" || rep.Repriced != "6" || rep.Difference != "2.999999999999999999999999999999" {
		t.Errorf("report under a corrected table: %+v", rep)
	}
	if len(rep.ByModel) != 2 || rep.ByModel[0].Model != "m1" || rep.ByModel[0].Difference != "3" || rep.ByModel[1].Repriced != "0" {
		t.Errorf("by model: %+v", rep.ByModel)
	}
	b.must(t, http.StatusOK, "POST", "/admin/price-rules/reprice", with("at", v1), &rep)
	if rep.Repriced != "3" || rep.ByModel[0].Difference != "0" {
		t.Errorf("report under the rules in force then: %+v", rep)
	}
	var usagesAfter string
	if err := b.db.Pool.QueryRow(ctx, `SELECT md5(string_agg(u::text, ',' ORDER BY id)) FROM usages u`).Scan(&usagesAfter); err != nil {
		t.Fatal(err)
	}
	if b.state(t) != before || usagesAfter != usagesBefore {
		t.Error("the report changed rules or usage rows")
	}
	b.refuses(t, []refusal{
		{"no period", "POST", "/admin/price-rules/reprice", map[string]any{"at": v1}, 422, "from"},
		{"empty period", "POST", "/admin/price-rules/reprice", map[string]any{"from": v1, "to": v1, "at": v1}, 422, "to"},
		{"neither rules nor at", "POST", "/admin/price-rules/reprice", with(), 422, "rules"},
		{"both rules and at", "POST", "/admin/price-rules/reprice", with("at", v1, "rules", []any{rule()}), 422, "rules"},
		{"bad rule", "POST", "/admin/price-rules/reprice", with("rules", []any{rule("input_price", "1e3")}), 422, "input_price"},
	})
}

// BenchmarkImport10kPriceHistory measures what the price-history triggers cost the 10,000-rule
// admin import: the same import with the three version triggers disabled and enabled, in one run.
func BenchmarkImport10kPriceHistory(b *testing.B) {
	for _, history := range []bool{false, true} {
		b.Run(fmt.Sprintf("history=%t", history), func(b *testing.B) {
			tb := setup(b)
			ctx := context.Background()
			if !history {
				if _, err := tb.db.Pool.Exec(ctx, `ALTER TABLE price_rules DISABLE TRIGGER price_rule_versions_insert,
					DISABLE TRIGGER price_rule_versions_update, DISABLE TRIGGER price_rule_versions_delete`); err != nil {
					b.Fatal(err)
				}
			}
			body := importBundle(10000)
			for b.Loop() {
				b.StopTimer()
				if _, err := tb.db.Pool.Exec(ctx, `DELETE FROM price_rules; DELETE FROM price_rule_versions`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				tb.callB(b, "POST", "/admin/import", json.RawMessage(body))
			}
		})
	}
}
