package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/period"
)

// TxBeginner starts transactions; *pgxpool.Pool and *pgx.Conn satisfy it.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// SecretOpener decrypts credential ciphertexts (*secret.Box satisfies it).
type SecretOpener interface {
	Open(ciphertext []byte) ([]byte, error)
}

// ErrSnapshotData marks a snapshot read that failed on the stored data itself (a pricing_tiers_json the
// snapshot cannot carry, a credential that does not decrypt) rather than on the database. Retrying the
// same revision fails the same way; only a new configuration commit can fix it.
var ErrSnapshotData = errors.New("stored configuration cannot be snapshotted")

// SnapshotDataError is the error of a snapshot read that failed on the data: it names the revision whose
// state cannot be snapshotted. errors.Is(err, ErrSnapshotData) holds for it.
type SnapshotDataError struct {
	Version int64
	Err     error
}

func (e *SnapshotDataError) Error() string {
	return fmt.Sprintf("read snapshot of revision %d: %v", e.Version, e.Err)
}

// Unwrap returns the cause, which wraps ErrSnapshotData.
func (e *SnapshotDataError) Unwrap() error { return e.Err }

// ReadSnapshot reads one consistent configuration state into a Snapshot whose version is the
// config_revision of that state. Everything is read in a single REPEATABLE READ, read-only transaction,
// so the revision and every row come from the same instant:
//
//   - enabled price rules (global, or scoped to an enabled provider), prices as exact decimal strings
//     (numeric::text) and pricing_tiers_json decoded into TierEntry messages;
//   - the pending scheduled price rule versions, each with its reserved history version;
//   - enabled routing rules of enabled providers, by provider, sort_order, id;
//   - enabled providers with their enabled credentials, secrets decrypted;
//   - enabled routes with their aliases and their enabled members on enabled providers;
//   - the gateway's model policy, and each provider's effective unpriced policy;
//   - enabled, unexpired API keys with the owning user's org and team, and a rotated key's previous hash
//     while its grace period runs;
//   - every quota with its limit and the cost_used at read time.
//
// BuiltAt is left unset; the caller stamps it when it publishes. Rows come in id order, so two reads of
// the same state produce the same message apart from cost_used. Errors caused by the data rather than the
// database are a *SnapshotDataError (wrapping ErrSnapshotData).
func ReadSnapshot(ctx context.Context, db TxBeginner, secrets SecretOpener) (*snapshotv1.Snapshot, error) {
	snap, err := readSnapshot(ctx, db, secrets)
	if err != nil && snap != nil && errors.Is(err, ErrSnapshotData) {
		return nil, &SnapshotDataError{Version: snap.Version, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return snap, nil
}

// readSnapshot returns the snapshot read so far (at least its version, once read) with any error.
func readSnapshot(ctx context.Context, db TxBeginner, secrets SecretOpener) (*snapshotv1.Snapshot, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	// Read-only: rolling back is the normal end and releases the snapshot.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	snap := &snapshotv1.Snapshot{}
	// The revision is the first statement, so the transaction's snapshot is taken here and every later
	// read sees exactly the state this revision names.
	if snap.Version, err = Revision(ctx, tx); err != nil {
		return nil, err
	}
	if err = readSnapshotRest(ctx, tx, secrets, snap, allSmallKinds); err != nil {
		return snap, err
	}
	if snap.ApiKeys, err = snapAPIKeys(ctx, tx, nil); err != nil {
		return snap, err
	}
	return snap, nil
}

// SmallKinds names the parts of a snapshot other than the API keys.
type SmallKinds struct {
	PriceRules, ScheduledPriceRules, RoutingRules, ModelPolicy, Providers, Routes, Quotas bool
}

var allSmallKinds = SmallKinds{true, true, true, true, true, true, true}

// readSnapshotRest reads the parts of kinds (every part but the API keys) into snap.
func readSnapshotRest(ctx context.Context, tx pgx.Tx, secrets SecretOpener, snap *snapshotv1.Snapshot, kinds SmallKinds) error {
	var err error
	if kinds.PriceRules {
		if snap.PriceRules, err = snapPriceRules(ctx, tx); err != nil {
			return err
		}
	}
	if kinds.ScheduledPriceRules {
		if snap.ScheduledPriceRules, err = snapScheduledPriceRules(ctx, tx); err != nil {
			return err
		}
	}
	if kinds.RoutingRules {
		if snap.RoutingRules, err = snapRoutingRules(ctx, tx); err != nil {
			return err
		}
	}
	if kinds.ModelPolicy || kinds.Providers { // a provider carries the default unpriced policy
		if snap.ModelPolicy, err = GetModelPolicy(ctx, tx); err != nil {
			return err
		}
		// The gateway_settings row holds both.
		if snap.GatewaySettings, err = GetGatewaySettings(ctx, tx); err != nil {
			return err
		}
	}
	if kinds.Providers {
		if snap.Providers, err = snapProviders(ctx, tx, secrets, snap.ModelPolicy.GetUnpricedPolicy()); err != nil {
			return err
		}
	}
	if kinds.Routes {
		if snap.Routes, err = snapRoutes(ctx, tx); err != nil {
			return err
		}
	}
	if kinds.Quotas {
		if snap.Quotas, err = snapQuotas(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}

func snapTime(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func snapPriceRules(ctx context.Context, tx pgx.Tx) ([]*configv1.PriceRule, error) {
	rows, err := tx.Query(ctx, `
		SELECT r.id, r.provider_id, r.match_type, r.model_match,
		       r.input_price::text, r.output_price::text, r.cache_read_price::text,
		       r.cache_creation_5m_price::text, r.cache_creation_30m_price::text,
		       r.cache_creation_1h_price::text, r.image_output_price::text,
		       r.pricing_tiers_json::text, r.updated_at,
		       coalesce((SELECT v.version FROM price_rule_versions v
		                  WHERE v.price_rule_id = r.id AND v.valid_to IS NULL), 0)
		  FROM price_rules r
		  LEFT JOIN providers p ON p.id = r.provider_id
		 WHERE r.enabled AND (r.provider_id IS NULL OR p.enabled)
		 ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("price rules: %w", interpretError(err))
	}
	defer rows.Close()
	var out []*configv1.PriceRule
	for rows.Next() {
		r := &configv1.PriceRule{Enabled: true}
		var tiers string
		var updated time.Time
		if err := rows.Scan(&r.Id, &r.ProviderId, &r.MatchType, &r.ModelMatch,
			&r.InputPrice, &r.OutputPrice, &r.CacheReadPrice,
			&r.CacheCreation_5MPrice, &r.CacheCreation_30MPrice, &r.CacheCreation_1HPrice, &r.ImageOutputPrice,
			&tiers, &updated, &r.Version); err != nil {
			return nil, fmt.Errorf("price rules: scan: %w", interpretError(err))
		}
		if r.PricingTiersJson, err = DecodeTierEntries([]byte(tiers)); err != nil {
			return nil, fmt.Errorf("price rule %d: pricing_tiers_json: %w: %w", r.Id, ErrSnapshotData, err)
		}
		r.UpdatedAt = snapTime(updated)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("price rules: %w", interpretError(err))
	}
	return out, nil
}

// snapTierKeys are the accepted keys of a pricing_tiers_json entry.
var snapTierKeys = map[string]bool{
	"min_prompt_tokens": true, "service_tier": true, "multiplier": true,
	"input_price": true, "output_price": true, "cache_read_price": true, "cache_creation_5m_price": true,
	"cache_creation_30m_price": true, "cache_creation_1h_price": true, "image_output_price": true,
}

// DecodeTierEntries decodes a pricing_tiers_json array into TierEntry messages without judging values:
// decimals are carried as the text written (a JSON string, or a JSON number's literal text, never a
// float), so shared/snapshot.Compile is the one place that validates them. It fails only on what a
// TierEntry cannot carry: not an array of objects, an unknown key, a non-integer min_prompt_tokens, or a
// value of the wrong JSON type. An empty input or null is no tiers.
func DecodeTierEntries(raw []byte) ([]*configv1.TierEntry, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("want an array of objects: %w", err)
	}
	out := make([]*configv1.TierEntry, 0, len(entries))
	for i, e := range entries {
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic error messages
		t := &configv1.TierEntry{}
		for _, k := range keys {
			v := bytes.TrimSpace(e[k])
			if !snapTierKeys[k] {
				return nil, fmt.Errorf("entry %d: unknown key %q", i, k)
			}
			if string(v) == "null" {
				continue
			}
			switch k {
			case "min_prompt_tokens":
				n, err := snapTierInt(v)
				if err != nil {
					return nil, fmt.Errorf("entry %d: min_prompt_tokens: %w", i, err)
				}
				t.MinPromptTokens = n
			case "service_tier":
				var s string
				if err := json.Unmarshal(v, &s); err != nil {
					return nil, fmt.Errorf("entry %d: service_tier: want a string", i)
				}
				t.ServiceTier = &s
			default:
				s, err := snapTierDecimalText(v)
				if err != nil {
					return nil, fmt.Errorf("entry %d: %s: %w", i, k, err)
				}
				*snapTierField(t, k) = &s
			}
		}
		out = append(out, t)
	}
	return out, nil
}

func snapTierField(t *configv1.TierEntry, key string) **string {
	switch key {
	case "multiplier":
		return &t.Multiplier
	case "input_price":
		return &t.InputPrice
	case "output_price":
		return &t.OutputPrice
	case "cache_read_price":
		return &t.CacheReadPrice
	case "cache_creation_5m_price":
		return &t.CacheCreation_5MPrice
	case "cache_creation_30m_price":
		return &t.CacheCreation_30MPrice
	case "cache_creation_1h_price":
		return &t.CacheCreation_1HPrice
	default: // image_output_price; snapTierKeys admits nothing else
		return &t.ImageOutputPrice
	}
}

// snapTierInt accepts a JSON integer or an integer in a string.
func snapTierInt(v json.RawMessage) (int64, error) {
	s := string(v)
	var quoted string
	if json.Unmarshal(v, &quoted) == nil { // an integer in a string
		s = quoted
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer, got %.40s", s)
	}
	return n, nil
}

// snapTierDecimalText returns a JSON string's content or a JSON number's literal text.
func snapTierDecimalText(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return "", errors.New("want a decimal string or number")
	}
	return n.String(), nil
}

func snapRoutingRules(ctx context.Context, tx pgx.Tx) ([]*configv1.RoutingRule, error) {
	rows, err := tx.Query(ctx, `
		SELECT r.id, r.provider_id, r.operation, r.kind, r.implementation, r.dest_operation, r.dest_kind,
		       r.sort_order
		  FROM routing_rules r JOIN providers p ON p.id = r.provider_id
		 WHERE r.enabled AND p.enabled
		 ORDER BY r.provider_id, r.sort_order, r.id`)
	if err != nil {
		return nil, fmt.Errorf("routing rules: %w", interpretError(err))
	}
	defer rows.Close()
	var out []*configv1.RoutingRule
	for rows.Next() {
		r := &configv1.RoutingRule{Enabled: true}
		if err := rows.Scan(&r.Id, &r.ProviderId, &r.Operation, &r.Kind, &r.Implementation,
			&r.DestOperation, &r.DestKind, &r.SortOrder); err != nil {
			return nil, fmt.Errorf("routing rules: scan: %w", interpretError(err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("routing rules: %w", interpretError(err))
	}
	return out, nil
}

// snapProviders reads the enabled providers, each with its effective unpriced policy (its own, else
// unpricedDefault).
func snapProviders(ctx context.Context, tx pgx.Tx, secrets SecretOpener, unpricedDefault string) ([]*configv1.Provider, error) {
	rows, err := tx.Query(ctx, `
		SELECT id, name, channel_type, base_url, settings::text, COALESCE(unpriced_policy, $1)
		  FROM providers WHERE enabled ORDER BY id`, unpricedDefault)
	if err != nil {
		return nil, fmt.Errorf("providers: %w", interpretError(err))
	}
	var out []*configv1.Provider
	byID := map[int64]*configv1.Provider{}
	for rows.Next() {
		p := &configv1.Provider{Enabled: true}
		if err := rows.Scan(&p.Id, &p.Name, &p.ChannelType, &p.BaseUrl, &p.SettingsJson, &p.UnpricedPolicy); err != nil {
			rows.Close()
			return nil, fmt.Errorf("providers: scan: %w", interpretError(err))
		}
		out = append(out, p)
		byID[p.Id] = p
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("providers: %w", interpretError(err))
	}

	rows, err = tx.Query(ctx, `
		SELECT c.id, c.provider_id, c.secret_ciphertext, c.weight
		  FROM credentials c JOIN providers p ON p.id = c.provider_id
		 WHERE c.enabled AND p.enabled
		 ORDER BY c.provider_id, c.id`)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		c := &configv1.Credential{Enabled: true}
		var sealed []byte
		if err := rows.Scan(&c.Id, &c.ProviderId, &sealed, &c.Weight); err != nil {
			return nil, fmt.Errorf("credentials: scan: %w", interpretError(err))
		}
		plain, err := secrets.Open(sealed)
		if err != nil {
			return nil, fmt.Errorf("credential %d: %w: %w", c.Id, ErrSnapshotData, err)
		}
		c.Secret = string(plain)
		if p := byID[c.ProviderId]; p != nil {
			p.Credentials = append(p.Credentials, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("credentials: %w", interpretError(err))
	}
	return out, nil
}

func snapRoutes(ctx context.Context, tx pgx.Tx) ([]*configv1.Route, error) {
	rows, err := tx.Query(ctx, `
		SELECT r.id, r.name, r.strategy,
		       COALESCE((SELECT array_agg(a.alias ORDER BY a.alias) FROM route_aliases a WHERE a.route_id = r.id),
		                '{}'::text[])
		  FROM routes r WHERE r.enabled ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("routes: %w", interpretError(err))
	}
	var out []*configv1.Route
	byID := map[int64]*configv1.Route{}
	for rows.Next() {
		r := &configv1.Route{Enabled: true}
		if err := rows.Scan(&r.Id, &r.Name, &r.Strategy, &r.Aliases); err != nil {
			rows.Close()
			return nil, fmt.Errorf("routes: scan: %w", interpretError(err))
		}
		if len(r.Aliases) == 0 {
			r.Aliases = nil
		}
		out = append(out, r)
		byID[r.Id] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("routes: %w", interpretError(err))
	}

	rows, err = tx.Query(ctx, `
		SELECT m.route_id, m.provider_id, m.upstream_model_id, m.priority, m.weight
		  FROM route_members m
		  JOIN routes r ON r.id = m.route_id
		  JOIN providers p ON p.id = m.provider_id
		 WHERE m.enabled AND r.enabled AND p.enabled
		 ORDER BY m.route_id, m.priority, m.id`)
	if err != nil {
		return nil, fmt.Errorf("route members: %w", interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var routeID int64
		m := &configv1.RouteMember{Enabled: true}
		if err := rows.Scan(&routeID, &m.ProviderId, &m.UpstreamModelId, &m.Priority, &m.Weight); err != nil {
			return nil, fmt.Errorf("route members: scan: %w", interpretError(err))
		}
		if r := byID[routeID]; r != nil {
			r.Members = append(r.Members, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("route members: %w", interpretError(err))
	}
	return out, nil
}

// snapAPIKeys reads the keys the snapshot carries: all of them, or only those of ids when ids is not nil.
func snapAPIKeys(ctx context.Context, tx pgx.Tx, ids []int64) ([]*configv1.ApiKey, error) {
	rows, err := tx.Query(ctx, `
		SELECT k.id, k.user_id, u.org_id, u.team_id, k.name, k.prefix, k.key_hash, k.allowed_models,
		       k.rpm_limit, k.tpm_limit, k.expires_at, k.allow_direct_addressing, k.cost_disclosure,
		       CASE WHEN k.previous_expires_at > now() THEN k.previous_key_hash END,
		       CASE WHEN k.previous_expires_at > now() THEN k.previous_prefix END,
		       CASE WHEN k.previous_expires_at > now() THEN k.previous_expires_at END
		  FROM api_keys k JOIN users u ON u.id = k.user_id
		 WHERE k.enabled AND (k.expires_at IS NULL OR k.expires_at > now())
		   AND ($1::bigint[] IS NULL OR k.id = ANY($1))`, ids)
	if err != nil {
		return nil, fmt.Errorf("api keys: %w", interpretError(err))
	}
	defer rows.Close()
	var out []*configv1.ApiKey
	for rows.Next() {
		k := &configv1.ApiKey{Enabled: true}
		var expires, prevExpires *time.Time
		var prevPrefix *string
		if err := rows.Scan(&k.Id, &k.UserId, &k.OrgId, &k.TeamId, &k.Name, &k.Prefix, &k.KeyHash,
			&k.AllowedModels, &k.RpmLimit, &k.TpmLimit, &expires, &k.AllowDirectAddressing, &k.CostDisclosure,
			&k.PreviousKeyHash, &prevPrefix, &prevExpires); err != nil {
			return nil, fmt.Errorf("api keys: scan: %w", interpretError(err))
		}
		if len(k.AllowedModels) == 0 {
			k.AllowedModels = nil
		}
		if expires != nil {
			k.ExpiresAt = snapTime(*expires)
		}
		if prevExpires != nil && prevPrefix != nil {
			k.PreviousExpiresAt, k.PreviousPrefix = snapTime(*prevExpires), *prevPrefix
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("api keys: %w", interpretError(err))
	}
	// Sorted here rather than by ORDER BY: with 100,000 keys Postgres sorts on disk (work_mem), slower than
	// sorting the pointers.
	slices.SortFunc(out, func(a, b *configv1.ApiKey) int { return cmp.Compare(a.Id, b.Id) })
	return out, nil
}

// snapQuotas reads every quota. cost_used is the exact sum of settled costs, which can carry up to
// 30 decimal places (tokens × a 24-place price / 10^6); admission works in integer micro-dollars, so the
// snapshot carries it rounded up to the micro-dollar (conservative: never under-counts spend). For a
// periodic quota it is the spend of the period containing the build time (0 when that period has no row
// yet), named by period_id; a data plane that has moved on to a later period counts 0 from the snapshot
// (docs/budgets.md, "Periods").
func snapQuotas(ctx context.Context, tx pgx.Tx) ([]*configv1.Quota, error) {
	rows, err := tx.Query(ctx, `
		SELECT scope, scope_id, cost_limit::text, trim_scale(ceil(cost_used * 1000000) / 1000000)::text, adjust_epoch,
		       period, time_zone, rpm_limit, tpm_limit
		  FROM quotas ORDER BY scope, scope_id`)
	if err != nil {
		return nil, fmt.Errorf("quotas: %w", interpretError(err))
	}
	defer rows.Close()
	now := time.Now()
	var out []*configv1.Quota
	var periodic []*configv1.Quota
	var starts []time.Time
	for rows.Next() {
		q := &configv1.Quota{}
		if err := rows.Scan(&q.Scope, &q.ScopeId, &q.CostLimit, &q.CostUsed, &q.AdjustEpoch, &q.Period, &q.TimeZone,
			&q.RpmLimit, &q.TpmLimit); err != nil {
			return nil, fmt.Errorf("quotas: scan: %w", interpretError(err))
		}
		kind, zone := quotaPeriodSettings(q.Period, q.TimeZone)
		if kind == period.None { // the defaults travel as empty strings
			q.Period, q.TimeZone = "", ""
		}
		if kind != period.None {
			p := period.Of(kind, zone, now)
			q.PeriodId, q.PeriodStart, q.PeriodEnd = p.ID(), timestamppb.New(p.Start), timestamppb.New(p.End)
			q.CostUsed = "0"
			periodic = append(periodic, q)
			starts = append(starts, p.Start)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quotas: %w", interpretError(err))
	}
	rows.Close()
	if len(periodic) == 0 {
		return out, nil
	}
	scopes, ids := make([]string, len(periodic)), make([]int64, len(periodic))
	for i, q := range periodic {
		scopes[i], ids[i] = q.Scope, q.ScopeId
	}
	prow, err := tx.Query(ctx, `
		SELECT t.i, trim_scale(ceil(p.cost_used * 1000000) / 1000000)::text
		  FROM unnest($1::text[], $2::bigint[], $3::timestamptz[]) WITH ORDINALITY AS t(scope, scope_id, ps, i)
		  JOIN quota_periods p ON p.scope = t.scope AND p.scope_id = t.scope_id AND p.period_start = t.ps`, scopes, ids, starts)
	if err != nil {
		return nil, fmt.Errorf("quota periods: %w", interpretError(err))
	}
	defer prow.Close()
	for prow.Next() {
		var i int64
		var used string
		if err := prow.Scan(&i, &used); err != nil {
			return nil, fmt.Errorf("quota periods: scan: %w", interpretError(err))
		}
		periodic[i-1].CostUsed = used
	}
	if err := prow.Err(); err != nil {
		return nil, fmt.Errorf("quota periods: %w", interpretError(err))
	}
	return out, nil
}
