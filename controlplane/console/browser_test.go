package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tollgate/tollgate/controlplane/app"
	"github.com/tollgate/tollgate/controlplane/config"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/process"
	"github.com/tollgate/tollgate/shared/testkit"
)

// The browser test drives Debian's Chromium headless through the Chrome DevTools Protocol (chromedp,
// over a pipe: no driver binary, no Node) against a real control plane on loopback with a real
// Postgres database. Set TOLLGATE_CHROMIUM to use another binary, and TOLLGATE_UPDATE_SCREENSHOTS=1 to
// write the review screenshots to docs/img.

const (
	adminToken      = "console-test-bootstrap-admin-token"
	screenshotsEnv  = "TOLLGATE_UPDATE_SCREENSHOTS"
	chromiumEnv     = "TOLLGATE_CHROMIUM"
	waitTimeout     = 15 * time.Second
	testModel       = "tg-console-model"
	importedRuleID  = "900"
	docsImgRelative = "../../docs/img"
)

// findChromium returns the browser binary. A missing browser fails the test: CI must install it
// (Debian package "chromium").
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s=%s: %v", chromiumEnv, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no Chromium found: the console browser test needs Debian's chromium package "+
		"(apt-get install -y chromium) or %s=/path/to/chrome", chromiumEnv)
	return ""
}

// controlPlane starts app.New + Run on loopback against db and returns its base URL.
func controlPlane(t *testing.T, db *storetest.DB) string {
	t.Helper()
	env := map[string]string{
		"TOLLGATE_DATABASE_URL":     db.URL,
		"TOLLGATE_ADMIN_TOKEN":      adminToken,
		"TOLLGATE_SECRET_KEY":       strings.Repeat("ab", 32),
		"TOLLGATE_DP_TOKEN":         "console-test-dataplane-token",
		"TOLLGATE_CP_HTTP_ADDR":     "127.0.0.1:0",
		"TOLLGATE_CP_GRPC_ADDR":     "127.0.0.1:0",
		"TOLLGATE_LOG_LEVEL":        "warn",
		"TOLLGATE_NO_MIGRATE":       "true", // storetest migrated it
		"TOLLGATE_SHUTDOWN_TIMEOUT": "5s",
	}
	cfg, err := config.Load(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	logs := &testkit.Buffer{}
	log, err := process.NewLogger(logs, cfg.LogLevel)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("app.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("control plane Run: %v", err)
		}
		if t.Failed() {
			t.Logf("control plane log:\n%s", logs.String())
		}
	})
	base := "http://" + srv.HTTPAddr()
	deadline := time.Now().Add(waitTimeout)
	for {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("control plane at %s not healthy: %v", base, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adminAPI calls the admin REST API directly, to seed data and to check what the page stored.
type adminAPI struct {
	t     *testing.T
	base  string
	token string
}

func (a adminAPI) call(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// must calls and decodes a 2xx answer (numbers kept as json.Number).
func (a adminAPI) must(method, path string, body any) map[string]any {
	a.t.Helper()
	status, out := a.call(method, path, body)
	if status/100 != 2 {
		a.t.Fatalf("%s %s = %d %s", method, path, status, out)
	}
	return decode(a.t, out)
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// rules returns every stored price rule by id.
func (a adminAPI) rules() map[string]map[string]any {
	a.t.Helper()
	out := map[string]map[string]any{}
	for _, it := range a.must("GET", "/admin/price-rules?limit=1000", nil)["items"].([]any) {
		r := it.(map[string]any)
		out[fmt.Sprint(r["id"])] = r
	}
	return out
}

func (a adminAPI) ruleByModel(model string) map[string]any {
	a.t.Helper()
	for _, r := range a.rules() {
		if r["model_match"] == model {
			return r
		}
	}
	a.t.Fatalf("no stored price rule with model_match %q", model)
	return nil
}

// tab is one browser tab.
type tab struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
}

func newTab(t *testing.T, parent context.Context) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent)
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // opens the tab (and starts the browser for the first one)
		t.Fatalf("start Chromium tab: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.messages = append(tb.messages, m)
			tb.mu.Unlock()
		}
	}()
	return tb
}

// checkConsole fails on uncaught exceptions and CSP violations. Failed admin calls (401, 403, 422)
// are expected network log entries and are not errors of the page.
func (tb *tab) checkConsole() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, m := range tb.messages {
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
			tb.t.Errorf("browser console: %s", m)
		}
	}
}

func (tb *tab) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", step, err)
	}
}

// eval evaluates a JavaScript expression and decodes its value into T.
func eval[T any](tb *tab, js string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it is true.
func (tb *tab) waitFor(what, js string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(waitTimeout), chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		tb.t.Fatalf("waiting for %s (%s): %v\n%s", what, js, err, tb.debugState())
	}
}

// debugState describes the page and its console for a failure message.
func (tb *tab) debugState() string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
	fmt.Fprintf(&b, "page text (err %v):\n%s\n", err, text)
	values, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("input, select, textarea")]
		.filter(e => e.value && e.type !== "password").map(e => [e.id || e.dataset.field, e.value]))`))
	fmt.Fprintf(&b, "field values (err %v): %s\n", err, values)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, m := range tb.messages {
		fmt.Fprintf(&b, "console: %s\n", m)
	}
	return b.String()
}

// fill replaces an input's value by typing into it, as a user would. (chromedp.Clear resets only the
// value attribute, not what was typed, so the field is emptied from JavaScript first.)
func fill(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ""`, sel)),
		chromedp.SendKeys(chromedp.CSS(sel), value))
}

// clickRow clicks the button sel finds at the moment of the click: a table re-rendered by a refresh
// between finding a node and clicking it (chromedp.Click) leaves a detached node ("Could not find node with
// given id"); the page's own handler runs as for a user's click.
func clickRow(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).click()`, sel))
}

// choose selects an option of a <select> and fires the events a user's choice fires.
func choose(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q;
		s.dispatchEvent(new Event("input", {bubbles: true})); s.dispatchEvent(new Event("change", {bubbles: true})); })()`, sel, value))
}

// setText pastes text into a textarea.
func setText(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q;
		s.dispatchEvent(new Event("input", {bubbles: true})); })()`, sel, value))
}

func visible(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden"; })()`, sel)
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "<missing>").trim()`, sel))
}

func (tb *tab) rowIDs() []string {
	return eval[[]string](tb, `[...document.querySelectorAll("#rules tbody tr[data-rule]")].map(r => r.dataset.rule)`)
}

// screenshot captures the page at width (the whole page, or only the viewport when a modal dialog is
// open), checks that nothing scrolls sideways, and writes docs/img/<name>.png when asked to.
func (tb *tab) screenshot(name string, width int64) {
	tb.t.Helper()
	// Transient notices would only clutter the review images.
	tb.do("viewport "+name, chromedp.EmulateViewport(width, 900),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("toast").hidden = true`),
		chromedp.Sleep(150*time.Millisecond))
	if w := eval[int](tb, `document.documentElement.scrollWidth`); w > int(width) {
		tb.t.Errorf("at %d px the page is %d px wide: it scrolls sideways", width, w)
	}
	ctx, cancel := context.WithTimeout(tb.ctx, waitTimeout)
	defer cancel()
	capture := chromedp.FullScreenshot(100)
	if eval[bool](tb, `!!document.querySelector("dialog[open]")`) {
		capture = chromedp.CaptureScreenshot()
	}
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		tb.t.Fatalf("screenshot %s is not a PNG", name)
	}
	if os.Getenv(screenshotsEnv) == "1" {
		if err := os.MkdirAll(docsImgRelative, 0o755); err != nil {
			tb.t.Fatal(err)
		}
		path := filepath.Join(docsImgRelative, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			tb.t.Fatal(err)
		}
		tb.t.Logf("wrote %s", path)
	}
}

func seed(t *testing.T, api adminAPI) (providerID string, ids map[string]string) {
	t.Helper()
	p := api.must("POST", "/admin/providers", map[string]any{"name": "alpha-main", "channel_type": "alpha",
		"base_url": "http://127.0.0.1:9/v1", "enabled": true, "settings": map[string]any{}})
	providerID = fmt.Sprint(p["id"])
	pid := json.Number(providerID)
	ids = map[string]string{}
	for _, r := range []map[string]any{
		{"provider_id": nil, "match_type": "contains", "model_match": "gpt-4o", "input_price": "2.50", "output_price": "10",
			"cache_read_price": "1.25", "cache_creation_5m_price": "0", "cache_creation_30m_price": "0",
			"cache_creation_1h_price": "0", "image_output_price": "0", "enabled": true},
		{"provider_id": pid, "match_type": "exact", "model_match": "claude-sonnet-4", "input_price": "3",
			"output_price": "15", "cache_read_price": "0.30", "cache_creation_5m_price": "3.75", "cache_creation_30m_price": "0",
			"cache_creation_1h_price": "6", "image_output_price": "0", "enabled": true,
			"pricing_tiers_json": []any{map[string]any{"min_prompt_tokens": 200000, "multiplier": "2"}}},
		{"provider_id": nil, "match_type": "contains", "model_match": "gemini-2.5", "input_price": "1.25",
			"output_price": "10", "cache_read_price": "0.3125", "cache_creation_5m_price": "0", "cache_creation_30m_price": "0",
			"cache_creation_1h_price": "0", "image_output_price": "30", "enabled": false},
	} {
		got := api.must("POST", "/admin/price-rules", r)
		ids[r["model_match"].(string)] = fmt.Sprint(got["id"])
	}
	return providerID, ids
}

func revision(t *testing.T, db *storetest.DB) int64 {
	t.Helper()
	rev, err := store.Revision(context.Background(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// jsonEqual compares two JSON values semantically.
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func TestPricingPageInChromium(t *testing.T) {
	db := storetest.New(t) // skips under -short; fails loudly without Postgres otherwise
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	providerID, seeded := seed(t, api)
	viewer := api.must("POST", "/admin/admin-tokens", map[string]any{"name": "console-test-viewer", "role": "viewer"})
	viewerToken := viewer["token"].(string)

	downloads := t.TempDir()
	browserCtx := startBrowser(t, downloads)

	p := newTab(t, browserCtx)
	defer p.checkConsole()
	p.do("open console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/#pricing"))
	p.waitFor("sign-in form", visible("#signin-token"))
	if got := eval[string](p, `document.activeElement.id`); got != "signin-token" {
		t.Errorf("focus on load = %q, want the token field", got)
	}

	// The page's exact-money helpers, run in the browser: numbers keep their digits both ways and
	// decimals compare exactly (a float would get all of these wrong).
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	helpers, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(async () => {
		const wire = await import("/console/assets/js/wire.js");
		const dec = await import("/console/assets/js/decimal.js");
		const parsed = wire.parseExact('{"cost_micros": 12345678901234567890, "cost": "0.1000000000000000000000001", "n": 1e3}');
		return {
			micros: parsed.cost_micros, cost: parsed.cost, n: parsed.n,
			out: wire.stringify({id: wire.int("98765432109876543210"), t: wire.int("007")}),
			cmp: [dec.compareDecimal("10", "9.99"), dec.compareDecimal("0.30", "0.3"), dec.compareDecimal("0.1", "0.10000000000000000001"),
				dec.compareDecimal("123456789012345678", "123456789012345677")],
			valid: ["2.50", "0", "1.", ".5", "1e3", "-1", "1,5", " 1"].map(dec.isDecimal),
			sub: [["0.01409", "0.01814"], ["0.00152274", "0.00126895"], ["2.50", "2.5"], ["10", "9.99"],
				["0.1000000000000000000000001", "0.1"], ["12345678901234567890", "12345678901234567891"], ["1", "x"]].map(([a, b]) => dec.subtractDecimal(a, b)),
		};
	})()`, chromedp.EvalAwaitPromise))
	cancel()
	if err != nil {
		t.Fatalf("run the page's helpers: %v", err)
	}
	wantHelpers := map[string]any{"micros": "12345678901234567890", "cost": "0.1000000000000000000000001", "n": "1e3",
		"out": `{"id":98765432109876543210,"t":7}`, "cmp": []any{1.0, 0.0, -1.0, 1.0},
		"valid": []any{true, true, false, false, false, false, false, false},
		"sub":   []any{"-0.00405", "0.00025379", "0", "0.01", "0.0000000000000000000000001", "-1", ""}}
	if !reflect.DeepEqual(helpers, wantHelpers) {
		t.Errorf("exact-money helpers in the browser = %v, want %v", helpers, wantHelpers)
	}

	// A wrong token is refused with a message next to the field; Enter submits.
	p.do("wrong token", chromedp.SendKeys(chromedp.ID("signin-token"), "not-a-real-token-123\n"))
	p.waitFor("sign-in error", visible("#signin-error"))
	if got := p.text("#signin-error"); !strings.Contains(got, "not accepted") {
		t.Errorf("sign-in error = %q, want it to say the token was not accepted", got)
	}

	// Sign in as admin: the seeded rules are listed with their prices exactly as stored.
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("rule list", `document.querySelectorAll("#rules tbody tr[data-rule]").length === 3`)
	if got := eval[string](p, `sessionStorage.getItem("tollgate.console.token")`); got != adminToken {
		t.Errorf("session storage token = %q, want the admin token", got)
	}
	// The token survives a reload of the tab.
	p.do("reload", chromedp.Reload())
	p.waitFor("rule list after reload", `document.querySelectorAll("#rules tbody tr[data-rule]").length === 3`)
	if got := p.text("#identity"); !strings.HasSuffix(got, "admin") {
		t.Errorf("identity = %q, want the admin role", got)
	}
	gpt := seeded["gpt-4o"]
	if got := p.text(fmt.Sprintf(`#rules tr[data-rule="%s"] td[data-label="Input"]`, gpt)); got != "2.50" {
		t.Errorf("gpt-4o input price shown as %q, want the stored string 2.50", got)
	}
	if got := p.text(fmt.Sprintf(`#rules tr[data-rule="%s"] td[data-label="Provider"]`, seeded["claude-sonnet-4"])); got != "alpha-main" {
		t.Errorf("claude rule provider shown as %q, want alpha-main", got)
	}

	// Create a rule with a prompt-threshold entry and a service-tier entry with an override.
	p.do("new rule", chromedp.Click(chromedp.ID("new-rule")))
	p.waitFor("editor", `document.getElementById("rule-dialog").open`)
	if got := eval[string](p, `document.activeElement.id`); got != "rf-model_match" {
		t.Errorf("editor focus = %q, want rf-model_match", got)
	}
	prices := map[string]string{"input_price": "2.50", "output_price": "10", "cache_read_price": "0.25",
		"cache_creation_5m_price": "3.125", "cache_creation_30m_price": "0", "cache_creation_1h_price": "5",
		"image_output_price": "40"}
	steps := []chromedp.Action[chromedp.Void]{choose("#rf-provider_id", providerID), choose("#rf-match_type", "exact"),
		fill("#rf-model_match", testModel)}
	for _, f := range slices.Sorted(maps.Keys(prices)) {
		steps = append(steps, fill("#rf-"+f, prices[f]))
	}
	steps = append(steps,
		chromedp.Click(chromedp.ID("add-prompt-tier")),
		fill(`#tier-list li:nth-child(1) [data-field="min_prompt_tokens"]`, "200000"),
		fill(`#tier-list li:nth-child(1) [data-field="multiplier"]`, "2"),
		chromedp.Click(chromedp.ID("add-service-tier")),
		fill(`#tier-list li:nth-child(2) [data-field="service_tier"]`, "priority"),
		fill(`#tier-list li:nth-child(2) [data-field="multiplier"]`, "1.5"),
		chromedp.Click(chromedp.CSS(`#tier-list li:nth-child(2) details summary`)),
		fill(`#tier-list li:nth-child(2) [data-field="output_price"]`, "30"),
		// Enter in a field submits the form.
		chromedp.SendKeys(chromedp.ID("rf-model_match"), "\n"),
	)
	p.do("fill new rule", steps...)
	p.waitFor("editor closed and rule listed", fmt.Sprintf(`!document.getElementById("rule-dialog").open &&
		[...document.querySelectorAll("#rules tbody td.model")].some(td => td.textContent === %q)`, testModel))
	created := api.ruleByModel(testModel)
	ruleID := fmt.Sprint(created["id"])
	for f, want := range prices {
		if got := created[f]; got != want {
			t.Errorf("stored %s = %v, want %q exactly", f, got, want)
		}
	}
	if got := fmt.Sprint(created["provider_id"]); got != providerID {
		t.Errorf("stored provider_id = %s, want %s", got, providerID)
	}
	wantTiers := []any{
		map[string]any{"min_prompt_tokens": 200000, "multiplier": "2"},
		map[string]any{"service_tier": "priority", "multiplier": "1.5", "output_price": "30"},
	}
	if !jsonEqual(t, created["pricing_tiers_json"], wantTiers) {
		t.Errorf("stored tiers = %v, want %v", created["pricing_tiers_json"], wantTiers)
	}
	if got := p.text(fmt.Sprintf(`#rules tr[data-rule="%s"] td[data-label="Tiers"]`, ruleID)); got != "2" {
		t.Errorf("tier count shown = %q, want 2", got)
	}

	// Sorting by input price (exact decimal order, ties by id), then descending.
	p.do("sort by input", chromedp.Click(chromedp.CSS(`th[data-sort="input_price"] button`)))
	wantAsc := []string{seeded["gemini-2.5"], gpt, ruleID, seeded["claude-sonnet-4"]}
	if got := p.rowIDs(); !slices.Equal(got, wantAsc) {
		t.Errorf("rows sorted by input price = %v, want %v", got, wantAsc)
	}
	p.do("sort by input again", chromedp.Click(chromedp.CSS(`th[data-sort="input_price"] button`)))
	wantDesc := slices.Clone(wantAsc)
	slices.Reverse(wantDesc)
	if got := p.rowIDs(); !slices.Equal(got, wantDesc) {
		t.Errorf("rows sorted by input price descending = %v, want %v", got, wantDesc)
	}
	if got := eval[string](p, `document.querySelector('th[data-sort="input_price"]').getAttribute("aria-sort")`); got != "descending" {
		t.Errorf("aria-sort = %q, want descending", got)
	}
	p.do("sort by id", chromedp.Click(chromedp.CSS(`th[data-sort="id"] button`)))

	// Filters: model text, provider, match type, enabled.
	p.do("filter model", chromedp.SendKeys(chromedp.ID("filter-model"), "tg-console"))
	if got := p.rowIDs(); !slices.Equal(got, []string{ruleID}) {
		t.Errorf("rows with model filter = %v, want [%s]", got, ruleID)
	}
	p.do("clear filters", chromedp.Click(chromedp.ID("filter-clear")))
	p.do("filter disabled", choose("#filter-enabled", "false"))
	if got := p.rowIDs(); !slices.Equal(got, []string{seeded["gemini-2.5"]}) {
		t.Errorf("rows with enabled=false = %v, want [%s]", got, seeded["gemini-2.5"])
	}
	p.do("filter provider", choose("#filter-enabled", ""), choose("#filter-provider", providerID))
	if got := p.rowIDs(); !slices.Equal(got, []string{seeded["claude-sonnet-4"], ruleID}) {
		t.Errorf("rows for provider %s = %v, want [%s %s]", providerID, got, seeded["claude-sonnet-4"], ruleID)
	}
	p.do("filter global contains", choose("#filter-provider", "global"), choose("#filter-match", "contains"))
	if got := p.rowIDs(); !slices.Equal(got, []string{gpt, seeded["gemini-2.5"]}) {
		t.Errorf("global contains rows = %v, want [%s %s]", got, gpt, seeded["gemini-2.5"])
	}
	p.do("clear filters", chromedp.Click(chromedp.ID("filter-clear")))
	p.waitFor("all rows", `document.querySelectorAll("#rules tbody tr[data-rule]").length === 4`)

	// Edit: the form shows the stored values; change the output price.
	editBtn := fmt.Sprintf(`button[data-action="edit"][data-rule="%s"]`, ruleID)
	p.do("edit", chromedp.Click(chromedp.CSS(editBtn)))
	p.waitFor("editor", `document.getElementById("rule-dialog").open`)
	if got := eval[string](p, `document.getElementById("rf-input_price").value`); got != "2.50" {
		t.Errorf("editor input_price = %q, want 2.50", got)
	}
	if got := eval[string](p, `document.querySelector('#tier-list li:nth-child(2) [data-field="service_tier"]').value`); got != "priority" {
		t.Errorf("editor tier 2 service_tier = %q, want priority", got)
	}
	p.do("change output", fill("#rf-output_price", "12.5"), chromedp.Click(chromedp.ID("rule-save")))
	p.waitFor("saved", fmt.Sprintf(`!document.getElementById("rule-dialog").open &&
		document.querySelector('#rules tr[data-rule="%s"] td[data-label="Output"]').textContent === "12.5"`, ruleID))
	if got := api.rules()[ruleID]["output_price"]; got != "12.5" {
		t.Errorf("stored output_price after edit = %v, want 12.5", got)
	}

	// An invalid decimal: the browser's check names the field and nothing is sent.
	before := api.rules()[ruleID]
	rev := revision(t, db)
	p.do("edit again", chromedp.Click(chromedp.CSS(editBtn)))
	p.waitFor("editor", `document.getElementById("rule-dialog").open`)
	p.do("bad decimal", fill("#rf-input_price", "1,5"), chromedp.Click(chromedp.ID("rule-save")))
	p.waitFor("field error", visible("#rf-input_price-error"))
	if got := p.text("#rf-input_price-error"); !strings.Contains(got, "plain decimal") {
		t.Errorf("input_price error = %q, want a plain-decimal message", got)
	}
	if got := eval[string](p, `document.getElementById("rf-input_price").getAttribute("aria-invalid")`); got != "true" {
		t.Errorf("aria-invalid = %q, want true", got)
	}
	if got := eval[string](p, `document.activeElement.id`); got != "rf-input_price" {
		t.Errorf("focus after a field error = %q, want rf-input_price", got)
	}
	// Values only the server refuses (over 15 integer digits; a threshold beyond int64) come back as
	// 422 details, shown next to the price field and the tier entry's field.
	p.do("server-refused values", fill("#rf-input_price", "1234567890123456"),
		fill(`#tier-list li:nth-child(1) [data-field="min_prompt_tokens"]`, "99999999999999999999"),
		chromedp.Click(chromedp.ID("rule-save")))
	p.waitFor("server field errors", visible("#rf-input_price-error")+" && "+
		visible(`#tier-list li:nth-child(1) [data-error="min_prompt_tokens"]`))
	if got := p.text("#rf-input_price-error"); !strings.Contains(got, "integer digits") {
		t.Errorf("server input_price error = %q, want the API's message about integer digits", got)
	}
	if got := p.text(`#tier-list li:nth-child(1) [data-error="min_prompt_tokens"]`); !strings.Contains(got, "integer") {
		t.Errorf("server tier error = %q, want the API's message about the threshold", got)
	}
	if !eval[bool](p, `document.getElementById("rule-dialog").open`) {
		t.Error("the editor closed after a refused save")
	}
	p.do("scroll editor to top", chromedp.Evaluate[chromedp.Void](`document.querySelector("#rule-dialog .dialog-body").scrollTop = 0`))
	p.screenshot("console-pricing-errors-1280", 1280)
	// Escape closes the dialog and focus returns to the button that opened it.
	p.do("escape", chromedp.KeyEvent(kb.Escape))
	p.waitFor("editor closed, focus back on the edit button", fmt.Sprintf(`!document.getElementById("rule-dialog").open &&
		document.activeElement.matches(%q)`, editBtn))
	if after := api.rules()[ruleID]; !jsonEqual(t, after, before) {
		t.Errorf("rule changed after refused saves:\nbefore %v\nafter  %v", before, after)
	}
	if got := revision(t, db); got != rev {
		t.Errorf("config revision moved from %d to %d: a refused save wrote something", rev, got)
	}

	// Enable/disable toggle.
	sw := fmt.Sprintf(`input.switch[data-rule="%s"]`, ruleID)
	p.do("disable", chromedp.Click(chromedp.CSS(sw)))
	p.waitFor("disabled", fmt.Sprintf(`!document.querySelector(%q).checked && !document.querySelector(%q).disabled`, sw, sw))
	if got := api.rules()[ruleID]["enabled"]; got != false {
		t.Errorf("stored enabled after toggle = %v, want false", got)
	}
	p.do("enable", chromedp.Click(chromedp.CSS(sw)))
	p.waitFor("enabled", fmt.Sprintf(`document.querySelector(%q).checked && !document.querySelector(%q).disabled`, sw, sw))
	if got := api.rules()[ruleID]["enabled"]; got != true {
		t.Errorf("stored enabled after second toggle = %v, want true", got)
	}

	// Quote: 250,000 input tokens reach the 200,000 threshold (×2), "fast" is the priority entry
	// (×1.5, output overridden at 30): 250000×7.5/1e6 + 1000×30/1e6 = 1.905 dollars.
	p.do("quote", choose("#q-provider", providerID), fill("#q-model", testModel), fill("#q-service_tier", "fast"),
		fill("#q-input_tokens", "250000"), fill("#q-output_tokens", "1000"), chromedp.SendKeys(chromedp.ID("q-output_tokens"), "\n"))
	p.waitFor("quote result", visible("#quote-result [data-out=cost]"))
	pid := json.Number(providerID)
	want := api.must("POST", "/admin/price-rules/quote", map[string]any{"provider_id": pid, "model": testModel,
		"service_tier": "fast", "usage": map[string]any{"input_tokens": 250000, "output_tokens": 1000}})
	if got := p.text("#quote-result [data-out=cost]"); got != "$"+want["cost"].(string) {
		t.Errorf("quoted cost = %q, want $%v", got, want["cost"])
	}
	if got := p.text("#quote-result [data-out=cost_micros]"); got != "1905000" || got != fmt.Sprint(want["cost_micros"]) {
		t.Errorf("quoted cost_micros = %q, want 1905000 (API says %v)", got, want["cost_micros"])
	}
	if got := p.text("#quote-result [data-out=price_rule_id]"); !strings.HasPrefix(got, "rule "+ruleID+" ") {
		t.Errorf("quoted rule = %q, want rule %s", got, ruleID)
	}
	if got := p.text("#quote-result [data-out=prompt_tier]"); !strings.Contains(got, "entry 1") || !strings.Contains(got, "200000") {
		t.Errorf("prompt tier = %q, want entry 1 (≥ 200000 prompt tokens)", got)
	}
	if got := p.text("#quote-result [data-out=service_tier]"); !strings.Contains(got, "entry 2") || !strings.Contains(got, "priority") {
		t.Errorf("service tier = %q, want entry 2 (priority)", got)
	}
	rates := want["rates"].(map[string]any)
	for f := range prices {
		if got := p.text(fmt.Sprintf(`#quote-result [data-rate=%q]`, f)); got != rates[f] {
			t.Errorf("rate %s shown as %q, want %v", f, got, rates[f])
		}
	}

	// Review screenshots: the list with the quote at both widths, and the editor.
	p.do("blur", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	p.screenshot("console-pricing-1280", 1280)
	p.screenshot("console-pricing-390", 390)
	p.do("editor for screenshot", chromedp.EmulateViewport(1280, 900), chromedp.Click(chromedp.CSS(editBtn)))
	p.waitFor("editor", `document.getElementById("rule-dialog").open`)
	if !eval[bool](p, `document.querySelector("#tier-list li:nth-child(2) details").open`) {
		t.Error("the overrides of a tier entry that has one are collapsed in the editor")
	}
	// Every control has a label (the editor with its tier entries is the densest part of the page).
	if unlabeled := eval[[]string](p, `[...document.querySelectorAll("input, select, textarea, button")]
		.filter(e => e.type !== "hidden" && !(e.labels && e.labels.length) && !e.getAttribute("aria-label") &&
			!e.getAttribute("aria-labelledby") && !(e.tagName === "BUTTON" && e.textContent.trim()))
		.map(e => e.outerHTML.slice(0, 120))`); len(unlabeled) > 0 {
		t.Errorf("controls without a label: %q", unlabeled)
	}
	p.do("scroll to tiers", chromedp.Evaluate[chromedp.Void](`document.querySelector("#rule-dialog .tiers").scrollIntoView({block: "start"})`))
	p.screenshot("console-pricing-editor-1280", 1280)
	p.do("close editor", chromedp.KeyEvent(kb.Escape))
	p.waitFor("editor closed", fmt.Sprintf(`!document.getElementById("rule-dialog").open && document.activeElement.matches(%q)`, editBtn))

	// A scheduled change: the editor's "Effective at" field schedules the edit instead of applying it;
	// the list shows a "scheduled" badge; the editor then shows the scheduled version with its time;
	// refusals land next to the field; the change can be cancelled from the editor.
	storedInput := api.rules()[ruleID]["input_price"]
	p.do("edit to schedule", chromedp.Click(chromedp.CSS(editBtn)))
	p.waitFor("editor", `document.getElementById("rule-dialog").open`)
	p.do("schedule a price an hour ahead", fill("#rf-input_price", "9.5"),
		chromedp.Evaluate[chromedp.Void](`(() => { const d = new Date(Date.now() + 3600e3), p = (n) => String(n).padStart(2, "0");
			document.getElementById("rf-effective_at").value = d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) +
				"T" + p(d.getHours()) + ":" + p(d.getMinutes()) + ":00"; })()`),
		chromedp.Click(chromedp.ID("rule-save")))
	badge := fmt.Sprintf(`#rules tr[data-rule="%s"] .badge-scheduled`, ruleID)
	p.waitFor("scheduled badge", `!document.getElementById("rule-dialog").open && `+visible(badge))
	if got := p.text(badge); !strings.HasPrefix(got, "scheduled") {
		t.Errorf("badge text = %q, want it to start with \"scheduled\"", got)
	}
	_, rawSched := api.call("GET", "/admin/price-rules/scheduled", nil)
	sched := decode(t, rawSched)["items"].([]any)
	if len(sched) != 1 {
		t.Fatalf("scheduled versions after the save = %v, want 1", sched)
	}
	sp := sched[0].(map[string]any)
	if fmt.Sprint(sp["price_rule_id"]) != ruleID || sp["rule"].(map[string]any)["input_price"] != "9.5" {
		t.Errorf("scheduled version = %v, want rule %s at input 9.5", sp, ruleID)
	}
	if got := api.rules()[ruleID]["input_price"]; got != storedInput {
		t.Errorf("the rule changed before its instant: input %v, want %v", got, storedInput)
	}
	p.do("blur", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	p.screenshot("console-pricing-scheduled-1280", 1280)
	p.screenshot("console-pricing-scheduled-390", 390)
	p.do("open the scheduled version", chromedp.EmulateViewport(1280, 900), chromedp.Click(chromedp.CSS(editBtn)))
	p.waitFor("editor with the scheduled version", `document.getElementById("rule-dialog").open && `+visible("#rf-scheduled"))
	if got := eval[string](p, `document.getElementById("rf-input_price").value`); got != "9.5" {
		t.Errorf("editor shows input %q, want the scheduled 9.5", got)
	}
	// The field holds local time (the browser drops ":00" seconds): compare the instants.
	if !eval[bool](p, fmt.Sprintf(`new Date(document.getElementById("rf-effective_at").value).getTime() === new Date(%q).getTime()`, sp["effective_at"])) {
		t.Errorf("effective at field = %q, want the scheduled time %v", eval[string](p, `document.getElementById("rf-effective_at").value`), sp["effective_at"])
	}
	p.screenshot("console-pricing-scheduled-editor-1280", 1280)
	// A past time is refused by the API, next to the field, focus on it.
	p.do("past time", chromedp.Evaluate[chromedp.Void](`document.getElementById("rf-effective_at").value = "2020-01-01T00:00:00"`),
		chromedp.Click(chromedp.ID("rule-save")))
	p.waitFor("effective_at error", visible("#rf-effective_at-error")+` && document.activeElement.id === "rf-effective_at"`)
	if got := p.text("#rf-effective_at-error"); !strings.Contains(got, "in the future") {
		t.Errorf("effective_at error = %q, want the API's message", got)
	}
	// Without a time the edit would apply now, which a pending change forbids: 409, shown at the field.
	p.do("no time", chromedp.Evaluate[chromedp.Void](`document.getElementById("rf-effective_at").value = ""`),
		chromedp.Click(chromedp.ID("rule-save")))
	p.waitFor("conflict at the field", visible("#rf-effective_at-error")+` && document.getElementById("rf-effective_at-error").textContent.includes("scheduled change pending")`)
	// Cancel it from the editor (keyboard: the button takes Enter).
	p.do("cancel the scheduled change", chromedp.Focus(chromedp.ID("rf-cancel-schedule")), chromedp.KeyEvent(kb.Enter))
	p.waitFor("badge gone", `!document.getElementById("rule-dialog").open && !document.querySelector(`+fmt.Sprintf("%q", badge)+`)`)
	_, rawSched = api.call("GET", "/admin/price-rules/scheduled", nil)
	if left := decode(t, rawSched)["items"].([]any); len(left) != 0 {
		t.Errorf("scheduled versions after cancel = %v, want none", left)
	}
	if got := api.rules()[ruleID]["input_price"]; got != storedInput {
		t.Errorf("input after cancel = %v, want %v", got, storedInput)
	}

	// Export downloads the API's bundle.
	p.do("export", chromedp.Click(chromedp.ID("export")))
	var exported []byte
	deadline := time.Now().Add(waitTimeout)
	for exported == nil {
		matches, _ := filepath.Glob(filepath.Join(downloads, "tollgate-pricing-*.json"))
		if len(matches) == 1 {
			exported, _ = os.ReadFile(matches[0])
		}
		if time.Now().After(deadline) {
			t.Fatalf("no export download in %s (found %v)", downloads, matches)
		}
		time.Sleep(25 * time.Millisecond)
	}
	_, apiExport := api.call("GET", "/admin/export", nil)
	if !jsonEqual(t, decode(t, exported), decode(t, apiExport)) {
		t.Errorf("downloaded export differs from GET /admin/export:\n%s\nvs\n%s", exported, apiExport)
	}

	// Import: a bundle with a malformed decimal is refused, every problem listed, nothing written.
	rev = revision(t, db)
	badBundle := `{"price_rules":[{"id":` + importedRuleID + `,"provider_id":null,"match_type":"exact","model_match":"tg-imported",` +
		`"input_price":"abc","output_price":"1","cache_read_price":"0","cache_creation_5m_price":"0","cache_creation_30m_price":"0",` +
		`"cache_creation_1h_price":"0","image_output_price":"0","enabled":true,"pricing_tiers_json":[]}],"routing_rules":[]}`
	p.do("open import", chromedp.Click(chromedp.ID("open-import")))
	p.waitFor("import dialog", `document.getElementById("import-dialog").open`)
	p.do("bad import", setText("#import-text", badBundle), chromedp.Click(chromedp.CSS(`#import-form button[type=submit]`)))
	p.waitFor("import error", visible("#import-error li"))
	if got := p.text("#import-error"); !strings.Contains(got, "price_rules[0].input_price") || !strings.Contains(got, "Nothing was imported") {
		t.Errorf("import error = %q, want it to name price_rules[0].input_price", got)
	}
	if _, ok := api.rules()[importedRuleID]; ok {
		t.Error("a refused import stored a rule")
	}
	if got := revision(t, db); got != rev {
		t.Errorf("config revision moved from %d to %d on a refused import", rev, got)
	}
	// The good bundle comes from a file, as an operator would import an export.
	goodBundle := strings.Replace(badBundle, `"input_price":"abc"`, `"input_price":"0.000001"`, 1)
	bundleFile := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(bundleFile, []byte(goodBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	p.do("choose file", chromedp.SetUploadFiles(chromedp.ID("import-file"), []string{bundleFile}))
	p.waitFor("file read into the text box", fmt.Sprintf(`document.getElementById("import-text").value === %q`, goodBundle))
	p.do("good import", chromedp.Click(chromedp.CSS(`#import-form button[type=submit]`)))
	p.waitFor("imported rule listed", fmt.Sprintf(`!document.getElementById("import-dialog").open &&
		!!document.querySelector('#rules tr[data-rule="%s"]')`, importedRuleID))
	if got := api.rules()[importedRuleID]; got == nil || got["input_price"] != "0.000001" {
		t.Errorf("imported rule = %v, want input_price 0.000001", got)
	}

	// Delete asks first: Escape cancels, Delete deletes.
	delBtn := fmt.Sprintf(`button[data-action="delete"][data-rule="%s"]`, ruleID)
	p.do("delete", chromedp.Click(chromedp.CSS(delBtn)))
	p.waitFor("confirm dialog", `document.getElementById("confirm-dialog").open`)
	if got := eval[string](p, `document.activeElement.textContent`); got != "Cancel" {
		t.Errorf("confirmation focus = %q, want Cancel", got)
	}
	p.do("escape", chromedp.KeyEvent(kb.Escape))
	p.waitFor("confirm closed, focus back on Delete", fmt.Sprintf(`!document.getElementById("confirm-dialog").open &&
		document.activeElement.matches(%q)`, delBtn))
	if _, ok := api.rules()[ruleID]; !ok {
		t.Fatal("Escape on the confirmation deleted the rule")
	}
	p.do("delete for real", chromedp.Click(chromedp.CSS(delBtn)))
	p.waitFor("confirm dialog", `document.getElementById("confirm-dialog").open`)
	p.do("confirm", chromedp.Click(chromedp.ID("confirm-delete")))
	p.waitFor("row gone", fmt.Sprintf(`!document.getElementById("confirm-dialog").open && !document.querySelector('#rules tr[data-rule="%s"]')`, ruleID))
	if status, body := api.call("GET", "/admin/price-rules/"+ruleID, nil); status != http.StatusNotFound {
		t.Errorf("GET deleted rule = %d %s, want 404", status, body)
	}

	// A viewer token in a fresh tab (its own session storage) sees everything read-only.
	v := newTab(t, browserCtx)
	defer v.checkConsole()
	v.do("viewer opens console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/#pricing"))
	v.waitFor("sign-in form", visible("#signin-token"))
	v.do("viewer signs in", chromedp.SendKeys(chromedp.ID("signin-token"), viewerToken+"\n"))
	v.waitFor("viewer rule list", `document.querySelectorAll("#rules tbody tr[data-rule]").length === 4`)
	if got := v.text("#identity"); got != "console-test-viewer · viewer (read-only)" {
		t.Errorf("viewer identity = %q, want viewer", got)
	}
	if !eval[bool](v, visible("#readonly-notice")) {
		t.Error("viewer: no read-only notice")
	}
	for _, sel := range []string{"#new-rule", "#open-import", "button[data-action=delete]"} {
		if eval[bool](v, visible(sel)) {
			t.Errorf("viewer: %s is visible", sel)
		}
	}
	if n := eval[int](v, `[...document.querySelectorAll("input.switch")].filter(s => !s.disabled).length`); n != 0 {
		t.Errorf("viewer: %d enable toggles are usable", n)
	}
	if !eval[bool](v, visible("#export")) {
		t.Error("viewer: export is hidden; reading is allowed")
	}
	v.do("viewer views a rule", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action="edit"][data-rule="%s"]`, seeded["claude-sonnet-4"]))))
	v.waitFor("viewer dialog", `document.getElementById("rule-dialog").open`)
	if !eval[bool](v, `document.getElementById("rule-fields").disabled && document.getElementById("rule-save").hidden`) {
		t.Error("viewer: the rule form is editable or has a save button")
	}
	if got := eval[string](v, `document.getElementById("rf-input_price").value`); got != "3" {
		t.Errorf("viewer: input_price shown as %q, want 3", got)
	}
	v.do("viewer closes", chromedp.KeyEvent(kb.Escape))
	v.waitFor("viewer dialog closed, focus back on View", `!document.getElementById("rule-dialog").open &&
		document.activeElement.dataset.action === "edit"`)
	v.do("viewer quotes", fill("#q-model", "gpt-4o-mini"), fill("#q-input_tokens", "1000000"), chromedp.SendKeys(chromedp.ID("q-input_tokens"), "\n"))
	v.waitFor("viewer quote", visible("#quote-result [data-out=cost]"))
	if got := v.text("#quote-result [data-out=cost]"); got != "$2.50" && got != "$2.5" {
		t.Errorf("viewer quote for 1M gpt-4o-mini input tokens = %q, want $2.50\n%s\nAPI: %v", got, v.debugState(),
			api.must("POST", "/admin/price-rules/quote", map[string]any{"model": "gpt-4o-mini", "usage": map[string]any{"input_tokens": 1000000}}))
	}

	// Revoking the viewer's token sends its tab back to the sign-in screen on the next call.
	if status, body := api.call("DELETE", "/admin/admin-tokens/"+fmt.Sprint(viewer["id"]), nil); status != http.StatusNoContent {
		t.Fatalf("revoke viewer token = %d %s", status, body)
	}
	v.do("viewer reloads", chromedp.Click(chromedp.ID("reload")))
	v.waitFor("sign-in after revocation", visible("#signin-error"))
	if got := v.text("#signin-error"); !strings.Contains(got, "no longer accepted") {
		t.Errorf("after revocation the sign-in says %q, want that the token is no longer accepted", got)
	}
	if got := eval[string](v, `sessionStorage.getItem("tollgate.console.token") ?? ""`); got != "" {
		t.Errorf("revoked token still in session storage: %q", got)
	}

	// Sign out forgets the admin token.
	p.do("sign out", chromedp.Click(chromedp.ID("sign-out")))
	p.waitFor("sign-in form", visible("#signin-token"))
	if got := eval[string](p, `sessionStorage.getItem("tollgate.console.token") ?? ""`); got != "" {
		t.Errorf("token still in session storage after sign-out: %q", got)
	}
}

// startBrowser starts Debian's Chromium headless for one test, with the flags this machine needs (no
// sandbox as root, no background networking, component updates, sync or QUIC: the network is closed) and
// a fresh profile; with downloads set, files the page downloads are saved there. It stops with the test.
func startBrowser(t *testing.T, downloads string) context.Context {
	t.Helper()
	chromium := findChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	if downloads != "" {
		if _, err := chromedp.CallBrowser(browserCtx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
			t.Fatalf("set download directory: %v", err)
		}
	}
	return browserCtx
}
