package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/shared/pricing"
)

// Provenance says where an imported price rule came from (price_rule_provenance).
type Provenance struct {
	PriceRuleID int64     `json:"price_rule_id"`
	Catalog     string    `json:"catalog"`
	FileDigest  string    `json:"file_digest"`
	EntryID     string    `json:"entry_id"`
	ImportedAt  time.Time `json:"imported_at"`
	ImportedBy  string    `json:"imported_by"`
	PlanID      string    `json:"plan_id"`
	// Fingerprint is the digest of the rule's content as imported.
	Fingerprint string `json:"-"`
}

const provenanceColumns = `price_rule_id, catalog, file_digest, entry_id, imported_at, imported_by, plan_id, fingerprint`

func collectProvenance(rows pgx.Rows, err error) ([]Provenance, error) {
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Provenance, error) {
		var p Provenance
		err := row.Scan(&p.PriceRuleID, &p.Catalog, &p.FileDigest, &p.EntryID, &p.ImportedAt, &p.ImportedBy, &p.PlanID, &p.Fingerprint)
		return p, err
	})
	return out, interpretError(err)
}

// AllProvenance returns the provenance of every imported rule, keyed by rule id.
func AllProvenance(ctx context.Context, db DBTX) (map[int64]Provenance, error) {
	ps, err := collectProvenance(db.Query(ctx, `SELECT `+provenanceColumns+` FROM price_rule_provenance`))
	if err != nil {
		return nil, fmt.Errorf("read price rule provenance: %w", err)
	}
	out := make(map[int64]Provenance, len(ps))
	for _, p := range ps {
		out[p.PriceRuleID] = p
	}
	return out, nil
}

// ListProvenance returns up to limit provenance rows with price_rule_id > afterID, in id order.
func ListProvenance(ctx context.Context, db DBTX, afterID int64, limit int) ([]Provenance, error) {
	ps, err := collectProvenance(db.Query(ctx, `SELECT `+provenanceColumns+` FROM price_rule_provenance
		WHERE price_rule_id > $1 ORDER BY price_rule_id LIMIT $2`, afterID, limit))
	if err != nil {
		return nil, fmt.Errorf("list price rule provenance: %w", err)
	}
	return ps, nil
}

// GetProvenance reads the provenance of one rule; ErrNotFound when the rule was not imported from
// a catalog.
func GetProvenance(ctx context.Context, db DBTX, ruleID int64) (Provenance, error) {
	ps, err := collectProvenance(db.Query(ctx, `SELECT `+provenanceColumns+` FROM price_rule_provenance
		WHERE price_rule_id = $1`, ruleID))
	if err != nil {
		return Provenance{}, fmt.Errorf("get provenance of price rule %d: %w", ruleID, err)
	}
	if len(ps) == 0 {
		return Provenance{}, fmt.Errorf("get provenance of price rule %d: %w", ruleID, ErrNotFound)
	}
	return ps[0], nil
}

// CatalogPlanRow is a stored plan.
type CatalogPlanRow struct {
	ID        string
	Format    string
	Digest    string
	CreatedAt time.Time
	CreatedBy string
	Plan      json.RawMessage
	AppliedAt *time.Time
	AppliedBy *string
}

// InsertCatalogPlan stores a plan and deletes plans older than keep.
func InsertCatalogPlan(ctx context.Context, db DBTX, p CatalogPlanRow, keep time.Duration) (time.Time, error) {
	var created time.Time
	if err := db.QueryRow(ctx, `INSERT INTO price_catalog_plans (id, format, digest, created_by, plan)
		VALUES ($1, $2, $3, $4, $5::text::jsonb) RETURNING created_at`, p.ID, p.Format, p.Digest, p.CreatedBy, string(p.Plan)).Scan(&created); err != nil {
		return time.Time{}, fmt.Errorf("store catalog plan: %w", interpretError(err))
	}
	if _, err := db.Exec(ctx, `DELETE FROM price_catalog_plans WHERE created_at < now() - $1::interval`,
		fmt.Sprintf("%d seconds", int64(keep/time.Second))); err != nil {
		return time.Time{}, fmt.Errorf("delete old catalog plans: %w", interpretError(err))
	}
	return created, nil
}

// LockCatalogPlan reads a plan and locks it for the rest of the transaction; ErrNotFound when absent.
func LockCatalogPlan(ctx context.Context, db DBTX, id string) (CatalogPlanRow, error) {
	var p CatalogPlanRow
	var plan string
	err := db.QueryRow(ctx, `SELECT id, format, digest, created_at, created_by, plan::text, applied_at, applied_by
		FROM price_catalog_plans WHERE id = $1 FOR UPDATE`, id).Scan(&p.ID, &p.Format, &p.Digest, &p.CreatedAt,
		&p.CreatedBy, &plan, &p.AppliedAt, &p.AppliedBy)
	if err != nil {
		return CatalogPlanRow{}, fmt.Errorf("read catalog plan %s: %w", id, interpretError(err))
	}
	p.Plan = json.RawMessage(plan)
	return p, nil
}

// MarkCatalogPlanApplied records that a plan was applied.
func MarkCatalogPlanApplied(ctx context.Context, db DBTX, id, by string) (time.Time, error) {
	var at time.Time
	if err := db.QueryRow(ctx, `UPDATE price_catalog_plans SET applied_at = now(), applied_by = $2 WHERE id = $1
		RETURNING applied_at`, id, by).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("mark catalog plan %s applied: %w", id, interpretError(err))
	}
	return at, nil
}

// LockPriceRules reads the rules with the given ids, locked FOR UPDATE, keyed by id (absent ids are
// missing from the map).
func LockPriceRules(ctx context.Context, db DBTX, ids []int64) (map[int64]PriceRule, error) {
	rules, err := adminCollectPriceRules(db.Query(ctx, `SELECT `+adminPriceRuleColumns+` FROM price_rules
		WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids))
	if err != nil {
		return nil, fmt.Errorf("lock price rules: %w", err)
	}
	out := make(map[int64]PriceRule, len(rules))
	for _, r := range rules {
		out[r.ID] = r
	}
	return out, nil
}

// LockPriceRuleTable takes a lock that keeps other writers of price_rules out until the
// transaction ends (readers go on), so a catalog apply's checks and writes see one state.
func LockPriceRuleTable(ctx context.Context, db DBTX) error {
	if _, err := db.Exec(ctx, `LOCK TABLE price_rules IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return fmt.Errorf("lock price rules: %w", interpretError(err))
	}
	return nil
}

// InsertPriceRulesReturningIDs inserts rules (their ids ignored) in one statement and returns the
// new ids in input order.
func InsertPriceRulesReturningIDs(ctx context.Context, db DBTX, rules []PriceRule) ([]int64, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	a := adminPriceRuleArrays(rules)
	ord := make([]int32, len(rules))
	for i := range ord {
		ord[i] = int32(i)
	}
	// Keys (provider, match type, pattern) are unique within one apply, so the inserted rows are
	// matched back to their input position by key.
	rows, err := db.Query(ctx, `WITH src AS (
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
				$8::text[], $9::text[], $10::text[], $11::boolean[], $12::text[], $13::int[])
				AS r(pid, mt, mm, p1, p2, p3, p4, p5, p6, p7, en, tiers, n)
		), ins AS (
			INSERT INTO price_rules (provider_id, match_type, model_match, input_price, output_price,
				cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price,
				image_output_price, enabled, pricing_tiers_json)
			SELECT pid, mt, mm, p1::numeric, p2::numeric, p3::numeric, p4::numeric, p5::numeric, p6::numeric,
				p7::numeric, en, tiers::jsonb FROM src ORDER BY n
			RETURNING id, provider_id, match_type, model_match
		)
		SELECT ins.id, src.n + 1 FROM ins JOIN src ON coalesce(ins.provider_id, 0) = coalesce(src.pid, 0)
			AND ins.match_type = src.mt AND ins.model_match = src.mm`, append(a[:12], ord)...)
	if err != nil {
		return nil, fmt.Errorf("insert catalog price rules: %w", interpretError(err))
	}
	ids := make([]int64, len(rules))
	var id, n int64
	count := 0
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		if n < 1 || int(n) > len(rules) || ids[n-1] != 0 {
			return fmt.Errorf("unexpected ordinal %d", n)
		}
		ids[n-1] = id
		count++
		return nil
	}); err != nil {
		return nil, fmt.Errorf("insert catalog price rules: %w", interpretError(err))
	}
	if count != len(rules) {
		return nil, fmt.Errorf("insert catalog price rules: %d ids for %d rules", count, len(rules))
	}
	return ids, nil
}

// UpdatePriceRulePrices replaces the prices, match and tiers of existing rules by id in one
// statement, keeping each rule's enabled flag.
func UpdatePriceRulePrices(ctx context.Context, db DBTX, rules []PriceRule) error {
	if len(rules) == 0 {
		return nil
	}
	a := adminPriceRuleArrays(rules)
	tag, err := db.Exec(ctx, `UPDATE price_rules p SET provider_id = r.pid, match_type = r.mt, model_match = r.mm,
			input_price = r.p1::numeric, output_price = r.p2::numeric, cache_read_price = r.p3::numeric,
			cache_creation_5m_price = r.p4::numeric, cache_creation_30m_price = r.p5::numeric,
			cache_creation_1h_price = r.p6::numeric, image_output_price = r.p7::numeric,
			pricing_tiers_json = r.tiers::jsonb, updated_at = now()
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::text[], $10::text[], $11::boolean[], $12::text[], $13::bigint[])
			AS r(pid, mt, mm, p1, p2, p3, p4, p5, p6, p7, en, tiers, id)
		WHERE p.id = r.id`, a...)
	if err != nil {
		return fmt.Errorf("update catalog price rules: %w", interpretError(err))
	}
	if int(tag.RowsAffected()) != len(rules) {
		return fmt.Errorf("update catalog price rules: %d of %d rules updated: %w", tag.RowsAffected(), len(rules), ErrNotFound)
	}
	return nil
}

// UpsertProvenance records the provenance of imported rules in one statement.
func UpsertProvenance(ctx context.Context, db DBTX, ps []Provenance) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	ids := make([]int64, n)
	var strs [6][]string
	for i := range strs {
		strs[i] = make([]string, n)
	}
	at := make([]time.Time, n)
	for i, p := range ps {
		ids[i], at[i] = p.PriceRuleID, p.ImportedAt
		for j, s := range [6]string{p.Catalog, p.FileDigest, p.EntryID, p.ImportedBy, p.PlanID, p.Fingerprint} {
			strs[j][i] = s
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO price_rule_provenance (price_rule_id, catalog, file_digest, entry_id,
			imported_by, plan_id, fingerprint, imported_at)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::timestamptz[])
		ON CONFLICT (price_rule_id) DO UPDATE SET catalog = EXCLUDED.catalog, file_digest = EXCLUDED.file_digest,
			entry_id = EXCLUDED.entry_id, imported_by = EXCLUDED.imported_by, plan_id = EXCLUDED.plan_id,
			fingerprint = EXCLUDED.fingerprint, imported_at = EXCLUDED.imported_at`,
		ids, strs[0], strs[1], strs[2], strs[3], strs[4], strs[5], at); err != nil {
		return fmt.Errorf("record price rule provenance: %w", interpretError(err))
	}
	return nil
}

// PriceRuleVersion is one version of a price rule: its content, the time range it was in force
// (ValidTo nil: in force now) and who wrote it.
type PriceRuleVersion struct {
	Version   int32           `json:"version"`
	ValidFrom time.Time       `json:"valid_from"`
	ValidTo   *time.Time      `json:"valid_to"`
	ChangedBy string          `json:"changed_by"`
	Rule      json.RawMessage `json:"rule"`
}

// Input decodes the version's rule.
func (v PriceRuleVersion) Input() (pricing.RuleInput, error) {
	in, err := decodeVersionRule(string(v.Rule))
	if err != nil {
		return pricing.RuleInput{}, fmt.Errorf("price rule version %d: %w", v.Version, err)
	}
	return in, nil
}

// decodeVersionRule reads the rule JSON a price_rule_versions row keeps (price_rule_version_json).
func decodeVersionRule(text string) (pricing.RuleInput, error) {
	var in pricing.RuleInput
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return pricing.RuleInput{}, fmt.Errorf("decode rule: %w", err)
	}
	return in, nil
}

// PriceRuleHistory returns every version of a rule, oldest first (also for a deleted rule);
// ErrNotFound when the id never existed.
func PriceRuleHistory(ctx context.Context, db DBTX, id int64) ([]PriceRuleVersion, error) {
	rows, err := db.Query(ctx, `SELECT version, valid_from, valid_to, changed_by, rule::text FROM price_rule_versions
		WHERE price_rule_id = $1 ORDER BY version`, id)
	if err != nil {
		return nil, fmt.Errorf("price rule %d history: %w", id, interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PriceRuleVersion, error) {
		var v PriceRuleVersion
		var rule string
		err := row.Scan(&v.Version, &v.ValidFrom, &v.ValidTo, &v.ChangedBy, &rule)
		v.Rule = json.RawMessage(rule)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("price rule %d history: %w", id, interpretError(err))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("price rule %d history: %w", id, ErrNotFound)
	}
	return out, nil
}

// SetActor names the writer of the transaction's changes for the price history.
func SetActor(ctx context.Context, db DBTX, actor string) error {
	if _, err := db.Exec(ctx, `SELECT set_config('tollgate.actor', $1, true)`, actor); err != nil {
		return fmt.Errorf("set actor: %w", interpretError(err))
	}
	return nil
}

// PriceRulesAt returns the rules in force at t, in id order: from the price history, with the pending
// scheduled version of a rule instead when it is due by t (so a future t answers the scheduled prices).
func PriceRulesAt(ctx context.Context, db DBTX, t time.Time) ([]pricing.RuleInput, error) {
	rows, err := db.Query(ctx, `SELECT coalesce(s.rule, v.rule)::text FROM price_rule_versions v
		LEFT JOIN price_rule_schedule s ON s.price_rule_id = v.price_rule_id AND s.effective_at <= $1
		WHERE v.valid_from <= $1 AND (v.valid_to IS NULL OR v.valid_to > $1) ORDER BY v.price_rule_id`, t)
	if err != nil {
		return nil, fmt.Errorf("price rules at %s: %w", t.Format(time.RFC3339), interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pricing.RuleInput, error) {
		var text string
		if err := row.Scan(&text); err != nil {
			return pricing.RuleInput{}, err
		}
		return decodeVersionRule(text)
	})
	if err != nil {
		return nil, fmt.Errorf("price rules at %s: %w", t.Format(time.RFC3339), interpretError(err))
	}
	return out, nil
}

// RepriceUsage is what the re-pricing report needs of a usage row.
type RepriceUsage struct {
	ProviderID                                                  int64
	Model, RequestedTier, ReportedTier, Cost                    string
	Input, Output, CacheRead, Cache5m, Cache30m, Cache1h, Image int64
}

// ForEachUsageBetween streams the usage rows created in [from, to) in (created_at, id) order.
func ForEachUsageBetween(ctx context.Context, db DBTX, from, to time.Time, fn func(RepriceUsage) error) error {
	rows, err := db.Query(ctx, `SELECT coalesce(provider_id, 0), upstream_model, requested_tier, reported_tier, cost::text,
			input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens,
			cache_creation_1h_tokens, image_output_tokens
		FROM usages WHERE created_at >= $1 AND created_at < $2 AND kind = 'request' ORDER BY created_at, id`, from, to)
	if err != nil {
		return fmt.Errorf("read usages: %w", interpretError(err))
	}
	var u RepriceUsage
	_, err = pgx.ForEachRow(rows, []any{&u.ProviderID, &u.Model, &u.RequestedTier, &u.ReportedTier, &u.Cost,
		&u.Input, &u.Output, &u.CacheRead, &u.Cache5m, &u.Cache30m, &u.Cache1h, &u.Image}, func() error { return fn(u) })
	if err != nil {
		return fmt.Errorf("read usages: %w", interpretError(err))
	}
	return nil
}
