package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ImportPriceRules writes validated rules in bulk inside the caller's transaction: rules with an id
// are inserted or replaced under that id, rules without one get a new id; the id sequence is then
// moved past every stored id. Two statements whatever the number of rules (unnest of arrays).
func ImportPriceRules(ctx context.Context, db DBTX, rules []PriceRule) error {
	withID, without := adminSplitByID(rules, func(r *PriceRule) bool { return r.ID != 0 })
	const cols = `provider_id, match_type, model_match, input_price, output_price, cache_read_price,
		cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price, enabled,
		pricing_tiers_json`
	const sel = `SELECT pid, mt, mm, p1::numeric, p2::numeric, p3::numeric, p4::numeric, p5::numeric, p6::numeric,
		p7::numeric, en, tiers::jsonb`
	const from = ` FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::text[], $11::boolean[], $12::text[], $13::bigint[])
		AS r(pid, mt, mm, p1, p2, p3, p4, p5, p6, p7, en, tiers, id)`
	if len(withID) > 0 {
		if _, err := db.Exec(ctx, `INSERT INTO price_rules (`+cols+`, id) `+sel+`, id`+from+`
			ON CONFLICT (id) DO UPDATE SET `+adminPriceRuleUpdateSet, adminPriceRuleArrays(withID)...); err != nil {
			return fmt.Errorf("import price rules with ids: %w", interpretError(err))
		}
		if err := adminSyncSequence(ctx, db, "price_rules"); err != nil {
			return err
		}
	}
	if len(without) > 0 {
		if _, err := db.Exec(ctx, `INSERT INTO price_rules (`+cols+`) `+sel+from, adminPriceRuleArrays(without)...); err != nil {
			return fmt.Errorf("import price rules: %w", interpretError(err))
		}
	}
	return nil
}

func adminPriceRuleArrays(rules []PriceRule) []any {
	n := len(rules)
	pids := make([]*int64, n)
	var strs [9][]string
	for i := range strs {
		strs[i] = make([]string, n)
	}
	enabled := make([]bool, n)
	tiers := make([]string, n)
	ids := make([]int64, n)
	for i, r := range rules {
		pids[i] = r.ProviderID
		for j, s := range [9]string{r.MatchType, r.ModelMatch, r.InputPrice, r.OutputPrice, r.CacheReadPrice,
			r.CacheCreation5mPrice, r.CacheCreation30mPrice, r.CacheCreation1hPrice, r.ImageOutputPrice} {
			strs[j][i] = s
		}
		enabled[i], tiers[i], ids[i] = r.Enabled, adminTiersOrEmpty(r.PricingTiersJSON), r.ID
	}
	return []any{pids, strs[0], strs[1], strs[2], strs[3], strs[4], strs[5], strs[6], strs[7], strs[8], enabled, tiers, ids}
}

// RoutingRuleClash is a bundle row whose (provider_id, operation, kind) is held by another stored row.
type RoutingRuleClash struct {
	Index    int
	HolderID int64
}

// RoutingRuleClashes finds the rows (by index) that would collide with a stored row of another id
// on (provider_id, operation, kind) when imported.
func RoutingRuleClashes(ctx context.Context, db DBTX, rules []RoutingRule) ([]RoutingRuleClash, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	a := adminRoutingRuleArrays(rules)
	idx := make([]int32, len(rules))
	for i := range idx {
		idx[i] = int32(i)
	}
	rows, err := db.Query(ctx, `SELECT b.i, rr.id
		FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::int[]) AS b(id, pid, op, kind, i)
		JOIN routing_rules rr ON rr.provider_id = b.pid AND rr.operation = b.op AND rr.kind = b.kind
		WHERE b.id <> 0 AND rr.id <> b.id ORDER BY b.i`, a[0], a[1], a[2], a[3], idx)
	if err != nil {
		return nil, fmt.Errorf("check routing rule clashes: %w", interpretError(err))
	}
	var out []RoutingRuleClash
	var c RoutingRuleClash
	var i int32
	if _, err := pgx.ForEachRow(rows, []any{&i, &c.HolderID}, func() error {
		c.Index = int(i)
		out = append(out, c)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("check routing rule clashes: %w", interpretError(err))
	}
	return out, nil
}

// ImportRoutingRules writes validated routing rules in bulk inside the caller's transaction: rows
// with an id are inserted or replaced under that id; rows without one are inserted or, when their
// (provider_id, operation, kind) exists, overwrite that row. The id sequence is moved past every id.
func ImportRoutingRules(ctx context.Context, db DBTX, rules []RoutingRule) error {
	withID, without := adminSplitByID(rules, func(r *RoutingRule) bool { return r.ID != 0 })
	const ins = `INSERT INTO routing_rules (id, provider_id, operation, kind, implementation, dest_operation, dest_kind,
			sort_order, enabled)
		SELECT id, pid, op, kind, impl, dop, dkind, ord, en
		  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		              $8::int[], $9::boolean[]) AS r(id, pid, op, kind, impl, dop, dkind, ord, en)`
	const set = ` DO UPDATE SET provider_id = EXCLUDED.provider_id, operation = EXCLUDED.operation,
		kind = EXCLUDED.kind, implementation = EXCLUDED.implementation, dest_operation = EXCLUDED.dest_operation,
		dest_kind = EXCLUDED.dest_kind, sort_order = EXCLUDED.sort_order, enabled = EXCLUDED.enabled`
	if len(withID) > 0 {
		if _, err := db.Exec(ctx, ins+` ON CONFLICT (id)`+set, adminRoutingRuleArrays(withID)...); err != nil {
			return fmt.Errorf("import routing rules with ids: %w", interpretError(err))
		}
		if err := adminSyncSequence(ctx, db, "routing_rules"); err != nil {
			return err
		}
	}
	if len(without) > 0 {
		if _, err := db.Exec(ctx, `INSERT INTO routing_rules (provider_id, operation, kind, implementation,
				dest_operation, dest_kind, sort_order, enabled)
			SELECT pid, op, kind, impl, dop, dkind, ord, en
			  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			              $8::int[], $9::boolean[]) AS r(id, pid, op, kind, impl, dop, dkind, ord, en)
			ON CONFLICT (provider_id, operation, kind)`+set, adminRoutingRuleArrays(without)...); err != nil {
			return fmt.Errorf("import routing rules: %w", interpretError(err))
		}
	}
	return nil
}

func adminRoutingRuleArrays(rules []RoutingRule) []any {
	n := len(rules)
	ids, pids := make([]int64, n), make([]int64, n)
	ops, kinds, impls := make([]string, n), make([]string, n), make([]string, n)
	dops, dkinds := make([]*string, n), make([]*string, n)
	orders, enabled := make([]int32, n), make([]bool, n)
	for i, r := range rules {
		ids[i], pids[i], ops[i], kinds[i], impls[i] = r.ID, r.ProviderID, r.Operation, r.Kind, r.Implementation
		dops[i], dkinds[i], orders[i], enabled[i] = r.DestOperation, r.DestKind, r.SortOrder, r.Enabled
	}
	return []any{ids, pids, ops, kinds, impls, dops, dkinds, orders, enabled}
}

// adminSplitByID splits rows into those with an id and those without, keeping order.
func adminSplitByID[T any](rows []T, hasID func(*T) bool) (withID, without []T) {
	n := 0
	for i := range rows {
		if hasID(&rows[i]) {
			n++
		}
	}
	withID, without = make([]T, 0, n), make([]T, 0, len(rows)-n)
	for i := range rows {
		if hasID(&rows[i]) {
			withID = append(withID, rows[i])
		} else {
			without = append(without, rows[i])
		}
	}
	return withID, without
}
