package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/alert"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func TestAlertThresholdsEndpointsAndEvents(t *testing.T) {
	b := setup(t)
	org, _, _ := b.tenants(t, "acme")
	path := fmt.Sprintf("/admin/quotas/org/%d/alerts", org)

	var got struct {
		Thresholds []int32 `json:"thresholds"`
	}
	b.must(t, http.StatusOK, "GET", path, nil, &got)
	if len(got.Thresholds) != 0 {
		t.Fatalf("thresholds of a new scope = %v", got.Thresholds)
	}
	b.must(t, http.StatusOK, "PUT", path, map[string]any{"thresholds": []int{100, 50, 80}}, &got)
	if fmt.Sprint(got.Thresholds) != "[50 80 100]" {
		t.Fatalf("thresholds = %v, want sorted [50 80 100]", got.Thresholds)
	}
	b.refuses(t, []refusal{
		{"zero", "PUT", path, map[string]any{"thresholds": []int{0}}, 422, "thresholds[0]"},
		{"too high", "PUT", path, map[string]any{"thresholds": []int{50, 1001}}, 422, "thresholds[1]"},
		{"duplicate", "PUT", path, map[string]any{"thresholds": []int{80, 80}}, 422, "thresholds[1]"},
		{"too many", "PUT", path, map[string]any{"thresholds": []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}}, 422, "thresholds"},
		{"unknown scope", "PUT", "/admin/quotas/galaxy/1/alerts", map[string]any{"thresholds": []int{50}}, 400, ""},
		{"missing org", "PUT", "/admin/quotas/org/999999/alerts", map[string]any{"thresholds": []int{50}}, 404, ""},
		{"bad webhook url", "POST", "/admin/webhooks", map[string]any{"url": "ftp://x"}, 422, "url"},
	})

	var ep struct {
		ID     int64  `json:"id"`
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/webhooks", map[string]any{"url": "https://hooks.example/tollgate", "description": "ops"}, &ep)
	if !strings.HasPrefix(ep.Secret, alert.SecretPrefix) {
		t.Fatalf("secret %q is not whsec_", ep.Secret)
	}
	var stored []byte
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT secret_ciphertext FROM webhook_endpoints WHERE id = $1`, ep.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), ep.Secret[len(alert.SecretPrefix):]) {
		t.Fatal("the signing secret is stored in clear")
	}
	r := b.must(t, http.StatusOK, "GET", "/admin/webhooks", nil, nil)
	if strings.Contains(string(r.raw), ep.Secret) || !strings.Contains(string(r.raw), "hooks.example") {
		t.Fatalf("webhook listing: %s", r.raw)
	}

	// Spend crosses 50 and 80: one evaluation records two events with one pending delivery each.
	if _, err := b.db.Pool.Exec(context.Background(), `INSERT INTO quotas (scope, scope_id, cost_limit, cost_used) VALUES ('org', $1, 10, 8)`, org); err != nil {
		t.Fatal(err)
	}
	if n, err := alert.New(b.db.Pool, b.box, nil, alert.Options{}).Evaluate(context.Background()); err != nil || n != 2 {
		t.Fatalf("Evaluate = %d, %v; want 2", n, err)
	}
	var evs struct {
		Items []struct {
			Threshold  int32 `json:"threshold"`
			Deliveries []struct {
				EndpointID int64  `json:"endpoint_id"`
				State      string `json:"state"`
				WebhookID  string `json:"webhook_id"`
			} `json:"deliveries"`
		} `json:"items"`
		NextCursor string `json:"next_cursor"`
	}
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/alert-events?scope=org&scope_id=%d&limit=1", org), nil, &evs)
	if len(evs.Items) != 1 || evs.Items[0].Threshold != 80 || evs.NextCursor == "" || len(evs.Items[0].Deliveries) != 1 ||
		evs.Items[0].Deliveries[0].State != "pending" || evs.Items[0].Deliveries[0].EndpointID != ep.ID {
		t.Fatalf("first page = %+v", evs)
	}
	b.must(t, http.StatusOK, "GET", "/admin/alert-events?limit=1&cursor="+evs.NextCursor, nil, &evs)
	if len(evs.Items) != 1 || evs.Items[0].Threshold != 50 {
		t.Fatalf("second page = %+v", evs)
	}

	// gRPC lists the same events; a viewer may read them but not change thresholds.
	cl, _ := b.grpcClient(t)
	list, err := cl.ListAlertEvents(withToken(b.viewerToken(t)), &adminv1.ListAlertEventsRequest{Scope: "org", ScopeId: &org})
	if err != nil || len(list.GetItems()) != 2 || list.GetItems()[0].GetDeliveries()[0].GetState() != "pending" {
		t.Fatalf("ListAlertEvents = %v, %v", list, err)
	}
	if _, err := cl.SetQuotaAlerts(withToken(b.viewerToken(t)), &adminv1.SetQuotaAlertsRequest{Scope: "org", ScopeId: org,
		Thresholds: []int32{90}}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("viewer SetQuotaAlerts = %v", err)
	}
	if _, err := cl.SetQuotaAlerts(withToken(bootstrapToken), &adminv1.SetQuotaAlertsRequest{Scope: "org", ScopeId: org}); err != nil {
		t.Fatal(err)
	}
	if a, err := cl.GetQuotaAlerts(withToken(bootstrapToken), &adminv1.GetQuotaAlertsRequest{Scope: "org", ScopeId: org}); err != nil || len(a.GetThresholds()) != 0 {
		t.Fatalf("after clearing: %v, %v", a, err)
	}

	// Deleting the endpoint drops its pending deliveries; the events stay.
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/webhooks/%d", ep.ID), nil, nil)
	b.must(t, http.StatusOK, "GET", "/admin/alert-events", nil, &evs)
	if len(evs.Items) != 2 || len(evs.Items[0].Deliveries) != 0 {
		t.Fatalf("after deleting the endpoint: %+v", evs.Items)
	}
	b.must(t, http.StatusNotFound, "DELETE", fmt.Sprintf("/admin/webhooks/%d", ep.ID), nil, nil)
}
