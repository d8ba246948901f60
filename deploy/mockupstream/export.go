package mockupstream

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
)

// The billing export: the bills of whole UTC days as a CSV file in the shape of the gateway's file import
// (docs/reconciliation.md, "File import"), as a provider without a usage API but with a billing export
// would give it. One row per day, key, model and tier; every token category in a column of its own, the
// 30-minute cache writes included; the cost in dollars, exact. The drift switches apply as in the admin
// reports: Drop, LateDays, UnderReport (per row, tokens only) and PriceMultiplier.

// ExportColumns are the billing export's header.
var ExportColumns = []string{"day", "key_ref", "project_ref", "model", "tier", "input_tokens", "output_tokens",
	"cache_read_tokens", "cache_creation_5m_tokens", "cache_creation_30m_tokens", "cache_creation_1h_tokens",
	"image_output_tokens", "requests", "cost"}

// BillingCSV exports the first-party bills of the UTC days [from, to) of the given endpoints (all when none).
func (s *Server) BillingCSV(from, to time.Time, endpoints ...string) ([]byte, error) {
	return s.ProviderBillingCSV("", from, to, endpoints...)
}

// ProviderBillingCSV exports a provider's bills ("" = first party, else a cloud's Provider name) of the
// UTC days [from, to) of the given endpoints (all when none).
func (s *Server) ProviderBillingCSV(provider string, from, to time.Time, endpoints ...string) ([]byte, error) {
	if len(endpoints) == 0 {
		endpoints = []string{EndpointCompletions, EndpointEmbeddings, EndpointImages, EndpointMessages,
			EndpointGenerateContent, EndpointConverse}
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(ExportColumns); err != nil {
		return nil, fmt.Errorf("billing export: %w", err)
	}
	for t := from.UTC().Truncate(day); t.Before(to); t = t.Add(day) {
		bills, c, prices, projects := s.reportedBills(provider, t, t.Add(day), endpoints...)
		// Beta bills are in workspaces, the others in projects: grouped apart.
		var alpha, beta []Bill
		for _, b := range bills {
			if b.Endpoint == EndpointMessages || b.Endpoint == EndpointConverse {
				beta = append(beta, b)
			} else {
				alpha = append(alpha, b)
			}
		}
		for _, part := range []struct {
			bills []Bill
			beta  bool
		}{{alpha, false}, {beta, true}} {
			costs, err := groupCosts(part.bills, c, prices)
			if err != nil {
				return nil, fmt.Errorf("billing export: %w", err)
			}
			for _, g := range groupBills(part.bills, projects, part.beta) {
				rec := []string{t.Format(time.DateOnly), g.apiKey, g.project, g.model, g.tier}
				for _, v := range []struct {
					category string
					n        int64
				}{{"input", g.input}, {"output", g.output}, {"cache_read", g.cacheRead}, {"cache_creation_5m", g.cache5m},
					{"cache_creation_30m", g.cache30m}, {"cache_creation_1h", g.cache1h}, {"image_output", g.imageOut}} {
					rec = append(rec, strconv.FormatInt(underReport(c, v.category, v.n), 10))
				}
				rec = append(rec, strconv.FormatInt(g.requests, 10), pricing.FormatDecimal(costs[g.apiKey+"\x00"+g.model+"\x00"+g.tier]))
				if err := w.Write(rec); err != nil {
					return nil, fmt.Errorf("billing export: %w", err)
				}
			}
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("billing export: %w", err)
	}
	return buf.Bytes(), nil
}

// groupCosts prices bills per group (key id, model, tier, as groupBills groups them).
func groupCosts(bills []Bill, c ReconcileControls, prices map[string]Price) (map[string]*decimal.Big, error) {
	out := map[string]*decimal.Big{}
	for _, b := range bills {
		k := KeyID(b.APIKey) + "\x00" + b.Model + "\x00" + b.Tier
		if out[k] == nil {
			out[k], _ = pricing.ParseDecimal("0")
		}
		for _, cat := range costCategories(b) {
			cost, err := categoryCost(c, prices, b.Model, cat.tokens, cat.price)
			if err != nil {
				return nil, err
			}
			out[k].Add(out[k], cost)
		}
	}
	return out, nil
}

// serveBillingCSV answers GET /_mock/billing.csv?from=YYYY-MM-DD&to=YYYY-MM-DD[&endpoint=…]: the billing
// export of the UTC days [from, to).
func (s *Server) serveBillingCSV(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, err := time.Parse(time.DateOnly, q.Get("from"))
	if err != nil {
		http.Error(w, "from: "+err.Error(), http.StatusBadRequest)
		return
	}
	to, err := time.Parse(time.DateOnly, q.Get("to"))
	if err != nil || !to.After(from) || to.Sub(from) > 366*day {
		http.Error(w, "to: a day after from, at most 366 days later", http.StatusBadRequest)
		return
	}
	body, err := s.ProviderBillingCSV(q.Get("provider"), from, to, q["endpoint"]...)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	_, _ = w.Write(body)
}
