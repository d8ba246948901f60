package store_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

func snapTestBox(t *testing.T) *secret.Box {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secret.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return box
}

func snapTestExec(t *testing.T, db store.DBTX, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

// seedSnapshotState writes one of every row kind, each in an included and an excluded variant, in one
// transaction, and returns the expected snapshot (without version and timestamps).
func seedSnapshotState(t *testing.T, pool *pgxpool.Pool, box *secret.Box) *snapshotv1.Snapshot {
	t.Helper()
	ctx := context.Background()
	seal := func(s string) []byte {
		c, err := box.Seal([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		snapTestExec(t, tx, `INSERT INTO providers (id, name, channel_type, base_url, enabled, settings) VALUES
			(1, 'alpha-main', 'alpha', 'http://alpha.test', true, '{"org": "x"}'),
			(2, 'beta-off', 'beta', 'http://beta.test', false, '{}')`)
		snapTestExec(t, tx, `INSERT INTO credentials (id, provider_id, secret_ciphertext, weight, enabled) VALUES
			(1, 1, $1, 3, true), (2, 1, $2, 1, false), (3, 2, $3, 1, true)`,
			seal("sk-one"), seal("sk-two"), seal("sk-three"))
		snapTestExec(t, tx, `INSERT INTO price_rules (id, provider_id, match_type, model_match, input_price, output_price,
			cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price,
			image_output_price, enabled, pricing_tiers_json) VALUES
			(1, NULL, 'contains', 'gpt', 0.000001, 2.50, 0.1, 0.2, 0.3, 0.4, 30, true,
			 '[{"min_prompt_tokens": 200000, "multiplier": "2"}, {"service_tier": "priority", "multiplier": 1.75, "output_price": "12.000"}]'),
			(2, 1, 'exact', 'gpt-x', 1, 1, 1, 1, 1, 1, 1, false, '[]'),
			(3, 2, 'exact', 'claude', 1, 1, 1, 1, 1, 1, 1, true, '[]'),
			(4, 1, 'exact', 'gpt-y', 123456789012345678901234567890.123456789, 0, 0, 0, 0, 0, 0, true, '[]')`)
		snapTestExec(t, tx, `INSERT INTO routing_rules (id, provider_id, operation, kind, implementation, dest_operation,
			dest_kind, sort_order, enabled) VALUES
			(1, 1, 'generate_content', 'beta_messages', 'transform_to', 'generate_content', 'alpha_responses', 5, true),
			(2, 1, 'list_models', 'alpha', 'local', NULL, NULL, 1, true),
			(3, 1, 'rerank', 'alpha', 'passthrough', NULL, NULL, 0, false),
			(4, 2, 'list_models', 'beta', 'local', NULL, NULL, 0, true)`)
		snapTestExec(t, tx, `INSERT INTO routes (id, name, strategy, enabled) VALUES
			(1, 'smart', 'weighted', true), (2, 'off', 'priority', false), (3, 'bare', 'priority', true)`)
		snapTestExec(t, tx, `INSERT INTO route_aliases (alias, route_id) VALUES ('smart-b', 1), ('smart-a', 1), ('off-a', 2)`)
		snapTestExec(t, tx, `INSERT INTO route_members (id, route_id, provider_id, upstream_model_id, priority, weight, enabled) VALUES
			(1, 1, 1, 'gpt-x', 2, 5, true), (2, 1, 1, 'gpt-y', 1, 1, true), (3, 1, 1, 'gpt-z', 0, 1, false),
			(4, 1, 2, 'claude', 0, 1, true), (5, 2, 1, 'gpt-x', 0, 1, true)`)
		snapTestExec(t, tx, `INSERT INTO orgs (id, name) VALUES (1, 'acme')`)
		snapTestExec(t, tx, `INSERT INTO teams (id, org_id, name) VALUES (1, 1, 'red')`)
		snapTestExec(t, tx, `INSERT INTO users (id, org_id, team_id, name) VALUES (1, 1, 1, 'ann'), (2, 1, NULL, 'bob')`)
		snapTestExec(t, tx, `INSERT INTO api_keys (id, user_id, name, key_hash, prefix, allowed_models, rpm_limit, tpm_limit,
			enabled, expires_at) VALUES
			(1, 1, 'ann-1', $1, 'tg-aaa', '{smart,gpt-x}', 60, 1000, true, NULL),
			(2, 2, 'bob-1', $2, 'tg-bbb', '{}', 0, 0, true, '2999-01-02T03:04:05Z'),
			(3, 2, 'bob-off', $3, 'tg-ccc', '{}', 0, 0, false, NULL),
			(4, 2, 'bob-old', $4, 'tg-ddd', '{}', 0, 0, true, now() - interval '1 hour')`,
			hash("k1"), hash("k2"), hash("k3"), hash("k4"))
		snapTestExec(t, tx, `INSERT INTO quotas (scope, scope_id, cost_limit, cost_used) VALUES
			('org', 1, 100.50, 3.000001), ('user', 2, NULL, 0)`)
		// Key 1 was rotated with a grace period still running, key 2 with one already over; key 1 may use
		// direct addressing, which the gateway turns off; provider 1 refuses unpriced models by itself.
		snapTestExec(t, tx, `UPDATE api_keys SET previous_key_hash = $1, previous_prefix = 'tg-old',
			previous_expires_at = '2999-06-01T00:00:00Z', allow_direct_addressing = true WHERE id = 1`, hash("k1-old"))
		snapTestExec(t, tx, `UPDATE api_keys SET previous_key_hash = $1, previous_prefix = 'tg-gone',
			previous_expires_at = now() - interval '1 second' WHERE id = 2`, hash("k2-old"))
		snapTestExec(t, tx, `UPDATE gateway_settings SET direct_addressing = false`)
		snapTestExec(t, tx, `UPDATE providers SET unpriced_policy = 'deny' WHERE id = 1`)
		return nil
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	str := func(s string) *string { return &s }
	i64 := func(v int64) *int64 { return &v }
	return &snapshotv1.Snapshot{
		PriceRules: []*configv1.PriceRule{
			{Id: 1, MatchType: "contains", ModelMatch: "gpt", InputPrice: "0.000001", OutputPrice: "2.50",
				CacheReadPrice: "0.1", CacheCreation_5MPrice: "0.2", CacheCreation_30MPrice: "0.3",
				CacheCreation_1HPrice: "0.4", ImageOutputPrice: "30", Enabled: true,
				PricingTiersJson: []*configv1.TierEntry{
					{MinPromptTokens: 200000, Multiplier: str("2")},
					{ServiceTier: str("priority"), Multiplier: str("1.75"), OutputPrice: str("12.000")},
				}, Version: 1},
			{Id: 4, ProviderId: i64(1), MatchType: "exact", ModelMatch: "gpt-y",
				InputPrice: "123456789012345678901234567890.123456789", OutputPrice: "0", CacheReadPrice: "0",
				CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0",
				ImageOutputPrice: "0", Enabled: true, Version: 1},
		},
		RoutingRules: []*configv1.RoutingRule{
			{Id: 2, ProviderId: 1, Operation: "list_models", Kind: "alpha", Implementation: "local", SortOrder: 1, Enabled: true},
			{Id: 1, ProviderId: 1, Operation: "generate_content", Kind: "beta_messages", Implementation: "transform_to",
				DestOperation: str("generate_content"), DestKind: str("alpha_responses"), SortOrder: 5, Enabled: true},
		},
		ModelPolicy:     &configv1.ModelPolicy{UnpricedPolicy: "allow", DirectAddressing: false},
		GatewaySettings: &configv1.GatewaySettings{CostDisclosure: true},
		Providers: []*configv1.Provider{{Id: 1, Name: "alpha-main", ChannelType: "alpha", BaseUrl: "http://alpha.test",
			Enabled: true, SettingsJson: `{"org": "x"}`, UnpricedPolicy: "deny",
			Credentials: []*configv1.Credential{{Id: 1, ProviderId: 1, Secret: "sk-one", Weight: 3, Enabled: true}}}},
		Routes: []*configv1.Route{
			{Id: 1, Name: "smart", Strategy: "weighted", Enabled: true, Aliases: []string{"smart-a", "smart-b"},
				Members: []*configv1.RouteMember{
					{ProviderId: 1, UpstreamModelId: "gpt-y", Priority: 1, Weight: 1, Enabled: true},
					{ProviderId: 1, UpstreamModelId: "gpt-x", Priority: 2, Weight: 5, Enabled: true},
				}},
			{Id: 3, Name: "bare", Strategy: "priority", Enabled: true},
		},
		ApiKeys: []*configv1.ApiKey{
			{Id: 1, UserId: 1, OrgId: 1, TeamId: i64(1), Name: "ann-1", Prefix: "tg-aaa", KeyHash: hash("k1"),
				AllowedModels: []string{"smart", "gpt-x"}, RpmLimit: 60, TpmLimit: 1000, Enabled: true,
				AllowDirectAddressing: true, PreviousKeyHash: hash("k1-old"), PreviousPrefix: "tg-old",
				PreviousExpiresAt: timestamppb.New(time.Date(2999, 6, 1, 0, 0, 0, 0, time.UTC))},
			{Id: 2, UserId: 2, OrgId: 1, Name: "bob-1", Prefix: "tg-bbb", KeyHash: hash("k2"), Enabled: true},
		},
		Quotas: []*configv1.Quota{
			{Scope: "org", ScopeId: 1, CostLimit: str("100.50"), CostUsed: "3.000001"},
			{Scope: "user", ScopeId: 2, CostUsed: "0"},
		},
	}
}

func TestReadSnapshot(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	box := snapTestBox(t)
	want := seedSnapshotState(t, db.Pool, box)
	ctx := context.Background()
	rev, err := store.Revision(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.ReadSnapshot(ctx, db.Pool, box)
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if got.GetVersion() != rev {
		t.Errorf("ReadSnapshot version = %d, want config_revision %d", got.GetVersion(), rev)
	}
	if exp := got.GetApiKeys()[1].GetExpiresAt().AsTime(); !exp.Equal(time.Date(2999, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("api key 2 expires_at = %v", exp)
	}
	for _, r := range got.GetPriceRules() {
		if r.GetUpdatedAt() == nil {
			t.Errorf("price rule %d: updated_at missing", r.GetId())
		}
	}
	want.Version = rev
	if diff := cmp.Diff(want, got, protocmp.Transform(),
		protocmp.IgnoreFields(&configv1.PriceRule{}, "updated_at"),
		protocmp.IgnoreFields(&configv1.ApiKey{}, "expires_at")); diff != "" {
		t.Errorf("ReadSnapshot mismatch (-want +got):\n%s", diff)
	}

	// The same state reads the same message again (replicas agree).
	again, err := store.ReadSnapshot(ctx, db.Pool, box)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, again) {
		t.Error("two reads of the same state differ")
	}
}

func TestReadSnapshotEmpty(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	got, err := store.ReadSnapshot(context.Background(), db.Pool, snapTestBox(t))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if got.GetVersion() != 1 || len(got.GetPriceRules())+len(got.GetProviders())+len(got.GetApiKeys()) != 0 {
		t.Errorf("empty database snapshot = %v, want version 1 and nothing else", got)
	}
}

// snapCommitAfterRevision runs hook (in another connection) right after the snapshot transaction has read the
// revision, before it reads any table.
type snapCommitAfterRevision struct {
	pool *pgxpool.Pool
	hook func()
}

func (c snapCommitAfterRevision) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := c.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &snapHookTx{Tx: tx, hook: c.hook}, nil
}

type snapHookTx struct {
	pgx.Tx
	hook func()
}

func (h *snapHookTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if h.hook != nil {
		h.hook()
		h.hook = nil
	}
	return h.Tx.Query(ctx, sql, args...)
}

func TestReadSnapshotIsOneConsistentState(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	snapTestExec(t, db.Pool, `INSERT INTO price_rules (match_type, model_match, input_price, output_price, cache_read_price,
		cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price)
		VALUES ('exact', 'before', 1, 1, 1, 1, 1, 1, 1)`)
	before, err := store.Revision(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := store.ReadSnapshot(ctx, snapCommitAfterRevision{pool: db.Pool, hook: func() {
		snapTestExec(t, db.Pool, `INSERT INTO price_rules (match_type, model_match, input_price, output_price, cache_read_price,
			cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price)
			VALUES ('exact', 'after', 1, 1, 1, 1, 1, 1, 1)`)
	}}, snapTestBox(t))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	after, err := store.Revision(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if after != before+1 {
		t.Fatalf("concurrent commit moved the revision %d → %d, want +1", before, after)
	}
	if snap.GetVersion() != before || len(snap.GetPriceRules()) != 1 || snap.GetPriceRules()[0].GetModelMatch() != "before" {
		t.Errorf("snapshot = version %d with %v; want version %d holding only rule \"before\"",
			snap.GetVersion(), snap.GetPriceRules(), before)
	}
}

func TestReadSnapshotUndecryptableCredential(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	snapTestExec(t, db.Pool, `INSERT INTO providers (id, name, channel_type, base_url) VALUES (1, 'p', 'alpha', 'http://p')`)
	sealed, err := snapTestBox(t).Seal([]byte("sk"))
	if err != nil {
		t.Fatal(err)
	}
	snapTestExec(t, db.Pool, `INSERT INTO credentials (id, provider_id, secret_ciphertext) VALUES (7, 1, $1)`, sealed)
	_, err = store.ReadSnapshot(context.Background(), db.Pool, snapTestBox(t)) // another key
	if !errors.Is(err, store.ErrSnapshotData) || !errors.Is(err, secret.ErrDecrypt) {
		t.Errorf("ReadSnapshot with the wrong key = %v, want ErrSnapshotData wrapping ErrDecrypt", err)
	}
}

func TestReadSnapshotUndecodableTiers(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	snapTestExec(t, db.Pool, `INSERT INTO price_rules (id, match_type, model_match, input_price, output_price, cache_read_price,
		cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price, pricing_tiers_json)
		VALUES (9, 'exact', 'm', 1, 1, 1, 1, 1, 1, 1, '[{"min_prompt_tokens": "lots"}]')`)
	rev, err := store.Revision(context.Background(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.ReadSnapshot(context.Background(), db.Pool, snapTestBox(t))
	var dataErr *store.SnapshotDataError
	if !errors.Is(err, store.ErrSnapshotData) || !errors.As(err, &dataErr) || dataErr.Version != rev {
		t.Errorf("ReadSnapshot = %v, want a SnapshotDataError of revision %d", err, rev)
	}
	if err != nil && !strings.Contains(err.Error(), "price rule 9") {
		t.Errorf("ReadSnapshot error %q does not name the rule", err)
	}
}

func TestDecodeTierEntries(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	tests := []struct {
		name    string
		in      string
		want    []*configv1.TierEntry
		wantErr bool
	}{
		{name: "empty", in: ``},
		{name: "null", in: `null`},
		{name: "empty array", in: `[]`, want: []*configv1.TierEntry{}},
		{name: "numbers keep their text", in: `[{"min_prompt_tokens": 1000, "multiplier": 1.10, "input_price": 3e2}]`,
			want: []*configv1.TierEntry{{MinPromptTokens: 1000, Multiplier: str("1.10"), InputPrice: str("3e2")}}},
		{name: "strings kept as written", in: `[{"min_prompt_tokens": "5", "service_tier": "Fast", "image_output_price": "abc"}]`,
			want: []*configv1.TierEntry{{MinPromptTokens: 5, ServiceTier: str("Fast"), ImageOutputPrice: str("abc")}}},
		{name: "every price", in: `[{"output_price": "1", "cache_read_price": "2", "cache_creation_5m_price": "3",
			"cache_creation_30m_price": "4", "cache_creation_1h_price": "5", "multiplier": null}]`,
			want: []*configv1.TierEntry{{OutputPrice: str("1"), CacheReadPrice: str("2"), CacheCreation_5MPrice: str("3"),
				CacheCreation_30MPrice: str("4"), CacheCreation_1HPrice: str("5")}}},
		{name: "object", in: `{"min_prompt_tokens": 1}`, wantErr: true},
		{name: "unknown key", in: `[{"multipler": "2"}]`, wantErr: true},
		{name: "fractional threshold", in: `[{"min_prompt_tokens": 1.5}]`, wantErr: true},
		{name: "tier not a string", in: `[{"service_tier": 3}]`, wantErr: true},
		{name: "price is a bool", in: `[{"input_price": true}]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := store.DecodeTierEntries([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("DecodeTierEntries(%s) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("DecodeTierEntries(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestReadSnapshotRoundsCostUsedUpToMicros: settled costs sum to more decimal places than a price may
// carry; the snapshot must still compile, carrying spend rounded up to the micro-dollar.
func TestReadSnapshotRoundsCostUsedUpToMicros(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	snapTestExec(t, db.Pool, `INSERT INTO quotas (scope, scope_id, cost_limit, cost_used) VALUES
		('org', 1, 10, 0.000000123456789012345678901234),
		('team', 2, NULL, 1.5),
		('user', 3, 5, 0)`)
	got, err := store.ReadSnapshot(context.Background(), db.Pool, snapTestBox(t))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	want := map[string]string{"org": "0.000001", "team": "1.5", "user": "0"}
	for _, q := range got.GetQuotas() {
		if q.GetCostUsed() != want[q.GetScope()] {
			t.Errorf("quota %s cost_used = %q, want %q", q.GetScope(), q.GetCostUsed(), want[q.GetScope()])
		}
	}
	if _, err := snapshot.Compile(got); err != nil {
		t.Fatalf("Compile(snapshot with long cost_used) = %v", err)
	}
}
