package mockupstream

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
)

// The provider admin endpoints (docs/mockupstream.md, "Admin reports"): alpha's organization usage and
// costs, beta's usage and cost reports, computed from the bills (billing.go). Buckets are UTC days; pages
// hold `limit` buckets and the cursor is opaque.

const day = 24 * time.Hour

// isAdminPath reports whether path is one of the admin report endpoints.
func isAdminPath(path string) bool {
	return strings.HasPrefix(path, "/v1/organization/usage/") || path == "/v1/organization/costs" ||
		path == "/v1/organizations/usage_report/messages" || path == "/v1/organizations/cost_report"
}

// serveAdmin answers an admin report request.
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	beta := strings.HasPrefix(path, "/v1/organizations/")
	errBody := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if beta {
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	}
	if r.Method != http.MethodGet {
		errBody(http.StatusMethodNotAllowed, "invalid_request_error", "method not allowed")
		return
	}
	key := r.Header.Get("x-api-key")
	if a := r.Header.Get("Authorization"); key == "" && len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		key = a[7:]
	}
	if s.opts.AdminKey != "" && key != s.opts.AdminKey {
		errBody(http.StatusUnauthorized, "authentication_error", "invalid admin key")
		return
	}
	if beta && r.Header.Get("anthropic-version") == "" {
		errBody(http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	status, retryAfter, cut := s.takeFault()
	switch status {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		errBody(status, map[bool]string{true: "rate_limit_error", false: "rate_limit_exceeded"}[beta], "rate limited")
		return
	case http.StatusInternalServerError:
		errBody(status, map[bool]string{true: "api_error", false: "server_error"}[beta], "internal error")
		return
	}
	from, to, limit, err := s.adminWindow(r, beta)
	if err != nil {
		errBody(http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	var buckets []any
	for t := from; t.Before(to) && len(buckets) < limit; t = t.Add(day) {
		var results any
		switch path {
		case "/v1/organization/usage/completions":
			results, err = s.alphaUsage(t, EndpointCompletions)
		case "/v1/organization/usage/embeddings":
			results, err = s.alphaUsage(t, EndpointEmbeddings)
		case "/v1/organization/usage/images":
			results, err = s.alphaUsage(t, EndpointImages)
		case "/v1/organization/costs":
			results, err = s.alphaCosts(t)
		case "/v1/organizations/usage_report/messages":
			results, err = s.betaUsageReport(t)
		case "/v1/organizations/cost_report":
			results, err = s.betaCostReport(t)
		default:
			errBody(http.StatusNotFound, "invalid_request_error", "unknown admin route "+path)
			return
		}
		if err != nil {
			errBody(http.StatusInternalServerError, "api_error", err.Error())
			return
		}
		if beta {
			buckets = append(buckets, map[string]any{"starting_at": t.Format(time.RFC3339), "ending_at": t.Add(day).Format(time.RFC3339), "results": results})
		} else {
			buckets = append(buckets, map[string]any{"object": "bucket", "start_time": t.Unix(), "end_time": t.Add(day).Unix(), "results": results})
		}
	}
	next := from.Add(time.Duration(len(buckets)) * day)
	page := map[string]any{"data": nonNilSlice(buckets), "has_more": next.Before(to), "next_page": nil}
	if !beta {
		page["object"] = "page"
	}
	if next.Before(to) {
		page["next_page"] = "page_" + base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(next.Unix(), 10)))
	}
	body, err := json.Marshal(page)
	if err != nil {
		errBody(http.StatusInternalServerError, "api_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if cut { // half the body, then the handler returns short of Content-Length: the connection is closed
		_, _ = w.Write(body[:len(body)/2])
		return
	}
	_, _ = w.Write(body)
}

func nonNilSlice(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

// adminWindow reads the window [from, to) snapped to UTC days, the page size and the page cursor.
func (s *Server) adminWindow(r *http.Request, beta bool) (from, to time.Time, limit int, err error) {
	q := r.URL.Query()
	if bw := q.Get("bucket_width"); bw != "" && bw != "1d" {
		return from, to, 0, fmt.Errorf("the mock reports only bucket_width=1d, got %q", bw)
	}
	if beta {
		if from, err = time.Parse(time.RFC3339, q.Get("starting_at")); err != nil {
			return from, to, 0, fmt.Errorf("starting_at: %w", err)
		}
		to = time.Now()
		if v := q.Get("ending_at"); v != "" {
			if to, err = time.Parse(time.RFC3339, v); err != nil {
				return from, to, 0, fmt.Errorf("ending_at: %w", err)
			}
		}
	} else {
		st, err := strconv.ParseInt(q.Get("start_time"), 10, 64)
		if err != nil {
			return from, to, 0, fmt.Errorf("start_time: %w", err)
		}
		from, to = time.Unix(st, 0), time.Now()
		if v := q.Get("end_time"); v != "" {
			et, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return from, to, 0, fmt.Errorf("end_time: %w", err)
			}
			to = time.Unix(et, 0)
		}
	}
	from = from.UTC().Truncate(day)
	limit = 7
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 31 {
			return from, to, 0, fmt.Errorf("limit must be 1..31, got %q", v)
		}
	}
	if p := q.Get("page"); p != "" {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(p, "page_"))
		if err != nil {
			return from, to, 0, fmt.Errorf("page: %w", err)
		}
		ts, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return from, to, 0, fmt.Errorf("page: %w", err)
		}
		from = time.Unix(ts, 0).UTC()
	}
	return from, to, limit, nil
}

// group is one reported group's totals.
type group struct {
	model, tier, apiKey, project                                   string
	input, output, cacheRead, cache5m, cache30m, cache1h, imageOut int64
	images, requests                                               int64
}

// groupBills sums bills by (key id, model, tier), sorted for deterministic output.
func groupBills(bills []Bill, projects map[string]string, beta bool) []*group {
	m := map[string]*group{}
	for _, b := range bills {
		k := KeyID(b.APIKey) + "\x00" + b.Model + "\x00" + b.Tier
		g := m[k]
		if g == nil {
			g = &group{model: b.Model, tier: b.Tier, apiKey: KeyID(b.APIKey), project: projectOf(projects, b.APIKey, beta)}
			m[k] = g
		}
		g.input += b.Input
		g.output += b.Output
		g.cacheRead += b.CacheRead
		g.cache5m += b.Cache5m
		g.cache30m += b.Cache30m
		g.cache1h += b.Cache1h
		g.imageOut += b.ImageOut
		g.images += b.Images
		g.requests += b.Requests
	}
	out := make([]*group, 0, len(m))
	for _, g := range m {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.apiKey+a.model+a.tier < b.apiKey+b.model+b.tier
	})
	return out
}

// alphaUsage is one day's results of an alpha organization usage endpoint, grouped by project, key,
// model and tier. input_tokens includes cached and cache-written input, whatever the write's lifetime (the
// alpha report has no cache-write field).
func (s *Server) alphaUsage(t time.Time, endpoint string) ([]map[string]any, error) {
	bills, c, _, projects := s.reportedBills("", t, t.Add(day), endpoint)
	out := []map[string]any{}
	for _, g := range groupBills(bills, projects, false) {
		r := map[string]any{"project_id": g.project, "user_id": nil, "api_key_id": g.apiKey, "model": g.model,
			"num_model_requests": g.requests}
		switch endpoint {
		case EndpointCompletions:
			uncached := underReport(c, "input", g.input+g.cache5m+g.cache30m+g.cache1h)
			cached := underReport(c, "cache_read", g.cacheRead)
			r["object"] = "organization.usage.completions.result"
			r["input_tokens"] = uncached + cached
			r["input_cached_tokens"] = cached
			r["output_tokens"] = underReport(c, "output", g.output)
			r["input_audio_tokens"], r["output_audio_tokens"] = 0, 0
			r["batch"], r["service_tier"] = g.tier == BatchTier, g.tier
		case EndpointEmbeddings:
			r["object"] = "organization.usage.embeddings.result"
			r["input_tokens"] = underReport(c, "input", g.input)
		case EndpointImages:
			r["object"] = "organization.usage.images.result"
			r["images"], r["size"], r["source"] = g.images, nil, nil
		}
		out = append(out, r)
	}
	return out, nil
}

// alphaLineItems names the alpha cost line item of each category.
var alphaLineItems = map[string]string{"input": "input", "cache_read": "cached input", "cache_creation_5m": "input",
	"cache_creation_30m": "input", "cache_creation_1h": "input", "output": "output", "image_output": "image output"}

// alphaCosts is one day's alpha cost results grouped by project and line item ("<model>, <item>").
func (s *Server) alphaCosts(t time.Time) ([]map[string]any, error) {
	bills, c, prices, projects := s.reportedBills("", t, t.Add(day), EndpointCompletions, EndpointEmbeddings, EndpointImages)
	sums := map[string]*decimal.Big{}
	for _, b := range bills {
		for _, cat := range costCategories(b) {
			cost, err := categoryCost(c, prices, b.Model, cat.tokens, cat.price)
			if err != nil {
				return nil, err
			}
			k := projectOf(projects, b.APIKey, false) + "\x00" + b.Model + ", " + alphaLineItems[cat.name]
			if sums[k] == nil {
				sums[k], _ = pricing.ParseDecimal("0")
			}
			sums[k].Add(sums[k], cost)
		}
	}
	out := []map[string]any{}
	for _, k := range sortedKeys(sums) {
		project, item, _ := strings.Cut(k, "\x00")
		out = append(out, map[string]any{"object": "organization.costs.result", "project_id": project, "line_item": item,
			"amount": map[string]any{"value": json.Number(pricing.FormatDecimal(sums[k])), "currency": "usd"}})
	}
	return out, nil
}

// betaUsageReport is one day's beta usage results grouped by key, workspace, model and tier.
func (s *Server) betaUsageReport(t time.Time) ([]map[string]any, error) {
	bills, c, _, projects := s.reportedBills("", t, t.Add(day), EndpointMessages)
	out := []map[string]any{}
	for _, g := range groupBills(bills, projects, true) {
		out = append(out, map[string]any{"api_key_id": g.apiKey, "workspace_id": g.project, "model": g.model,
			"service_tier": g.tier, "context_window": nil,
			"uncached_input_tokens":   underReport(c, "input", g.input),
			"cache_read_input_tokens": underReport(c, "cache_read", g.cacheRead),
			"cache_creation": map[string]int64{"ephemeral_5m_input_tokens": underReport(c, "cache_creation_5m", g.cache5m),
				"ephemeral_1h_input_tokens": underReport(c, "cache_creation_1h", g.cache1h)},
			"output_tokens":   underReport(c, "output", g.output),
			"server_tool_use": map[string]int64{"web_search_requests": 0}})
	}
	return out, nil
}

// betaTokenTypes names the beta cost token type of each category. Beta has no 30-minute cache writes
// (billPlan bills its writes as 5-minute ones), so that category has no token type.
var betaTokenTypes = map[string]string{"input": "uncached_input_tokens", "cache_read": "cache_read_input_tokens",
	"cache_creation_5m": "cache_creation.ephemeral_5m_input_tokens", "cache_creation_1h": "cache_creation.ephemeral_1h_input_tokens",
	"output": "output_tokens", "image_output": "output_tokens"}

// betaCostReport is one day's beta cost results grouped by workspace and description; amounts are cents.
func (s *Server) betaCostReport(t time.Time) ([]map[string]any, error) {
	bills, c, prices, projects := s.reportedBills("", t, t.Add(day), EndpointMessages)
	type item struct{ workspace, model, tier, tokenType string }
	sums := map[item]*decimal.Big{}
	for _, b := range bills {
		for _, cat := range costCategories(b) {
			tokenType, ok := betaTokenTypes[cat.name]
			if !ok {
				if cat.tokens != 0 {
					return nil, fmt.Errorf("bill %d: beta has no %s tokens", b.Seq, cat.name)
				}
				continue
			}
			cost, err := categoryCost(c, prices, b.Model, cat.tokens, cat.price)
			if err != nil {
				return nil, err
			}
			k := item{projectOf(projects, b.APIKey, true), b.Model, b.Tier, tokenType}
			if sums[k] == nil {
				sums[k], _ = pricing.ParseDecimal("0")
			}
			sums[k].Add(sums[k], cost)
		}
	}
	keys := make([]item, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return a.workspace+a.model+a.tier+a.tokenType < b.workspace+b.model+b.tier+b.tokenType
	})
	out := []map[string]any{}
	for _, k := range keys {
		cents := sums[k]
		cents.Mul(cents, decimal.New(100, 0))
		out = append(out, map[string]any{"currency": "USD", "amount": pricing.FormatDecimal(cents), "workspace_id": k.workspace,
			"description": k.model + " " + k.tokenType, "cost_type": "tokens", "context_window": "0-200k", "model": k.model,
			"service_tier": k.tier, "token_type": k.tokenType, "inference_geo": nil})
	}
	return out, nil
}

func sortedKeys(m map[string]*decimal.Big) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
