package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// TestAuditPageInChromium drives the Audit log page: an admin finds a provider change by resource, opens its
// before and after images (secrets redacted), and a viewer is told the log is for admins only.
func TestAuditPageInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	api.must("POST", "/admin/providers", map[string]any{"name": "audited-alpha", "channel_type": "alpha",
		"base_url": "http://127.0.0.1:9/v1", "enabled": true, "settings": map[string]any{}})
	api.must("POST", "/admin/orgs", map[string]any{"name": "audited-org"})
	browserCtx := startBrowser(t, "")
	p := newTab(t, browserCtx)
	defer p.checkConsole()

	p.do("open console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/#audit"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("audit rows", `document.querySelectorAll("#au-table tbody tr").length >= 2`)
	all := p.text("#au-table tbody")
	for _, w := range []string{"providers", "orgs", "insert"} {
		if !strings.Contains(all, w) {
			t.Errorf("audit table %q lacks %q", all, w)
		}
	}
	p.screenshot("console-audit-1280", 1280)
	p.screenshot("console-audit-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))

	p.do("filter providers", fill("#au-resource", "providers"), chromedp.Click(chromedp.CSS(`#au-form button[type=submit]`)))
	p.waitFor("provider rows only", `[...document.querySelectorAll("#au-table tbody tr td:nth-child(4)")].every(td => td.textContent === "providers")`)
	p.do("details", chromedp.Click(chromedp.CSS(`#au-table tbody button`)))
	p.waitFor("detail dialog", `document.getElementById("au-dialog").open`)
	if after := p.text("#au-after"); !strings.Contains(after, "audited-alpha") {
		t.Errorf("after image %q lacks the provider's name", after)
	}
	if before := p.text("#au-before"); before != "—" {
		t.Errorf("before image of an insert %q, want —", before)
	}
	if actor := p.text("#au-detail"); !strings.Contains(actor, "admin:") {
		t.Errorf("detail %q does not name the admin token", actor)
	}
	p.screenshot("console-audit-detail-1280", 1280)
	p.do("escape", chromedp.KeyEvent("\x1b"))
	p.waitFor("dialog closed, focus back", `!document.getElementById("au-dialog").open && document.activeElement.matches("#au-table tbody button")`)

	// A viewer may not read the audit log: the page says so instead of failing silently.
	viewer := api.must("POST", "/admin/admin-tokens", map[string]any{"name": "audit-viewer", "role": "viewer"})["token"].(string)
	p.do("sign out", chromedp.Click(chromedp.ID("sign-out")))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("viewer signs in", fill("#signin-token", viewer+"\n"))
	p.do("viewer opens audit", chromedp.Navigate(base+"/console/#audit"))
	p.waitFor("admins-only notice", `document.getElementById("au-error").textContent.includes("admin tokens only")`)
}
