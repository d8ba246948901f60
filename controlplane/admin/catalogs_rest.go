package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// catalogOps are the price catalog operations (plan, apply, plans, provenance), a price rule's history and
// re-pricing (catalogs_grpc.go).
var catalogOps = []operation{
	{role: RoleAdmin, rest: "POST /admin/price-catalogs/plan", grpc: "PlanPriceCatalog", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in CatalogPlanRequest
		if err := decodeBody(r, MaxImportBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.PlanCatalog(r.Context(), s.principalName(r.Context(), r.Header.Get("Authorization")), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleAdmin, rest: "POST /admin/price-catalogs/apply", grpc: "ApplyPriceCatalog", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in CatalogApplyRequest
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.ApplyCatalog(r.Context(), s.principalName(r.Context(), r.Header.Get("Authorization")), in)
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/price-catalogs/plans/{id}", serve: func(s *Service, r *http.Request) (int, any, error) {
		out, err := s.GetCatalogPlan(r.Context(), r.PathValue("id"))
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/price-catalogs/provenance", serve: func(s *Service, r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListProvenance(r.Context(), limit, cursor)
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "POST /admin/price-rules/reprice", grpc: "RepricePriceRules", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in RepriceRequest
		if err := decodeBody(r, MaxImportBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.Reprice(r.Context(), in)
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/price-rules/{id}/history", grpc: "GetPriceRuleHistory", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.PriceRuleHistory(r.Context(), id)
		return http.StatusOK, Page[store.PriceRuleVersion]{Items: nonNil(out)}, err
	}},
	{role: RoleViewer, rest: "GET /admin/price-rules/{id}/provenance", grpc: "GetPriceRuleProvenance", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetProvenance(r.Context(), id)
		return http.StatusOK, out, err
	}},
}
