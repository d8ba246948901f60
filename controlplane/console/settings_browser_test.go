package console_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// TestCostDisclosureTogglesInChromium drives the cost-disclosure switch (docs/cost.md, "Turning it off"):
// the Settings page turns it off gateway-wide and on again, a key is set to hidden in the key dialog and back
// to the gateway setting, each change stored, and a viewer sees the switch but cannot change it. Screenshots
// at 1280 and 390 px.
func TestCostDisclosureTogglesInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	org := api.must("POST", "/admin/orgs", map[string]any{"name": "resell"})["id"]
	user := api.must("POST", "/admin/users", map[string]any{"org_id": org, "name": "shop"})["id"]
	key := api.must("POST", "/admin/api-keys", map[string]any{"user_id": user, "name": "storefront"})
	prefix := key["prefix"].(string)

	browserCtx := startBrowser(t, "")
	p := newTab(t, browserCtx)
	defer p.checkConsole()
	const settled = ` && document.getElementById("settings-view")?.getAttribute("aria-busy") === "false"`
	p.do("open console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/#settings"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("settings page", visible("#st-cost")+settled)
	if !eval[bool](p, `document.getElementById("st-cost").checked`) {
		t.Fatal("the switch shows off; the gateway default is on")
	}
	if got := p.text("#st-cost-state"); !strings.HasPrefix(got, "On:") {
		t.Errorf("state %q, want On:", got)
	}

	// Off gateway-wide: stored, and the page says so.
	p.do("turn off", chromedp.Click(chromedp.ID("st-cost")))
	p.waitFor("off shown", `document.getElementById("st-cost-state").textContent.startsWith("Off:")`+settled)
	if got := sqlText(t, db, `SELECT cost_disclosure::text FROM gateway_settings`); got != "false" {
		t.Fatalf("gateway_settings.cost_disclosure = %s after turning it off", got)
	}
	p.screenshot("console-settings-1280", 1280)
	p.screenshot("console-settings-390", 390)
	p.do("back to 1280", chromedp.EmulateViewport(1280, 900))
	// The page reads the stored value, not its own state: a reload shows it off.
	p.do("reload", chromedp.Reload())
	p.waitFor("settings page after reload", visible("#st-cost")+settled)
	if eval[bool](p, `document.getElementById("st-cost").checked`) {
		t.Fatal("after a reload the switch shows on; it is stored off")
	}
	p.do("turn on", chromedp.Click(chromedp.ID("st-cost")))
	p.waitFor("on shown", `document.getElementById("st-cost-state").textContent.startsWith("On:")`+settled)
	if got := sqlText(t, db, `SELECT cost_disclosure::text FROM gateway_settings`); got != "true" {
		t.Fatalf("gateway_settings.cost_disclosure = %s after turning it on", got)
	}

	// A key hidden in the key dialog, listed as such, then back to the gateway setting.
	const tenantsReady = ` && document.getElementById("tenants-view")?.getAttribute("aria-busy") === "false"`
	editKey := chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tn-key-table button[aria-label="Edit key %s"]`, prefix)))
	p.do("tenants", chromedp.Navigate(base+"/console/#tenants"))
	p.waitFor("key listed", fmt.Sprintf(`!!document.querySelector('#tn-key-table button[aria-label="Edit key %s"]')`, prefix)+tenantsReady)
	p.do("edit key", editKey)
	p.waitFor("key dialog", `document.getElementById("tn-key-edit").open && document.getElementById("tn-ke-cost").value === ""`)
	p.do("hide cost", choose("#tn-ke-cost", "false"))
	p.screenshot("console-key-cost-1280", 1280)
	p.do("save", chromedp.Click(chromedp.CSS(`#tn-ke-form button[type=submit]`)))
	p.waitFor("saved and listed", `!document.getElementById("tn-key-edit").open && document.querySelector("#tn-key-table").textContent.includes("cost hidden")`+tenantsReady)
	if got := sqlText(t, db, `SELECT coalesce(cost_disclosure::text, 'null') FROM api_keys`); got != "false" {
		t.Fatalf("api_keys.cost_disclosure = %s after hiding, want false", got)
	}
	p.do("edit again", editKey)
	p.waitFor("dialog shows hidden", `document.getElementById("tn-key-edit").open && document.getElementById("tn-ke-cost").value === "false"`)
	p.do("follow the gateway", choose("#tn-ke-cost", ""), chromedp.Click(chromedp.CSS(`#tn-ke-form button[type=submit]`)))
	p.waitFor("saved", `!document.getElementById("tn-key-edit").open && !document.querySelector("#tn-key-table").textContent.includes("cost hidden")`+tenantsReady)
	if got := sqlText(t, db, `SELECT coalesce(cost_disclosure::text, 'null') FROM api_keys`); got != "null" {
		t.Fatalf("api_keys.cost_disclosure = %s after choosing the gateway setting, want null", got)
	}

	// A viewer sees the switch, disabled.
	viewer := api.must("POST", "/admin/admin-tokens", map[string]any{"name": "settings-viewer", "role": "viewer"})["token"].(string)
	p.do("sign out", chromedp.Click(chromedp.ID("sign-out")))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("viewer signs in", fill("#signin-token", viewer+"\n"))
	p.do("viewer opens settings", chromedp.Navigate(base+"/console/#settings"))
	p.waitFor("read-only switch", visible("#st-readonly")+` && document.getElementById("st-cost").disabled && document.getElementById("st-cost").checked`+settled)
}
