package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

const cloudCatalogDoc = `[{"id":"aws","models":[
	{"id":"anthropic.claude-sonnet-4-5-20250929-v1:0","match":{"or":[{"starts_with":"anthropic.claude-sonnet-4-5-20250929"},{"contains":"us.anthropic.claude-sonnet-4-5-20250929"}]},"prices":{"input_mtok":3.3,"output_mtok":16.5}}]},
	{"id":"acme","models":[{"id":"m1","match":{"equals":"tg-cat-m1"},"prices":{"input_mtok":1,"output_mtok":2}}]}]`

// With two aws_bedrock providers, the Catalogs page says the genai-prices "aws" entries go to both
// (the channel-type default) and lists one provider-scoped contains rule per provider and clause.
func TestCatalogsPageCloudScopesInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	var ids []string
	for _, name := range []string{"bedrock-us", "bedrock-eu"} {
		p := api.must("POST", "/admin/providers", map[string]any{"name": name, "channel_type": "aws_bedrock",
			"base_url": "https://bedrock.example", "settings": map[string]any{"region": "us-east-1"}})
		ids = append(ids, fmt.Sprint(p["id"]))
	}
	file := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(file, []byte(cloudCatalogDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	browserCtx := startBrowser(t, "")
	p := newTab(t, browserCtx)
	defer p.checkConsole()
	p.do("open console", chromedp.Navigate(base+"/console/#catalogs"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", chromedp.SendKeys(chromedp.ID("signin-token"), adminToken+"\n"))
	p.waitFor("catalogs page", visible("#cat-form"))
	p.do("choose file", chromedp.SetUploadFiles(chromedp.ID("cat-file"), []string{file}))
	p.do("plan", chromedp.Click(chromedp.ID("cat-plan-btn")))
	p.waitFor("plan", visible("#cat-plan"))
	if s, want := p.text("#cat-scopes"), "aws → providers "+ids[0]+", "+ids[1]; !strings.Contains(s, want) {
		t.Errorf("scopes %q, want %q", s, want)
	}
	added := p.text("#cat-added tbody")
	for _, id := range ids {
		for _, want := range []string{
			"provider " + id + ` · contains "anthropic.claude-sonnet-4-5-20250929"`,
			"provider " + id + ` · contains "us.anthropic.claude-sonnet-4-5-20250929"`,
		} {
			if !strings.Contains(added, want) {
				t.Errorf("added table lacks %q:\n%s", want, added)
			}
		}
	}
	if !strings.Contains(added, `global · exact "tg-cat-m1"`) {
		t.Errorf("added table: the acme entry is not global:\n%s", added)
	}
	p.screenshot("console-catalogs-cloud-1280", 1280)
	p.do("apply", chromedp.Click(chromedp.ID("cat-apply")))
	p.waitFor("applied", `document.getElementById("cat-status").textContent.includes("5 added")`)
	if n := len(api.rules()); n != 5 {
		t.Errorf("stored %d rules, want 5", n)
	}
}
