package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RoutingRule is one routing cell of a provider: how it serves one (operation, kind).
type RoutingRule struct {
	ID             int64   `json:"id"`
	ProviderID     int64   `json:"provider_id"`
	Operation      string  `json:"operation"`
	Kind           string  `json:"kind"`
	Implementation string  `json:"implementation"`
	DestOperation  *string `json:"dest_operation"`
	DestKind       *string `json:"dest_kind"`
	SortOrder      int32   `json:"sort_order"`
	Enabled        bool    `json:"enabled"`
}

const adminRoutingRuleColumns = `id, provider_id, operation, kind, implementation, dest_operation, dest_kind, sort_order, enabled`

func adminCollectRoutingRules(rows pgx.Rows, err error) ([]RoutingRule, error) {
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RoutingRule])
	if err != nil {
		return nil, interpretError(err)
	}
	return out, nil
}

// ListRoutingRules returns a provider's routing rules ordered by sort_order, then id.
func ListRoutingRules(ctx context.Context, db DBTX, providerID int64) ([]RoutingRule, error) {
	out, err := adminCollectRoutingRules(db.Query(ctx, `SELECT `+adminRoutingRuleColumns+` FROM routing_rules
		WHERE provider_id = $1 ORDER BY sort_order, id`, providerID))
	if err != nil {
		return nil, fmt.Errorf("list routing rules of provider %d: %w", providerID, err)
	}
	return out, nil
}

// AllRoutingRules returns every routing rule in id order.
func AllRoutingRules(ctx context.Context, db DBTX) ([]RoutingRule, error) {
	out, err := adminCollectRoutingRules(db.Query(ctx, `SELECT `+adminRoutingRuleColumns+` FROM routing_rules ORDER BY id`))
	if err != nil {
		return nil, fmt.Errorf("read routing rules: %w", err)
	}
	return out, nil
}

// InsertRoutingRule inserts a new cell; a duplicate (provider_id, operation, kind) is ErrConflict.
func InsertRoutingRule(ctx context.Context, db DBTX, r RoutingRule) (RoutingRule, error) {
	rows, err := db.Query(ctx, `INSERT INTO routing_rules (provider_id, operation, kind, implementation,
		dest_operation, dest_kind, sort_order, enabled) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING `+adminRoutingRuleColumns,
		r.ProviderID, r.Operation, r.Kind, r.Implementation, r.DestOperation, r.DestKind, r.SortOrder, r.Enabled)
	out, err := adminCollectOne(adminCollectRoutingRules(rows, err))
	if err != nil {
		return RoutingRule{}, fmt.Errorf("insert routing rule %s/%s: %w", r.Operation, r.Kind, err)
	}
	return out, nil
}

// UpdateRoutingRule replaces the cell with id r.ID of provider r.ProviderID; ErrNotFound when the
// provider has no such row, ErrConflict when the new (operation, kind) is taken.
func UpdateRoutingRule(ctx context.Context, db DBTX, r RoutingRule) (RoutingRule, error) {
	rows, err := db.Query(ctx, `UPDATE routing_rules SET operation = $1, kind = $2, implementation = $3,
		dest_operation = $4, dest_kind = $5, sort_order = $6, enabled = $7
		WHERE id = $8 AND provider_id = $9 RETURNING `+adminRoutingRuleColumns,
		r.Operation, r.Kind, r.Implementation, r.DestOperation, r.DestKind, r.SortOrder, r.Enabled, r.ID, r.ProviderID)
	out, err := adminCollectOne(adminCollectRoutingRules(rows, err))
	if err != nil {
		return RoutingRule{}, fmt.Errorf("update routing rule %d: %w", r.ID, err)
	}
	return out, nil
}

// DeleteRoutingRule deletes provider providerID's (operation, kind) cell; ErrNotFound when the
// provider has no such row.
func DeleteRoutingRule(ctx context.Context, db DBTX, providerID int64, operation, kind string) error {
	tag, err := db.Exec(ctx, `DELETE FROM routing_rules WHERE provider_id = $1 AND operation = $2 AND kind = $3`,
		providerID, operation, kind)
	if err != nil {
		return fmt.Errorf("delete routing rule %s/%s of provider %d: %w", operation, kind, providerID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete routing rule %s/%s of provider %d: %w", operation, kind, providerID, ErrNotFound)
	}
	return nil
}

func adminCollectOne[T any](items []T, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	if len(items) == 0 {
		return zero, ErrNotFound
	}
	return items[0], nil
}

// ResetRoutingRules writes cells onto a provider: each cell's (operation, kind) row is inserted or
// overwritten (implementation, dest_operation, dest_kind, sort_order, enabled = true); rows for
// other (operation, kind) pairs are not touched. One statement.
func ResetRoutingRules(ctx context.Context, db DBTX, providerID int64, cells []RoutingRule) error {
	if len(cells) == 0 {
		return nil
	}
	ops := make([]string, len(cells))
	kinds := make([]string, len(cells))
	impls := make([]string, len(cells))
	destOps := make([]*string, len(cells))
	destKinds := make([]*string, len(cells))
	orders := make([]int32, len(cells))
	for i, c := range cells {
		ops[i], kinds[i], impls[i] = c.Operation, c.Kind, c.Implementation
		destOps[i], destKinds[i], orders[i] = c.DestOperation, c.DestKind, c.SortOrder
	}
	_, err := db.Exec(ctx, `INSERT INTO routing_rules (provider_id, operation, kind, implementation, dest_operation,
			dest_kind, sort_order, enabled)
		SELECT $1, op, kind, impl, dop, dkind, ord, true
		  FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[])
		    AS c(op, kind, impl, dop, dkind, ord)
		ON CONFLICT (provider_id, operation, kind) DO UPDATE SET implementation = EXCLUDED.implementation,
			dest_operation = EXCLUDED.dest_operation, dest_kind = EXCLUDED.dest_kind,
			sort_order = EXCLUDED.sort_order, enabled = true`,
		providerID, ops, kinds, impls, destOps, destKinds, orders)
	if err != nil {
		return fmt.Errorf("reset routing rules of provider %d: %w", providerID, interpretError(err))
	}
	return nil
}
