package admin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/shared/period"
)

// BudgetBurn is one limited quota's spend in its current period against its limit (docs/console.md,
// "Budget burn"). Money is exact decimal text; Percent is cost_used × 100 / cost_limit rounded half up
// to two places by Postgres (absent for a zero limit, which refuses everything).
type BudgetBurn struct {
	Scope       string     `json:"scope"`
	ScopeID     int64      `json:"scope_id"`
	Name        string     `json:"name"`
	Period      string     `json:"period"`
	TimeZone    string     `json:"time_zone"`
	PeriodStart *time.Time `json:"period_start,omitempty"`
	PeriodEnd   *time.Time `json:"period_end,omitempty"`
	CostLimit   string     `json:"cost_limit"`
	CostUsed    string     `json:"cost_used"`
	Percent     *string    `json:"percent,omitempty"`
}

// DefaultBurnLimit and MaxBurnLimit bound GET /admin/budget-burn's answer.
const (
	DefaultBurnLimit = 10
	MaxBurnLimit     = 500
)

// BudgetBurn answers the quotas with a spend limit, highest share of the limit used in the current
// period first (a zero limit first of all; ties by scope and id), at most limit of them. It reads the
// quotas with a limit (one scan of the small quotas table) and, for the periodic ones, the current
// period's row by primary key; the period is computed by shared/period, as settlement does.
func (s *Service) BudgetBurn(ctx context.Context, limit int) ([]BudgetBurn, error) {
	if limit == 0 {
		limit = DefaultBurnLimit
	}
	if limit < 1 || limit > MaxBurnLimit {
		return nil, invalidFields("invalid budget burn query", field("limit", "must be between 1 and %d", MaxBurnLimit))
	}
	rows, err := s.pool.Query(ctx, `
		SELECT q.scope, q.scope_id, q.period, q.time_zone,
		       coalesce(CASE q.scope
		           WHEN 'org' THEN (SELECT name FROM orgs WHERE id = q.scope_id)
		           WHEN 'team' THEN (SELECT name FROM teams WHERE id = q.scope_id)
		           WHEN 'user' THEN (SELECT name FROM users WHERE id = q.scope_id)
		           WHEN 'key' THEN (SELECT CASE WHEN name = '' THEN prefix ELSE name || ' (' || prefix || ')' END FROM api_keys WHERE id = q.scope_id)
		       END, '')
		FROM quotas q WHERE q.cost_limit IS NOT NULL`)
	if err != nil {
		return nil, storeError(fmt.Errorf("budget burn: quotas: %w", err), "budget burn")
	}
	var (
		scopes []string
		ids    []int64
		starts []*time.Time
		meta   = map[string]BudgetBurn{}
	)
	now := time.Now()
	for rows.Next() {
		var b BudgetBurn
		if err := rows.Scan(&b.Scope, &b.ScopeID, &b.Period, &b.TimeZone, &b.Name); err != nil {
			rows.Close()
			return nil, storeError(fmt.Errorf("budget burn: scan quota: %w", err), "budget burn")
		}
		var start *time.Time
		if kind, err := period.ParseKind(b.Period); err == nil && kind != period.None {
			loc, err := period.LoadZone(b.TimeZone)
			if err != nil {
				loc = time.UTC // as settlement does for a zone written around the API
			}
			p := period.Of(kind, loc, now)
			b.PeriodStart, b.PeriodEnd = &p.Start, &p.End
			start = &p.Start
		}
		scopes, ids, starts = append(scopes, b.Scope), append(ids, b.ScopeID), append(starts, start)
		meta[b.Scope+"/"+strconv.FormatInt(b.ScopeID, 10)] = b
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, storeError(fmt.Errorf("budget burn: quotas: %w", err), "budget burn")
	}
	if len(scopes) == 0 {
		return []BudgetBurn{}, nil
	}
	// The spend of each quota's current period (a lifetime quota's own cost_used), its share of the
	// limit, sorted and cut in Postgres on exact numerics.
	rows, err = s.pool.Query(ctx, `
		WITH c AS (
		    SELECT x.scope, x.scope_id, x.start, q.cost_limit,
		           CASE WHEN x.start IS NULL THEN q.cost_used ELSE coalesce(p.cost_used, 0) END AS used
		    FROM unnest($1::text[], $2::bigint[], $3::timestamptz[]) AS x(scope, scope_id, start)
		    JOIN quotas q ON q.scope = x.scope AND q.scope_id = x.scope_id AND q.cost_limit IS NOT NULL
		    LEFT JOIN quota_periods p ON p.scope = x.scope AND p.scope_id = x.scope_id AND p.period_start = x.start)
		SELECT scope, scope_id, cost_limit::text, used::text,
		       CASE WHEN cost_limit > 0 THEN round(used * 100 / cost_limit, 2)::text END
		FROM c
		ORDER BY (cost_limit = 0) DESC, CASE WHEN cost_limit > 0 THEN used / cost_limit END DESC, scope, scope_id
		LIMIT $4`, scopes, ids, starts, limit)
	if err != nil {
		return nil, storeError(fmt.Errorf("budget burn: spend: %w", err), "budget burn")
	}
	defer rows.Close()
	out := []BudgetBurn{}
	for rows.Next() {
		var (
			scope, limitS, used string
			id                  int64
			pct                 *string
		)
		if err := rows.Scan(&scope, &id, &limitS, &used, &pct); err != nil {
			return nil, storeError(fmt.Errorf("budget burn: scan spend: %w", err), "budget burn")
		}
		b := meta[scope+"/"+strconv.FormatInt(id, 10)]
		b.CostLimit, b.CostUsed, b.Percent = limitS, used, pct
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, storeError(fmt.Errorf("budget burn: spend: %w", err), "budget burn")
	}
	return out, nil
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
