package admin

import (
	"net/http"
)

// priceRuleOps are the price rule operations (their gRPC methods are in pricerules_grpc.go): POST and PUT with
// effective_at schedule a version instead (schedule.go).
var priceRuleOps = []operation{
	{role: RoleViewer, rest: "GET /admin/price-rules", grpc: "ListPriceRules", serve: func(s *Service, r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		p, err := s.ListPriceRules(r.Context(), limit, cursor)
		return http.StatusOK, p, err
	}},
	{role: RoleAdmin, rest: "POST /admin/price-rules", grpc: "CreatePriceRule", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in PriceRuleInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		if in.EffectiveAt != nil {
			if in.ID == 0 {
				return 0, nil, invalidFields("invalid price rule", field("effective_at",
					"a new rule takes effect when created: create it disabled now and schedule enabling it"))
			}
			out, err := s.SchedulePriceRule(r.Context(), in.ID, in)
			return http.StatusAccepted, out, err
		}
		out, err := s.CreatePriceRule(r.Context(), in)
		if in.ID != 0 {
			return http.StatusOK, out, err
		}
		return http.StatusCreated, out, err
	}},
	{role: RoleViewer, rest: "POST /admin/price-rules/quote", grpc: "QuotePrice", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in QuoteRequest
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.Quote(r.Context(), in)
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/price-rules/{id}", grpc: "GetPriceRule", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetPriceRule(r.Context(), id)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/price-rules/{id}", grpc: "UpdatePriceRule", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in PriceRuleInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		if in.EffectiveAt != nil {
			out, err := s.SchedulePriceRule(r.Context(), id, in)
			return http.StatusAccepted, out, err
		}
		out, err := s.UpdatePriceRule(r.Context(), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/price-rules/{id}", grpc: "DeletePriceRule", serve: deleteBy("id", (*Service).DeletePriceRule)},
}
