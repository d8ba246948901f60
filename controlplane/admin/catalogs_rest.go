package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// registerCatalogHTTP registers the price catalog endpoints (plan, apply, plans, provenance).
func registerCatalogHTTP(mux *http.ServeMux, s *Service) {
	h := func(pattern string, need Role, fn restHandler) {
		mux.Handle(pattern, s.restEndpoint(need, fn))
	}
	h("POST /admin/price-catalogs/plan", RoleAdmin, func(r *http.Request) (int, any, error) {
		var in CatalogPlanRequest
		if err := decodeBody(r, MaxImportBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.PlanCatalog(r.Context(), s.principalName(r.Context(), r.Header.Get("Authorization")), in)
		return http.StatusCreated, out, err
	})
	h("POST /admin/price-catalogs/apply", RoleAdmin, func(r *http.Request) (int, any, error) {
		var in CatalogApplyRequest
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.ApplyCatalog(r.Context(), s.principalName(r.Context(), r.Header.Get("Authorization")), in)
		return http.StatusOK, out, err
	})
	h("GET /admin/price-catalogs/plans/{id}", RoleViewer, func(r *http.Request) (int, any, error) {
		out, err := s.GetCatalogPlan(r.Context(), r.PathValue("id"))
		return http.StatusOK, out, err
	})
	h("GET /admin/price-catalogs/provenance", RoleViewer, func(r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListProvenance(r.Context(), limit, cursor)
		return http.StatusOK, out, err
	})
	h("POST /admin/price-rules/reprice", RoleViewer, func(r *http.Request) (int, any, error) {
		var in RepriceRequest
		if err := decodeBody(r, MaxImportBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.Reprice(r.Context(), in)
		return http.StatusOK, out, err
	})
	h("GET /admin/price-rules/{id}/history", RoleViewer, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.PriceRuleHistory(r.Context(), id)
		return http.StatusOK, Page[store.PriceRuleVersion]{Items: nonNil(out)}, err
	})
	h("GET /admin/price-rules/{id}/provenance", RoleViewer, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetProvenance(r.Context(), id)
		return http.StatusOK, out, err
	})
}
