package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/shared/period"
)

// QuotaAdjustment is one audited correction of a scope's cost_used (table quota_adjustments, append-only).
// Amount is signed decimal dollars: positive debits, negative credits.
type QuotaAdjustment struct {
	ID             int64     `json:"id"`
	Scope          string    `json:"scope"`
	ScopeID        int64     `json:"scope_id"`
	Amount         string    `json:"amount"`
	CostUsedBefore string    `json:"cost_used_before"`
	CostUsedAfter  string    `json:"cost_used_after"`
	Reason         string    `json:"reason"`
	ActorName      string    `json:"actor_name"`
	ActorRole      string    `json:"actor_role"`
	CreatedAt      time.Time `json:"created_at"`
	// PeriodStart is the start of the period corrected (nil: a quota without period); CostUsedBefore and
	// CostUsedAfter are that period's spend.
	PeriodStart *time.Time `json:"period_start"`
}

// ErrAdjustmentOutOfRange is returned (wrapped) by AdjustQuota when the adjusted cost_used would be
// negative or above the largest amount carried.
var ErrAdjustmentOutOfRange = errors.New("adjusted cost_used out of range")

const adjustmentColumns = `id, scope, scope_id, amount::text, cost_used_before::text, cost_used_after::text, reason,
	actor_name, actor_role, created_at, period_start`

func scanAdjustment(row pgx.Row) (QuotaAdjustment, error) {
	var a QuotaAdjustment
	err := row.Scan(&a.ID, &a.Scope, &a.ScopeID, &a.Amount, &a.CostUsedBefore, &a.CostUsedAfter, &a.Reason,
		&a.ActorName, &a.ActorRole, &a.CreatedAt, &a.PeriodStart)
	return a, err
}

// AdjustQuota applies a.Amount to the scope's spend and records the adjustment, in tx (one transaction:
// the change and its audit row commit together). A scope without a quota row gets one (no limit). For a
// periodic quota the adjustment corrects the period containing at (created if missing, docs/budgets.md,
// "Corrections"); the lifetime cost_used moves by the same amount. The corrected spend must not be
// negative and a debit must not take it above maxUsed (decimal dollars), else ErrAdjustmentOutOfRange
// and nothing changes. The quota row is rewritten with its own cost_limit so the config revision moves
// and the next snapshot carries the adjusted spend to the data planes, and its adjust_epoch is raised by
// one: the data planes' cost_used mirror takes a value of a newer epoch even when it is lower (a credit)
// and ignores Settle answers of older ones (docs/settlement.md, "Adjustment epochs"). The adjustment also
// becomes a usage row of kind 'adjustment' (request id "adj_<id>", cost the signed amount), so the usage
// listing shows it.
func AdjustQuota(ctx context.Context, tx pgx.Tx, a QuotaAdjustment, maxUsed string, at time.Time) (QuotaAdjustment, Quota, error) {
	where := fmt.Sprintf("adjust quota %s/%d", a.Scope, a.ScopeID)
	if _, err := tx.Exec(ctx, `INSERT INTO quotas (scope, scope_id) VALUES ($1, $2) ON CONFLICT (scope, scope_id) DO NOTHING`,
		a.Scope, a.ScopeID); err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, interpretError(err))
	}
	var kindText, zoneText string
	if err := tx.QueryRow(ctx, `SELECT period, time_zone FROM quotas WHERE scope = $1 AND scope_id = $2 FOR UPDATE`,
		a.Scope, a.ScopeID).Scan(&kindText, &zoneText); err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, interpretError(err))
	}
	kind, zone := quotaPeriodSettings(kindText, zoneText)
	// The spend corrected: the lifetime total, or the period's.
	spend := `SELECT cost_used::text, (cost_used + $3::text::numeric)::text,
		cost_used + $3::text::numeric < 0, $3::text::numeric > 0 AND cost_used + $3::text::numeric > $4::text::numeric
		FROM quotas WHERE scope = $1 AND scope_id = $2`
	args := []any{a.Scope, a.ScopeID, a.Amount, maxUsed}
	var p period.Period
	if kind != period.None {
		if at.IsZero() {
			at = time.Now()
		}
		p = period.Of(kind, zone, at)
		if err := ensurePeriod(ctx, tx, a.Scope, a.ScopeID, p, zoneText); err != nil {
			return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, err)
		}
		spend = `SELECT cost_used::text, (cost_used + $3::text::numeric)::text,
			cost_used + $3::text::numeric < 0, $3::text::numeric > 0 AND cost_used + $3::text::numeric > $4::text::numeric
			FROM quota_periods WHERE scope = $1 AND scope_id = $2 AND period_start = $5`
		args = append(args, p.Start)
		a.PeriodStart = &p.Start
	}
	var before, after string
	var below, above bool
	if err := tx.QueryRow(ctx, spend, args...).Scan(&before, &after, &below, &above); err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, interpretError(err))
	}
	if below || above {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: cost_used %s %+s = %s, allowed 0 to %s: %w", where, before, a.Amount, after, maxUsed, ErrAdjustmentOutOfRange)
	}
	if kind != period.None {
		if _, err := tx.Exec(ctx, `UPDATE quota_periods SET cost_used = $4::text::numeric,
			adjustments = adjustments + $5::text::numeric WHERE scope = $1 AND scope_id = $2 AND period_start = $3`,
			a.Scope, a.ScopeID, p.Start, after, a.Amount); err != nil {
			return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: period: %w", where, interpretError(err))
		}
	}
	var q Quota
	if err := tx.QueryRow(ctx, `UPDATE quotas SET cost_used = greatest(cost_used + $3::text::numeric, 0), cost_limit = cost_limit,
		adjust_epoch = adjust_epoch + 1, updated_at = now()
		WHERE scope = $1 AND scope_id = $2 RETURNING `+quotaColumns, a.Scope, a.ScopeID, a.Amount).
		Scan(&q.Scope, &q.ScopeID, &q.CostLimit, &q.CostUsed, &q.AdjustEpoch, &q.Period, &q.TimeZone, &q.RPMLimit, &q.TPMLimit); err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, interpretError(err))
	}
	out, err := scanAdjustment(tx.QueryRow(ctx, `INSERT INTO quota_adjustments (scope, scope_id, amount, cost_used_before,
		cost_used_after, reason, actor_name, actor_role, period_start) VALUES ($1, $2, $3::text::numeric, $4::text::numeric,
		$5::text::numeric, $6, $7, $8, $9) RETURNING `+adjustmentColumns,
		a.Scope, a.ScopeID, a.Amount, before, after, a.Reason, a.ActorName, a.ActorRole, a.PeriodStart))
	if err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: record: %w", where, interpretError(err))
	}
	col, err := usageScopeColumn(a.Scope)
	if err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, err)
	}
	// The usage row of the adjustment, created when it was made, with admitted_at (which decides a row's
	// period) inside the corrected period.
	when := out.CreatedAt
	if a.PeriodStart != nil && (when.Before(p.Start) || !when.Before(p.End)) {
		when = p.Start
	}
	if _, err := tx.Exec(ctx, `INSERT INTO usages (request_id, `+col+`, operation, inbound_kind, cost, source, end_state,
			created_at, admitted_at, kind, adjustment_id)
		VALUES ('adj_' || $1::bigint, $2, 'quota_adjustment', '', $3::text::numeric, 'none', 'completed', $4, $5, 'adjustment', $1)`,
		out.ID, a.ScopeID, a.Amount, out.CreatedAt, when); err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: usage row: %w", where, interpretError(err))
	}
	q, err = withCurrentPeriod(ctx, tx, q, time.Now())
	if err != nil {
		return QuotaAdjustment{}, Quota{}, err
	}
	return out, q, nil
}

// ListQuotaAdjustments lists a scope's adjustments newest first, with ids below beforeID (0: from the
// newest), at most limit.
func ListQuotaAdjustments(ctx context.Context, db DBTX, scope string, scopeID, beforeID int64, limit int) ([]QuotaAdjustment, error) {
	rows, err := db.Query(ctx, `SELECT `+adjustmentColumns+` FROM quota_adjustments
		WHERE scope = $1 AND scope_id = $2 AND ($3 = 0 OR id < $3) ORDER BY id DESC LIMIT $4`, scope, scopeID, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("list quota adjustments: %w", interpretError(err))
	}
	defer rows.Close()
	var out []QuotaAdjustment
	for rows.Next() {
		a, err := scanAdjustment(rows)
		if err != nil {
			return nil, fmt.Errorf("list quota adjustments: %w", interpretError(err))
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list quota adjustments: %w", interpretError(err))
	}
	return out, nil
}
