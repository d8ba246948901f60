package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/shared/pricing"
)

// PriceRule is a stored price rule in the spec's shape (pricing.RuleInput, the same JSON the API takes).
// Prices are decimal strings read back with ::text, so Postgres numeric keeps the scale the operator wrote
// ("1.50" stays "1.50").
type PriceRule struct {
	pricing.RuleInput
	UpdatedAt time.Time `json:"-"`
}

const adminPriceRuleColumns = `id, provider_id, match_type, model_match, input_price::text, output_price::text,
	cache_read_price::text, cache_creation_5m_price::text, cache_creation_30m_price::text,
	cache_creation_1h_price::text, image_output_price::text, enabled, pricing_tiers_json::text, updated_at`

func adminScanPriceRule(row pgx.Row) (PriceRule, error) {
	var r PriceRule
	var tiers string
	err := row.Scan(&r.ID, &r.ProviderID, &r.MatchType, &r.ModelMatch, &r.InputPrice, &r.OutputPrice,
		&r.CacheReadPrice, &r.CacheCreation5mPrice, &r.CacheCreation30mPrice, &r.CacheCreation1hPrice,
		&r.ImageOutputPrice, &r.Enabled, &tiers, &r.UpdatedAt)
	r.PricingTiersJSON = json.RawMessage(tiers)
	return r, err
}

func adminCollectPriceRules(rows pgx.Rows, err error) ([]PriceRule, error) {
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PriceRule, error) { return adminScanPriceRule(row) })
	if err != nil {
		return nil, interpretError(err)
	}
	return out, nil
}

// adminTiersOrEmpty stores an absent pricing_tiers_json as an empty array.
func adminTiersOrEmpty(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "[]"
	}
	return string(raw)
}

// ListPriceRules returns up to limit rules with id > afterID, in id order (keyset pagination).
func ListPriceRules(ctx context.Context, db DBTX, afterID int64, limit int) ([]PriceRule, error) {
	rules, err := adminCollectPriceRules(db.Query(ctx, `SELECT `+adminPriceRuleColumns+` FROM price_rules
		WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit))
	if err != nil {
		return nil, fmt.Errorf("list price rules: %w", err)
	}
	return rules, nil
}

// AllPriceRules returns every rule in id order; enabledOnly restricts it to enabled rules.
func AllPriceRules(ctx context.Context, db DBTX, enabledOnly bool) ([]PriceRule, error) {
	rules, err := adminCollectPriceRules(db.Query(ctx, `SELECT `+adminPriceRuleColumns+` FROM price_rules
		WHERE enabled OR NOT $1 ORDER BY id`, enabledOnly))
	if err != nil {
		return nil, fmt.Errorf("read price rules: %w", err)
	}
	return rules, nil
}

// GetPriceRule reads one rule; ErrNotFound when absent.
func GetPriceRule(ctx context.Context, db DBTX, id int64) (PriceRule, error) {
	r, err := adminScanPriceRule(db.QueryRow(ctx, `SELECT `+adminPriceRuleColumns+` FROM price_rules WHERE id = $1`, id))
	if err != nil {
		return PriceRule{}, fmt.Errorf("get price rule %d: %w", id, interpretError(err))
	}
	return r, nil
}

// UpsertPriceRule inserts r with a new id when r.ID is 0, else inserts or replaces the rule with
// that id (and moves the id sequence past it). It returns the stored rule.
func UpsertPriceRule(ctx context.Context, db DBTX, r PriceRule) (PriceRule, error) {
	args := []any{r.ProviderID, r.MatchType, r.ModelMatch, r.InputPrice, r.OutputPrice, r.CacheReadPrice,
		r.CacheCreation5mPrice, r.CacheCreation30mPrice, r.CacheCreation1hPrice, r.ImageOutputPrice,
		r.Enabled, adminTiersOrEmpty(r.PricingTiersJSON)}
	const values = `$1, $2, $3, $4::text::numeric, $5::text::numeric, $6::text::numeric, $7::text::numeric,
		$8::text::numeric, $9::text::numeric, $10::text::numeric, $11, $12::text::jsonb`
	var row pgx.Row
	if r.ID == 0 {
		row = db.QueryRow(ctx, `INSERT INTO price_rules (provider_id, match_type, model_match, input_price,
			output_price, cache_read_price, cache_creation_5m_price, cache_creation_30m_price,
			cache_creation_1h_price, image_output_price, enabled, pricing_tiers_json)
			VALUES (`+values+`) RETURNING `+adminPriceRuleColumns, args...)
	} else {
		row = db.QueryRow(ctx, `INSERT INTO price_rules (provider_id, match_type, model_match, input_price,
			output_price, cache_read_price, cache_creation_5m_price, cache_creation_30m_price,
			cache_creation_1h_price, image_output_price, enabled, pricing_tiers_json, id)
			VALUES (`+values+`, $13)
			ON CONFLICT (id) DO UPDATE SET `+adminPriceRuleUpdateSet+` RETURNING `+adminPriceRuleColumns, append(args, r.ID)...)
	}
	out, err := adminScanPriceRule(row)
	if err != nil {
		return PriceRule{}, fmt.Errorf("upsert price rule %d: %w", r.ID, interpretError(err))
	}
	if r.ID != 0 {
		if err := adminSyncSequence(ctx, db, "price_rules"); err != nil {
			return PriceRule{}, err
		}
	}
	return out, nil
}

const adminPriceRuleUpdateSet = `provider_id = EXCLUDED.provider_id, match_type = EXCLUDED.match_type,
	model_match = EXCLUDED.model_match, input_price = EXCLUDED.input_price, output_price = EXCLUDED.output_price,
	cache_read_price = EXCLUDED.cache_read_price, cache_creation_5m_price = EXCLUDED.cache_creation_5m_price,
	cache_creation_30m_price = EXCLUDED.cache_creation_30m_price,
	cache_creation_1h_price = EXCLUDED.cache_creation_1h_price, image_output_price = EXCLUDED.image_output_price,
	enabled = EXCLUDED.enabled, pricing_tiers_json = EXCLUDED.pricing_tiers_json, updated_at = now()`

// UpdatePriceRule replaces the rule with id r.ID; ErrNotFound when it does not exist.
func UpdatePriceRule(ctx context.Context, db DBTX, r PriceRule) (PriceRule, error) {
	out, err := adminScanPriceRule(db.QueryRow(ctx, `UPDATE price_rules SET provider_id = $1, match_type = $2,
		model_match = $3, input_price = $4::text::numeric, output_price = $5::text::numeric,
		cache_read_price = $6::text::numeric, cache_creation_5m_price = $7::text::numeric,
		cache_creation_30m_price = $8::text::numeric, cache_creation_1h_price = $9::text::numeric,
		image_output_price = $10::text::numeric, enabled = $11, pricing_tiers_json = $12::text::jsonb,
		updated_at = now()
		WHERE id = $13 RETURNING `+adminPriceRuleColumns,
		r.ProviderID, r.MatchType, r.ModelMatch, r.InputPrice, r.OutputPrice, r.CacheReadPrice,
		r.CacheCreation5mPrice, r.CacheCreation30mPrice, r.CacheCreation1hPrice, r.ImageOutputPrice,
		r.Enabled, adminTiersOrEmpty(r.PricingTiersJSON), r.ID))
	if err != nil {
		return PriceRule{}, fmt.Errorf("update price rule %d: %w", r.ID, interpretError(err))
	}
	return out, nil
}

// DeletePriceRule deletes a rule; ErrNotFound when it does not exist.
func DeletePriceRule(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM price_rules WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete price rule %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete price rule %d: %w", id, ErrNotFound)
	}
	return nil
}

// adminSyncSequence moves table's id sequence to at least max(id), so rows created after an insert with
// explicit ids never collide. It only ever moves the sequence forward.
func adminSyncSequence(ctx context.Context, db DBTX, table string) error {
	_, err := db.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'),
		GREATEST((SELECT coalesce(max(id), 0) FROM `+pgx.Identifier{table}.Sanitize()+`),
		         (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END
		            FROM `+adminSequenceName(table)+`), 1))`, table)
	if err != nil {
		return fmt.Errorf("sync %s id sequence: %w", table, interpretError(err))
	}
	return nil
}

// adminSequenceName is the bigserial sequence of a table created by 0001_init.
func adminSequenceName(table string) string {
	return pgx.Identifier{table + "_id_seq"}.Sanitize()
}
