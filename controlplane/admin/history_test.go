package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/controlplane/store"
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
