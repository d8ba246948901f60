package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// routingRuleOps are a provider's routing rule operations (routingrules_grpc.go).
var routingRuleOps = []operation{
	{role: RoleViewer, rest: "GET /admin/providers/{id}/routing-rules", grpc: "ListRoutingRules", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListRoutingRules(r.Context(), id)
		return http.StatusOK, Page[store.RoutingRule]{Items: nonNil(out)}, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/providers/{id}/routing-rules", grpc: "UpsertRoutingRules", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in struct {
			Rules []RoutingRuleInput `json:"rules"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpsertRoutingRules(r.Context(), id, in.Rules)
		return http.StatusOK, Page[store.RoutingRule]{Items: nonNil(out)}, err
	}},
	{role: RoleAdmin, rest: "POST /admin/providers/{provider_id}/routing-rules/reset", grpc: "ResetRoutingRules", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "provider_id")
		if err != nil {
			return 0, nil, err
		}
		if err := emptyBody(r); err != nil {
			return 0, nil, err
		}
		out, err := s.ResetRoutingRules(r.Context(), id)
		return http.StatusOK, Page[store.RoutingRule]{Items: nonNil(out)}, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/providers/{provider_id}/routing-rules/{operation}/{kind}", grpc: "DeleteRoutingRule", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "provider_id")
		if err != nil {
			return 0, nil, err
		}
		if err := emptyBody(r); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, s.DeleteRoutingRule(r.Context(), id, r.PathValue("operation"), r.PathValue("kind"))
	}},
}
