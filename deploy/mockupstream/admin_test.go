package mockupstream

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
)

// adminGet fetches an admin report page and decodes it.
func (b *testBundle) adminGet(t *testing.T, path string, q url.Values, headers ...string) (result, map[string]any) {
	t.Helper()
	r := b.call(t, http.MethodGet, path+"?"+q.Encode(), "", headers...)
	if r.status != http.StatusOK || r.err != nil {
		return r, nil
	}
	return r, decodeJSON(t, r.body)
}

func dayStart(daysAgo int) time.Time {
	return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -daysAgo)
}

func alphaWindow(from time.Time, days int) url.Values {
	return url.Values{"start_time": {strconv.FormatInt(from.Unix(), 10)},
		"end_time": {strconv.FormatInt(from.AddDate(0, 0, days).Unix(), 10)}, "bucket_width": {"1d"},
		"group_by": {"model", "project_id", "api_key_id", "service_tier"}}
}

// results flattens every bucket's results of a page.
func results(t *testing.T, page map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, b := range page["data"].([]any) {
		for _, r := range b.(map[string]any)["results"].([]any) {
			out = append(out, r.(map[string]any))
		}
	}
	return out
}

func TestAdminReportsAreWhatWasBilled(t *testing.T) {
	b := setup(t, Options{AdminKey: "sk-admin", Prices: map[string]Price{
		"m-1": {Input: "2", Output: "8", CacheRead: "0.5", Cache5m: "2.5"},
		"b-1": {Input: "3", Output: "15", CacheRead: "0.3", Cache5m: "3.75"}}})
	yesterday := dayStart(1)
	at := yesterday.Add(13 * time.Hour).Format(time.RFC3339)
	chat := `{"model":"m-1","messages":[{"role":"user","content":"hello there, how are you"}]}`
	var wantIn, wantCached, wantOut float64
	for i := range 3 {
		r := b.post(t, "/v1/chat/completions", chat, "Authorization", "Bearer sk-a", "x-mock-billed-at", at,
			"x-mock-usage", []string{"full", "cached", "full"}[i])
		u := decodeJSON(t, r.body)["usage"].(map[string]any)
		wantIn += u["prompt_tokens"].(float64)
		wantOut += u["completion_tokens"].(float64)
		wantCached += u["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	}
	// A request that failed upstream is not billed (a cut stream is: cutbill_test.go).
	b.call(t, http.MethodPost, "/v1/chat/completions", chat, "x-mock-status", "500", "x-mock-billed-at", at)
	beta := `{"model":"b-1","max_tokens":50,"messages":[{"role":"user","content":"bonjour"}]}`
	r := b.post(t, "/v1/messages", beta, "anthropic-version", "2023-06-01", "x-api-key", "sk-b",
		"x-mock-billed-at", at, "x-mock-usage", "cached")
	bu := decodeJSON(t, r.body)["usage"].(map[string]any)
	if got := len(b.mock.Bills()); got != 4 {
		t.Fatalf("bills = %d, want 4 (3 chat + 1 message)", got)
	}

	// The admin key is required.
	if r, _ := b.adminGet(t, "/v1/organization/usage/completions", alphaWindow(yesterday, 1), "Authorization", "Bearer sk-a"); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong admin key: %d, want 401", r.status)
	}
	admin := []string{"Authorization", "Bearer sk-admin"}
	_, page := b.adminGet(t, "/v1/organization/usage/completions", alphaWindow(yesterday, 1), admin...)
	res := results(t, page)
	if len(res) != 1 {
		t.Fatalf("completions results = %v, want one group", res)
	}
	g := res[0]
	if g["api_key_id"] != KeyID("sk-a") || g["model"] != "m-1" || g["project_id"] != ProjectID || g["service_tier"] != "default" ||
		g["input_tokens"].(float64) != wantIn || g["input_cached_tokens"].(float64) != wantCached ||
		g["output_tokens"].(float64) != wantOut || g["num_model_requests"].(float64) != 3 {
		t.Fatalf("completions group = %v; want input %v cached %v output %v over 3 requests", g, wantIn, wantCached, wantOut)
	}

	_, page = b.adminGet(t, "/v1/organizations/usage_report/messages", url.Values{"starting_at": {yesterday.Format(time.RFC3339)},
		"ending_at": {yesterday.AddDate(0, 0, 1).Format(time.RFC3339)}, "group_by[]": {"model", "api_key_id", "workspace_id", "service_tier"}},
		"x-api-key", "sk-admin", "anthropic-version", "2023-06-01")
	res = results(t, page)
	if len(res) != 1 || res[0]["uncached_input_tokens"] != bu["input_tokens"] || res[0]["cache_read_input_tokens"] != bu["cache_read_input_tokens"] ||
		res[0]["cache_creation"].(map[string]any)["ephemeral_5m_input_tokens"] != bu["cache_creation_input_tokens"] ||
		res[0]["output_tokens"] != bu["output_tokens"] || res[0]["api_key_id"] != KeyID("sk-b") || res[0]["workspace_id"] != WorkspaceID {
		t.Fatalf("messages usage = %v; message usage was %v", res, bu)
	}

	// Costs: the exact sum of tokens × price per line item; beta amounts in cents.
	_, page = b.adminGet(t, "/v1/organization/costs", url.Values{"start_time": {strconv.FormatInt(yesterday.Unix(), 10)},
		"end_time": {strconv.FormatInt(yesterday.AddDate(0, 0, 1).Unix(), 10)}, "group_by": {"project_id", "line_item"}}, admin...)
	costs := map[string]string{}
	for _, c := range results(t, page) {
		costs[c["line_item"].(string)] = fmt.Sprint(c["amount"].(map[string]any)["value"])
	}
	wantOutCost := fmt.Sprint(wantOut * 8 / 1e6)
	if costs["m-1, output"] != wantOutCost {
		t.Fatalf("costs = %v, want m-1 output %s", costs, wantOutCost)
	}
	_, page = b.adminGet(t, "/v1/organizations/cost_report", url.Values{"starting_at": {yesterday.Format(time.RFC3339)},
		"ending_at": {yesterday.AddDate(0, 0, 1).Format(time.RFC3339)}, "group_by[]": {"workspace_id", "description"}},
		"x-api-key", "sk-admin", "anthropic-version", "2023-06-01")
	for _, c := range results(t, page) {
		if c["token_type"] == "output_tokens" {
			got, err := pricing.ParseDecimal(c["amount"].(string))
			want := decimal.New(int64(bu["output_tokens"].(float64))*15, 4) // tokens × $15/M in cents
			if err != nil || got.Cmp(want) != 0 {
				t.Fatalf("beta output cost = %v cents (%v), want %v", c["amount"], err, want)
			}
		}
	}
}

func TestAdminReportsPaginateAndInjectDriftAndFaults(t *testing.T) {
	b := setup(t, Options{Prices: map[string]Price{"m-1": {Input: "1", Output: "2"}}})
	from := dayStart(3)
	chat := `{"model":"m-1","messages":[{"role":"user","content":"hi"}]}`
	for d := range 3 {
		b.post(t, "/v1/chat/completions", chat, "x-mock-billed-at", from.AddDate(0, 0, d).Add(time.Hour).Format(time.RFC3339))
	}
	// Three days, one bucket per page: three pages chained by next_page.
	q := alphaWindow(from, 3)
	q.Set("limit", "1")
	pages, outputs := 0, 0.0
	for {
		_, page := b.adminGet(t, "/v1/organization/usage/completions", q)
		pages++
		for _, r := range results(t, page) {
			outputs += r["output_tokens"].(float64)
		}
		if page["has_more"] != true {
			break
		}
		q.Set("page", page["next_page"].(string))
	}
	if pages != 3 || outputs != 24 {
		t.Fatalf("pages = %d, output tokens = %v; want 3 pages, 24 tokens", pages, outputs)
	}

	sum := func() (out float64, requests float64) {
		_, page := b.adminGet(t, "/v1/organization/usage/completions", alphaWindow(from, 3))
		for _, r := range results(t, page) {
			out += r["output_tokens"].(float64)
			requests += r["num_model_requests"].(float64)
		}
		return out, requests
	}
	set := func(c string) {
		if r := b.call(t, http.MethodPut, "/_mock/reconcile", c); r.status != http.StatusOK {
			t.Fatalf("PUT /_mock/reconcile %s = %d %s", c, r.status, r.body)
		}
	}
	set(`{"drop":1}`)
	if out, n := sum(); out != 16 || n != 2 {
		t.Fatalf("drop 1: output %v over %v requests, want 16 over 2", out, n)
	}
	set(`{"under_report":{"category":"output","percent":25}}`)
	if out, _ := sum(); out != 18 {
		t.Fatalf("output under-reported by 25%%: %v, want 18", out)
	}
	set(fmt.Sprintf(`{"late_days":[%q]}`, from.Format(time.DateOnly)))
	if out, _ := sum(); out != 16 {
		t.Fatalf("first day late: %v, want 16", out)
	}

	// Faults: 429 with Retry-After, 500, then a page cut halfway; each consumed once.
	set(`{"rate_limit":1,"retry_after":2,"server_error":1,"cut_page":1}`)
	r, _ := b.adminGet(t, "/v1/organization/usage/completions", alphaWindow(from, 3))
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "2" {
		t.Fatalf("first call = %d Retry-After %q, want 429 with 2", r.status, r.header.Get("Retry-After"))
	}
	if r, _ := b.adminGet(t, "/v1/organization/usage/completions", alphaWindow(from, 3)); r.status != http.StatusInternalServerError {
		t.Fatalf("second call = %d, want 500", r.status)
	}
	r = b.call(t, http.MethodGet, "/v1/organization/usage/completions?"+alphaWindow(from, 3).Encode(), "")
	var v any
	if r.err == nil && json.Unmarshal(r.body, &v) == nil {
		t.Fatalf("cut page read whole and valid: %s", r.body)
	}
	if out, _ := sum(); out != 24 {
		t.Fatalf("after the faults the report is whole again: %v, want 24", out)
	}
}

func TestNoBillsWhenRecordingIsOff(t *testing.T) {
	b := setup(t, Options{MaxRecords: -1})
	b.post(t, "/v1/chat/completions", `{"model":"m-1","messages":[{"role":"user","content":"hi"}]}`)
	if n := len(b.mock.Bills()); n != 0 {
		t.Fatalf("%d bills kept with recording off", n)
	}
}

// Alpha's cache lives 30 minutes: a cached alpha answer's cache writes are billed as 30-minute writes at the
// 30-minute price (in the "input" line item, where alpha reports them), beta's as 5-minute writes; the
// billing export carries the 30-minute column, and under-reporting it touches nothing else.
func TestAlphaCacheWritesAreBilledAs30MinuteWrites(t *testing.T) {
	b := setup(t, Options{Prices: map[string]Price{"m-1": {Input: "2", Output: "8", CacheRead: "0.5", Cache5m: "100", Cache30m: "3", Cache1h: "200"},
		"b-1": {Input: "3", Output: "15", CacheRead: "0.3", Cache5m: "3.75", Cache30m: "300", Cache1h: "6"}}})
	yesterday := dayStart(1)
	at := yesterday.Add(13 * time.Hour).Format(time.RFC3339)
	r := b.post(t, "/v1/chat/completions", `{"model":"m-1","messages":[{"role":"user","content":"hello there, how are you today"}]}`,
		"x-mock-billed-at", at, "x-mock-usage", "cached")
	details := decodeJSON(t, r.body)["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)
	writes := int64(details["cache_write_tokens"].(float64))
	b.post(t, "/v1/messages", `{"model":"b-1","max_tokens":50,"messages":[{"role":"user","content":"bonjour tout le monde"}]}`,
		"anthropic-version", "2023-06-01", "x-mock-billed-at", at, "x-mock-usage", "cached")
	bills := b.mock.Bills()
	if len(bills) != 2 || writes == 0 {
		t.Fatalf("bills %+v, cache writes %d: want two bills with cache writes", bills, writes)
	}
	alpha, beta := bills[0], bills[1]
	if alpha.Cache30m != writes || alpha.Cache5m != 0 || alpha.Cache1h != 0 || beta.Cache5m == 0 || beta.Cache30m != 0 {
		t.Fatalf("alpha bill %+v (cache writes %d), beta bill %+v", alpha, writes, beta)
	}

	// Costs: alpha's input line item is uncached input × 2 + 30-minute writes × 3; the 5m and 1h prices
	// (100, 200) are not used. Beta's cost report has no 30-minute token type.
	_, page := b.adminGet(t, "/v1/organization/costs", url.Values{"start_time": {strconv.FormatInt(yesterday.Unix(), 10)},
		"end_time": {strconv.FormatInt(yesterday.AddDate(0, 0, 1).Unix(), 10)}}, "Authorization", "Bearer x")
	var input string
	for _, c := range results(t, page) {
		if c["line_item"] == "m-1, input" {
			input = strconv.FormatFloat(c["amount"].(map[string]any)["value"].(float64), 'f', -1, 64)
		}
	}
	want := decimal.New(alpha.Input*2+alpha.Cache30m*3, 6)
	if got, err := pricing.ParseDecimal(input); err != nil || got.Cmp(want) != 0 {
		t.Fatalf("m-1 input cost %q, want %s", input, want)
	}
	_, page = b.adminGet(t, "/v1/organizations/cost_report", url.Values{"starting_at": {yesterday.Format(time.RFC3339)},
		"ending_at": {yesterday.AddDate(0, 0, 1).Format(time.RFC3339)}}, "anthropic-version", "2023-06-01")
	for _, c := range results(t, page) {
		if strings.Contains(c["token_type"].(string), "30m") || c["token_type"] == "" {
			t.Fatalf("beta cost result %v", c)
		}
	}

	// The billing export: one row per group with the 30-minute column, costs exact.
	export := func() [][]string {
		t.Helper()
		r := b.call(t, http.MethodGet, "/_mock/billing.csv?from="+yesterday.Format(time.DateOnly)+"&to="+
			yesterday.AddDate(0, 0, 1).Format(time.DateOnly)+"&endpoint=completions", "")
		if r.status != http.StatusOK {
			t.Fatalf("billing export = %d %s", r.status, r.body)
		}
		rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		if err != nil || len(rows) != 2 || strings.Join(rows[0], ",") != strings.Join(ExportColumns, ",") {
			t.Fatalf("billing export %q: %v", r.body, err)
		}
		return rows
	}
	row := export()[1]
	col := func(name string) string { return row[slices.Index(ExportColumns, name)] }
	cost := decimal.New(alpha.Input*20+alpha.Output*80+alpha.CacheRead*5+alpha.Cache30m*30, 7) // per-million prices × 10
	if col("day") != yesterday.Format(time.DateOnly) || col("key_ref") != KeyID("") || col("model") != "m-1" ||
		col("cache_creation_30m_tokens") != fmt.Sprint(writes) || col("cache_creation_5m_tokens") != "0" ||
		col("input_tokens") != fmt.Sprint(alpha.Input) || col("requests") != "1" {
		t.Fatalf("export row %v, bill %+v", row, alpha)
	}
	if got, err := pricing.ParseDecimal(col("cost")); err != nil || got.Cmp(cost) != 0 {
		t.Fatalf("export cost %q, want %s", col("cost"), cost)
	}
	if r := b.call(t, http.MethodPut, "/_mock/reconcile", `{"under_report":{"category":"cache_creation_30m","percent":50}}`); r.status != http.StatusOK {
		t.Fatalf("under-report cache_creation_30m: %d %s", r.status, r.body)
	}
	under := export()[1]
	for i, name := range ExportColumns {
		want := row[i]
		if name == "cache_creation_30m_tokens" {
			want = fmt.Sprint(writes - writes/2)
		}
		if under[i] != want {
			t.Fatalf("under-reported 30m: %s = %s, want %s (row %v)", name, under[i], want, under)
		}
	}
	if r := b.call(t, http.MethodPut, "/_mock/reconcile", `{"under_report":{"category":"cache_creation_2h","percent":50}}`); r.status != http.StatusBadRequest {
		t.Fatalf("unknown category accepted: %d", r.status)
	}
}

// Gamma has no admin report API: its answers — whole, and a stream cut short — are billed and exported
// in the billing export with the usage they reported (uncached input = prompt − cached).
func TestGammaIsBilledInTheExport(t *testing.T) {
	b := setup(t, Options{Prices: map[string]Price{"g-1-flash": {Input: "1", Output: "4", CacheRead: "0.25"}}})
	yesterday := dayStart(1)
	at := yesterday.Add(9 * time.Hour).Format(time.RFC3339)
	body := `{"contents":[{"role":"user","parts":[{"text":"hello there, how are you today?"}]}]}`
	r := b.post(t, "/v1beta/models/g-1-flash:generateContent", body, "x-goog-api-key", "sk-g", "x-mock-billed-at", at,
		"x-mock-usage", "cached")
	u := decodeJSON(t, r.body)["usageMetadata"].(map[string]any)
	prompt, cached, out := int64(u["promptTokenCount"].(float64)), int64(u["cachedContentTokenCount"].(float64)), int64(u["candidatesTokenCount"].(float64))
	cut := b.call(t, http.MethodPost, "/v1beta/models/g-1-flash:streamGenerateContent?alt=sse", body, "x-goog-api-key", "sk-g",
		"x-mock-billed-at", at, "x-mock-disconnect-after", "2")
	evs := parseSSE(t, cut.body)
	cu := evs[len(evs)-1].json(t)["usageMetadata"].(map[string]any)
	if cached == 0 || len(evs) != 2 || cu["candidatesTokenCount"].(float64) != 2 {
		t.Fatalf("usage %v, cut stream %d events, its last usage %v", u, len(evs), cu)
	}
	if _, err := b.mock.Wait(testCtx(t), func(r Request) bool { return r.Aborted && r.Done }); err != nil {
		t.Fatal(err)
	}
	// The cut stream (no cache) bills the running usage of its last event: 2 words.
	wantIn, wantOut := prompt-cached+int64(cu["promptTokenCount"].(float64)), out+2
	r = b.call(t, http.MethodGet, "/_mock/billing.csv?from="+yesterday.Format(time.DateOnly)+"&to="+
		yesterday.AddDate(0, 0, 1).Format(time.DateOnly), "")
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("billing export %q: %v", r.body, err)
	}
	row := rows[1]
	col := func(name string) string { return row[slices.Index(ExportColumns, name)] }
	if col("model") != "g-1-flash" || col("key_ref") != KeyID("sk-g") || col("tier") != "standard" || col("requests") != "2" ||
		col("input_tokens") != fmt.Sprint(wantIn) || col("cache_read_tokens") != fmt.Sprint(cached) || col("output_tokens") != fmt.Sprint(wantOut) {
		t.Fatalf("gamma export row %v; want input %d, cache read %d, output %d over 2 requests", row, wantIn, cached, wantOut)
	}
	cost := decimal.New(wantIn*100+wantOut*400+cached*25, 8)
	if got, err := pricing.ParseDecimal(col("cost")); err != nil || got.Cmp(cost) != 0 {
		t.Fatalf("gamma export cost %q, want %s", col("cost"), cost)
	}
}
