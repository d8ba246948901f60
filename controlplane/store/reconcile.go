package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconciliation storage (migration 0016, docs/reconciliation.md): provider admin access, credential
// mappings, imported provider reports and reconciliation runs.

// ReconcileProvider is a provider's reconciliation settings. The sealed admin key is filled only by
// GetReconcileProviderSecret; the admin API shows HasAdminKey.
type ReconcileProvider struct {
	ProviderID  int64     `json:"provider_id"`
	Kind        string    `json:"kind"`
	BaseURL     string    `json:"base_url"`
	HasAdminKey bool      `json:"has_admin_key"`
	Enabled     bool      `json:"enabled"`
	BucketBy    string    `json:"bucket_by"`
	LateHours   int32     `json:"late_hours"`
	TokensAbs   *int64    `json:"tokens_abs"`
	TokensRel   *string   `json:"tokens_rel"`
	CostAbs     *string   `json:"cost_abs"`
	CostRel     *string   `json:"cost_rel"`
	UpdatedAt   time.Time `json:"updated_at"`

	SealedAdminKey []byte `json:"-"`
}

const reconcileProviderColumns = `provider_id, kind, base_url, admin_key_ciphertext IS NOT NULL, enabled, bucket_by, late_hours,
	tokens_abs, tokens_rel::text, cost_abs::text, cost_rel::text, updated_at`

func scanReconcileProvider(row pgx.Row, extra ...any) (ReconcileProvider, error) {
	var p ReconcileProvider
	err := row.Scan(append([]any{&p.ProviderID, &p.Kind, &p.BaseURL, &p.HasAdminKey, &p.Enabled, &p.BucketBy, &p.LateHours,
		&p.TokensAbs, &p.TokensRel, &p.CostAbs, &p.CostRel, &p.UpdatedAt}, extra...)...)
	return p, err
}

// PutReconcileProvider creates or replaces a provider's settings. sealedKey nil keeps the stored key
// (kind csv clears it).
func PutReconcileProvider(ctx context.Context, db DBTX, p ReconcileProvider, sealedKey []byte) (ReconcileProvider, error) {
	out, err := scanReconcileProvider(db.QueryRow(ctx, `
		INSERT INTO reconcile_providers AS r (provider_id, kind, base_url, admin_key_ciphertext, enabled, bucket_by, late_hours,
			tokens_abs, tokens_rel, cost_abs, cost_rel)
		VALUES ($1, $2, $3, CASE WHEN $2 = 'csv' THEN NULL ELSE $4::bytea END, $5, $6, $7, $8, $9::text::numeric,
			$10::text::numeric, $11::text::numeric)
		ON CONFLICT (provider_id) DO UPDATE SET kind = EXCLUDED.kind, base_url = EXCLUDED.base_url,
			admin_key_ciphertext = CASE WHEN EXCLUDED.kind = 'csv' THEN NULL
			                            ELSE coalesce($4::bytea, r.admin_key_ciphertext) END,
			enabled = EXCLUDED.enabled, bucket_by = EXCLUDED.bucket_by, late_hours = EXCLUDED.late_hours,
			tokens_abs = EXCLUDED.tokens_abs, tokens_rel = EXCLUDED.tokens_rel, cost_abs = EXCLUDED.cost_abs,
			cost_rel = EXCLUDED.cost_rel, updated_at = now()
		RETURNING `+reconcileProviderColumns,
		p.ProviderID, p.Kind, p.BaseURL, sealedKey, p.Enabled, p.BucketBy, p.LateHours, p.TokensAbs, p.TokensRel, p.CostAbs, p.CostRel))
	if err != nil {
		return ReconcileProvider{}, fmt.Errorf("put reconciliation settings of provider %d: %w", p.ProviderID, interpretError(err))
	}
	return out, nil
}

// GetReconcileProvider reads a provider's settings with its sealed admin key.
func GetReconcileProvider(ctx context.Context, db DBTX, providerID int64) (ReconcileProvider, error) {
	var sealed []byte
	p, err := scanReconcileProvider(db.QueryRow(ctx, `SELECT `+reconcileProviderColumns+`, admin_key_ciphertext
		FROM reconcile_providers WHERE provider_id = $1`, providerID), &sealed)
	if err != nil {
		return ReconcileProvider{}, fmt.Errorf("get reconciliation settings of provider %d: %w", providerID, interpretError(err))
	}
	p.SealedAdminKey = sealed
	return p, nil
}

// ListReconcileProviders lists every provider's settings (without keys), by provider id.
func ListReconcileProviders(ctx context.Context, db DBTX) ([]ReconcileProvider, error) {
	rows, err := db.Query(ctx, `SELECT `+reconcileProviderColumns+` FROM reconcile_providers ORDER BY provider_id`)
	if err != nil {
		return nil, fmt.Errorf("list reconciliation settings: %w", interpretError(err))
	}
	defer rows.Close()
	out := []ReconcileProvider{}
	for rows.Next() {
		p, err := scanReconcileProvider(rows)
		if err != nil {
			return nil, fmt.Errorf("list reconciliation settings: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// DeleteReconcileProvider removes a provider's settings (its runs and reports stay).
func DeleteReconcileProvider(ctx context.Context, db DBTX, providerID int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM reconcile_providers WHERE provider_id = $1`, providerID)
	if err != nil {
		return fmt.Errorf("delete reconciliation settings of provider %d: %w", providerID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// CredentialRef maps a credential to the provider-side key and project (workspace) it is.
type CredentialRef struct {
	CredentialID int64  `json:"credential_id"`
	ProviderID   int64  `json:"provider_id"`
	KeyRef       string `json:"key_ref"`
	ProjectRef   string `json:"project_ref"`
}

// SetCredentialRef creates or replaces a credential's mapping; both refs empty deletes it.
func SetCredentialRef(ctx context.Context, db DBTX, r CredentialRef) error {
	var err error
	if r.KeyRef == "" && r.ProjectRef == "" {
		_, err = db.Exec(ctx, `DELETE FROM reconcile_credential_refs WHERE credential_id = $1`, r.CredentialID)
	} else {
		_, err = db.Exec(ctx, `INSERT INTO reconcile_credential_refs (credential_id, key_ref, project_ref) VALUES ($1, $2, $3)
			ON CONFLICT (credential_id) DO UPDATE SET key_ref = EXCLUDED.key_ref, project_ref = EXCLUDED.project_ref`,
			r.CredentialID, r.KeyRef, r.ProjectRef)
	}
	if err != nil {
		return fmt.Errorf("map credential %d: %w", r.CredentialID, interpretError(err))
	}
	return nil
}

// ListCredentialRefs lists the mappings of a provider's credentials.
func ListCredentialRefs(ctx context.Context, db DBTX, providerID int64) ([]CredentialRef, error) {
	rows, err := db.Query(ctx, `SELECT r.credential_id, c.provider_id, r.key_ref, r.project_ref FROM reconcile_credential_refs r
		JOIN credentials c ON c.id = r.credential_id WHERE c.provider_id = $1 ORDER BY r.credential_id`, providerID)
	if err != nil {
		return nil, fmt.Errorf("list credential mappings: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[CredentialRef])
	if err != nil {
		return nil, fmt.Errorf("list credential mappings: %w", err)
	}
	if out == nil {
		out = []CredentialRef{}
	}
	return out, nil
}

// ReportTokens are token counts per category, in the ledger's disjoint categories.
type ReportTokens struct {
	Input     int64 `json:"input_tokens"`
	Output    int64 `json:"output_tokens"`
	CacheRead int64 `json:"cache_read_tokens"`
	Cache5m   int64 `json:"cache_creation_5m_tokens"`
	Cache30m  int64 `json:"cache_creation_30m_tokens"`
	Cache1h   int64 `json:"cache_creation_1h_tokens"`
	ImageOut  int64 `json:"image_output_tokens"`
}

// ReportUsage is one imported usage group of a day.
type ReportUsage struct {
	KeyRef, ProjectRef, Model, Tier string
	Tokens                          ReportTokens
	TokensReported                  bool
	Requests                        int64
}

// ReportCost is one imported cost group of a day; Cost is an exact decimal string in dollars.
type ReportCost struct {
	ProjectRef, Model, Cost string
}

// ImportedDay is a provider's stored report of one UTC day.
type ImportedDay struct {
	ProviderID  int64
	Day         time.Time
	Source      string
	ImportedAt  time.Time
	Complete    bool
	ImportCount int32
	Usage       []ReportUsage
	Costs       []ReportCost
}

// SaveImportedDay stores a provider's report of one day, replacing what an earlier import stored for it
// (late data), in one transaction.
func SaveImportedDay(ctx context.Context, db TxBeginner, d ImportedDay) (ImportedDay, error) {
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM reconcile_report_usage WHERE provider_id = $1 AND day = $2`, d.ProviderID, d.Day); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM reconcile_report_costs WHERE provider_id = $1 AND day = $2`, d.ProviderID, d.Day); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `INSERT INTO reconcile_imports (provider_id, day, source, complete) VALUES ($1, $2, $3, $4)
			ON CONFLICT (provider_id, day) DO UPDATE SET source = EXCLUDED.source, complete = EXCLUDED.complete,
				imported_at = now(), import_count = reconcile_imports.import_count + 1
			RETURNING imported_at, import_count`, d.ProviderID, d.Day, d.Source, d.Complete).Scan(&d.ImportedAt, &d.ImportCount); err != nil {
			return err
		}
		usage := make([][]any, len(d.Usage))
		for i, u := range d.Usage {
			usage[i] = []any{d.ProviderID, d.Day, u.KeyRef, u.ProjectRef, u.Model, u.Tier, u.Tokens.Input, u.Tokens.Output,
				u.Tokens.CacheRead, u.Tokens.Cache5m, u.Tokens.Cache30m, u.Tokens.Cache1h, u.Tokens.ImageOut, u.TokensReported, u.Requests}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"reconcile_report_usage"}, []string{"provider_id", "day", "key_ref",
			"project_ref", "model", "tier", "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_5m_tokens",
			"cache_creation_30m_tokens", "cache_creation_1h_tokens", "image_output_tokens", "tokens_reported", "requests"}, pgx.CopyFromRows(usage)); err != nil {
			return err
		}
		for _, c := range d.Costs {
			if _, err := tx.Exec(ctx, `INSERT INTO reconcile_report_costs (provider_id, day, project_ref, model, cost)
				VALUES ($1, $2, $3, $4, $5::text::numeric)`, d.ProviderID, d.Day, c.ProjectRef, c.Model, c.Cost); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ImportedDay{}, fmt.Errorf("save report of provider %d for %s: %w", d.ProviderID, d.Day.Format(time.DateOnly), interpretError(err))
	}
	return d, nil
}

// LoadImportedDay reads a provider's stored report of one day (ErrNotFound: never imported).
func LoadImportedDay(ctx context.Context, db DBTX, providerID int64, day time.Time) (ImportedDay, error) {
	d := ImportedDay{ProviderID: providerID, Day: day}
	err := db.QueryRow(ctx, `SELECT source, imported_at, complete, import_count FROM reconcile_imports WHERE provider_id = $1 AND day = $2`,
		providerID, day).Scan(&d.Source, &d.ImportedAt, &d.Complete, &d.ImportCount)
	if err != nil {
		return ImportedDay{}, fmt.Errorf("load report of provider %d for %s: %w", providerID, day.Format(time.DateOnly), interpretError(err))
	}
	rows, err := db.Query(ctx, `SELECT key_ref, project_ref, model, tier, input_tokens, output_tokens, cache_read_tokens,
		cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens, tokens_reported, requests
		FROM reconcile_report_usage WHERE provider_id = $1 AND day = $2`, providerID, day)
	if err != nil {
		return ImportedDay{}, fmt.Errorf("load report usage: %w", err)
	}
	for rows.Next() {
		var u ReportUsage
		if err := rows.Scan(&u.KeyRef, &u.ProjectRef, &u.Model, &u.Tier, &u.Tokens.Input, &u.Tokens.Output, &u.Tokens.CacheRead,
			&u.Tokens.Cache5m, &u.Tokens.Cache30m, &u.Tokens.Cache1h, &u.Tokens.ImageOut, &u.TokensReported, &u.Requests); err != nil {
			rows.Close()
			return ImportedDay{}, fmt.Errorf("load report usage: %w", err)
		}
		d.Usage = append(d.Usage, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return ImportedDay{}, fmt.Errorf("load report usage: %w", err)
	}
	rows, err = db.Query(ctx, `SELECT project_ref, model, cost::text FROM reconcile_report_costs WHERE provider_id = $1 AND day = $2`,
		providerID, day)
	if err != nil {
		return ImportedDay{}, fmt.Errorf("load report costs: %w", err)
	}
	d.Costs, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ReportCost])
	if err != nil {
		return ImportedDay{}, fmt.Errorf("load report costs: %w", err)
	}
	return d, nil
}

// LedgerGroup is the ledger's rows of a provider and day that share a provider-side group (the credential's
// key and project, the upstream model, the reported tier), a source and the price rule that priced them.
type LedgerGroup struct {
	KeyRef, ProjectRef, Model, Tier string
	Source                          string
	PriceRuleID                     *int64
	PriceRuleVersion                *int32
	Rows, Requests                  int64
	// Cut counts the rows of streams that broke before their end (upstream_interrupted, client_dropped).
	Cut                        int64
	Input, Output, CacheRead   int64
	Cache5m, Cache30m, Cache1h int64
	ImageOut                   int64
	Cost                       string
}

// LedgerGroups sums the ledger's request rows of a provider whose bucket instant — the request's end
// (created_at + latency) or start (created_at), per bucketBy — is in [from, to). Refused requests are not
// counted; a request counts as one the provider answered when it completed or carries tokens.
func LedgerGroups(ctx context.Context, db DBTX, providerID int64, from, to time.Time, bucketBy string) ([]LedgerGroup, error) {
	instant := `u.created_at + u.latency_ms * interval '1 millisecond'`
	if bucketBy == "start" {
		instant = `u.created_at`
	}
	rows, err := db.Query(ctx, `
		SELECT coalesce(r.key_ref, ''), coalesce(r.project_ref, ''), u.upstream_model, u.reported_tier, u.source,
		       u.price_rule_id, u.price_rule_version, count(*),
		       count(*) FILTER (WHERE u.end_state = 'completed' OR u.input_tokens + u.output_tokens + u.cache_read_tokens
		           + u.cache_creation_5m_tokens + u.cache_creation_30m_tokens + u.cache_creation_1h_tokens + u.image_output_tokens > 0),
		       count(*) FILTER (WHERE u.end_state IN ('upstream_interrupted', 'client_dropped')),
		       sum(u.input_tokens), sum(u.output_tokens), sum(u.cache_read_tokens), sum(u.cache_creation_5m_tokens),
		       sum(u.cache_creation_30m_tokens), sum(u.cache_creation_1h_tokens), sum(u.image_output_tokens), sum(u.cost)::text
		  FROM usages u
		  LEFT JOIN reconcile_credential_refs r ON r.credential_id = u.credential_id
		 WHERE u.provider_id = $1 AND u.kind = 'request' AND u.end_state <> 'rejected'
		   -- the partition key bounds the scan; a request may last up to a day
		   AND u.created_at >= $2::timestamptz - interval '1 day' AND u.created_at < $3
		   AND `+instant+` >= $2 AND `+instant+` < $3
		 GROUP BY 1, 2, 3, 4, 5, 6, 7
		 ORDER BY 1, 2, 3, 4, 5, 6, 7`, providerID, from, to)
	if err != nil {
		return nil, fmt.Errorf("ledger of provider %d: %w", providerID, interpretError(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LedgerGroup])
	if err != nil {
		return nil, fmt.Errorf("ledger of provider %d: %w", providerID, err)
	}
	return out, nil
}

// ReconcileRun is one stored run with its totals; Lines are filled by GetReconcileRun.
type ReconcileRun struct {
	ID              int64           `json:"id"`
	ProviderID      int64           `json:"provider_id"`
	Day             time.Time       `json:"day"`
	Trigger         string          `json:"trigger"`
	Status          string          `json:"status"`
	Error           string          `json:"error"`
	Provisional     bool            `json:"provisional"`
	ImportCount     int32           `json:"import_count"`
	LedgerTokens    int64           `json:"ledger_tokens"`
	ProviderTokens  int64           `json:"provider_tokens"`
	LedgerCost      string          `json:"ledger_cost"`
	ProviderCost    string          `json:"provider_cost"`
	SourceUpstream  int64           `json:"source_upstream"`
	SourceLocal     int64           `json:"source_local"`
	SourceEstimated int64           `json:"source_estimated"`
	StartedAt       time.Time       `json:"started_at"`
	FinishedAt      time.Time       `json:"finished_at"`
	Lines           []ReconcileLine `json:"lines,omitempty"`
}

// ReconcileLine is one compared group of a run; Provider is nil when the provider reported no tokens for it.
type ReconcileLine struct {
	ID               int64           `json:"id"`
	Kind             string          `json:"kind"`
	KeyRef           string          `json:"key_ref"`
	ProjectRef       string          `json:"project_ref"`
	Model            string          `json:"model"`
	Tier             string          `json:"tier"`
	Ledger           ReportTokens    `json:"ledger"`
	Provider         *ReportTokens   `json:"provider"`
	LedgerRequests   int64           `json:"ledger_requests"`
	ProviderRequests int64           `json:"provider_requests"`
	LedgerCost       string          `json:"ledger_cost"`
	ProviderCost     string          `json:"provider_cost"`
	SourceUpstream   int64           `json:"source_upstream"`
	SourceLocal      int64           `json:"source_local"`
	SourceEstimated  int64           `json:"source_estimated"`
	PriceRules       json.RawMessage `json:"price_rules"`
	Cause            string          `json:"cause"`
	Detail           string          `json:"detail"`
}

const reconcileRunColumns = `id, provider_id, day, trigger, status, error, provisional, import_count, ledger_tokens, provider_tokens,
	ledger_cost::text, provider_cost::text, source_upstream, source_local, source_estimated, started_at, finished_at`

func scanReconcileRun(row pgx.Row) (ReconcileRun, error) {
	var r ReconcileRun
	err := row.Scan(&r.ID, &r.ProviderID, &r.Day, &r.Trigger, &r.Status, &r.Error, &r.Provisional, &r.ImportCount,
		&r.LedgerTokens, &r.ProviderTokens, &r.LedgerCost, &r.ProviderCost, &r.SourceUpstream, &r.SourceLocal,
		&r.SourceEstimated, &r.StartedAt, &r.FinishedAt)
	return r, err
}

// InsertReconcileRun stores a run and its lines in tx and returns the run with its id.
func InsertReconcileRun(ctx context.Context, tx pgx.Tx, r ReconcileRun) (ReconcileRun, error) {
	out, err := scanReconcileRun(tx.QueryRow(ctx, `INSERT INTO reconcile_runs (provider_id, day, trigger, status, error, provisional,
		import_count, ledger_tokens, provider_tokens, ledger_cost, provider_cost, source_upstream, source_local, source_estimated,
		started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text::numeric, $11::text::numeric, $12, $13, $14, $15, now())
		RETURNING `+reconcileRunColumns, r.ProviderID, r.Day, r.Trigger, r.Status, r.Error, r.Provisional, r.ImportCount,
		r.LedgerTokens, r.ProviderTokens, orZero(r.LedgerCost), orZero(r.ProviderCost), r.SourceUpstream, r.SourceLocal,
		r.SourceEstimated, r.StartedAt))
	if err != nil {
		return ReconcileRun{}, fmt.Errorf("insert reconciliation run: %w", interpretError(err))
	}
	for _, l := range r.Lines {
		var p [7]*int64
		if l.Provider != nil {
			p = [7]*int64{&l.Provider.Input, &l.Provider.Output, &l.Provider.CacheRead, &l.Provider.Cache5m, &l.Provider.Cache30m,
				&l.Provider.Cache1h, &l.Provider.ImageOut}
		}
		rules := l.PriceRules
		if len(rules) == 0 {
			rules = json.RawMessage("[]")
		}
		err := tx.QueryRow(ctx, `INSERT INTO reconcile_lines (run_id, kind, key_ref, project_ref, model, tier, ledger_input, ledger_output,
			ledger_cache_read, ledger_cache_creation_5m, ledger_cache_creation_30m, ledger_cache_creation_1h, ledger_image_output,
			provider_input, provider_output, provider_cache_read, provider_cache_creation_5m, provider_cache_creation_30m,
			provider_cache_creation_1h, provider_image_output, ledger_requests,
			provider_requests, ledger_cost, provider_cost, source_upstream, source_local, source_estimated, price_rules, cause, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
			        $23::text::numeric, $24::text::numeric, $25, $26, $27, $28::text::jsonb, $29, $30) RETURNING id`,
			out.ID, l.Kind, l.KeyRef, l.ProjectRef, l.Model, l.Tier, l.Ledger.Input, l.Ledger.Output, l.Ledger.CacheRead,
			l.Ledger.Cache5m, l.Ledger.Cache30m, l.Ledger.Cache1h, l.Ledger.ImageOut, p[0], p[1], p[2], p[3], p[4], p[5], p[6], l.LedgerRequests,
			l.ProviderRequests, orZero(l.LedgerCost), orZero(l.ProviderCost), l.SourceUpstream, l.SourceLocal, l.SourceEstimated,
			string(rules), l.Cause, l.Detail).Scan(&l.ID)
		if err != nil {
			return ReconcileRun{}, fmt.Errorf("insert reconciliation line: %w", interpretError(err))
		}
		out.Lines = append(out.Lines, l)
	}
	return out, nil
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// ReconcileRunFilter selects runs, newest first (by id) before BeforeID.
type ReconcileRunFilter struct {
	ProviderID *int64
	From, To   *time.Time // days, inclusive from, exclusive to
	Status     string
	BeforeID   int64
	Limit      int
}

// ListReconcileRuns lists runs without lines.
func ListReconcileRuns(ctx context.Context, db DBTX, f ReconcileRunFilter) ([]ReconcileRun, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	rows, err := db.Query(ctx, `SELECT `+reconcileRunColumns+` FROM reconcile_runs
		WHERE ($1::bigint IS NULL OR provider_id = $1) AND ($2::date IS NULL OR day >= $2) AND ($3::date IS NULL OR day < $3)
		  AND ($4 = '' OR status = $4) AND ($5 = 0 OR id < $5)
		ORDER BY id DESC LIMIT $6`, f.ProviderID, f.From, f.To, f.Status, f.BeforeID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list reconciliation runs: %w", interpretError(err))
	}
	defer rows.Close()
	out := []ReconcileRun{}
	for rows.Next() {
		r, err := scanReconcileRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list reconciliation runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// GetReconcileRun reads a run with its lines.
func GetReconcileRun(ctx context.Context, db DBTX, id int64) (ReconcileRun, error) {
	r, err := scanReconcileRun(db.QueryRow(ctx, `SELECT `+reconcileRunColumns+` FROM reconcile_runs WHERE id = $1`, id))
	if err != nil {
		return ReconcileRun{}, fmt.Errorf("get reconciliation run %d: %w", id, interpretError(err))
	}
	rows, err := db.Query(ctx, `SELECT id, kind, key_ref, project_ref, model, tier, ledger_input, ledger_output, ledger_cache_read,
		ledger_cache_creation_5m, ledger_cache_creation_30m, ledger_cache_creation_1h, ledger_image_output, provider_input,
		provider_output, provider_cache_read, provider_cache_creation_5m, provider_cache_creation_30m, provider_cache_creation_1h,
		provider_image_output, ledger_requests, provider_requests,
		ledger_cost::text, provider_cost::text, source_upstream, source_local, source_estimated, price_rules::text, cause, detail
		FROM reconcile_lines WHERE run_id = $1 ORDER BY id`, id)
	if err != nil {
		return ReconcileRun{}, fmt.Errorf("get reconciliation run %d lines: %w", id, err)
	}
	defer rows.Close()
	r.Lines = []ReconcileLine{}
	for rows.Next() {
		var l ReconcileLine
		var p [7]*int64
		var rules string
		if err := rows.Scan(&l.ID, &l.Kind, &l.KeyRef, &l.ProjectRef, &l.Model, &l.Tier, &l.Ledger.Input, &l.Ledger.Output,
			&l.Ledger.CacheRead, &l.Ledger.Cache5m, &l.Ledger.Cache30m, &l.Ledger.Cache1h, &l.Ledger.ImageOut, &p[0], &p[1], &p[2], &p[3],
			&p[4], &p[5], &p[6],
			&l.LedgerRequests, &l.ProviderRequests, &l.LedgerCost, &l.ProviderCost, &l.SourceUpstream, &l.SourceLocal,
			&l.SourceEstimated, &rules, &l.Cause, &l.Detail); err != nil {
			return ReconcileRun{}, fmt.Errorf("get reconciliation run %d lines: %w", id, err)
		}
		if p[0] != nil {
			l.Provider = &ReportTokens{*p[0], *p[1], *p[2], *p[3], *p[4], *p[5], *p[6]}
		}
		l.PriceRules = json.RawMessage(rules)
		r.Lines = append(r.Lines, l)
	}
	return r, rows.Err()
}

// LatestReconcileRuns returns, for each provider (or only providerID) and day in [from, to), its latest run
// that did not fail, with lines, by provider and day.
func LatestReconcileRuns(ctx context.Context, db DBTX, from, to time.Time, providerID *int64) ([]ReconcileRun, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT ON (provider_id, day) id FROM reconcile_runs
		WHERE status <> 'failed' AND day >= $1 AND day < $2 AND ($3::bigint IS NULL OR provider_id = $3)
		ORDER BY provider_id, day, id DESC`, from, to, providerID)
	if err != nil {
		return nil, fmt.Errorf("latest reconciliation runs: %w", interpretError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("latest reconciliation runs: %w", err)
	}
	out := make([]ReconcileRun, 0, len(ids))
	for _, id := range ids {
		r, err := GetReconcileRun(ctx, db, id)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ProviderRefs are the provider-side keys and projects mapped to credentials: those of the provider, and
// those mapped only to other providers' credentials (an admin report covers a whole account, which several
// Tollgate providers may share).
type ProviderRefs struct {
	OwnProjects     map[string]bool
	ForeignKeys     map[string]bool
	ForeignProjects map[string]bool
}

// LoadProviderRefs reads the mappings that decide which report rows belong to providerID.
func LoadProviderRefs(ctx context.Context, db DBTX, providerID int64) (ProviderRefs, error) {
	out := ProviderRefs{OwnProjects: map[string]bool{}, ForeignKeys: map[string]bool{}, ForeignProjects: map[string]bool{}}
	rows, err := db.Query(ctx, `SELECT c.provider_id = $1, r.key_ref, r.project_ref FROM reconcile_credential_refs r
		JOIN credentials c ON c.id = r.credential_id`, providerID)
	if err != nil {
		return out, fmt.Errorf("credential mappings: %w", interpretError(err))
	}
	defer rows.Close()
	ownKeys := map[string]bool{}
	for rows.Next() {
		var own bool
		var key, project string
		if err := rows.Scan(&own, &key, &project); err != nil {
			return out, fmt.Errorf("credential mappings: %w", err)
		}
		if own {
			ownKeys[key] = true
			out.OwnProjects[project] = true
		} else {
			out.ForeignKeys[key] = true
			out.ForeignProjects[project] = true
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("credential mappings: %w", err)
	}
	for k := range ownKeys {
		delete(out.ForeignKeys, k)
	}
	for p := range out.OwnProjects {
		delete(out.ForeignProjects, p)
	}
	return out, nil
}

// LedgerCost is the ledger's cost of a project and model, with one price rule version that priced it.
type LedgerCost struct {
	ProjectRef, Model string
	PriceRuleID       *int64
	PriceRuleVersion  *int32
	Rows              int64
	Cost              string
}

// LedgerCosts sums the cost of the ledger's request rows in [from, to) (bucketed as LedgerGroups) per
// project, model and price rule version: the rows of every credential mapped to one of projects, whatever
// its provider (a project's cost report covers them all), and the provider's rows of unmapped credentials
// (project "").
func LedgerCosts(ctx context.Context, db DBTX, providerID int64, projects []string, from, to time.Time, bucketBy string) ([]LedgerCost, error) {
	instant := `u.created_at + u.latency_ms * interval '1 millisecond'`
	if bucketBy == "start" {
		instant = `u.created_at`
	}
	rows, err := db.Query(ctx, `
		SELECT coalesce(r.project_ref, ''), u.upstream_model, u.price_rule_id, u.price_rule_version, count(*), sum(u.cost)::text
		  FROM usages u
		  LEFT JOIN reconcile_credential_refs r ON r.credential_id = u.credential_id
		 WHERE (r.project_ref = ANY($2) OR (r.credential_id IS NULL AND u.provider_id = $1))
		   AND u.kind = 'request' AND u.end_state <> 'rejected'
		   AND u.created_at >= $3::timestamptz - interval '1 day' AND u.created_at < $4
		   AND `+instant+` >= $3 AND `+instant+` < $4
		 GROUP BY 1, 2, 3, 4
		 ORDER BY 1, 2, 3, 4`, providerID, projects, from, to)
	if err != nil {
		return nil, fmt.Errorf("ledger costs of provider %d: %w", providerID, interpretError(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LedgerCost])
	if err != nil {
		return nil, fmt.Errorf("ledger costs of provider %d: %w", providerID, err)
	}
	return out, nil
}
