package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/pricing"
)

// ScheduledPriceRule is a version of a price rule that takes effect at EffectiveAt (table
// price_rule_schedule, migration 0008). Rule is the rule's whole content from then on; Version is the
// history version it will have.
type ScheduledPriceRule struct {
	ID          int64             `json:"id"`
	PriceRuleID int64             `json:"price_rule_id"`
	Version     int32             `json:"version"`
	EffectiveAt time.Time         `json:"effective_at"`
	Rule        pricing.RuleInput `json:"rule"`
	CreatedAt   time.Time         `json:"created_at"`
	CreatedBy   string            `json:"created_by"`
}

// ErrUnchangedSchedule: a scheduled version identical to the rule's current content (it would make no
// history version, yet usage rows would name one).
var ErrUnchangedSchedule = errors.New("the scheduled version is identical to the rule's current content")

// scheduleRuleJSON builds price_rule_version_json's shape from the parameters $1..$12.
const scheduleRuleJSON = `jsonb_build_object('id', $1::bigint, 'provider_id', $2::bigint, 'match_type', $3::text,
	'model_match', $4::text, 'input_price', $5::text::numeric::text, 'output_price', $6::text::numeric::text,
	'cache_read_price', $7::text::numeric::text, 'cache_creation_5m_price', $8::text::numeric::text,
	'cache_creation_30m_price', $9::text::numeric::text, 'cache_creation_1h_price', $10::text::numeric::text,
	'image_output_price', $11::text::numeric::text, 'enabled', $12::boolean, 'pricing_tiers_json', $13::text::jsonb)`

const scheduleColumns = `id, price_rule_id, version, effective_at, rule::text, created_at, created_by`

func scanSchedule(row pgx.Row) (ScheduledPriceRule, error) {
	var s ScheduledPriceRule
	var rule string
	if err := row.Scan(&s.ID, &s.PriceRuleID, &s.Version, &s.EffectiveAt, &rule, &s.CreatedAt, &s.CreatedBy); err != nil {
		return ScheduledPriceRule{}, err
	}
	in, err := decodeVersionRule(rule)
	if err != nil {
		return ScheduledPriceRule{}, fmt.Errorf("scheduled price rule %d: %w", s.ID, err)
	}
	s.Rule = in
	return s, nil
}

// SchedulePriceRule stores r as the version of the existing rule r.ID in force from at, replacing the
// rule's pending scheduled version if it has one (which keeps its id and reserved version). The rule is
// locked for the rest of the transaction. The scheduler recorded is the transaction's tollgate.actor (as
// for the history; else the database role). ErrNotFound: no rule r.ID; ErrUnchangedSchedule: r is the
// rule's current content.
func SchedulePriceRule(ctx context.Context, db DBTX, r PriceRule, at time.Time) (ScheduledPriceRule, error) {
	args := []any{r.ID, r.ProviderID, r.MatchType, r.ModelMatch, r.InputPrice, r.OutputPrice, r.CacheReadPrice,
		r.CacheCreation5mPrice, r.CacheCreation30mPrice, r.CacheCreation1hPrice, r.ImageOutputPrice,
		r.Enabled, adminTiersOrEmpty(r.PricingTiersJSON)}
	var same bool
	err := db.QueryRow(ctx, `SELECT price_rule_version_json(r) = `+scheduleRuleJSON+`
		FROM price_rules r WHERE r.id = $1 FOR UPDATE`, args...).Scan(&same)
	if err != nil {
		return ScheduledPriceRule{}, fmt.Errorf("schedule price rule %d: %w", r.ID, interpretError(err))
	}
	if same {
		return ScheduledPriceRule{}, fmt.Errorf("schedule price rule %d: %w", r.ID, ErrUnchangedSchedule)
	}
	s, err := scanSchedule(db.QueryRow(ctx, `INSERT INTO price_rule_schedule (price_rule_id, version, effective_at, rule, created_by)
		VALUES ($1, coalesce((SELECT max(v.version) FROM price_rule_versions v WHERE v.price_rule_id = $1), 0) + 1,
		        $14, `+scheduleRuleJSON+`,
		        coalesce(nullif(current_setting('tollgate.actor', true), ''), 'db:' || current_user))
		ON CONFLICT (price_rule_id) DO UPDATE SET effective_at = EXCLUDED.effective_at, rule = EXCLUDED.rule,
		        created_at = now(), created_by = EXCLUDED.created_by
		RETURNING `+scheduleColumns, append(args, at)...))
	if err != nil {
		return ScheduledPriceRule{}, fmt.Errorf("schedule price rule %d: %w", r.ID, interpretError(err))
	}
	return s, nil
}

// ListScheduledPriceRules returns the pending scheduled versions, earliest first (of one rule when
// ruleID is not 0).
func ListScheduledPriceRules(ctx context.Context, db DBTX, ruleID int64) ([]ScheduledPriceRule, error) {
	rows, err := db.Query(ctx, `SELECT `+scheduleColumns+` FROM price_rule_schedule
		WHERE $1 = 0 OR price_rule_id = $1 ORDER BY effective_at, id`, ruleID)
	if err != nil {
		return nil, fmt.Errorf("list scheduled price rules: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ScheduledPriceRule, error) { return scanSchedule(row) })
	if err != nil {
		return nil, fmt.Errorf("list scheduled price rules: %w", interpretError(err))
	}
	return out, nil
}

// CancelScheduledPriceRule deletes a pending scheduled version; ErrNotFound when there is none with that
// id (never scheduled, cancelled, or already in force).
func CancelScheduledPriceRule(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM price_rule_schedule WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("cancel scheduled price rule %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("cancel scheduled price rule %d: %w", id, ErrNotFound)
	}
	return nil
}

// NextScheduledPriceRule returns the earliest pending effective time; ok is false when none is pending.
func NextScheduledPriceRule(ctx context.Context, db DBTX) (at time.Time, ok bool, err error) {
	var t *time.Time
	if err := db.QueryRow(ctx, `SELECT min(effective_at) FROM price_rule_schedule`).Scan(&t); err != nil {
		return time.Time{}, false, fmt.Errorf("next scheduled price rule: %w", interpretError(err))
	}
	if t == nil {
		return time.Time{}, false, nil
	}
	return *t, true, nil
}

// AppliedSchedule is one scheduled version applied by ApplyDueScheduledPriceRules. Err is set when it
// could not be written (e.g. its provider was deleted since): it was dropped.
type AppliedSchedule struct {
	ScheduledPriceRule
	// Recorded is the history version the write made (Version, unless the content was unchanged).
	Recorded int32
	Err      error
}

// ApplyDueScheduledPriceRules writes every scheduled version due at now to its rule, each in a transaction
// of its own, earliest first: the rule takes the scheduled content, the history closes the previous
// version and opens the new one exactly at effective_at (tollgate.effective_at), written by the scheduler
// ("<created_by> (scheduled change <id>)"), and the schedule row goes. Replicas may run it concurrently
// (rows are claimed with SKIP LOCKED).
func ApplyDueScheduledPriceRules(ctx context.Context, db TxBeginner, now time.Time) ([]AppliedSchedule, error) {
	var out []AppliedSchedule
	for {
		var a AppliedSchedule
		var found bool
		err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error {
			s, err := scanSchedule(tx.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM price_rule_schedule
				WHERE effective_at <= $1 ORDER BY effective_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`, now))
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return interpretError(err)
			}
			found, a.ScheduledPriceRule = true, s
			if _, err := tx.Exec(ctx, `SELECT set_config('tollgate.effective_at', $1::timestamptz::text, true),
				set_config('tollgate.actor', $2, true)`, s.EffectiveAt, fmt.Sprintf("%s (scheduled change %d)", s.CreatedBy, s.ID)); err != nil {
				return interpretError(err)
			}
			if _, err := tx.Exec(ctx, `SAVEPOINT apply_schedule`); err != nil {
				return interpretError(err)
			}
			_, err = tx.Exec(ctx, `UPDATE price_rules r SET provider_id = (s.rule->>'provider_id')::bigint,
				match_type = s.rule->>'match_type', model_match = s.rule->>'model_match',
				input_price = (s.rule->>'input_price')::numeric, output_price = (s.rule->>'output_price')::numeric,
				cache_read_price = (s.rule->>'cache_read_price')::numeric,
				cache_creation_5m_price = (s.rule->>'cache_creation_5m_price')::numeric,
				cache_creation_30m_price = (s.rule->>'cache_creation_30m_price')::numeric,
				cache_creation_1h_price = (s.rule->>'cache_creation_1h_price')::numeric,
				image_output_price = (s.rule->>'image_output_price')::numeric,
				enabled = (s.rule->>'enabled')::boolean, pricing_tiers_json = s.rule->'pricing_tiers_json',
				updated_at = s.effective_at
				FROM price_rule_schedule s WHERE s.id = $1 AND r.id = s.price_rule_id`, s.ID)
			if err != nil {
				a.Err = fmt.Errorf("apply scheduled price rule %d: %w", s.ID, interpretError(err))
				if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT apply_schedule`); err != nil {
					return interpretError(err)
				}
			} else if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM price_rule_versions
				WHERE price_rule_id = $1`, s.PriceRuleID).Scan(&a.Recorded); err != nil {
				return interpretError(err)
			}
			_, err = tx.Exec(ctx, `DELETE FROM price_rule_schedule WHERE id = $1`, s.ID)
			return interpretError(err)
		})
		if err != nil {
			return out, fmt.Errorf("apply scheduled price rules: %w", err)
		}
		if !found {
			return out, nil
		}
		out = append(out, a)
	}
}

// snapScheduledPriceRules reads the pending scheduled versions for the snapshot. A version scoped to a
// disabled provider is carried disabled (the rule leaves pricing at that instant, as the snapshot's
// current rules leave out rules of disabled providers).
func snapScheduledPriceRules(ctx context.Context, tx pgx.Tx) ([]*configv1.ScheduledPriceRule, error) {
	rows, err := tx.Query(ctx, `SELECT s.id, s.price_rule_id, s.version, s.effective_at, s.rule::text, s.created_at, s.created_by,
		       coalesce((s.rule->>'provider_id') IS NULL OR p.enabled, false)
		  FROM price_rule_schedule s
		  LEFT JOIN providers p ON p.id = (s.rule->>'provider_id')::bigint
		 ORDER BY s.effective_at, s.id`)
	if err != nil {
		return nil, fmt.Errorf("scheduled price rules: %w", interpretError(err))
	}
	defer rows.Close()
	var out []*configv1.ScheduledPriceRule
	for rows.Next() {
		var s ScheduledPriceRule
		var rule string
		var providerOn bool
		if err := rows.Scan(&s.ID, &s.PriceRuleID, &s.Version, &s.EffectiveAt, &rule, &s.CreatedAt, &s.CreatedBy, &providerOn); err != nil {
			return nil, fmt.Errorf("scheduled price rules: scan: %w", interpretError(err))
		}
		in, err := decodeVersionRule(rule)
		if err != nil {
			return nil, fmt.Errorf("scheduled price rule %d: %w: %w", s.ID, ErrSnapshotData, err)
		}
		s.Rule = in
		pr, err := s.Message()
		if err != nil {
			return nil, fmt.Errorf("scheduled price rule %d: %w: %w", s.ID, ErrSnapshotData, err)
		}
		pr.Rule.Enabled = pr.Rule.Enabled && providerOn
		out = append(out, pr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("scheduled price rules: %w", interpretError(err))
	}
	return out, nil
}

// Message converts s to its protobuf form (snapshot and gRPC).
func (s ScheduledPriceRule) Message() (*configv1.ScheduledPriceRule, error) {
	in := s.Rule
	tiers, err := DecodeTierEntries(in.PricingTiersJSON)
	if err != nil {
		return nil, fmt.Errorf("pricing_tiers_json: %w", err)
	}
	return &configv1.ScheduledPriceRule{
		Id: s.ID, PriceRuleId: s.PriceRuleID, EffectiveAt: snapTime(s.EffectiveAt),
		CreatedBy: s.CreatedBy, CreatedAt: snapTime(s.CreatedAt),
		Rule: &configv1.PriceRule{
			Id: s.PriceRuleID, ProviderId: in.ProviderID, MatchType: in.MatchType, ModelMatch: in.ModelMatch,
			InputPrice: in.InputPrice, OutputPrice: in.OutputPrice, CacheReadPrice: in.CacheReadPrice,
			CacheCreation_5MPrice: in.CacheCreation5mPrice, CacheCreation_30MPrice: in.CacheCreation30mPrice,
			CacheCreation_1HPrice: in.CacheCreation1hPrice, ImageOutputPrice: in.ImageOutputPrice,
			Enabled: in.Enabled, PricingTiersJson: tiers, Version: int64(s.Version),
		},
	}, nil
}

// MarshalJSON keeps the rule's pricing_tiers_json an array in the API ("[]" when empty).
func (s ScheduledPriceRule) MarshalJSON() ([]byte, error) {
	type plain ScheduledPriceRule
	p := plain(s)
	p.Rule.PricingTiersJSON = json.RawMessage(adminTiersOrEmpty(p.Rule.PricingTiersJSON))
	return json.Marshal(p)
}
