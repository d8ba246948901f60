package admin

import (
	"net/http"
)

// quotaOps are the quota, adjustment and quota period (docs/budgets.md) operations (quotas_grpc.go).
var quotaOps = []operation{
	{role: RoleViewer, rest: "GET /admin/quotas/{scope}/{id}", grpc: "GetQuota", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetQuota(r.Context(), r.PathValue("scope"), id)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/quotas/{scope}/{id}", grpc: "SetQuota", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in QuotaInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.SetQuota(r.Context(), r.PathValue("scope"), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "POST /admin/quotas/{scope}/{id}/adjustments", grpc: "AdjustQuota", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in AdjustmentInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		who, err := s.Authenticate(r.Context(), r.Header.Get("Authorization"))
		if err != nil {
			return 0, nil, err
		}
		out, err := s.AdjustQuota(r.Context(), who, r.PathValue("scope"), id, in)
		return http.StatusCreated, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/quotas/{scope}/{id}/adjustments", grpc: "ListQuotaAdjustments", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListQuotaAdjustments(r.Context(), r.PathValue("scope"), id, limit, cursor)
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/quotas/{scope}/{id}/periods", grpc: "ListQuotaPeriods", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListQuotaPeriods(r.Context(), r.PathValue("scope"), id, limit, cursor)
		return http.StatusOK, out, err
	}},
}
