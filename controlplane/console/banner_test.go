package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// A configuration that does not compile is shown on every console page as a banner naming the offending
// row; when the row is fixed the banner goes away.
func TestSnapshotFailureBannerInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	var pid int64
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO providers (name, channel_type, base_url)
		VALUES ('broken/provider', 'alpha', 'https://u.example') RETURNING id`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	browserCtx := startBrowser(t, "")
	p := newTab(t, browserCtx)
	defer p.checkConsole()
	p.do("open console", chromedp.Navigate(base+"/console/#pricing"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("banner", visible("#snapshot-banner"))
	got := p.text("#snapshot-banner")
	for _, want := range []string{"not reaching the data planes", fmt.Sprintf("provider %d", pid), "broken/provider", "name"} {
		if !strings.Contains(got, want) {
			t.Errorf("banner %q does not say %q", got, want)
		}
	}
	if role := eval[string](p, `document.getElementById("snapshot-banner").getAttribute("role")`); role != "alert" {
		t.Errorf("banner role = %q, want alert (announced to screen readers)", role)
	}
	p.screenshot("console-snapshot-banner-1280", 1280)
	p.screenshot("console-snapshot-banner-390", 390)
	if _, err := db.Pool.Exec(context.Background(), `UPDATE providers SET name = 'fixed' WHERE id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	// Wait for the control plane to publish the fixed configuration, then reload: no banner.
	api := adminAPI{t: t, base: base, token: adminToken}
	for deadline := time.Now().Add(waitTimeout); api.must("GET", "/admin/snapshot-status", nil)["failing"] == true; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fixed configuration was not published")
		}
	}
	p.do("reload", chromedp.Reload())
	p.waitFor("page after reload", visible("#identity"))
	p.waitFor("banner hidden", `document.getElementById("snapshot-banner").hidden`)
}
