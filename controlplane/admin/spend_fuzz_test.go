package admin

import (
	"bytes"
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
)

// FuzzSpendQuery: any query string either is refused with an *Error or yields a store query within the
// documented bounds (whole hours, since < until, known and distinct dimensions, top with group_by).
func FuzzSpendQuery(f *testing.F) {
	for _, s := range []string{
		"since=2026-11-01T00:00:00Z&until=2026-11-02T00:00:00Z&bucket=day&group_by=logical_model",
		"since=2026-11-01T00:00:00Z&until=2026-12-01T00:00:00Z&bucket=month&tz=Europe/Paris&group_by=org,key&top=5&org=1&key=none",
		"since=2026-11-01T00:30:00Z&until=2026-11-02T00:00:00Z",
		"since=2026-11-01T00:00:00Z&until=2026-11-02T00:00:00Z&bucket=day&tz=Asia/Kolkata",
		"group_by=&top=-1&format=csv&logical_model=a,b&logical_model=c",
		"since=%zz", "tz=Local&bucket=day&since=2026-11-01T00:00:00Z&until=2026-11-02T00:00:00Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := url.ParseQuery(raw); err != nil {
			return
		}
		r := &http.Request{Method: "GET", URL: &url.URL{Path: "/admin/spend", RawQuery: raw}}
		req, format, err := parseSpendRequest(r)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("parse error %T %v", err, err)
			}
			return
		}
		if format != "" && format != "json" && format != "csv" {
			t.Fatalf("format %q accepted", format)
		}
		q, loc, err := spendQuery(req)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("validation error %T %v", err, err)
			}
			return
		}
		if !q.Since.Before(q.Until) || !q.Since.Equal(q.Since.Truncate(time.Hour)) || !q.Until.Equal(q.Until.Truncate(time.Hour)) {
			t.Fatalf("accepted range %v – %v", q.Since, q.Until)
		}
		if loc == nil || (q.Top > 0 && len(q.GroupBy) == 0) || q.Top < 0 || q.Top > MaxSpendTop {
			t.Fatalf("accepted %+v", q)
		}
		seen := map[store.SpendDim]bool{}
		for _, d := range q.GroupBy {
			if !d.Known() || seen[d] {
				t.Fatalf("accepted group_by %v", q.GroupBy)
			}
			seen[d] = true
		}
		for _, fl := range q.Filters {
			if !fl.Dim.Known() || (fl.Dim.IsID() && len(fl.IDs) == 0) || (!fl.Dim.IsID() && len(fl.Values) == 0) {
				t.Fatalf("accepted filter %+v", fl)
			}
			for _, id := range fl.IDs {
				if id < 0 {
					t.Fatalf("accepted id %d", id)
				}
			}
		}
	})
}

// FuzzSpendCSV: a text dimension value round-trips through the CSV as itself, or apostrophe-prefixed when
// a spreadsheet would read it as a formula; no cell starts a formula.
func FuzzSpendCSV(f *testing.F) {
	for _, s := range []string{"gpt-4o", "=1+1", "+x", "-2", "@SUM(A1)", "\tx", "a,\"b\"\nc", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, model string) {
		if strings.Contains(model, "\r") {
			return // encoding/csv turns \r\n into \n inside quoted fields
		}
		res := SpendResult{GroupBy: []string{"logical_model"}, Rows: []SpendRow{{Group: map[string]any{"logical_model": model},
			SpendTotals: SpendTotals{Cost: "1.25", Requests: 1}}}}
		var buf bytes.Buffer
		if err := writeSpendCSV(&buf, res); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatalf("csv does not read back: %v", err)
		}
		cell := recs[1][1]
		if cell != model && cell != "'"+model {
			t.Fatalf("cell %q for %q", cell, model)
		}
		if cell != "" && strings.ContainsRune("=+-@\t", rune(cell[0])) {
			t.Fatalf("cell %q starts a formula", cell)
		}
		if recs[1][4] != "1.25" {
			t.Fatalf("cost cell %q", recs[1][4])
		}
	})
}
