package admin

import (
	"context"
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
