package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/deploy/mockupstream"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

// seedReconciliation makes an alpha provider with one credential, a mock provider on loopback that served
// (and billed) two chats on day, and the ledger rows of those chats; it returns the provider id, the
// credential id, the mock and its URL.
func seedReconciliation(t *testing.T, b *testBundle, day time.Time) (int64, int64, *mockupstream.Server, string) {
	t.Helper()
	ctx := context.Background()
	mock := mockupstream.New(mockupstream.Options{AdminKey: "sk-admin-secret", Prices: map[string]mockupstream.Price{"m-1": {Input: "1", Output: "2"}}})
	srv := httptest.NewServer(mock)
	t.Cleanup(srv.Close)
	prov, err := store.InsertProvider(ctx, b.db.Pool, store.Provider{Name: "alpha-r", ChannelType: "alpha", BaseURL: srv.URL, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := b.box.Seal([]byte("sk-inference"))
	cred, err := store.InsertCredential(ctx, b.db.Pool, prov.ID, sealed, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(fmt.Sprintf(`{"model":"m-1","messages":[{"role":"user","content":"q%d"}]}`, i)))
		req.Header.Set("Authorization", "Bearer sk-inference")
		req.Header.Set("x-mock-billed-at", day.Add(time.Hour).Format(time.RFC3339))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var rows []store.UsageRow
	for i, bill := range mock.Bills() {
		rows = append(rows, store.UsageRow{RequestID: fmt.Sprintf("r%d", i), ProviderID: &prov.ID, CredentialID: &cred.ID,
			UpstreamModel: "m-1", LogicalModel: "m-1", Operation: "generate_content", InboundKind: "alpha_chat_completions",
			InputTokens: bill.Input, OutputTokens: bill.Output, ReportedTier: bill.Tier,
			Cost: fmt.Sprintf("%d.%06d", 0, bill.Input*1+bill.Output*2), Source: "upstream", EndState: "completed",
			CreatedAt: day.Add(time.Hour)})
	}
	if _, err := store.SettleUsages(ctx, b.db.Pool, rows); err != nil {
		t.Fatal(err)
	}
	return prov.ID, cred.ID, mock, srv.URL
}

func TestReconciliationAdminAPI(t *testing.T) {
	b := setup(t)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	pid, cid, mock, mockURL := seedReconciliation(t, b, day)
	var viewer struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "v", "role": "viewer"}, &viewer)
	base := fmt.Sprintf("/admin/reconciliation/providers/%d", pid)

	// Settings: validated; the admin key is required for an API kind and never answered.
	if r := b.call(t, "PUT", base, map[string]any{"kind": "openai", "base_url": "http://x.test"}); r.status != http.StatusUnprocessableEntity || !r.apiError(t).hasField("admin_key", -1) {
		t.Fatalf("no admin key: %d %s", r.status, r.raw)
	}
	if r := b.call(t, "PUT", base, map[string]any{"kind": "sap", "base_url": "ftp://x", "admin_key": "k", "cost_rel": "-1"}); r.status != http.StatusUnprocessableEntity ||
		!r.apiError(t).hasField("kind", -1) || !r.apiError(t).hasField("cost_rel", -1) {
		t.Fatalf("bad settings: %d %s", r.status, r.raw)
	}
	settings := map[string]any{"kind": "openai", "base_url": mockURL, "admin_key": "sk-admin-secret", "tokens_abs": 0, "cost_rel": "0.01"}
	if r := b.callAs(t, viewer.Token, "PUT", base, settings); r.status != http.StatusForbidden {
		t.Fatalf("viewer setting = %d, want 403", r.status)
	}
	var got store.ReconcileProvider
	r := b.call(t, "PUT", base, settings)
	if r.status != http.StatusOK || strings.Contains(string(r.raw), "sk-admin-secret") {
		t.Fatalf("put settings: %d %s", r.status, r.raw)
	}
	r.json(t, &got)
	if !got.HasAdminKey || got.Kind != "openai" || got.LateHours != 24 || got.BucketBy != "end" {
		t.Fatalf("settings %+v", got)
	}
	if r := b.callAs(t, viewer.Token, "GET", "/admin/reconciliation/providers", nil); r.status != 200 || strings.Contains(string(r.raw), "sk-admin") {
		t.Fatalf("viewer list: %d %s", r.status, r.raw)
	}
	// Credential mapping.
	b.must(t, http.StatusNoContent, "PUT", fmt.Sprintf("/admin/reconciliation/credential-refs/%d", cid),
		map[string]any{"key_ref": mockupstream.KeyID("sk-inference"), "project_ref": mockupstream.ProjectID}, nil)
	var refs struct {
		Items []store.CredentialRef `json:"items"`
	}
	b.must(t, 200, "GET", base+"/credential-refs", nil, &refs)
	if len(refs.Items) != 1 || refs.Items[0].KeyRef != mockupstream.KeyID("sk-inference") {
		t.Fatalf("refs %+v", refs)
	}

	// An on-demand run: honest, zero drift.
	var run store.ReconcileRun
	if r := b.callAs(t, viewer.Token, "POST", "/admin/reconciliation/runs", map[string]any{"provider_id": pid, "day": day.Format(time.DateOnly)}); r.status != http.StatusForbidden {
		t.Fatalf("viewer run = %d", r.status)
	}
	b.must(t, http.StatusCreated, "POST", "/admin/reconciliation/runs", map[string]any{"provider_id": pid, "day": day.Format(time.DateOnly)}, &run)
	if run.Status != "ok" || run.LedgerTokens == 0 || run.LedgerTokens != run.ProviderTokens || len(run.Lines) != 2 {
		t.Fatalf("honest run %+v", run)
	}
	// A drifting run: the provider lost a request.
	mock.SetReconcile(mockupstream.ReconcileControls{Drop: 1})
	var drift store.ReconcileRun
	b.must(t, http.StatusCreated, "POST", "/admin/reconciliation/runs", map[string]any{"provider_id": pid, "day": day.Format(time.DateOnly)}, &drift)
	if drift.Status != "drift" {
		t.Fatalf("drifting run %+v", drift)
	}
	// A failed import is a failed run, answered.
	mock.SetReconcile(mockupstream.ReconcileControls{ServerError: 100})
	var failed store.ReconcileRun
	b.must(t, http.StatusCreated, "POST", "/admin/reconciliation/runs", map[string]any{"provider_id": pid, "day": day.Format(time.DateOnly), "reimport": true}, &failed)
	if failed.Status != "failed" || !strings.Contains(failed.Error, "500") {
		t.Fatalf("failed run %+v", failed)
	}
	mock.SetReconcile(mockupstream.ReconcileControls{})

	// Listing and drift.
	var runs struct {
		Items      []store.ReconcileRun `json:"items"`
		NextCursor string               `json:"next_cursor"`
	}
	b.must(t, 200, "GET", fmt.Sprintf("/admin/reconciliation/runs?provider_id=%d&limit=2", pid), nil, &runs)
	if len(runs.Items) != 2 || runs.Items[0].ID != failed.ID || runs.NextCursor == "" {
		t.Fatalf("runs page %+v", runs)
	}
	b.must(t, 200, "GET", "/admin/reconciliation/runs?status=drift", nil, &runs)
	if len(runs.Items) != 1 || runs.Items[0].ID != drift.ID {
		t.Fatalf("drift runs %+v", runs.Items)
	}
	var one store.ReconcileRun
	b.must(t, 200, "GET", fmt.Sprintf("/admin/reconciliation/runs/%d", drift.ID), nil, &one)
	if len(one.Lines) != 2 || one.Lines[0].Cause != "missing_at_provider" {
		t.Fatalf("run detail %+v", one)
	}
	var series struct {
		Items []struct {
			Day         string   `json:"day"`
			Model       string   `json:"model"`
			RunID       int64    `json:"run_id"`
			TokensDrift int64    `json:"tokens_drift"`
			Causes      []string `json:"causes"`
		} `json:"items"`
	}
	b.must(t, 200, "GET", fmt.Sprintf("/admin/reconciliation/drift?from=%s&to=%s", day.Format(time.DateOnly), day.AddDate(0, 0, 1).Format(time.DateOnly)), nil, &series)
	if len(series.Items) != 1 || series.Items[0].RunID != drift.ID || series.Items[0].TokensDrift == 0 || series.Items[0].Model != "m-1" {
		t.Fatalf("drift series %+v (the day's latest run that did not fail is the drifting one)", series)
	}
	if r := b.call(t, "GET", "/admin/reconciliation/runs?status=weird", nil); r.status != http.StatusBadRequest {
		t.Fatalf("bad status filter = %d", r.status)
	}

	// gRPC: the same runs and drift; viewers read, only admins run.
	client, _ := b.grpcClient(t)
	lr, err := client.ListReconciliationRuns(withToken(viewer.Token), &adminv1.ListReconciliationRunsRequest{ProviderId: &pid})
	if err != nil || len(lr.Items) != 3 {
		t.Fatalf("grpc list: %v %v", lr, err)
	}
	gr, err := client.GetReconciliationRun(withToken(viewer.Token), &adminv1.GetReconciliationRunRequest{Id: drift.ID})
	if err != nil || gr.Run.Status != "drift" || len(gr.Run.Lines) != 2 || gr.Run.Lines[0].Provider == nil || len(gr.Run.Lines[1].PriceRules) != 1 {
		t.Fatalf("grpc get: %v %v", gr, err)
	}
	gd, err := client.GetReconciliationDrift(withToken(viewer.Token), &adminv1.GetReconciliationDriftRequest{FromDay: day.Format(time.DateOnly),
		ToDay: day.AddDate(0, 0, 1).Format(time.DateOnly)})
	if err != nil || len(gd.Items) != 1 || gd.Items[0].TokensDrift != series.Items[0].TokensDrift {
		t.Fatalf("grpc drift: %v %v", gd, err)
	}
	if _, err := client.RunReconciliation(withToken(viewer.Token), &adminv1.RunReconciliationRequest{ProviderId: pid, Day: day.Format(time.DateOnly)}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("viewer grpc run: %v", err)
	}
	rr, err := client.RunReconciliation(withToken(bootstrapToken), &adminv1.RunReconciliationRequest{ProviderId: pid, Day: day.Format(time.DateOnly)})
	if err != nil || rr.Run.Status != "ok" {
		t.Fatalf("grpc run: %v %v", rr, err)
	}
	gp, err := client.ListReconciliationProviders(withToken(viewer.Token), &adminv1.ListReconciliationProvidersRequest{})
	if err != nil || len(gp.Items) != 1 || !gp.Items[0].HasAdminKey || gp.Items[0].GetCostRel() != "0.01" {
		t.Fatalf("grpc providers: %v %v", gp, err)
	}
}

func TestReconciliationFileUpload(t *testing.T) {
	b := setup(t)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -4)
	pid, cid, mock, _ := seedReconciliation(t, b, day)
	base := fmt.Sprintf("/admin/reconciliation/providers/%d", pid)
	// Not set up yet: 404.
	if r := b.call(t, "POST", base+"/reports", "day,model,cost\n2026-12-01,m-1,1\n"); r.status != http.StatusNotFound {
		t.Fatalf("upload before setup = %d %s", r.status, r.raw)
	}
	b.must(t, 200, "PUT", base, map[string]any{"kind": "csv"}, nil)
	if r := b.call(t, "PUT", base, map[string]any{"kind": "csv", "admin_key": "x"}); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("csv with a key = %d", r.status)
	}
	b.must(t, http.StatusNoContent, "PUT", fmt.Sprintf("/admin/reconciliation/credential-refs/%d", cid),
		map[string]any{"key_ref": "key_file", "project_ref": "proj_file"}, nil)
	// The export: what the mock billed, as the provider's file would list it.
	var csv strings.Builder
	csv.WriteString("day,key_ref,project_ref,model,tier,input_tokens,output_tokens,requests,cost\n")
	for _, bill := range mock.Bills() {
		fmt.Fprintf(&csv, "%s,key_file,proj_file,m-1,%s,%d,%d,1,0.%06d\n", day.Format(time.DateOnly), bill.Tier, bill.Input, bill.Output,
			bill.Input+bill.Output*2)
	}
	if r := b.call(t, "POST", base+"/reports", "day,model\n2026-12-01,m-1\n"); r.status != http.StatusUnprocessableEntity || !r.apiError(t).hasField("file", -1) {
		t.Fatalf("bad file = %d %s", r.status, r.raw)
	}
	var imported struct {
		Items []struct {
			Day       string `json:"day"`
			Source    string `json:"source"`
			UsageRows int    `json:"usage_rows"`
		} `json:"items"`
	}
	b.must(t, 200, "POST", base+"/reports", csv.String(), &imported)
	if len(imported.Items) != 1 || imported.Items[0].Source != "file" || imported.Items[0].UsageRows != 2 {
		t.Fatalf("imported %+v", imported)
	}
	var run store.ReconcileRun
	b.must(t, http.StatusCreated, "POST", "/admin/reconciliation/runs", map[string]any{"provider_id": pid, "day": day.Format(time.DateOnly)}, &run)
	if run.Status != "ok" || run.LedgerTokens == 0 || run.LedgerTokens != run.ProviderTokens || run.LedgerCost != run.ProviderCost {
		t.Fatalf("file run %+v", run)
	}
	// The 30-minute cache writes are a category of their own through the file, the store, REST and gRPC: a
	// day the ledger has nothing for, where the file reports only 30-minute writes.
	other := day.AddDate(0, 0, -1).Format(time.DateOnly)
	b.must(t, 200, "POST", base+"/reports", "day,key_ref,project_ref,model,tier,cache_creation_30m_tokens,requests,cost\n"+
		other+",key_file,proj_file,m-1,default,16,1,0.000048\n", nil)
	b.must(t, http.StatusCreated, "POST", "/admin/reconciliation/runs", map[string]any{"provider_id": pid, "day": other}, &run)
	var rest struct {
		Lines []struct {
			Kind     string           `json:"kind"`
			Cause    string           `json:"cause"`
			Provider map[string]int64 `json:"provider"`
			Ledger   map[string]int64 `json:"ledger"`
		} `json:"lines"`
	}
	b.must(t, 200, "GET", fmt.Sprintf("/admin/reconciliation/runs/%d", run.ID), nil, &rest)
	if len(rest.Lines) != 2 || rest.Lines[0].Kind != "tokens" || rest.Lines[0].Cause != "missing_in_ledger" ||
		rest.Lines[0].Provider["cache_creation_30m_tokens"] != 16 || rest.Lines[0].Provider["cache_creation_1h_tokens"] != 0 ||
		rest.Lines[0].Provider["cache_creation_5m_tokens"] != 0 {
		t.Fatalf("REST run with 30-minute writes: %+v", rest)
	}
	if _, ok := rest.Lines[0].Ledger["cache_creation_30m_tokens"]; !ok {
		t.Fatalf("REST ledger side without the 30-minute category: %+v", rest.Lines[0].Ledger)
	}
	client, _ := b.grpcClient(t)
	gr, err := client.GetReconciliationRun(withToken(bootstrapToken), &adminv1.GetReconciliationRunRequest{Id: run.ID})
	if err != nil || gr.Run.Lines[0].Provider.GetCacheCreation_30M() != 16 || gr.Run.Lines[0].Provider.GetCacheCreation_1H() != 0 {
		t.Fatalf("grpc run with 30-minute writes: %v %v", gr, err)
	}
}
