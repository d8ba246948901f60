package console_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

const catalogDoc = `[{"id":"acme","models":[
	{"id":"m1","match":{"equals":"tg-cat-m1"},"prices":{"input_mtok":1,"output_mtok":2}},
	{"id":"m2","match":{"equals":"tg-cat-m2"},"prices":{"input_mtok":2.5e-06,"output_mtok":4}},
	{"id":"rx","match":{"regex":"^tg"},"prices":{"input_mtok":1}}]}]`

// The Catalogs page plans an uploaded genai-prices file, shows what it would add and what it cannot
// import, applies it minus an unticked entry, and lists the provenance of what it imported.
func TestCatalogsPageInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	file := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(file, []byte(catalogDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	browserCtx := startBrowser(t, "")
	p := newTab(t, browserCtx)
	defer p.checkConsole()
	p.do("open console", chromedp.Navigate(base+"/console/#catalogs"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", chromedp.SendKeys(chromedp.ID("signin-token"), adminToken+"\n"))
	p.waitFor("catalogs page", visible("#cat-form"))
	if visible := eval[bool](p, `!document.getElementById("pricing-view").hidden`); visible {
		t.Error("pricing page shown together with the catalogs page")
	}
	p.do("choose file", chromedp.SetUploadFiles(chromedp.ID("cat-file"), []string{file}))
	p.do("plan", chromedp.Click(chromedp.ID("cat-plan-btn")))
	p.waitFor("plan", visible("#cat-plan"))
	if s := p.text("#cat-summary"); !strings.Contains(s, "2 to add") || !strings.Contains(s, "1 not imported") {
		t.Errorf("summary %q", s)
	}
	if s := p.text("#cat-skipped tbody"); !strings.Contains(s, "acme/rx") || !strings.Contains(s, "regex") {
		t.Errorf("not-imported table %q", s)
	}
	if s := p.text("#cat-added tbody"); !strings.Contains(s, "0.0000025") {
		t.Errorf("added table %q does not show the exact price 0.0000025", s)
	}
	if n := len(api.rules()); n != 0 {
		t.Fatalf("plan stored %d rules", n)
	}
	// Review screenshots of the plan at both widths (the screenshot also checks nothing scrolls sideways).
	p.screenshot("console-catalogs-plan-390", 390)
	p.screenshot("console-catalogs-plan-1280", 1280)
	p.do("untick m1", chromedp.Click(chromedp.CSS(`#cat-added input[data-entry="acme/m1"]`)))
	// A past effective time is refused next to its field; nothing is written.
	p.do("apply in the past", chromedp.Evaluate[chromedp.Void](`document.getElementById("cat-effective_at").value = "2020-01-01T00:00:00"`),
		chromedp.Click(chromedp.ID("cat-apply")))
	p.waitFor("effective_at error", visible("#cat-effective_at-error")+` && document.activeElement.id === "cat-effective_at"`)
	if n := len(api.rules()); n != 0 {
		t.Fatalf("a refused apply stored %d rules", n)
	}
	p.do("apply now", chromedp.Evaluate[chromedp.Void](`document.getElementById("cat-effective_at").value = ""`),
		chromedp.Click(chromedp.ID("cat-apply")))
	p.waitFor("applied", `document.getElementById("cat-status").textContent.includes("1 added")`)
	if got := p.text("#cat-status"); strings.Contains(got, "scheduled") {
		t.Errorf("status of an apply without effective time = %q, mentions scheduling", got)
	}
	rules := api.rules()
	if len(rules) != 1 {
		t.Fatalf("stored rules %v, want only tg-cat-m2", rules)
	}
	m2 := api.ruleByModel("tg-cat-m2")
	if m2["input_price"] != "0.0000025" {
		t.Errorf("m2 input %v", m2["input_price"])
	}
	p.waitFor("provenance row", `document.getElementById("cat-provenance").textContent.includes("acme/m2")`)
	// Back to the Pricing page by the section link.
	p.screenshot("console-catalogs-applied-1280", 1280)
	p.do("pricing link", chromedp.Click(chromedp.CSS(`nav.sections a[href="#pricing"]`)))
	p.waitFor("pricing page", `!document.getElementById("pricing-view").hidden && document.getElementById("catalogs-view").hidden`)
}
