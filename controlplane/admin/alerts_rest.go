package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// alertOps are the budget alert operations: thresholds, webhook endpoints, events (alerts_grpc.go).
var alertOps = []operation{
	{role: RoleViewer, rest: "GET /admin/quotas/{scope}/{id}/alerts", grpc: "GetQuotaAlerts", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetQuotaAlerts(r.Context(), r.PathValue("scope"), id)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/quotas/{scope}/{id}/alerts", grpc: "SetQuotaAlerts", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in QuotaAlertsInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.SetQuotaAlerts(r.Context(), r.PathValue("scope"), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/webhooks", grpc: "ListWebhookEndpoints", serve: func(s *Service, r *http.Request) (int, any, error) {
		out, err := s.ListWebhookEndpoints(r.Context())
		return http.StatusOK, Page[store.WebhookEndpoint]{Items: nonNil(out)}, err
	}},
	{role: RoleAdmin, rest: "POST /admin/webhooks", grpc: "CreateWebhookEndpoint", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in WebhookEndpointInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateWebhookEndpoint(r.Context(), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/webhooks/{id}", grpc: "DeleteWebhookEndpoint", serve: deleteBy("id", (*Service).DeleteWebhookEndpoint)},
	{role: RoleViewer, rest: "GET /admin/alert-events", grpc: "ListAlertEvents", serve: func(s *Service, r *http.Request) (int, any, error) {
		q := r.URL.Query()
		if err := onlyParams(q, "limit", "cursor", "scope", "scope_id"); err != nil {
			return 0, nil, err
		}
		var in AlertEventQuery
		var err error
		if in.Limit, in.Cursor, err = pageParams(r); err != nil {
			return 0, nil, err
		}
		if err := idParamsErr(q, "scope_id"); err != nil {
			return 0, nil, err
		}
		in.Scope, in.ScopeID = q.Get("scope"), idParam(q, "scope_id")
		out, err := s.ListAlertEvents(r.Context(), in)
		return http.StatusOK, out, err
	}},
}
