package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// registerAlertsHTTP registers the budget alert endpoints: thresholds, webhook endpoints, events.
func registerAlertsHTTP(mux *http.ServeMux, s *Service) {
	h := func(pattern string, need Role, fn restHandler) {
		mux.Handle(pattern, s.restEndpoint(need, fn))
	}
	h("GET /admin/quotas/{scope}/{id}/alerts", RoleViewer, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetQuotaAlerts(r.Context(), r.PathValue("scope"), id)
		return http.StatusOK, out, err
	})
	h("PUT /admin/quotas/{scope}/{id}/alerts", RoleAdmin, func(r *http.Request) (int, any, error) {
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
	})
	h("GET /admin/webhooks", RoleViewer, func(r *http.Request) (int, any, error) {
		out, err := s.ListWebhookEndpoints(r.Context())
		return http.StatusOK, Page[store.WebhookEndpoint]{Items: nonNil(out)}, err
	})
	h("POST /admin/webhooks", RoleAdmin, func(r *http.Request) (int, any, error) {
		var in WebhookEndpointInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateWebhookEndpoint(r.Context(), in)
		return http.StatusCreated, out, err
	})
	h("DELETE /admin/webhooks/{id}", RoleAdmin, deleteBy("id", s.DeleteWebhookEndpoint))
	h("GET /admin/alert-events", RoleViewer, func(r *http.Request) (int, any, error) {
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
	})
}
