package store

import (
	"context"
	"fmt"
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

// ListBudgetBurn answers the quotas with a spend limit, highest share of the limit used in the period
// containing now first (a zero limit first of all; ties by scope and id), at most limit of them. It reads
// the quotas with a limit (one scan of the small quotas table), then the current periods' spend in one
// query; the period is computed by shared/period with the quota's settings as settlement reads them.
func ListBudgetBurn(ctx context.Context, db DBTX, limit int, now time.Time) ([]BudgetBurn, error) {
	rows, err := db.Query(ctx, `
		SELECT q.scope, q.scope_id, q.period, q.time_zone,
		       coalesce(CASE q.scope
		           WHEN 'org' THEN (SELECT name FROM orgs WHERE id = q.scope_id)
		           WHEN 'team' THEN (SELECT name FROM teams WHERE id = q.scope_id)
		           WHEN 'user' THEN (SELECT name FROM users WHERE id = q.scope_id)
		           WHEN 'key' THEN (SELECT CASE WHEN name = '' THEN prefix ELSE name || ' (' || prefix || ')' END FROM api_keys WHERE id = q.scope_id)
		       END, '')
		FROM quotas q WHERE q.cost_limit IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("budget burn: quotas: %w", interpretError(err))
	}
	var (
		scopes []string
		ids    []int64
		starts []*time.Time
		meta   = map[string]BudgetBurn{}
	)
	for rows.Next() {
		var b BudgetBurn
		if err := rows.Scan(&b.Scope, &b.ScopeID, &b.Period, &b.TimeZone, &b.Name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("budget burn: scan quota: %w", interpretError(err))
		}
		var start *time.Time
		if kind, loc := quotaPeriodSettings(b.Period, b.TimeZone); kind != period.None {
			p := period.Of(kind, loc, now)
			b.PeriodStart, b.PeriodEnd = &p.Start, &p.End
			start = &p.Start
		}
		scopes, ids, starts = append(scopes, b.Scope), append(ids, b.ScopeID), append(starts, start)
		meta[b.Scope+"/"+strconv.FormatInt(b.ScopeID, 10)] = b
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("budget burn: quotas: %w", interpretError(err))
	}
	if len(scopes) == 0 {
		return []BudgetBurn{}, nil
	}
	// The spend of each quota's current period (a lifetime quota's own cost_used), its share of the
	// limit, sorted and cut in Postgres on exact numerics.
	rows, err = db.Query(ctx, `
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
		return nil, fmt.Errorf("budget burn: spend: %w", interpretError(err))
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
			return nil, fmt.Errorf("budget burn: scan spend: %w", interpretError(err))
		}
		b := meta[scope+"/"+strconv.FormatInt(id, 10)]
		b.CostLimit, b.CostUsed, b.Percent = limitS, used, pct
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("budget burn: spend: %w", interpretError(err))
	}
	return out, nil
}
