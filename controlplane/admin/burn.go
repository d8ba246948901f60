package admin

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
)

// DefaultBurnLimit and MaxBurnLimit bound GET /admin/budget-burn's answer.
const (
	DefaultBurnLimit = 10
	MaxBurnLimit     = 500
)

// BudgetBurn answers the quotas with a spend limit by the share of the limit spent in their current
// period (docs/console.md, "Budget burn"), at most limit of them (store.ListBudgetBurn).
func (s *Service) BudgetBurn(ctx context.Context, limit int) ([]store.BudgetBurn, error) {
	if limit == 0 {
		limit = DefaultBurnLimit
	}
	if limit < 1 || limit > MaxBurnLimit {
		return nil, invalidFields("invalid budget burn query", field("limit", "must be between 1 and %d", MaxBurnLimit))
	}
	items, err := store.ListBudgetBurn(ctx, s.pool, limit, time.Now())
	return items, storeError(err, "budget burn")
}

// registerBurnHTTP registers GET /admin/budget-burn?limit= (viewer): {"items": [BudgetBurn…]}.
func registerBurnHTTP(mux *http.ServeMux, s *Service) {
	mux.Handle("GET /admin/budget-burn", s.restEndpoint(RoleViewer, func(r *http.Request) (int, any, error) {
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
	}))
}
