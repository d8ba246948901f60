package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// TestBatchesPageInChromium drives the Batches page: an open batch with its reserved, held and settled
// amounts and line counts (a settled batch shown once "open only" is cleared), the usage page's batch filter
// and the spend page's batch dimension.
func TestBatchesPageInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	api := adminAPI{t: t, base: base, token: adminToken}
	id := func(m map[string]any) int64 {
		n, err := m["id"].(json.Number).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	org := id(api.must("POST", "/admin/orgs", map[string]any{"name": "batch-org"}))
	user := id(api.must("POST", "/admin/users", map[string]any{"org_id": org, "name": "ada"}))
	key := id(api.must("POST", "/admin/api-keys", map[string]any{"user_id": user, "name": "bulk"}))
	provider := id(api.must("POST", "/admin/providers", map[string]any{"name": "alpha-batch", "channel_type": "alpha",
		"base_url": "http://127.0.0.1:9", "enabled": true, "settings": map[string]any{}}))
	cred := id(api.must("POST", fmt.Sprintf("/admin/providers/%d/credentials", provider), map[string]any{"secret": "sk-batch"}))

	ctx := context.Background()
	svc := settlement.New(db.Pool, nil, nil)
	register := func(providerBatchID string, lines ...string) int64 {
		req := &settlementv1.RegisterBatchRequest{ProviderId: provider, CredentialId: cred, ProviderBatchId: providerBatchID,
			Dialect: "alpha", Endpoint: "/v1/chat/completions", ApiKeyId: key, UserId: user, OrgId: org, UpstreamModel: "a-1",
			ExpiresAt: timestamppb.New(time.Now().Add(24 * time.Hour))}
		for _, l := range lines {
			req.Lines = append(req.Lines, &settlementv1.BatchLine{CustomId: l, UpstreamModel: "a-1", EstimateMicros: 2500})
			req.ReservedMicros += 2500
		}
		res, err := svc.RegisterBatch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res.GetBatch().GetBatchId()
	}
	open := register("batch_open_1", "l1", "l2", "l3")
	done := register("batch_done_1", "m1")
	settle := func(batchID int64, custom, cost string) {
		o, k, u := org, key, user
		if _, err := store.SettleUsages(ctx, db.Pool, []store.UsageRow{{RequestID: store.BatchLineRequestID(batchID, custom),
			OrgID: &o, UserID: &u, APIKeyID: &k, LogicalModel: "a-1", UpstreamModel: "a-1", Operation: "generate_content",
			InboundKind: "alpha_chat_completions", Cost: cost, Source: "upstream", EndState: "completed", CreatedAt: time.Now(),
			BatchID: &batchID, CustomID: custom, BatchLineState: store.LineSucceeded}}); err != nil {
			t.Fatal(err)
		}
	}
	settle(open, "l1", "0.0012")
	settle(open, "l2", "0.0008")
	settle(done, "m1", "0.5")
	if err := store.CloseBatch(ctx, db.Pool, done); err != nil {
		t.Fatal(err)
	}

	browserCtx := startBrowser(t, "")
	p := newTab(t, browserCtx)
	defer p.checkConsole()
	p.do("open console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/#batches"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("one open batch", `document.querySelectorAll("#bt-table tbody tr").length === 1`)
	row := p.text("#bt-table tbody")
	for _, w := range []string{"batch_open_1", "alpha", "$0.0075", "$0.0025", "$0.002", "2 / 0 / 0 / 0 of 3"} {
		if !strings.Contains(row, w) {
			t.Errorf("open batch row %q lacks %q", row, w)
		}
	}
	p.screenshot("console-batches-1280", 1280)
	p.screenshot("console-batches-390", 390)
	p.do("viewport back", chromedp.EmulateViewport(1280, 900))
	p.do("all batches", chromedp.Click(chromedp.ID("bt-open")), chromedp.Click(chromedp.CSS(`#bt-form button[type=submit]`)))
	p.waitFor("both batches", `document.querySelectorAll("#bt-table tbody tr").length === 2`)
	if all := p.text("#bt-table tbody"); !strings.Contains(all, "batch_done_1") || !strings.Contains(all, "ended") || !strings.Contains(all, "$0.50") {
		t.Errorf("all batches %q lack the settled one", all)
	}

	// The usage page filters by batch; the spend page offers the batch dimension.
	p.do("usage page", chromedp.Click(chromedp.CSS(`#sections a[href="#usage"]`)))
	p.waitFor("usage form", visible("#us-batch_id"))
	p.do("filter by batch", fill("#us-batch_id", fmt.Sprint(open)), chromedp.Click(chromedp.CSS(`#us-form button[type=submit]`)))
	p.waitFor("the open batch's two lines", `document.querySelectorAll("#us-table tbody tr").length === 2`)
	if rows := p.text("#us-table tbody"); !strings.Contains(rows, fmt.Sprintf("batch_%d_l1", open)) {
		t.Errorf("usage rows %q lack line l1", rows)
	}
	p.do("spend page", chromedp.Click(chromedp.CSS(`#sections a[href="#spend"]`)))
	p.waitFor("batch dimension", `!!document.querySelector('#sp-group option[value="batch"]')`)
}
