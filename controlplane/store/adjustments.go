package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
}

// ErrAdjustmentOutOfRange is returned (wrapped) by AdjustQuota when the adjusted cost_used would be
// negative or above the largest amount carried.
var ErrAdjustmentOutOfRange = errors.New("adjusted cost_used out of range")

const adjustmentColumns = `id, scope, scope_id, amount::text, cost_used_before::text, cost_used_after::text, reason,
	actor_name, actor_role, created_at`

func scanAdjustment(row pgx.Row) (QuotaAdjustment, error) {
	var a QuotaAdjustment
	err := row.Scan(&a.ID, &a.Scope, &a.ScopeID, &a.Amount, &a.CostUsedBefore, &a.CostUsedAfter, &a.Reason,
		&a.ActorName, &a.ActorRole, &a.CreatedAt)
	return a, err
}

// AdjustQuota applies a.Amount to the scope's cost_used and records the adjustment, in tx (one
// transaction: the change and its audit row commit together). A scope without a quota row gets one (no
// limit). The adjusted total must not be negative and a debit must not take it above maxUsed (decimal
// dollars), else ErrAdjustmentOutOfRange and nothing changes. The quota row is rewritten with its own
// cost_limit so the config revision moves and the next snapshot carries the adjusted cost_used to the data
// planes, and its adjust_epoch is raised by one: the data planes' cost_used mirror takes a value of a newer
// epoch even when it is lower (a credit) and ignores Settle answers of older ones (docs/settlement.md,
// "Adjustment epochs").
func AdjustQuota(ctx context.Context, tx pgx.Tx, a QuotaAdjustment, maxUsed string) (QuotaAdjustment, Quota, error) {
	where := fmt.Sprintf("adjust quota %s/%d", a.Scope, a.ScopeID)
	if _, err := tx.Exec(ctx, `INSERT INTO quotas (scope, scope_id) VALUES ($1, $2) ON CONFLICT (scope, scope_id) DO NOTHING`,
		a.Scope, a.ScopeID); err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, interpretError(err))
	}
	var before, after string
	var below, above bool
	if err := tx.QueryRow(ctx, `SELECT cost_used::text, (cost_used + $3::text::numeric)::text,
		cost_used + $3::text::numeric < 0, $3::text::numeric > 0 AND cost_used + $3::text::numeric > $4::text::numeric
		FROM quotas WHERE scope = $1 AND scope_id = $2 FOR UPDATE`, a.Scope, a.ScopeID, a.Amount, maxUsed).
		Scan(&before, &after, &below, &above); err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, interpretError(err))
	}
	if below || above {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: cost_used %s %+s = %s, allowed 0 to %s: %w", where, before, a.Amount, after, maxUsed, ErrAdjustmentOutOfRange)
	}
	q := Quota{Scope: a.Scope, ScopeID: a.ScopeID}
	if err := tx.QueryRow(ctx, `UPDATE quotas SET cost_used = $3::text::numeric, cost_limit = cost_limit,
		adjust_epoch = adjust_epoch + 1, updated_at = now()
		WHERE scope = $1 AND scope_id = $2 RETURNING cost_limit::text, cost_used::text, adjust_epoch`, a.Scope, a.ScopeID, after).
		Scan(&q.CostLimit, &q.CostUsed, &q.AdjustEpoch); err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: %w", where, interpretError(err))
	}
	out, err := scanAdjustment(tx.QueryRow(ctx, `INSERT INTO quota_adjustments (scope, scope_id, amount, cost_used_before,
		cost_used_after, reason, actor_name, actor_role) VALUES ($1, $2, $3::text::numeric, $4::text::numeric,
		$5::text::numeric, $6, $7, $8) RETURNING `+adjustmentColumns,
		a.Scope, a.ScopeID, a.Amount, before, after, a.Reason, a.ActorName, a.ActorRole))
	if err != nil {
		return QuotaAdjustment{}, Quota{}, fmt.Errorf("%s: record: %w", where, interpretError(err))
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
