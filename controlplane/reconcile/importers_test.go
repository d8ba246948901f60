package reconcile

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/deploy/mockupstream"
	"github.com/tollgate/tollgate/shared/pricing"
)

// provider is a real mock upstream on loopback and a client that sends it traffic.
type provider struct {
	mock *mockupstream.Server
	srv  *httptest.Server
}

func newProvider(t *testing.T) *provider {
	t.Helper()
	m := mockupstream.New(mockupstream.Options{AdminKey: "sk-admin", Prices: map[string]mockupstream.Price{
		"m-1": mockPrice(ruleInputs["m-1"]), "emb-1": {Input: "0.02"}, "img-1": {Input: "5", ImageOut: "40"},
		"b-1": mockPrice(ruleInputs["b-1"])}})
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return &provider{mock: m, srv: srv}
}

func (p *provider) send(t *testing.T, path, body string, headers ...string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read to the end: the mock keeps the bill before the body ends.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %d", path, resp.StatusCode)
	}
}

// waits records the back-offs an importer asked for instead of sleeping.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return nil
}

func days(n int) time.Time { return utcDay(time.Now()).AddDate(0, 0, -n) }

// billTotals sums the mock's bills per endpoint set and model.
func billTotals(bills []mockupstream.Bill, endpoints ...string) map[string]Tokens {
	out := map[string]Tokens{}
	for _, b := range bills {
		for _, e := range endpoints {
			if b.Endpoint == e {
				t := out[b.Model]
				t.Add(Tokens{Input: b.Input, Output: b.Output, CacheRead: b.CacheRead, Cache5m: b.Cache5m, Cache30m: b.Cache30m,
					Cache1h: b.Cache1h, ImageOut: b.ImageOut})
				out[b.Model] = t
			}
		}
	}
	return out
}

func TestOpenAIImportPagesAndMatchesTheBills(t *testing.T) {
	p := newProvider(t)
	from := days(3)
	for d := range 3 {
		at := from.AddDate(0, 0, d).Add(time.Duration(d+1) * time.Hour).Format(time.RFC3339)
		p.send(t, "/v1/chat/completions", `{"model":"m-1","messages":[{"role":"user","content":"a question"}]}`,
			"Authorization", "Bearer sk-a", "x-mock-billed-at", at)
		p.send(t, "/v1/chat/completions", `{"model":"m-1","service_tier":"priority","messages":[{"role":"user","content":"q"}]}`,
			"Authorization", "Bearer sk-a", "x-mock-billed-at", at, "x-mock-usage", "cached")
		p.send(t, "/v1/embeddings", `{"model":"emb-1","input":"embed me"}`, "Authorization", "Bearer sk-a", "x-mock-billed-at", at)
		p.send(t, "/v1/images/generations", `{"model":"img-1","prompt":"a cat"}`, "Authorization", "Bearer sk-a", "x-mock-billed-at", at)
	}
	imp := &OpenAI{BaseURL: p.srv.URL, AdminKey: "sk-admin", Fetcher: &Fetcher{}, PageDays: 1}
	rep, err := imp.Import(context.Background(), from, from.AddDate(0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Tokens{}
	requests := map[string]int64{}
	for _, u := range rep.Usage {
		if u.KeyRef != mockupstream.KeyID("sk-a") || u.ProjectRef != mockupstream.ProjectID {
			t.Fatalf("row %+v: key/project not the mock's", u)
		}
		tk := got[u.Model]
		tk.Add(u.Tokens)
		got[u.Model] = tk
		requests[u.Model] += u.Requests
		if u.Model == "img-1" && (u.TokensReported || u.Tokens.Total() != 0) {
			t.Fatalf("images row reports tokens: %+v", u)
		}
	}
	want := billTotals(p.mock.Bills(), mockupstream.EndpointCompletions, mockupstream.EndpointEmbeddings)
	// Alpha folds cache writes into input.
	for m, w := range want {
		w.Input += w.Cache5m + w.Cache30m + w.Cache1h
		w.Cache5m, w.Cache30m, w.Cache1h = 0, 0, 0
		want[m] = w
	}
	if got["m-1"] != want["m-1"] || got["emb-1"] != want["emb-1"] || requests["m-1"] != 6 || requests["img-1"] != 3 {
		t.Fatalf("imported %v / requests %v; billed %v", got, requests, want)
	}
	if got["m-1"].CacheRead == 0 {
		t.Fatal("cached requests imported without cache reads")
	}
	// Costs: every day's line items of m-1 add up to the bills × the prices.
	total := zero()
	for _, c := range rep.Costs {
		if c.Model == "m-1" {
			total.Add(total, c.Cost)
		}
	}
	w := want["m-1"]
	exp, _ := pricing.ParseDecimal("0")
	for _, part := range []struct {
		n     int64
		price string
	}{{w.Output, "8"}, {w.CacheRead, "0.5"}} {
		x, _ := pricing.ParseDecimal(part.price)
		x.Mul(x, decimalInt(part.n))
		exp.Add(exp, x)
	}
	// The uncached input above includes the cache writes, billed at the cache write price: alpha's cache
	// lives 30 minutes, so its writes are 30-minute writes, never 5-minute or 1-hour ones.
	var cw int64
	for _, b := range p.mock.Bills() {
		if b.Model == "m-1" {
			if b.Cache5m != 0 || b.Cache1h != 0 {
				t.Fatalf("alpha bill with 5-minute or 1-hour cache writes: %+v", b)
			}
			cw += b.Cache30m
		}
	}
	if cw == 0 {
		t.Fatal("cached requests billed without cache writes")
	}
	in, _ := pricing.ParseDecimal("2")
	in.Mul(in, decimalInt(w.Input-cw))
	exp.Add(exp, in)
	cwp, _ := pricing.ParseDecimal(ruleInputs["m-1"].CacheCreation30mPrice)
	cwp.Mul(cwp, decimalInt(cw))
	exp.Add(exp, cwp)
	exp.Mul(exp, perMillion)
	if total.Cmp(exp) != 0 {
		t.Fatalf("m-1 cost %s, want %s", pricing.FormatDecimal(total), pricing.FormatDecimal(exp))
	}
}

func TestAnthropicImportMatchesTheBills(t *testing.T) {
	p := newProvider(t)
	from := days(2)
	for d := range 2 {
		at := from.AddDate(0, 0, d).Add(30 * time.Minute).Format(time.RFC3339)
		p.send(t, "/v1/messages", `{"model":"b-1","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`,
			"x-api-key", "sk-b", "anthropic-version", "2023-06-01", "x-mock-billed-at", at, "x-mock-usage", "cached")
	}
	imp := &Anthropic{BaseURL: p.srv.URL, AdminKey: "sk-admin", Fetcher: &Fetcher{}, PageDays: 1}
	rep, err := imp.Import(context.Background(), from, from.AddDate(0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	var got Tokens
	for _, u := range rep.Usage {
		if u.KeyRef != mockupstream.KeyID("sk-b") || u.ProjectRef != mockupstream.WorkspaceID || u.Tier != "standard" || !u.TokensReported {
			t.Fatalf("row %+v", u)
		}
		got.Add(u.Tokens)
	}
	if want := billTotals(p.mock.Bills(), mockupstream.EndpointMessages)["b-1"]; got != want || got.Cache5m == 0 {
		t.Fatalf("imported %+v, billed %+v", got, want)
	}
	if len(rep.Usage) != 2 {
		t.Fatalf("usage rows = %d, want one per day", len(rep.Usage))
	}
	total := zero()
	for _, c := range rep.Costs {
		total.Add(total, c.Cost)
	}
	exp := zero()
	for _, part := range []struct {
		n     int64
		price string
	}{{got.Input, "3"}, {got.Output, "15"}, {got.CacheRead, "0.3"}, {got.Cache5m, "3.75"}} {
		x, _ := pricing.ParseDecimal(part.price)
		x.Mul(x, decimalInt(part.n))
		exp.Add(exp, x)
	}
	exp.Mul(exp, perMillion)
	if total.Cmp(exp) != 0 {
		t.Fatalf("cost %s (from cents), want %s", pricing.FormatDecimal(total), pricing.FormatDecimal(exp))
	}
}

func TestImportRetriesRateLimitsErrorsAndCutPagesButNeverReturnsPartialData(t *testing.T) {
	p := newProvider(t)
	from := days(1)
	p.send(t, "/v1/chat/completions", `{"model":"m-1","messages":[{"role":"user","content":"x"}]}`,
		"x-mock-billed-at", from.Add(time.Hour).Format(time.RFC3339))
	w := &waits{}
	imp := &OpenAI{BaseURL: p.srv.URL, AdminKey: "sk-admin", Fetcher: &Fetcher{Sleep: w.sleep}}
	p.mock.SetReconcile(mockupstream.ReconcileControls{RateLimit: 1, RetryAfter: 7, ServerError: 1, CutPage: 1})
	rep, err := imp.Import(context.Background(), from, from.Add(Day))
	if err != nil {
		t.Fatalf("import through a 429, a 500 and a cut page: %v", err)
	}
	if len(w.d) != 3 || w.d[0] != 7*time.Second || w.d[1] != time.Second || w.d[2] != 2*time.Second {
		t.Fatalf("waits %v: want Retry-After 7s, then the back-off of attempts 2 and 3: 1s, 2s", w.d)
	}
	if len(rep.Usage) != 1 || rep.Usage[0].Requests != 1 {
		t.Fatalf("usage after retries: %+v", rep.Usage)
	}

	// More cut pages than attempts: an error, no report.
	p.mock.SetReconcile(mockupstream.ReconcileControls{CutPage: 10})
	imp.Fetcher.Attempts = 3
	rep, err = imp.Import(context.Background(), from, from.Add(Day))
	if err == nil || !strings.Contains(err.Error(), "cut short") || len(rep.Usage) != 0 || len(rep.Costs) != 0 {
		t.Fatalf("persistently cut pages: report %+v, err %v; want an error and no data", rep, err)
	}
	// A wrong admin key is refused at once, without retries.
	p.mock.SetReconcile(mockupstream.ReconcileControls{})
	w.d = nil
	bad := &OpenAI{BaseURL: p.srv.URL, AdminKey: "sk-wrong", Fetcher: &Fetcher{Sleep: w.sleep}}
	if _, err := bad.Import(context.Background(), from, from.Add(Day)); err == nil || !strings.Contains(err.Error(), "401") || len(w.d) != 0 {
		t.Fatalf("wrong admin key: %v after %d waits; want a 401 error at once", err, len(w.d))
	}
}

func TestImportWindowMustBeWholeDays(t *testing.T) {
	imp := &OpenAI{BaseURL: "http://127.0.0.1:1", Fetcher: &Fetcher{}}
	now := time.Now()
	if _, err := imp.Import(context.Background(), now, now.Add(Day)); err == nil {
		t.Fatal("a window not at midnight was accepted")
	}
	if _, err := imp.Import(context.Background(), days(40), days(0)); err == nil {
		t.Fatal("a 40-day window was accepted")
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{"3": 3 * time.Second, "": 0, "soon": 0,
		now.Add(10 * time.Second).Format(http.TimeFormat): 10 * time.Second, now.Add(-time.Minute).Format(http.TimeFormat): 0} {
		if got := retryAfter(in, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
