package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/deploy/mockupstream"
)

// seedReconciliation sets up an alpha provider reconciled against a mock provider on loopback: three days of
// chats billed by the mock and settled in the ledger, priced by two price rules; the middle day is then
// reconciled with a lost gpt-4o request and a gpt-4o-mini price change injected, the others honestly. It
// returns the gpt-4o-mini rule id and the drifting run's id.
func seedReconciliation(t *testing.T, db *storetest.DB, api adminAPI) (int64, string) {
	t.Helper()
	mock := mockupstream.New(mockupstream.Options{AdminKey: "sk-admin-console", Prices: map[string]mockupstream.Price{
		"gpt-4o": {Input: "2.5", Output: "10", CacheRead: "1.25", Cache30m: "3"}, "gpt-4o-mini": {Input: "0.15", Output: "0.6", CacheRead: "0.075", Cache30m: "0.2"}}})
	srv := httptest.NewServer(mock)
	t.Cleanup(srv.Close)
	p := api.must("POST", "/admin/providers", map[string]any{"name": "alpha-recon", "channel_type": "alpha",
		"base_url": srv.URL + "/v1", "enabled": true, "settings": map[string]any{}})
	pid, _ := strconv.ParseInt(fmt.Sprint(p["id"]), 10, 64)
	c := api.must("POST", fmt.Sprintf("/admin/providers/%d/credentials", pid), map[string]any{"secret": "sk-console-inference"})
	cid, _ := strconv.ParseInt(fmt.Sprint(c["id"]), 10, 64)
	api.must("PUT", fmt.Sprintf("/admin/reconciliation/providers/%d", pid), map[string]any{"kind": "openai", "base_url": srv.URL,
		"admin_key": "sk-admin-console", "cost_rel": "0.02"})
	if status, out := api.call("PUT", fmt.Sprintf("/admin/reconciliation/credential-refs/%d", cid),
		map[string]any{"key_ref": mockupstream.KeyID("sk-console-inference"), "project_ref": mockupstream.ProjectID}); status != http.StatusNoContent {
		t.Fatalf("credential ref: %d %s", status, out)
	}
	ruleIDs := map[string]int64{}
	for model, pr := range map[string][4]string{"gpt-4o": {"2.5", "10", "1.25", "3"}, "gpt-4o-mini": {"0.15", "0.6", "0.075", "0.2"}} {
		r := api.must("POST", "/admin/price-rules", map[string]any{"provider_id": pid, "match_type": "exact", "model_match": model,
			"input_price": pr[0], "output_price": pr[1], "cache_read_price": pr[2], "cache_creation_5m_price": "0",
			"cache_creation_30m_price": pr[3], "cache_creation_1h_price": "0", "image_output_price": "0", "enabled": true})
		ruleIDs[model], _ = strconv.ParseInt(fmt.Sprint(r["id"]), 10, 64)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	var rows []store.UsageRow
	for d := 1; d <= 3; d++ {
		day := today.AddDate(0, 0, -d)
		for i := range 6 {
			model := []string{"gpt-4o", "gpt-4o-mini"}[i%2]
			at := day.Add(time.Duration(2+i) * time.Hour)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
				strings.NewReader(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"question %d on day %d"}]}`, model, i, d)))
			req.Header.Set("Authorization", "Bearer sk-console-inference")
			req.Header.Set("x-mock-billed-at", at.Format(time.RFC3339))
			req.Header.Set("x-mock-chunks", strconv.Itoa(400+100*i))
			if i%3 == 1 { // cached prompts: cache reads and (alpha's 30-minute) cache writes
				req.Header.Set("x-mock-usage", "cached")
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			// Read to the end: the mock keeps a bill when its handler returns, and the end of the body comes
			// after that. Closing at the headers raced the bill (and could cut the answer, billing nothing).
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	// micro-dollars per million: input, output, cache read, 30-minute cache write
	prices := map[string][4]int64{"gpt-4o": {2500000, 10000000, 1250000, 3000000}, "gpt-4o-mini": {150000, 600000, 75000, 200000}}
	for i, b := range mock.Bills() {
		pr := prices[b.Model]
		nanoCost := b.Input*pr[0] + b.Output*pr[1] + b.CacheRead*pr[2] + b.Cache30m*pr[3] // 10^-12 dollars
		rule, version := ruleIDs[b.Model], int64(1)
		rows = append(rows, store.UsageRow{RequestID: fmt.Sprintf("rc-%d", i), ProviderID: &pid, CredentialID: &cid,
			PriceRuleID: &rule, PriceRuleVersion: &version,
			LogicalModel: b.Model, UpstreamModel: b.Model, Operation: "generate_content", InboundKind: "alpha_chat_completions",
			InputTokens: b.Input, OutputTokens: b.Output, CacheReadTokens: b.CacheRead, CacheCreation30m: b.Cache30m, ReportedTier: b.Tier, Cost: fmt.Sprintf("%d.%012d", nanoCost/1e12, nanoCost%1e12),
			Source: "upstream", EndState: "completed", HTTPStatus: 200, CreatedAt: b.At})
	}
	if _, err := store.SettleUsages(context.Background(), db.Pool, rows); err != nil {
		t.Fatal(err)
	}
	// The provider loses the first gpt-4o request of day 2 (Drop leaves out every bill up to it; the bills of
	// other days it also drops are not reconciled under the switch).
	day2 := today.AddDate(0, 0, -2)
	drop := int64(0)
	for _, b := range mock.Bills() {
		if b.At.Truncate(24*time.Hour).Equal(day2) && drop == 0 {
			if b.Model != "gpt-4o" {
				t.Fatalf("day 2's first bill is %s", b.Model)
			}
			drop = b.Seq
		}
	}
	var drifting string
	for d := 3; d >= 1; d-- {
		if d == 2 {
			mock.SetReconcile(mockupstream.ReconcileControls{Drop: int(drop), PriceMultiplier: map[string]string{"gpt-4o-mini": "1.2"}})
		}
		r := api.must("POST", "/admin/reconciliation/runs", map[string]any{"provider_id": pid, "day": today.AddDate(0, 0, -d).Format(time.DateOnly)})
		if d == 2 {
			drifting = fmt.Sprint(r["id"])
			if r["status"] != "drift" {
				t.Fatalf("day 2 run: %v", r)
			}
		} else if r["status"] != "ok" {
			t.Fatalf("honest run: %v", r)
		}
		mock.SetReconcile(mockupstream.ReconcileControls{})
	}
	return ruleIDs["gpt-4o-mini"], drifting
}

// TestReconciliationPageInChromium shows the drift chart, the table and a run's lines, and screenshots them.
func TestReconciliationPageInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	miniRule, drifting := seedReconciliation(t, db, api)
	p := newTab(t, startBrowser(t, t.TempDir()))
	defer p.checkConsole()

	p.do("open console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("overview", visible("#ov-today"))
	p.do("reconciliation page", chromedp.Click(chromedp.CSS(`#sections a[href="#reconciliation"]`)))
	p.waitFor("drift table", `document.querySelectorAll("#rc-table tbody tr").length === 6`)
	if n := eval[int](p, `document.querySelectorAll("#rc-chart canvas").length`); n != 1 {
		t.Errorf("%d chart canvases, want 1", n)
	}
	// Day 2 drifts for both models (a lost request of one, the price of the other); days 1 and 3 agree.
	if got := eval[int](p, `document.querySelectorAll("#rc-table tbody tr.drift").length`); got != 2 {
		t.Errorf("%d drifting rows, want 2", got)
	}
	causes := p.text("#rc-table tbody")
	if !strings.Contains(causes, "price differs") || !strings.Contains(causes, "missing at provider") {
		t.Errorf("drift causes %q: want the price change and the lost request named", causes)
	}
	if got := p.text("#rc-summary"); !strings.Contains(got, "6 provider·model·days reconciled, 2 with drift") {
		t.Errorf("summary %q", got)
	}
	p.do("open the drifting run", chromedp.Click(chromedp.CSS(`#rc-runs button[data-run="`+drifting+`"]`)))
	p.waitFor("run lines", visible("#rc-lines tbody tr"))
	want := fmt.Sprintf("price rule %d version 1", miniRule)
	if got := eval[string](p, `document.querySelector('#rc-lines tr[data-cause="price"] td:last-child').textContent`); !strings.Contains(got, want) {
		t.Errorf("price line detail %q: want %q (the rule that priced the rows)", got, want)
	}
	// The lines show all seven categories and the cost, each as ledger, provider and provider − ledger.
	heads := eval[[]string](p, `[...document.querySelectorAll("#rc-lines thead th")].map((th) => th.textContent)`)
	for _, h := range []string{"Input", "Output", "Cache read", "Cache write 5m", "Cache write 30m", "Cache write 1h", "Image output", "Cost ($)"} {
		if !slices.Contains(heads, h) {
			t.Errorf("line headers %q lack %q", heads, h)
		}
	}
	// The lost gpt-4o request: its token line has the ledger above the provider in input and output, the
	// difference negative and marked; the categories it has none of agree at 0.
	lost := `#rc-lines tr[data-kind="tokens"][data-cause="missing_at_provider"]`
	cell := func(label string) []string {
		return eval[[]string](p, `[...document.querySelectorAll('`+lost+` td[data-label="`+label+`"] span')].map((s) => s.textContent + (s.classList.contains("off") ? "!" : ""))`)
	}
	for _, label := range []string{"Input", "Output"} {
		if c := cell(label); len(c) != 3 || !strings.HasPrefix(c[2], "\u2212") || !strings.HasSuffix(c[2], "!") || c[0] == c[1] {
			t.Errorf("lost request, %s cell %q: want ledger, provider and a marked negative difference", label, c)
		}
	}
	if c := cell("Cache read"); len(c) != 3 || c[0] == "0" || c[2] != "0" {
		t.Errorf("lost request, cache read cell %q: want the cached tokens on both sides (the lost one was not cached), difference 0", c)
	}
	for _, label := range []string{"Cache write 5m", "Cache write 1h", "Image output"} {
		if c := cell(label); len(c) != 3 || c[0] != "0" || c[1] != "0" || c[2] != "0" {
			t.Errorf("lost request, %s cell %q: want 0 / 0 / 0", label, c)
		}
	}
	price := eval[[]string](p, `[...document.querySelectorAll('#rc-lines tr[data-cause="price"] td[data-label="Cost"] span')].map((s) => s.textContent)`)
	if len(price) != 3 || !strings.HasPrefix(price[2], "+") || price[0] == price[1] {
		t.Errorf("price line cost cell %q: want ledger, provider and a positive difference", price)
	}
	p.screenshot("console-reconciliation-1280", 1280)
	p.screenshot("console-reconciliation-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))

	// Token drift on the chart; an invalid provider filter is refused next to its field.
	p.do("tokens", choose("#rc-measure", "tokens"))
	p.do("bad provider", fill("#rc-provider", "x1"), chromedp.Click(chromedp.CSS(`#rc-form button[type=submit]`)))
	p.waitFor("provider error", visible("#rc-provider-error"))
}
