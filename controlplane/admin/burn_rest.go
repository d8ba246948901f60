package admin

import (
	"net/http"
	"strconv"
)

// burnOps report the budgets burning fastest: GET /admin/budget-burn?limit= answers {"items": [BudgetBurn…]}.
// It has no gRPC method.
var burnOps = []operation{
	{role: RoleViewer, rest: "GET /admin/budget-burn", serve: func(s *Service, r *http.Request) (int, any, error) {
		q := r.URL.Query()
		if err := onlyParams(q, "limit"); err != nil {
			return 0, nil, err
		}
		limit := 0
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return 0, nil, invalidFields("invalid budget burn query", field("limit", "must be between 1 and %d", MaxBurnLimit))
			}
			limit = n
		}
		items, err := s.BudgetBurn(r.Context(), limit)
		return http.StatusOK, map[string]any{"items": items}, err
	}},
}
