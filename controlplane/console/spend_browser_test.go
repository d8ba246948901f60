package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// seedUsage settles 60 requests over the last three UTC days (today included), every model on every day: three models, two teams,
// keys 1–3, costs with many decimals.
func seedUsage(t *testing.T, db *storetest.DB) {
	t.Helper()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	models := []string{"gpt-4o", "claude-sonnet", "llama-70b"}
	costs := []string{"0.012345678", "0.5", "1.25", "0.000001", "0.3333"}
	var rows []store.UsageRow
	for i := range 60 {
		org, team, key := int64(1), int64(1+i%2), int64(1+i%3)
		rows = append(rows, store.UsageRow{RequestID: fmt.Sprintf("req-console-%02d", i), OrgID: &org, TeamID: &team, APIKeyID: &key,
			LogicalModel: models[i%3], UpstreamModel: models[i%3] + "-2026", Operation: "generate_content",
			InboundKind: "alpha_chat_completions", InputTokens: int64(100 + i), OutputTokens: int64(20 + i), Cost: costs[i%5],
			Source: "upstream", EndState: "completed", HTTPStatus: 200,
			CreatedAt: today.Add(-time.Duration(i/3%3) * 24 * time.Hour).Add(time.Duration(i%20) * 30 * time.Minute)})
	}
	if _, err := store.SettleUsages(context.Background(), db.Pool, rows); err != nil {
		t.Fatal(err)
	}
}

func sqlText(t *testing.T, db *storetest.DB, sql string, args ...any) string {
	t.Helper()
	var s string
	if err := db.Pool.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSpendPagesInChromium drives the Overview, Spend, Usage, Providers, Routes and Admin tokens pages and screenshots them.
func TestSpendPagesInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	seedUsage(t, db)
	downloads := t.TempDir()
	browserCtx := startBrowser(t, downloads)
	p := newTab(t, browserCtx)
	defer p.checkConsole()

	// Overview is the landing page.
	p.do("open console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("overview", visible("#ov-today"))
	today := time.Now().UTC().Truncate(24 * time.Hour)
	todaySum := sqlText(t, db, `SELECT trim_scale(sum(cost))::text FROM usages WHERE created_at >= $1`, today)
	if got := p.text("#ov-today .card-sub"); got != "21 requests" {
		t.Errorf("today's requests %q, want 21 requests (today sums to $%s)", got, todaySum)
	}
	if got := p.text("#ov-month .card-value"); got != "$25.15" {
		t.Errorf("30-day card %q, want $25.15", got)
	}
	if got := p.text("#ov-dataplanes .card-value"); got != "None" {
		t.Errorf("data-plane card %q, want None (no data plane runs in this test)", got)
	}
	if got := p.text("#ov-snapshot .card-value"); got != "Published" {
		t.Errorf("snapshot card %q", got)
	}
	if got := p.text("#ov-models tbody"); !strings.Contains(got, "gpt-4o") || !strings.Contains(got, "llama-70b") {
		t.Errorf("top models %q", got)
	}
	if cur := eval[string](p, `document.querySelector('#sections a[aria-current="page"]').getAttribute("href")`); cur != "#overview" {
		t.Errorf("current nav link %s", cur)
	}
	p.screenshot("console-overview-1280", 1280)
	p.screenshot("console-overview-390", 390)

	// Spend: by day stacked by model; the table's total is exact and equals the usage rows.
	p.do("spend page", chromedp.EmulateViewport(1280, 900), chromedp.Click(chromedp.CSS(`#sections a[href="#spend"]`)))
	p.waitFor("spend table", visible("#sp-table tr.total"))
	allSum := sqlText(t, db, `SELECT trim_scale(sum(cost))::text FROM usages`)
	if got := p.text("#sp-table tr.total td.mono"); got != allSum {
		t.Errorf("table total %q, want %s (sum of usages.cost)", got, allSum)
	}
	if n := eval[int](p, `document.querySelectorAll("#sp-chart canvas").length`); n != 1 {
		t.Errorf("%d chart canvases", n)
	}
	if got := eval[[]string](p, `[...document.querySelectorAll("#sp-legend .legend-item")].map(e => e.textContent)`); len(got) != 3 {
		t.Errorf("legend %v, want the three models", got)
	}
	// A client-side error, then one only the API finds, each next to its field.
	p.do("bad top", fill("#sp-top", "many"), chromedp.Click(chromedp.CSS(`#sp-form button[type=submit]`)))
	p.waitFor("top error", visible("#sp-top-error"))
	if got := eval[string](p, `document.activeElement.id`); got != "sp-top" {
		t.Errorf("focus after the error on %q", got)
	}
	p.do("good top, bad org", fill("#sp-top", "2"), fill("#sp-f-org", "0"), chromedp.Click(chromedp.CSS(`#sp-form button[type=submit]`)))
	p.waitFor("org error from the API", visible("#sp-f-org-error"))
	if got := p.text("#sp-f-org-error"); !strings.Contains(got, "positive integer") {
		t.Errorf("org error %q", got)
	}
	if visible := eval[bool](p, `!document.getElementById("sp-top-error").hidden`); visible {
		t.Error("the fixed top field still shows its error")
	}
	p.do("by team, top 2", fill("#sp-f-org", ""), choose("#sp-group", "team"), chromedp.Click(chromedp.CSS(`#sp-form button[type=submit]`)))
	p.waitFor("team legend", `document.querySelectorAll("#sp-legend .legend-item").length === 2 && !document.querySelector("#sp-f-org-error:not([hidden])")`)
	p.do("by model again", choose("#sp-group", "logical_model"), fill("#sp-top", "8"), chromedp.Click(chromedp.CSS(`#sp-form button[type=submit]`)))
	p.waitFor("model legend", `document.querySelectorAll("#sp-legend .legend-item").length === 3`)
	p.screenshot("console-spend-1280", 1280)
	p.screenshot("console-spend-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))
	// CSV: the download is the API's CSV byte for byte.
	p.do("csv", chromedp.Click(chromedp.ID("sp-csv")))
	var got []byte
	deadline := time.Now().Add(waitTimeout)
	for got == nil {
		if m, _ := filepath.Glob(filepath.Join(downloads, "tollgate-spend-*.csv")); len(m) == 1 {
			got, _ = os.ReadFile(m[0])
		}
		if time.Now().After(deadline) {
			t.Fatal("no CSV download")
		}
		time.Sleep(25 * time.Millisecond)
	}
	since := today.Add(-29 * 24 * time.Hour).Format(time.RFC3339)
	until := today.Add(24 * time.Hour).Format(time.RFC3339)
	_, want := api.call("GET", "/admin/spend?since="+since+"&until="+until+"&bucket=day&group_by=logical_model&top=8&format=csv", nil)
	if string(got) != string(want) || !strings.Contains(string(got), "gpt-4o") {
		t.Errorf("downloaded CSV:\n%s\nAPI CSV:\n%s", got, want)
	}

	// Usage explorer: find one request by id and open its full row.
	p.do("usage page", chromedp.Click(chromedp.CSS(`#sections a[href="#usage"]`)))
	p.waitFor("usage rows", `document.querySelectorAll("#us-table tbody tr").length === 50 && !document.getElementById("us-more").hidden`)
	p.do("more", chromedp.Click(chromedp.ID("us-more")))
	p.waitFor("all rows", `document.querySelectorAll("#us-table tbody tr").length === 60 && document.getElementById("us-more").hidden`)
	p.do("model and team", fill("#us-logical_model", "gpt-4o"), fill("#us-team_id", "1"), chromedp.Click(chromedp.CSS(`#us-form button[type=submit]`)))
	p.waitFor("filtered rows", `document.querySelectorAll("#us-table tbody tr").length === 10`)
	if got := eval[[]string](p, `[...document.querySelectorAll("#us-table tbody tr td:nth-child(3)")].map(td => td.textContent)`); strings.Join(got, ",") != strings.Repeat("gpt-4o,", 9)+"gpt-4o" {
		t.Errorf("filtered models %v", got)
	}
	p.screenshot("console-usage-1280", 1280)
	p.screenshot("console-usage-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))
	p.do("bad key id", fill("#us-api_key_id", "x"), chromedp.Click(chromedp.CSS(`#us-form button[type=submit]`)))
	p.waitFor("key id error", visible("#us-api_key_id-error"))
	p.do("by request id", fill("#us-api_key_id", ""), fill("#us-logical_model", ""), fill("#us-team_id", ""), fill("#us-request_id", "req-console-07"), chromedp.Click(chromedp.CSS(`#us-form button[type=submit]`)))
	p.waitFor("one row", `document.querySelectorAll("#us-table tbody tr").length === 1`)
	p.do("details", chromedp.Click(chromedp.CSS(`#us-table tbody button`)))
	p.waitFor("detail dialog", `document.getElementById("us-dialog").open`)
	detail := p.text("#us-detail")
	for _, w := range []string{"req-console-07", "claude-sonnet-2026", "1.25", "alpha_chat_completions"} {
		if !strings.Contains(detail, w) {
			t.Errorf("detail %q lacks %q", detail, w)
		}
	}
	p.screenshot("console-usage-detail-1280", 1280)
	p.do("escape", chromedp.KeyEvent("\x1b"))
	p.waitFor("dialog closed", `!document.getElementById("us-dialog").open && document.activeElement.matches("#us-table tbody button")`)

	// Providers: a credential is added (write-only: the page never shows it; the API stores it), a routing
	// cell is edited to transform_to (the API's refusal lands next to its field first), then reset.
	prov := api.must("POST", "/admin/providers", map[string]any{"name": "alpha-main", "channel_type": "alpha",
		"base_url": "http://127.0.0.1:9/v1", "enabled": true, "settings": map[string]any{}})
	pid := fmt.Sprint(prov["id"])
	p.do("providers page", chromedp.Click(chromedp.CSS(`#sections a[href="#providers"]`)))
	p.waitFor("routing grid", `document.querySelectorAll("#pv-grid button.cell").length > 0`)
	cells := eval[int](p, `document.querySelectorAll("#pv-grid button.cell").length`)
	p.do("bad weight", fill("#pv-secret", "sk-test-secret-123"), fill("#pv-weight", "0"), chromedp.Click(chromedp.CSS(`#pv-cred-form button[type=submit]`)))
	p.waitFor("weight error", visible("#pv-weight-error"))
	p.do("add credential", fill("#pv-weight", "3"), chromedp.Click(chromedp.CSS(`#pv-cred-form button[type=submit]`)))
	p.waitFor("credential listed", `document.querySelectorAll("#pv-creds tbody tr").length === 1`)
	if body := eval[string](p, `document.body.innerText`); strings.Contains(body, "sk-test-secret-123") {
		t.Error("the page shows the credential's secret")
	}
	if v := eval[string](p, `document.getElementById("pv-secret").value`); v != "" {
		t.Errorf("secret field keeps %q after saving", v)
	}
	stored := api.must("GET", "/admin/providers/"+pid, nil)
	if creds := stored["credentials"].([]any); len(creds) != 1 || fmt.Sprint(creds[0].(map[string]any)["weight"]) != "3" {
		t.Errorf("stored credentials %v", creds)
	}
	const cell = "generate_content|alpha_chat_completions"
	op, kind, _ := strings.Cut(cell, "|")
	p.do("edit cell", chromedp.Click(chromedp.CSS(`#pv-grid button[data-cell="`+cell+`"]`)))
	p.waitFor("cell dialog", `document.getElementById("pv-cell").open && document.activeElement.id === "pv-impl"`)
	p.do("transform without kind", choose("#pv-impl", "transform_to"), chromedp.Click(chromedp.ID("pv-cell-save")))
	p.waitFor("dest kind error", visible("#pv-dest-kind-error"))
	p.do("unknown kind", fill("#pv-dest-kind", "no_such_kind"), chromedp.Click(chromedp.ID("pv-cell-save")))
	p.waitFor("API error next to dest kind", `document.getElementById("pv-dest-kind-error").textContent.length > 0 && document.getElementById("pv-dest-kind").getAttribute("aria-invalid") === "true" && document.getElementById("pv-cell").open`)
	p.do("valid kind", fill("#pv-dest-kind", "alpha_responses"), chromedp.Click(chromedp.ID("pv-cell-save")))
	p.waitFor("cell saved", `!document.getElementById("pv-cell").open && !!document.querySelector('#pv-grid button[data-cell="`+cell+`"].cell-transform_to')`)
	var stRules struct {
		Items []map[string]any `json:"items"`
	}
	_, raw := api.call("GET", "/admin/providers/"+pid+"/routing-rules", nil)
	if err := json.Unmarshal(raw, &stRules); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range stRules.Items {
		if r["operation"] == op && r["kind"] == kind {
			found = r["implementation"] == "transform_to" && r["dest_kind"] == "alpha_responses"
		}
	}
	if !found {
		t.Errorf("stored cell %s is not transform_to alpha_responses: %s", cell, raw)
	}
	p.screenshot("console-providers-1280", 1280)
	p.screenshot("console-providers-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))
	p.do("reset", chromedp.Click(chromedp.ID("pv-reset")))
	p.waitFor("cell back to default", `!!document.querySelector('#pv-grid button[data-cell="`+cell+`"].cell-passthrough')`)
	if n := eval[int](p, `document.querySelectorAll("#pv-grid button.cell").length`); n != cells {
		t.Errorf("%d cells after reset, want %d", n, cells)
	}

	// Routes: create one with two members (a client-side error, then the API's duplicate alias, each next
	// to its field), check what was stored, delete it after confirming.
	p.do("routes page", chromedp.Click(chromedp.CSS(`#sections a[href="#routes"]`)))
	p.waitFor("routes page", visible("#rt-new"))
	p.do("new route", chromedp.Click(chromedp.ID("rt-new")))
	p.waitFor("route dialog", `document.getElementById("rt-dialog").open && document.activeElement.id === "rt-name"`)
	p.do("fill route", fill("#rt-name", "chat-default"), fill("#rt-aliases", "chat, chat"), fill("#rt-m0-upstream_model_id", "gpt-4o-2026"),
		chromedp.Click(chromedp.ID("rt-add-member")), fill("#rt-m1-upstream_model_id", "gpt-4o-mini"), fill("#rt-m1-priority", "1"),
		fill("#rt-m1-weight", "x"), chromedp.Click(chromedp.ID("rt-save")))
	p.waitFor("weight error", visible("#rt-m1-weight-error"))
	p.do("good weight", fill("#rt-m1-weight", "5"), chromedp.Click(chromedp.ID("rt-save")))
	p.waitFor("alias error from the API", `document.getElementById("rt-aliases-error").textContent.includes("duplicate") && document.getElementById("rt-dialog").open`)
	p.screenshot("console-routes-editor-1280", 1280)
	p.do("one alias", fill("#rt-aliases", "chat"), chromedp.Click(chromedp.ID("rt-save")))
	p.waitFor("route listed", `!document.getElementById("rt-dialog").open && document.querySelector("#rt-table tbody")?.textContent.includes("chat-default")`)
	var routes struct {
		Items []struct {
			Name    string   `json:"name"`
			Aliases []string `json:"aliases"`
			Members []struct {
				UpstreamModelID string `json:"upstream_model_id"`
				Priority        int    `json:"priority"`
				Weight          int    `json:"weight"`
			} `json:"members"`
		} `json:"items"`
	}
	_, raw = api.call("GET", "/admin/routes", nil)
	if err := json.Unmarshal(raw, &routes); err != nil {
		t.Fatal(err)
	}
	if len(routes.Items) != 1 || routes.Items[0].Name != "chat-default" || strings.Join(routes.Items[0].Aliases, ",") != "chat" ||
		len(routes.Items[0].Members) != 2 || routes.Items[0].Members[1].Weight+routes.Items[0].Members[0].Weight != 6 {
		t.Errorf("stored routes %s", raw)
	}
	p.screenshot("console-routes-1280", 1280)
	p.screenshot("console-routes-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))
	p.do("delete route", chromedp.Click(chromedp.CSS(`#rt-table button[aria-label="Delete route chat-default"]`)))
	p.waitFor("confirm", `document.getElementById("rt-confirm").open && document.activeElement.id === "rt-confirm-cancel"`)
	p.do("confirm", chromedp.Click(chromedp.ID("rt-confirm-delete")))
	p.waitFor("route gone", `!document.querySelector("#rt-table tbody")`)
	if _, raw := api.call("GET", "/admin/routes", nil); strings.Contains(string(raw), "chat-default") {
		t.Errorf("route still stored: %s", raw)
	}

	// Admin tokens: create one (shown once, and it works), then delete it after confirming.
	p.do("tokens page", chromedp.Click(chromedp.CSS(`#sections a[href="#tokens"]`)))
	p.waitFor("token form", visible("#tk-name"))
	p.do("nameless", chromedp.Click(chromedp.CSS(`#tk-form button[type=submit]`)))
	p.waitFor("name error", visible("#tk-name-error"))
	p.do("create", fill("#tk-name", "ci-reader"), choose("#tk-role", "viewer"), chromedp.Click(chromedp.CSS(`#tk-form button[type=submit]`)))
	p.waitFor("token shown", visible("#tk-secret"))
	secret := p.text("#tk-secret")
	if status, body := (adminAPI{t: t, base: base, token: secret}).call("GET", "/admin/whoami", nil); status != 200 || !strings.Contains(string(body), "ci-reader") {
		t.Errorf("the shown token: whoami = %d %s", status, body)
	}
	p.waitFor("listed", `[...document.querySelectorAll("#tk-table tbody tr")].some(r => r.textContent.includes("ci-reader"))`)
	p.do("hide secret for the screenshot", chromedp.Evaluate[chromedp.Void](`document.getElementById("tk-secret").textContent = "tg_admin_…(shown once)"`))
	p.screenshot("console-tokens-1280", 1280)
	p.screenshot("console-tokens-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))
	p.do("delete", chromedp.Click(chromedp.CSS(`#tk-table button[aria-label="Delete token ci-reader"]`)))
	p.waitFor("confirm", `document.getElementById("tk-confirm").open && document.activeElement.id === "tk-cancel"`)
	p.do("escape cancels", chromedp.KeyEvent("\x1b"))
	p.waitFor("closed", `!document.getElementById("tk-confirm").open`)
	if status, _ := (adminAPI{t: t, base: base, token: secret}).call("GET", "/admin/whoami", nil); status != 200 {
		t.Errorf("cancelled delete: token answers %d", status)
	}
	p.do("delete again", chromedp.Click(chromedp.CSS(`#tk-table button[aria-label="Delete token ci-reader"]`)))
	p.waitFor("confirm", `document.getElementById("tk-confirm").open`)
	p.do("confirm", chromedp.Click(chromedp.ID("tk-confirm-delete")))
	p.waitFor("gone", `![...document.querySelectorAll("#tk-table tbody tr")].some(r => r.textContent.includes("ci-reader"))`)
	if status, _ := (adminAPI{t: t, base: base, token: secret}).call("GET", "/admin/whoami", nil); status != 401 {
		t.Errorf("deleted token answers %d, want 401", status)
	}

	// A viewer token sees the same pages read-only.
	viewer := api.must("POST", "/admin/admin-tokens", map[string]any{"name": "console-viewer", "role": "viewer"})["token"].(string)
	p.do("sign out", chromedp.Click(chromedp.ID("sign-out")))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("viewer signs in", fill("#signin-token", viewer+"\n"))
	p.waitFor("overview for the viewer", visible("#ov-today"))
	for _, c := range []struct{ hash, ready, hidden string }{
		{"#providers", "#pv-grid button.cell", "#pv-cred-form"},
		{"#providers", "#pv-grid button.cell", "#pv-reset"},
		{"#routes", "#rt-readonly", "#rt-new"},
		{"#tokens", "#tk-readonly", "#tk-form"},
	} {
		p.do("viewer "+c.hash, chromedp.Click(chromedp.CSS(`#sections a[href="`+c.hash+`"]`)))
		p.waitFor(c.hash+" for the viewer", visible(c.ready))
		if eval[bool](p, visible(c.hidden)) {
			t.Errorf("%s: %s is shown to a viewer", c.hash, c.hidden)
		}
	}
	p.do("spend for the viewer", chromedp.Click(chromedp.CSS(`#sections a[href="#spend"]`)))
	p.waitFor("spend table for the viewer", visible("#sp-table tr.total"))
}
