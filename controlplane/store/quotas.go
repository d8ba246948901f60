package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/shared/period"
)

// Quota is a scope's budget as the admin API shows it (docs/budgets.md, "Model"): its spend limit (nil:
// unlimited) and spend, as decimal strings, its period and the scope-wide rate limits. For a periodic
// quota CostUsed is the spend of the current period (PeriodStart to PeriodEnd); for one without period
// it is the lifetime total.
type Quota struct {
	Scope     string  `json:"scope"`
	ScopeID   int64   `json:"scope_id"`
	CostLimit *string `json:"cost_limit"`
	CostUsed  string  `json:"cost_used"`
	// AdjustEpoch counts the scope's adjustments (docs/settlement.md, "Adjustment epochs").
	AdjustEpoch int64  `json:"adjust_epoch"`
	Period      string `json:"period"`
	TimeZone    string `json:"time_zone"`
	// PeriodID, PeriodStart and PeriodEnd name the current period (empty and nil without period).
	PeriodID    string     `json:"period_id,omitempty"`
	PeriodStart *time.Time `json:"period_start,omitempty"`
	PeriodEnd   *time.Time `json:"period_end,omitempty"`
	// Requests is the number of settled requests charged to the current period (periodic quotas only).
	Requests *int64 `json:"requests,omitempty"`
	RPMLimit int32  `json:"rpm_limit"`
	TPMLimit int64  `json:"tpm_limit"`
	// LifetimeCostUsed is every settled cost and adjustment since the quota was created.
	LifetimeCostUsed string `json:"lifetime_cost_used"`
}

// QuotaSettings changes a quota: the limit always (nil: unlimited), the other fields when not nil.
type QuotaSettings struct {
	Scope     string
	ScopeID   int64
	CostLimit *string
	Period    *string
	TimeZone  *string
	RPMLimit  *int32
	TPMLimit  *int64
}

// QuotaPeriod is one period of a periodic quota (table quota_periods).
type QuotaPeriod struct {
	PeriodID    string    `json:"period_id"`
	Period      string    `json:"period"`
	TimeZone    string    `json:"time_zone"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	CostLimit   *string   `json:"cost_limit"`
	CostUsed    string    `json:"cost_used"`
	Requests    int64     `json:"requests"`
	Adjustments string    `json:"adjustments"`
	Closed      bool      `json:"closed"`
}

// quotaPeriodSettings reads a quota row's period columns. A zone that does not load (written around the
// API) falls back to UTC rather than failing settlement: the admin API refuses such zones.
func quotaPeriodSettings(kind, zone string) (period.Kind, *time.Location) {
	k, err := period.ParseKind(kind)
	if err != nil {
		k = period.None
	}
	loc, err := period.LoadZone(zone)
	if err != nil {
		loc = time.UTC
	}
	return k, loc
}

const quotaColumns = `scope, scope_id, cost_limit::text, cost_used::text, adjust_epoch, period, time_zone, rpm_limit, tpm_limit`

// GetQuota reads a quota row and, for a periodic quota, the spend of the period containing now;
// ErrNotFound when the scope has none.
func GetQuota(ctx context.Context, db DBTX, scope string, id int64, now time.Time) (Quota, error) {
	var q Quota
	if err := db.QueryRow(ctx, `SELECT `+quotaColumns+` FROM quotas WHERE scope = $1 AND scope_id = $2`, scope, id).
		Scan(&q.Scope, &q.ScopeID, &q.CostLimit, &q.CostUsed, &q.AdjustEpoch, &q.Period, &q.TimeZone, &q.RPMLimit, &q.TPMLimit); err != nil {
		return Quota{}, fmt.Errorf("get quota %s/%d: %w", scope, id, interpretError(err))
	}
	return withCurrentPeriod(ctx, db, q, now)
}

// withCurrentPeriod fills the current period of q (whose CostUsed is the lifetime total) at now.
func withCurrentPeriod(ctx context.Context, db DBTX, q Quota, now time.Time) (Quota, error) {
	q.LifetimeCostUsed = q.CostUsed
	kind, zone := quotaPeriodSettings(q.Period, q.TimeZone)
	if kind == period.None {
		return q, nil
	}
	p := period.Of(kind, zone, now)
	q.PeriodID, q.PeriodStart, q.PeriodEnd = p.ID(), &p.Start, &p.End
	var used string
	var n int64
	err := db.QueryRow(ctx, `SELECT cost_used::text, requests FROM quota_periods WHERE scope = $1 AND scope_id = $2 AND period_start = $3`,
		q.Scope, q.ScopeID, p.Start).Scan(&used, &n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		used, n = "0", 0
	case err != nil:
		return Quota{}, fmt.Errorf("get quota %s/%d: period: %w", q.Scope, q.ScopeID, interpretError(err))
	}
	q.CostUsed, q.Requests = used, &n
	return q, nil
}

// SetQuota creates a scope's quota row or changes it, keeping its spend. A periodic quota's current
// period (at now) gets its row, carrying the new limit; a period that starts with this call is
// backfilled from the usage rows already settled in it, so switching a quota to a period counts the
// spend of the period so far. Changing the period or zone never moves spend between closed periods.
func SetQuota(ctx context.Context, tx pgx.Tx, in QuotaSettings, now time.Time) (Quota, error) {
	where := fmt.Sprintf("set quota %s/%d", in.Scope, in.ScopeID)
	var q Quota
	if err := tx.QueryRow(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit, period, time_zone, rpm_limit, tpm_limit)
		VALUES ($1, $2, $3::text::numeric, coalesce($4, 'none'), coalesce($5, 'UTC'), coalesce($6, 0), coalesce($7, 0))
		ON CONFLICT (scope, scope_id) DO UPDATE SET cost_limit = EXCLUDED.cost_limit,
		    period = coalesce($4, quotas.period), time_zone = coalesce($5, quotas.time_zone),
		    rpm_limit = coalesce($6, quotas.rpm_limit), tpm_limit = coalesce($7, quotas.tpm_limit), updated_at = now()
		RETURNING `+quotaColumns, in.Scope, in.ScopeID, in.CostLimit, in.Period, in.TimeZone, in.RPMLimit, in.TPMLimit).
		Scan(&q.Scope, &q.ScopeID, &q.CostLimit, &q.CostUsed, &q.AdjustEpoch, &q.Period, &q.TimeZone, &q.RPMLimit, &q.TPMLimit); err != nil {
		return Quota{}, fmt.Errorf("%s: %w", where, interpretError(err))
	}
	kind, zone := quotaPeriodSettings(q.Period, q.TimeZone)
	if kind != period.None {
		p := period.Of(kind, zone, now)
		if err := ensurePeriod(ctx, tx, q.Scope, q.ScopeID, p, q.TimeZone); err != nil {
			return Quota{}, fmt.Errorf("%s: %w", where, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE quota_periods SET cost_limit = $4::text::numeric
			WHERE scope = $1 AND scope_id = $2 AND period_start = $3`, q.Scope, q.ScopeID, p.Start, q.CostLimit); err != nil {
			return Quota{}, fmt.Errorf("%s: period limit: %w", where, interpretError(err))
		}
	}
	return withCurrentPeriod(ctx, tx, q, now)
}

// usageScopeColumn is the usages column naming a scope's id.
func usageScopeColumn(scope string) (string, error) {
	switch scope {
	case "org":
		return "org_id", nil
	case "team":
		return "team_id", nil
	case "user":
		return "user_id", nil
	case "key":
		return "api_key_id", nil
	}
	return "", fmt.Errorf("scope %q: %w", scope, ErrConstraint)
}

// ensurePeriod creates the row of period p of a quota if it is missing, backfilled with the requests
// already settled in it (by admitted_at, else created_at), and with the quota's current limit.
func ensurePeriod(ctx context.Context, tx pgx.Tx, scope string, id int64, p period.Period, zone string) error {
	col, err := usageScopeColumn(scope)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO quota_periods (scope, scope_id, period_start, period_end, period, time_zone,
			cost_limit, cost_used, requests)
		SELECT $1, $2, $3, $4, $5, $6, q.cost_limit, u.cost, u.n
		  FROM quotas q,
		       (SELECT coalesce(sum(cost) FILTER (WHERE kind = 'request'), 0) AS cost,
		               count(*) FILTER (WHERE kind = 'request') AS n
		          FROM usages
		         WHERE `+col+` = $2 AND coalesce(admitted_at, created_at) >= $3 AND coalesce(admitted_at, created_at) < $4) u
		 WHERE q.scope = $1 AND q.scope_id = $2
		ON CONFLICT (scope, scope_id, period_start) DO NOTHING`, scope, id, p.Start, p.End, string(p.Kind), zone); err != nil {
		return fmt.Errorf("open period %s: %w", p.ID(), interpretError(err))
	}
	return nil
}

// ListQuotaPeriods lists a quota's periods newest first, those starting before `before` (zero: all), at
// most limit. Closed is judged at now.
func ListQuotaPeriods(ctx context.Context, db DBTX, scope string, id int64, before time.Time, limit int, now time.Time) ([]QuotaPeriod, error) {
	rows, err := db.Query(ctx, `SELECT period, time_zone, period_start, period_end, cost_limit::text, cost_used::text,
			requests, adjustments::text
		  FROM quota_periods WHERE scope = $1 AND scope_id = $2 AND ($3::timestamptz IS NULL OR period_start < $3)
		 ORDER BY period_start DESC LIMIT $4`, scope, id, nullTime(before), limit)
	if err != nil {
		return nil, fmt.Errorf("list quota periods %s/%d: %w", scope, id, interpretError(err))
	}
	defer rows.Close()
	var out []QuotaPeriod
	for rows.Next() {
		var p QuotaPeriod
		if err := rows.Scan(&p.Period, &p.TimeZone, &p.Start, &p.End, &p.CostLimit, &p.CostUsed, &p.Requests, &p.Adjustments); err != nil {
			return nil, fmt.Errorf("list quota periods %s/%d: %w", scope, id, interpretError(err))
		}
		p.PeriodID = period.Period{Kind: period.Kind(p.Period), Start: p.Start, End: p.End}.ID()
		p.Closed = !now.Before(p.End)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list quota periods %s/%d: %w", scope, id, interpretError(err))
	}
	return out, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// periodSpend collects, within a settlement batch, the spend and request count of each (quota, period).
type periodSpend struct {
	entries []periodEntry
	periods map[periodKey]period.Period
	quotas  map[scopeKey]QuotaTotal
}

type periodKey struct {
	k     scopeKey
	start int64
}

type periodEntry struct {
	key  periodKey
	p    period.Period
	zone string
	cost string
	n    int64
}

func newPeriodSpend() *periodSpend {
	return &periodSpend{periods: map[periodKey]period.Period{}, quotas: map[scopeKey]QuotaTotal{}}
}

func (s *periodSpend) add(k scopeKey, q QuotaTotal, p period.Period, cost string, n int64) {
	pk := periodKey{k, p.Start.Unix()}
	s.periods[pk] = p
	s.quotas[k] = q
	s.entries = append(s.entries, periodEntry{key: pk, p: p, zone: q.zone.String(), cost: cost, n: n})
}

// apply adds the collected spend to quota_periods (creating rows on first use, with the quota's current
// limit) and answers each (quota, period)'s total, per scope in period order. The quota rows are locked
// by the caller, so no two batches write one quota's periods at once.
func (s *periodSpend) apply(ctx context.Context, tx pgx.Tx) (map[scopeKey][]QuotaTotal, error) {
	out := map[scopeKey][]QuotaTotal{}
	if len(s.entries) == 0 {
		return out, nil
	}
	n := len(s.entries)
	scope, id, start, end, kind, zone, cost, cnt := make([]string, n), make([]int64, n), make([]time.Time, n),
		make([]time.Time, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, e := range s.entries {
		scope[i], id[i], start[i], end[i], kind[i], zone[i], cost[i], cnt[i] = e.key.k.scope, e.key.k.id, e.p.Start, e.p.End,
			string(e.p.Kind), e.zone, e.cost, e.n
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO quota_periods AS p (scope, scope_id, period_start, period_end, period, time_zone, cost_limit, cost_used, requests)
		SELECT t.scope, t.scope_id, t.ps, min(t.pe), min(t.kind), min(t.zone), min(q.cost_limit), sum(t.cost), sum(t.n)
		  FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[], $7::numeric[], $8::bigint[])
		       AS t(scope, scope_id, ps, pe, kind, zone, cost, n)
		  JOIN quotas q ON q.scope = t.scope AND q.scope_id = t.scope_id
		 GROUP BY t.scope, t.scope_id, t.ps
		 ORDER BY t.scope, t.scope_id, t.ps
		ON CONFLICT (scope, scope_id, period_start)
		DO UPDATE SET cost_used = p.cost_used + EXCLUDED.cost_used, requests = p.requests + EXCLUDED.requests
		RETURNING scope, scope_id, period_start, cost_used::text`, scope, id, start, end, kind, zone, cost, cnt)
	if err != nil {
		return nil, fmt.Errorf("settle: period spend: %w", interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var k scopeKey
		var ps time.Time
		var used string
		if err := rows.Scan(&k.scope, &k.id, &ps, &used); err != nil {
			return nil, fmt.Errorf("settle: period spend: %w", interpretError(err))
		}
		q := s.quotas[k]
		q.CostUsed = used
		q.Period = s.periods[periodKey{k, ps.Unix()}]
		out[k] = append(out[k], q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("settle: period spend: %w", interpretError(err))
	}
	for k := range out {
		slices.SortFunc(out[k], func(a, b QuotaTotal) int { return a.Period.Start.Compare(b.Period.Start) })
	}
	return out, nil
}
