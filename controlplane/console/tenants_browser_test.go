package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// TestTenantsAndBudgetsPagesInChromium drives Tenants and keys (org — a duplicate name refused by the API under the field —, team and user created; a key created
// through a client-side and an API error and shown once; prefix filter; disable/enable; rotate with a grace
// period, the new key shown once; revoke after Escape cancels; a team renamed and deleted with its stated
// effects), Budgets (a monthly budget with thresholds through a client-side and an API error, listed with
// its exact burn; closed periods; a webhook endpoint whose whsec_ secret is shown once; the alert event
// delivered to a real receiver) and the Overview's budget burn, and screenshots them at 1280 and 390 px.
func TestTenantsAndBudgetsPagesInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	var hooks atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("webhook-signature") != "" {
			hooks.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	browserCtx := startBrowser(t, "")
	p := newTab(t, browserCtx)
	defer p.checkConsole()
	p.do("open console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/#tenants"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("tenants page", visible("#tn-org-name")+tenantsSettled)
	submit := func(form string) chromedp.Action[chromedp.Void] {
		return chromedp.Click(chromedp.CSS(form + ` button[type=submit]`))
	}
	rowsWith := func(sel, text string) string {
		return fmt.Sprintf(`[...document.querySelectorAll(%q)].some(r => r.textContent.includes(%q))`, sel+" tbody tr", text)
	}

	// Tenants: an org (a missing name is refused next to the field first), a team, a user.
	p.do("nameless org", submit("#tn-org-form"))
	p.waitFor("org name error", visible("#tn-org-name-error"))
	if got := eval[string](p, `document.activeElement.id`); got != "tn-org-name" {
		t.Errorf("focus after the error on %q", got)
	}
	p.do("org", fill("#tn-org-name", "acme"), submit("#tn-org-form"))
	p.waitFor("org listed", rowsWith("#tn-org-table", "acme")+` && document.querySelector("#tn-team-org").options.length === 1`+tenantsSettled)
	p.do("duplicate org", fill("#tn-org-name", "acme"), submit("#tn-org-form"))
	p.waitFor("duplicate refused by the API, under the field", visible("#tn-org-name-error")+` && document.activeElement.id === "tn-org-name"`)
	p.do("erase", chromedp.SendKeys(chromedp.CSS("#tn-org-name"), "\b\b\b\b"))
	p.waitFor("error cleared by editing", `document.getElementById("tn-org-name-error").hidden && document.getElementById("tn-org-name").value === ""`)
	p.do("team", fill("#tn-team-name", "research"), submit("#tn-team-form"))
	p.waitFor("team listed", rowsWith("#tn-team-table", "research")+` && document.querySelector("#tn-user-team").options.length === 2`+tenantsSettled)
	p.do("spare team", fill("#tn-team-name", "ops"), submit("#tn-team-form"))
	p.waitFor("team listed", rowsWith("#tn-team-table", "ops")+tenantsSettled)
	team := sqlText(t, db, `SELECT id::text FROM teams WHERE name = 'research'`)
	p.do("user", fill("#tn-user-name", "ada"), choose("#tn-user-team", team), fill("#tn-user-email", "ada@example.com"), submit("#tn-user-form"))
	p.waitFor("user listed", rowsWith("#tn-user-table", "ada@example.com")+` && document.querySelector("#tn-key-user").options.length === 1`+tenantsSettled)
	if got := sqlText(t, db, `SELECT coalesce(team_id::text, 'null') FROM users WHERE name = 'ada'`); got != team {
		t.Errorf("ada's team %s, want %s", got, team)
	}

	// A key: a client-side error, an API error (the snapshot compiler's pattern limit), then created.
	p.do("bad rpm", fill("#tn-key-name", "ci"), fill("#tn-key-rpm", "fast"), submit("#tn-key-form"))
	p.waitFor("rpm error", visible("#tn-key-rpm-error"))
	p.do("bad pattern", fill("#tn-key-rpm", "600"), fill("#tn-key-models", "gpt-4o*, a*b*c*d*e*f"), submit("#tn-key-form"))
	p.waitFor("models error from the API", visible("#tn-key-models-error"))
	if n := sqlText(t, db, `SELECT count(*)::text FROM api_keys`); n != "0" {
		t.Fatalf("%s keys stored after refusals", n)
	}
	p.do("good key", fill("#tn-key-models", "gpt-4o*"), submit("#tn-key-form"))
	p.waitFor("key shown", visible("#tn-secret"))
	key := p.text("#tn-secret")
	if n := sqlText(t, db, `SELECT count(*)::text FROM api_keys WHERE key_hash = sha256(convert_to($1, 'UTF8')) AND rpm_limit = 600 AND allowed_models = '{gpt-4o*}'`, key); n != "1" || !strings.HasPrefix(key, "tg-") {
		t.Fatalf("the shown key %q is not the stored one (%s rows)", key, n)
	}
	keyID := sqlText(t, db, `SELECT id::text FROM api_keys`)
	prefix := sqlText(t, db, `SELECT prefix FROM api_keys`)
	p.waitFor("key listed", rowsWith("#tn-key-table", prefix))
	// Shown once: after a reload the page no longer holds it anywhere.
	p.do("done", chromedp.Click(chromedp.CSS(`#tn-secret-box .btn-quiet`)), chromedp.Click(chromedp.ID("tn-reload")))
	p.waitFor("reloaded", rowsWith("#tn-key-table", prefix))
	if eval[bool](p, fmt.Sprintf(`document.documentElement.outerHTML.includes(%q)`, key)) {
		t.Error("the key is still in the page after Done and a reload")
	}
	// Prefix search.
	p.do("filter miss", fill("#tn-kf-prefix", "tg-zzzz"), submit("#tn-kf"))
	p.waitFor("no match", `document.querySelector("#tn-key-table").textContent.includes("No key matches")`)
	p.do("filter hit", fill("#tn-kf-prefix", prefix[:6]), submit("#tn-kf"))
	p.waitFor("match", rowsWith("#tn-key-table", prefix))
	// Disable, enable.
	p.do("disable", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tn-key-table button[aria-label="Disable key %s"]`, prefix))))
	p.waitFor("disabled", visible(fmt.Sprintf(`#tn-key-table button[aria-label="Enable key %s"]`, prefix)))
	if got := sqlText(t, db, `SELECT enabled::text FROM api_keys`); got != "false" {
		t.Errorf("enabled = %s after Disable", got)
	}
	p.do("enable", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tn-key-table button[aria-label="Enable key %s"]`, prefix))))
	p.waitFor("enabled", visible(fmt.Sprintf(`#tn-key-table button[aria-label="Disable key %s"]`, prefix)))
	// Edit: name, allowed models, TPM (a client-side error first) and an expiry.
	p.do("edit key", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tn-key-table button[aria-label="Edit key %s"]`, prefix))))
	p.waitFor("key dialog", `document.getElementById("tn-key-edit").open && document.activeElement.id === "tn-ke-name"`)
	p.do("bad tpm", fill("#tn-ke-name", "ci-bot"), fill("#tn-ke-models", "gpt-4o*, claude-*"), fill("#tn-ke-tpm", "lots"), submit("#tn-ke-form"))
	p.waitFor("tpm error", visible("#tn-ke-tpm-error")+` && document.activeElement.id === "tn-ke-tpm"`)
	p.do("good tpm", fill("#tn-ke-tpm", "100000"), setText("#tn-ke-expires", "2030-01-01T12:00"), submit("#tn-ke-form"))
	p.waitFor("saved", `!document.getElementById("tn-key-edit").open && `+rowsWith("#tn-key-table", "ci-bot"))
	if got := sqlText(t, db, `SELECT name || ' ' || tpm_limit || ' ' || array_to_string(allowed_models, '|') || ' ' || (expires_at > now() + interval '3 years')::text FROM api_keys`); got != "ci-bot 100000 gpt-4o*|claude-* true" {
		t.Errorf("edited key %q", got)
	}
	if got := eval[string](p, `document.activeElement.getAttribute("aria-label") || ""`); !strings.HasPrefix(got, "Edit key") {
		t.Errorf("focus after saving on %q, want the Edit button", got)
	}
	// Rotate with a grace period: a bad value first, then 60 minutes; the new key is shown once.
	p.do("rotate", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tn-key-table button[aria-label="Rotate key %s"]`, prefix))))
	p.waitFor("rotate dialog", `document.getElementById("tn-rotate").open && document.activeElement.id === "tn-rotate-grace"`)
	p.do("bad grace", fill("#tn-rotate-grace", "99999"), submit("#tn-rotate-form"))
	p.waitFor("grace error", visible("#tn-rotate-grace-error"))
	p.do("grace 60", fill("#tn-rotate-grace", "60"), submit("#tn-rotate-form"))
	p.waitFor("new key shown", `!document.getElementById("tn-rotate").open && !!document.getElementById("tn-secret")`)
	newKey := p.text("#tn-secret")
	if newKey == key || sqlText(t, db, `SELECT count(*)::text FROM api_keys WHERE key_hash = sha256(convert_to($1, 'UTF8'))`, newKey) != "1" {
		t.Fatalf("rotated key %q not stored (old %q)", newKey, key)
	}
	got := api.must("GET", "/admin/api-keys/"+keyID, nil)
	exp, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(got["previous_expires_at"]))
	if got["previous_prefix"] != prefix || time.Until(exp) < 55*time.Minute || time.Until(exp) > 61*time.Minute {
		t.Errorf("after rotation: previous_prefix %v, previous_expires_at %v; want %s and an hour from now", got["previous_prefix"], got["previous_expires_at"], prefix)
	}
	newPrefix := fmt.Sprint(got["prefix"])
	p.do("clear filter", chromedp.Click(chromedp.ID("tn-kf-clear")))
	p.waitFor("grace shown", rowsWith("#tn-key-table", "previous "+prefix))
	p.do("mask key", chromedp.Evaluate[chromedp.Void](`document.getElementById("tn-secret").textContent = "tg-…(shown once)"`))
	p.screenshot("console-tenants-1280", 1280)
	p.screenshot("console-tenants-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))
	// A team renamed, then deleted: the dialog states the effects.
	p.do("rename ops", clickRow(`#tn-team-table button[aria-label="Rename team ops"]`))
	p.waitFor("edit dialog", `document.getElementById("tn-edit").open && document.getElementById("tn-edit-user-fields").hidden`)
	p.do("rename", fill("#tn-edit-name", "operations"), submit("#tn-edit-form"))
	p.waitFor("renamed", rowsWith("#tn-team-table", "operations"))
	p.do("delete research", clickRow(`#tn-team-table button[aria-label="Delete team research"]`))
	p.waitFor("confirm", `document.getElementById("tn-confirm").open && document.activeElement.id === "tn-confirm-cancel"`)
	if txt := p.text("#tn-confirm-text"); !strings.Contains(txt, "1 user(s) stay in acme without a team") || !strings.Contains(txt, "keep working") {
		t.Errorf("team delete effects %q", txt)
	}
	p.screenshot("console-tenants-confirm-1280", 1280)
	p.do("escape", chromedp.KeyEvent("\x1b"))
	p.waitFor("closed", `!document.getElementById("tn-confirm").open`)
	// An org with members: the API refuses the delete and the page says why.
	p.do("delete acme", clickRow(`#tn-org-table button[aria-label="Delete org acme"]`))
	p.waitFor("confirm", `document.getElementById("tn-confirm").open`)
	if txt := p.text("#tn-confirm-text"); !strings.Contains(txt, "refuses while the org still has teams or users") {
		t.Errorf("org delete effects %q", txt)
	}
	p.do("confirm", chromedp.Click(chromedp.ID("tn-confirm-ok")))
	p.waitFor("refusal shown", visible("#tn-error")+` && document.getElementById("tn-error").textContent.includes("delete them first")`)
	if n := sqlText(t, db, `SELECT count(*)::text FROM orgs`); n != "1" {
		t.Fatal("the org is gone")
	}
	// Revoke the key: Escape cancels first, then confirmed.
	p.do("revoke", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tn-key-table button[aria-label="Revoke key %s"]`, newPrefix))))
	p.waitFor("confirm", `document.getElementById("tn-confirm").open`)
	if txt := p.text("#tn-confirm-text"); !strings.Contains(txt, "stops working at once") {
		t.Errorf("revoke effects %q", txt)
	}
	p.do("escape", chromedp.KeyEvent("\x1b"))
	p.waitFor("closed", `!document.getElementById("tn-confirm").open`)
	if n := sqlText(t, db, `SELECT count(*)::text FROM api_keys`); n != "1" {
		t.Fatal("Escape revoked the key")
	}

	// Budgets: acme monthly, through a client-side and an API error.
	p.do("budgets page", chromedp.Click(chromedp.CSS(`#sections a[href="#budgets"]`)))
	p.waitFor("budget form", visible("#bg-limit")+` && document.querySelector("#bg-target").options.length === 1 && !!document.getElementById("bg-current-box") && document.getElementById("budgets-view").getAttribute("aria-busy") === "false"`)
	p.do("bad limit", fill("#bg-limit", "1,000"), submit("#bg-form"))
	p.waitFor("limit error", visible("#bg-limit-error"))
	p.do("duplicate threshold", fill("#bg-limit", "100.50"), fill("#bg-thresholds", "50, 80, 50"), submit("#bg-form"))
	p.waitFor("threshold error", visible("#bg-thresholds-error")+` && document.activeElement.id === "bg-thresholds"`)
	p.do("bad zone", fill("#bg-limit", "100.50"), choose("#bg-period", "monthly"), fill("#bg-zone", "Mars/Olympus"),
		fill("#bg-thresholds", "50, 80, 100"), fill("#bg-rpm", "600"), submit("#bg-form"))
	p.waitFor("zone error from the API", visible("#bg-zone-error"))
	if n := sqlText(t, db, `SELECT count(*)::text FROM quotas`); n != "0" {
		t.Fatalf("%s quotas after a refusal", n)
	}
	p.do("good zone", fill("#bg-zone", "Europe/Paris"), submit("#bg-form"))
	p.waitFor("listed", rowsWith("#bg-burn-table", "acme")+` && !document.getElementById("bg-saved").hidden`)
	org := sqlText(t, db, `SELECT id::text FROM orgs`)
	q := api.must("GET", "/admin/quotas/org/"+org, nil)
	a := api.must("GET", "/admin/quotas/org/"+org+"/alerts", nil)
	if q["cost_limit"] != "100.50" || q["period"] != "monthly" || q["time_zone"] != "Europe/Paris" || fmt.Sprint(q["rpm_limit"]) != "600" || fmt.Sprint(a["thresholds"]) != "[50 80 100]" {
		t.Errorf("stored quota %v, alerts %v", q, a)
	}
	// A webhook endpoint: a bad URL first; the secret is shown once.
	p.do("bad url", fill("#bg-hook-url", "ftp://example.com"), submit("#bg-hook-form"))
	p.waitFor("url error", visible("#bg-hook-url-error"))
	p.do("endpoint", fill("#bg-hook-url", receiver.URL+"/budget"), fill("#bg-hook-desc", "finance"), submit("#bg-hook-form"))
	p.waitFor("secret shown", visible("#bg-hook-secret-value")+" && "+rowsWith("#bg-hook-table", "finance"))
	if s := p.text("#bg-hook-secret-value"); !strings.HasPrefix(s, "whsec_") {
		t.Errorf("secret %q", s)
	}
	// Spend 60.30 this period (60.00 %) and 12 in a closed one; the 50 % alert fires and is delivered.
	api.must("POST", "/admin/quotas/org/"+org+"/adjustments", map[string]any{"amount": "60.30", "reason": "console test"})
	api.must("POST", "/admin/quotas/org/"+org+"/adjustments", map[string]any{"amount": "12", "reason": "console test",
		"period_at": time.Now().AddDate(0, -2, 0).UTC().Format(time.RFC3339)})
	deadline := time.Now().Add(30 * time.Second)
	for hooks.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if hooks.Load() == 0 {
		t.Fatal("no signed webhook delivered")
	}
	for time.Now().Before(deadline) && !strings.Contains(string(mustRaw(t, api, "/admin/alert-events")), `"delivered"`) {
		time.Sleep(200 * time.Millisecond)
	}
	p.do("reload", chromedp.Click(chromedp.ID("bg-reload")))
	p.waitFor("burn", `document.querySelector("#bg-burn-table tbody tr .burn-text")?.textContent === "60.00 %" && !!document.querySelector("#bg-current-box .burn") && document.querySelectorAll("#bg-periods tbody tr").length === 1`)
	if got := p.text("#bg-current-spent"); got != "$60.30" {
		t.Errorf("current spend %q", got)
	}
	if got := p.text("#bg-periods tbody tr td:nth-child(2)"); got != "$12" {
		t.Errorf("closed period spend %q", got)
	}
	p.waitFor("event delivered", `document.querySelector("#bg-event-table tbody")?.textContent.includes("delivered")`)
	p.do("mask secret", chromedp.Evaluate[chromedp.Void](`document.getElementById("bg-hook-secret-value").textContent = "whsec_…(shown once)"`))
	p.screenshot("console-budgets-1280", 1280)
	p.screenshot("console-budgets-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))

	// The endpoint is deleted after a confirmation.
	p.do("delete endpoint", chromedp.Click(chromedp.CSS(`#bg-hook-table button[aria-label^="Delete webhook endpoint"]`)))
	p.waitFor("confirm", `document.getElementById("bg-confirm").open && document.activeElement.id === "bg-confirm-cancel"`)
	p.do("confirm", chromedp.Click(chromedp.ID("bg-confirm-ok")))
	p.waitFor("endpoint gone", `document.querySelector("#bg-hook-table").textContent.includes("No webhook endpoints")`)
	if b := string(mustRaw(t, api, "/admin/webhooks")); strings.Contains(b, "finance") {
		t.Errorf("endpoint still listed by the API: %s", b)
	}

	// Overview: the budget burn panel.
	p.do("overview", chromedp.Click(chromedp.CSS(`#sections a[href="#overview"]`)))
	p.waitFor("burn on overview", `document.querySelector("#ov-burn")?.textContent.includes("60.00 %")`)
	if got := p.text("#ov-burn tbody td:nth-child(3)"); got != "$60.30 / $100.50" {
		t.Errorf("overview burn %q", got)
	}
	p.screenshot("console-overview-burn-1280", 1280)
	p.screenshot("console-overview-burn-390", 390)

	// Every control on these pages has a label.
	for _, page := range []string{"tenants", "budgets"} {
		p.do(page, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sections a[href="#%s"]`, page))))
		p.waitFor(page, visible("#"+page+"-title")+` && document.getElementById("`+page+`-view").getAttribute("aria-busy") === "false"`)
		if unlabeled := eval[[]string](p, `[...document.querySelectorAll("#`+page+`-view input, #`+page+`-view select, #`+page+`-view button")]
			.filter(e => e.type !== "hidden" && !(e.labels && e.labels.length) && !e.getAttribute("aria-label") &&
				!e.getAttribute("aria-labelledby") && !(e.tagName === "BUTTON" && e.textContent.trim()))
			.map(e => e.outerHTML.slice(0, 120))`); len(unlabeled) > 0 {
			t.Errorf("%s: controls without a label: %q", page, unlabeled)
		}
	}
	// A viewer sees both pages read-only (a fresh tab: its own session storage).
	viewer := api.must("POST", "/admin/admin-tokens", map[string]any{"name": "console-test-viewer", "role": "viewer"})
	v := newTab(t, browserCtx)
	defer v.checkConsole()
	v.do("viewer opens console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/#tenants"))
	v.waitFor("viewer sign-in", visible("#signin-token"))
	v.do("viewer signs in", fill("#signin-token", viewer["token"].(string)+"\n"))
	v.waitFor("viewer keys", rowsWith("#tn-key-table", newPrefix)+` && !document.getElementById("tn-readonly").hidden`)
	for _, sel := range []string{"#tn-key-form", "#tn-org-form", "#tn-team-form", "#tn-user-form", "#tn-key-table button[aria-label^=Revoke]", "#tn-org-table button"} {
		if eval[bool](v, visible(sel)) {
			t.Errorf("viewer: %s is visible", sel)
		}
	}
	v.do("viewer budgets", chromedp.Click(chromedp.CSS(`#sections a[href="#budgets"]`)))
	v.waitFor("viewer burn", rowsWith("#bg-burn-table", "acme")+` && !document.getElementById("bg-readonly").hidden`)
	if !eval[bool](v, `document.getElementById("bg-save").disabled && document.getElementById("bg-limit").disabled`) || eval[bool](v, visible("#bg-hook-form")) ||
		eval[bool](v, visible("#bg-hook-table button")) {
		t.Error("viewer: the budget form or webhook actions are usable")
	}

	// Finally revoke the key for real.
	p.do("tenants", chromedp.Click(chromedp.CSS(`#sections a[href="#tenants"]`)))
	p.waitFor("tenants loaded", visible("#tenants-view")+` && document.getElementById("tenants-view").getAttribute("aria-busy") === "false"`)
	p.do("revoke", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tn-key-table button[aria-label="Revoke key %s"]`, newPrefix))))
	p.waitFor("confirm", `document.getElementById("tn-confirm").open`)
	p.do("confirm", chromedp.Click(chromedp.ID("tn-confirm-ok")))
	p.waitFor("gone", `document.querySelector("#tn-key-table").textContent.includes("No API keys yet")`)
	if status, _ := api.call("GET", "/admin/api-keys/"+keyID, nil); status != http.StatusNotFound {
		t.Errorf("revoked key answers %d", status)
	}
}

// tenantsSettled: the Tenants page reloading its lists may move focus when done, so steps wait for
// aria-busy="false" before typing on.
const tenantsSettled = ` && document.getElementById("tenants-view").getAttribute("aria-busy") === "false"`

func mustRaw(t *testing.T, api adminAPI, path string) []byte {
	t.Helper()
	status, b := api.call("GET", path, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, status, b)
	}
	return b
}
