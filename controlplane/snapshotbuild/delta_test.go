package snapshotbuild_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/controlplane/snapshotbuild"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/watch"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/testkit"
)

const dpToken = "dp-token-0123456789abcdef"

// serve serves r's watch server on a loopback listener and returns a client for it.
func (r *replica) serve(t *testing.T) snapshotv1.SnapshotServiceClient {
	t.Helper()
	g := grpc.NewServer(watch.AuthOptions(dpToken)...)
	watch.Register(g, r.ws)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(func() { r.ws.Shutdown(); g.Stop() })
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return snapshotv1.NewSnapshotServiceClient(cc)
}

// watchFrom opens a stream accepting deltas that holds known, and returns its messages.
func watchFrom(t *testing.T, c snapshotv1.SnapshotServiceClient, known int64) <-chan *snapshotv1.WatchResponse {
	t.Helper()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+dpToken))
	t.Cleanup(cancel)
	st, err := c.Watch(ctx, &snapshotv1.WatchRequest{NodeId: t.Name(), KnownVersion: known, AcceptDeltas: true})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *snapshotv1.WatchResponse, 64)
	go func() {
		defer close(ch)
		for {
			m, err := st.Recv()
			if err != nil {
				return
			}
			ch <- m
		}
	}()
	return ch
}

func nextMsg(t *testing.T, ch <-chan *snapshotv1.WatchResponse) *snapshotv1.WatchResponse {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return nil
}

// nextDelta waits for the message of version v, which must be a delta.
func nextDelta(t *testing.T, ch <-chan *snapshotv1.WatchResponse, v int64) *snapshotv1.SnapshotDelta {
	t.Helper()
	m := nextMsg(t, ch)
	if m.GetDelta() == nil || m.GetDelta().GetVersion() != v {
		t.Fatalf("got %v, want a delta to version %d", m, v)
	}
	return m.GetDelta()
}

// apply is a reference application of d to held, independent of the code under test: per kind, the
// removals then the upserts by key. The result is normalized (see normalize).
func apply(t *testing.T, held *snapshotv1.Snapshot, d *snapshotv1.SnapshotDelta) *snapshotv1.Snapshot {
	t.Helper()
	if d.GetBaseVersion() != held.GetVersion() {
		t.Fatalf("delta base %d, held %d", d.GetBaseVersion(), held.GetVersion())
	}
	out := proto.Clone(held).(*snapshotv1.Snapshot)
	out.Version, out.BuiltAt = d.GetVersion(), d.GetBuiltAt()
	id := func(ids []int64) func(int64) bool { return func(x int64) bool { return slices.Contains(ids, x) } }
	out.PriceRules = merge(t, out.PriceRules, d.GetUpsertPriceRules(), id(d.GetRemovePriceRuleIds()), (*configv1.PriceRule).GetId)
	out.RoutingRules = merge(t, out.RoutingRules, d.GetUpsertRoutingRules(), id(d.GetRemoveRoutingRuleIds()), (*configv1.RoutingRule).GetId)
	out.Providers = merge(t, out.Providers, d.GetUpsertProviders(), id(d.GetRemoveProviderIds()), (*configv1.Provider).GetId)
	out.Routes = merge(t, out.Routes, d.GetUpsertRoutes(), id(d.GetRemoveRouteIds()), (*configv1.Route).GetId)
	out.ApiKeys = merge(t, out.ApiKeys, d.GetUpsertApiKeys(), id(d.GetRemoveApiKeyIds()), (*configv1.ApiKey).GetId)
	out.ScheduledPriceRules = merge(t, out.ScheduledPriceRules, d.GetUpsertScheduledPriceRules(),
		id(d.GetRemoveScheduledPriceRuleIds()), (*configv1.ScheduledPriceRule).GetId)
	quotaKey := func(q *configv1.Quota) string { return fmt.Sprintf("%s/%d", q.GetScope(), q.GetScopeId()) }
	out.Quotas = merge(t, out.Quotas, d.GetUpsertQuotas(), func(k string) bool {
		return slices.ContainsFunc(d.GetRemoveQuotas(), func(r *snapshotv1.QuotaRef) bool {
			return fmt.Sprintf("%s/%d", r.GetScope(), r.GetScopeId()) == k
		})
	}, quotaKey)
	if d.GetSettlementBounds() != nil {
		out.SettlementBounds = d.GetSettlementBounds()
	}
	if d.GetModelPolicy() != nil {
		out.ModelPolicy = d.GetModelPolicy()
	}
	if d.GetGatewaySettings() != nil {
		out.GatewaySettings = d.GetGatewaySettings()
	}
	return normalize(out)
}

// merge removes and upserts by key; removing a key that is not held is a test failure (the delta must
// name only what the base holds).
func merge[T proto.Message, K cmp.Ordered](t *testing.T, held, ups []T, removed func(K) bool, key func(T) K) []T {
	t.Helper()
	m := map[K]T{}
	for _, e := range held {
		m[key(e)] = e
	}
	for k := range m {
		if removed(k) {
			delete(m, k)
		}
	}
	for _, e := range ups {
		m[key(e)] = e
	}
	out := make([]T, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// normalize sorts every kind by key and clears built_at, so snapshots compare by content.
func normalize(s *snapshotv1.Snapshot) *snapshotv1.Snapshot {
	s = proto.Clone(s).(*snapshotv1.Snapshot)
	s.BuiltAt = nil
	slices.SortFunc(s.RoutingRules, func(a, b *configv1.RoutingRule) int { return cmp.Compare(a.GetId(), b.GetId()) })
	slices.SortFunc(s.Quotas, func(a, b *configv1.Quota) int {
		return cmp.Compare(fmt.Sprintf("%s/%d", a.GetScope(), a.GetScopeId()), fmt.Sprintf("%s/%d", b.GetScope(), b.GetScopeId()))
	})
	return s
}

// wholeAt reads the whole snapshot the database holds now, as the builder would publish it.
func (tb *testBundle) wholeAt(t *testing.T, v int64, like *snapshotv1.Snapshot) *snapshotv1.Snapshot {
	t.Helper()
	s, err := store.ReadSnapshot(context.Background(), tb.db.Pool, tb.box)
	if err != nil {
		t.Fatal(err)
	}
	if s.GetVersion() != v {
		t.Fatalf("database at %d, want %d", s.GetVersion(), v)
	}
	s.SettlementBounds = like.GetSettlementBounds()
	return normalize(s)
}

func keyHash(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

// TestDeltasOfEveryKind: for inserts, updates and deletes of every kind, a data plane holding the
// previous version receives a delta, and the delta applied to what it holds gives exactly the whole
// snapshot of the new version. A revoked key arrives as a removal.
func TestDeltasOfEveryKind(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r := tb.start(t, noSafetyNet)
	c := r.serve(t)
	waitPublished(t, r, 1)
	ch := watchFrom(t, c, 0)
	held := nextMsg(t, ch).GetSnapshot()
	if held.GetVersion() != 1 {
		t.Fatalf("first message %v, want the whole snapshot 1", held)
	}
	held = normalize(held)
	seal := func(s string) []byte {
		b, err := tb.box.Seal([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	steps := []struct {
		name  string
		sql   string
		args  []any
		check func(t *testing.T, d *snapshotv1.SnapshotDelta)
	}{
		{name: "provider insert", sql: `INSERT INTO providers (id, name, channel_type, base_url) VALUES (1, 'p1', 'alpha', 'http://p1.test');
			INSERT INTO providers (id, name, channel_type, base_url) VALUES (2, 'p2', 'beta', 'http://p2.test')`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if len(d.GetUpsertProviders()) != 2 {
					t.Errorf("upsert providers = %v, want 2", d.GetUpsertProviders())
				}
			}},
		{name: "credential insert (a provider upsert)", sql: `INSERT INTO credentials (id, provider_id, secret_ciphertext) VALUES (1, 1, $1)`,
			args: []any{seal("sk-1")},
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if u := d.GetUpsertProviders(); len(u) != 1 || u[0].GetId() != 1 || len(u[0].GetCredentials()) != 1 {
					t.Errorf("upsert providers = %v, want provider 1 with its credential", u)
				}
			}},
		{name: "price rule insert", sql: priceRuleSQL("m-1", "[]") + `; ` + priceRuleSQL("m-2", "[]")},
		{name: "price rule update", sql: `UPDATE price_rules SET output_price = 9 WHERE model_match = 'm-1'`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if u := d.GetUpsertPriceRules(); len(u) != 1 || u[0].GetOutputPrice() != "9" || len(d.GetUpsertApiKeys()) != 0 {
					t.Errorf("delta %v, want only price rule m-1", d)
				}
			}},
		{name: "price rule delete", sql: `DELETE FROM price_rules WHERE model_match = 'm-2'`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if len(d.GetRemovePriceRuleIds()) != 1 || len(d.GetUpsertPriceRules()) != 0 {
					t.Errorf("delta %v, want one price rule removed", d)
				}
			}},
		{name: "scheduled price rule", sql: `INSERT INTO price_rule_schedule (price_rule_id, version, effective_at, rule, created_by)
			SELECT id, 2, '2200-01-01', price_rule_version_json(price_rules), 'test' FROM price_rules WHERE model_match = 'm-1'`},
		{name: "scheduled price rule delete", sql: `DELETE FROM price_rule_schedule`},
		{name: "routing rule insert", sql: `INSERT INTO routing_rules (id, provider_id, operation, kind, implementation, sort_order)
			VALUES (1, 1, 'list_models', 'alpha', 'local', 1), (2, 1, 'rerank', 'alpha', 'passthrough', 0)`},
		{name: "routing rule update and delete", sql: `UPDATE routing_rules SET sort_order = 7 WHERE id = 1; DELETE FROM routing_rules WHERE id = 2`},
		{name: "route insert", sql: `INSERT INTO routes (id, name, strategy) VALUES (1, 'smart', 'priority');
			INSERT INTO route_aliases (alias, route_id) VALUES ('smart-a', 1);
			INSERT INTO route_members (route_id, provider_id, upstream_model_id, priority) VALUES (1, 1, 'm-1', 0)`},
		{name: "route alias", sql: `INSERT INTO route_aliases (alias, route_id) VALUES ('smart-b', 1)`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if u := d.GetUpsertRoutes(); len(u) != 1 || len(u[0].GetAliases()) != 2 || len(u[0].GetMembers()) != 1 {
					t.Errorf("upsert routes = %v, want route 1 whole with 2 aliases and its member", u)
				}
			}},
		{name: "provider 1 disabled: its routing rule and route member leave without being written", sql: `UPDATE providers SET enabled = false WHERE id = 1`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if !slices.Equal(d.GetRemoveProviderIds(), []int64{1}) || !slices.Equal(d.GetRemoveRoutingRuleIds(), []int64{1}) {
					t.Errorf("delta %v, want provider 1 and routing rule 1 removed", d)
				}
				if u := d.GetUpsertRoutes(); len(u) != 1 || len(u[0].GetMembers()) != 0 {
					t.Errorf("upsert routes = %v, want route 1 without its member", u)
				}
			}},
		{name: "provider 1 enabled again", sql: `UPDATE providers SET enabled = true WHERE id = 1`},
		{name: "provider 2 disabled", sql: `UPDATE providers SET enabled = false WHERE id = 2`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if !slices.Equal(d.GetRemoveProviderIds(), []int64{2}) {
					t.Errorf("remove providers = %v, want [2]", d.GetRemoveProviderIds())
				}
			}},
		{name: "tenancy (nothing a snapshot carries)", sql: `INSERT INTO orgs (id, name) VALUES (1, 'acme');
			INSERT INTO teams (id, org_id, name) VALUES (1, 1, 'red'), (2, 1, 'blue');
			INSERT INTO users (id, org_id, team_id, name) VALUES (1, 1, 1, 'ann')`},
		{name: "keys created", sql: `INSERT INTO api_keys (id, user_id, name, key_hash, prefix) VALUES (1, 1, 'k1', $1, 'tg-a'), (2, 1, 'k2', $2, 'tg-b'), (3, 1, 'k3', $3, 'tg-c')`,
			args: []any{keyHash("k1"), keyHash("k2"), keyHash("k3")},
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if len(d.GetUpsertApiKeys()) != 3 {
					t.Errorf("upsert keys = %v, want 3", d.GetUpsertApiKeys())
				}
			}},
		{name: "key revoked", sql: `UPDATE api_keys SET enabled = false WHERE id = 1`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if !slices.Equal(d.GetRemoveApiKeyIds(), []int64{1}) || len(d.GetUpsertApiKeys()) != 0 {
					t.Errorf("delta %v, want key 1 removed and nothing else", d)
				}
			}},
		{name: "key rotated", sql: `UPDATE api_keys SET previous_key_hash = key_hash, previous_prefix = prefix,
			previous_expires_at = now() + interval '1 hour', key_hash = $1, prefix = 'tg-d' WHERE id = 2`, args: []any{keyHash("k2b")},
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if u := d.GetUpsertApiKeys(); len(u) != 1 || u[0].GetPreviousPrefix() != "tg-b" {
					t.Errorf("upsert keys = %v, want key 2 with its previous hash", u)
				}
			}},
		{name: "user moved (every key of the user)", sql: `UPDATE users SET team_id = 2 WHERE id = 1`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if u := d.GetUpsertApiKeys(); len(u) != 2 || u[0].GetTeamId() != 2 || u[1].GetTeamId() != 2 {
					t.Errorf("upsert keys = %v, want keys 2 and 3 in team 2", u)
				}
			}},
		{name: "key deleted", sql: `DELETE FROM api_keys WHERE id = 3`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if !slices.Equal(d.GetRemoveApiKeyIds(), []int64{3}) {
					t.Errorf("remove keys = %v, want [3]", d.GetRemoveApiKeyIds())
				}
			}},
		{name: "quota insert", sql: `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 100), ('user', 1, 5)`},
		{name: "quota limit", sql: `UPDATE quotas SET cost_limit = 50 WHERE scope = 'org'`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if u := d.GetUpsertQuotas(); len(u) != 1 || u[0].GetCostLimit() != "50" {
					t.Errorf("upsert quotas = %v, want org 1 at 50", u)
				}
			}},
		{name: "quota delete", sql: `DELETE FROM quotas WHERE scope = 'user'`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if q := d.GetRemoveQuotas(); len(q) != 1 || q[0].GetScope() != "user" || q[0].GetScopeId() != 1 {
					t.Errorf("remove quotas = %v, want user 1", q)
				}
			}},
		{name: "model policy", sql: `UPDATE gateway_settings SET unpriced_policy = 'deny'`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if d.GetModelPolicy().GetUnpricedPolicy() != "deny" || len(d.GetUpsertProviders()) != 1 {
					t.Errorf("delta %v, want the policy and provider 1 (its effective policy)", d)
				}
			}},
		{name: "cost disclosure off", sql: `UPDATE gateway_settings SET cost_disclosure = false`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if d.GetGatewaySettings() == nil || d.GetGatewaySettings().GetCostDisclosure() || len(d.GetUpsertApiKeys()) != 0 {
					t.Errorf("delta %v, want the settings with cost disclosure off and no key", d)
				}
			}},
		{name: "key cost disclosure", sql: `UPDATE api_keys SET cost_disclosure = true WHERE id = 2`,
			check: func(t *testing.T, d *snapshotv1.SnapshotDelta) {
				if u := d.GetUpsertApiKeys(); len(u) != 1 || u[0].CostDisclosure == nil || !u[0].GetCostDisclosure() || d.GetGatewaySettings() != nil {
					t.Errorf("delta %v, want key 2 with cost_disclosure true and no settings", d)
				}
			}},
		{name: "provider delete", sql: `DELETE FROM routes; DELETE FROM providers WHERE id = 1`},
	}
	for _, s := range steps {
		t.Logf("step %s", s.name)
		v := tb.exec(t, s.sql, s.args...)
		d := nextDelta(t, ch, v)
		if d.GetBaseVersion() != held.GetVersion() {
			t.Fatalf("%s: delta from %d, data plane holds %d", s.name, d.GetBaseVersion(), held.GetVersion())
		}
		if s.check != nil {
			t.Run(s.name, func(t *testing.T) { s.check(t, d) })
		}
		held = apply(t, held, d)
		if want := tb.wholeAt(t, v, held); !proto.Equal(held, want) {
			t.Fatalf("%s: delta applied gives\n%v\nwant the whole snapshot\n%v", s.name, held, want)
		}
	}
}

// TestReplicasSendTheSameDelta: two replicas building from the same database send the same delta for the
// same pair of versions.
func TestReplicasSendTheSameDelta(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	base := tb.exec(t, `INSERT INTO orgs (id, name) VALUES (1, 'acme'); INSERT INTO users (id, org_id, name) VALUES (1, 1, 'ann')`)
	a, b := tb.start(t, noSafetyNet), tb.start(t, noSafetyNet)
	waitPublished(t, a, base)
	waitPublished(t, b, base)
	cha, chb := watchFrom(t, a.serve(t), base), watchFrom(t, b.serve(t), base)
	testkit.WaitFor(t, "watchers", func() bool { return a.ws.Watchers() == 1 && b.ws.Watchers() == 1 })
	v := tb.exec(t, `INSERT INTO api_keys (id, user_id, name, key_hash, prefix) VALUES (1, 1, 'k1', $1, 'tg-a'), (2, 1, 'k2', $2, 'tg-b')`,
		keyHash("k1"), keyHash("k2"))
	da, db := nextDelta(t, cha, v), nextDelta(t, chb, v)
	da.BuiltAt, db.BuiltAt = nil, nil
	if !proto.Equal(da, db) || len(da.GetUpsertApiKeys()) != 2 {
		t.Errorf("replicas sent different deltas for %d → %d:\n%v\n%v", base, v, da, db)
	}
}

// TestDeltaThatFailsToCompileIsRefused: a change that would make the snapshot invalid is not published
// (no delta is sent, the status names the row, the data plane keeps the last good version); the fix
// arrives as one delta from that last good version.
func TestDeltaThatFailsToCompileIsRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r := tb.start(t, snapshotbuild.Options{Debounce: 10 * time.Millisecond, Interval: 50 * time.Millisecond})
	good := tb.exec(t, priceRuleSQL("good", "[]"))
	waitPublished(t, r, good)
	ch := watchFrom(t, r.serve(t), good)
	testkit.WaitFor(t, "watcher", func() bool { return r.ws.Watchers() == 1 })

	bad := tb.exec(t, priceRuleSQL("bad", `[{"min_prompt_tokens": 10, "multiplier": "abc"}]`))
	testkit.WaitFor(t, "rejection", func() bool { st := r.b.Status(); return st.Rejected != nil && st.Rejected.Version == bad })
	select {
	case m := <-ch:
		t.Fatalf("sent %v for a version that does not compile", m)
	case <-time.After(200 * time.Millisecond): // several periodic checks
	}
	if got := r.ws.Latest().GetVersion(); got != good {
		t.Fatalf("latest %d, want %d kept", got, good)
	}
	if st := r.b.Status(); st.Rejected.Stage != "compile" || len(st.Rejected.Problems) != 1 {
		t.Errorf("status = %+v, want a compile rejection naming the row", st.Rejected)
	}

	fixed := tb.exec(t, `UPDATE price_rules SET pricing_tiers_json = '[]' WHERE model_match = 'bad'`)
	d := nextDelta(t, ch, fixed)
	if d.GetBaseVersion() != good || len(d.GetUpsertPriceRules()) != 1 || d.GetUpsertPriceRules()[0].GetModelMatch() != "bad" {
		t.Errorf("fix delta = %v, want the rule, from %d", d, good)
	}
	if r.b.Status().Failing {
		t.Error("still failing after the fix")
	}
}

// TestDeltaRemovesExpiredKeys: a key whose expiry passes (no write) is removed by the next delta.
func TestDeltaRemovesExpiredKeys(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.exec(t, `INSERT INTO orgs (id, name) VALUES (1, 'acme'); INSERT INTO users (id, org_id, name) VALUES (1, 1, 'ann')`)
	v := tb.exec(t, `INSERT INTO api_keys (id, user_id, name, key_hash, prefix, expires_at) VALUES
		(1, 1, 'short', $1, 'tg-a', now() + interval '1 second'), (2, 1, 'long', $2, 'tg-b', now() + interval '1 day')`,
		keyHash("k1"), keyHash("k2"))
	r := tb.start(t, noSafetyNet)
	waitPublished(t, r, v)
	ch := watchFrom(t, r.serve(t), v)
	testkit.WaitFor(t, "watcher", func() bool { return r.ws.Watchers() == 1 })
	time.Sleep(1100 * time.Millisecond)
	v2 := tb.exec(t, priceRuleSQL("unrelated", "[]"))
	d := nextDelta(t, ch, v2)
	if !slices.Equal(d.GetRemoveApiKeyIds(), []int64{1}) || len(d.GetUpsertApiKeys()) != 0 {
		t.Errorf("delta %v, want key 1 (expired) removed", d)
	}
}

// TestDeltaUnavailableSendsWholeSnapshot: once the deletions since the held version are pruned, the
// replica reads and sends a whole snapshot.
func TestDeltaUnavailableSendsWholeSnapshot(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.exec(t, `INSERT INTO orgs (id, name) VALUES (1, 'acme'); INSERT INTO users (id, org_id, name) VALUES (1, 1, 'ann')`)
	v := tb.exec(t, `INSERT INTO api_keys (id, user_id, name, key_hash, prefix) VALUES (1, 1, 'k1', $1, 'tg-a')`, keyHash("k1"))
	r := tb.start(t, noSafetyNet)
	waitPublished(t, r, v)
	ch := watchFrom(t, r.serve(t), v)
	testkit.WaitFor(t, "watcher", func() bool { return r.ws.Watchers() == 1 })
	// Deleted and pruned in the same transaction, before the builder reads the change.
	v2 := tb.exec(t, `DELETE FROM api_keys WHERE id = 1; UPDATE config_delta_horizon SET revision = (SELECT revision FROM config_revision)`)
	m := nextMsg(t, ch)
	if m.GetSnapshot().GetVersion() != v2 || len(m.GetSnapshot().GetApiKeys()) != 0 {
		t.Fatalf("got %v, want the whole snapshot %d without key 1", m, v2)
	}
	if !strings.Contains(scrape(r.reg), `tollgate_snapshot_build_reads_total{kind="full"} 2`) {
		t.Errorf("want two whole reads:\n%s", scrape(r.reg))
	}
}

// TestDeltaRefreshesQuotaSpend: spend moves without a write; a delta carries a quota whose cost_used
// moved only once QuotaRefresh has passed since the quotas were last read, so a key change does not cost
// a read of every quota.
func TestDeltaRefreshesQuotaSpend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		refresh time.Duration
		want    int
	}{{"within the refresh period", time.Hour, 0}, {"after it", time.Nanosecond, 1}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			tb.exec(t, `INSERT INTO orgs (id, name) VALUES (1, 'acme'); INSERT INTO users (id, org_id, name) VALUES (1, 1, 'ann')`)
			v := tb.exec(t, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 100)`)
			r := tb.start(t, snapshotbuild.Options{Debounce: 10 * time.Millisecond, Interval: time.Hour, QuotaRefresh: c.refresh})
			waitPublished(t, r, v)
			ch := watchFrom(t, r.serve(t), v)
			testkit.WaitFor(t, "watcher", func() bool { return r.ws.Watchers() == 1 })
			if got := tb.exec(t, `UPDATE quotas SET cost_used = 12.5`); got != v {
				t.Fatalf("settlement moved the revision to %d", got)
			}
			v2 := tb.exec(t, `INSERT INTO api_keys (id, user_id, name, key_hash, prefix) VALUES (1, 1, 'k1', $1, 'tg-a')`, keyHash("k1"))
			d := nextDelta(t, ch, v2)
			if len(d.GetUpsertQuotas()) != c.want || (c.want == 1 && d.GetUpsertQuotas()[0].GetCostUsed() != "12.5") {
				t.Errorf("upsert quotas = %v, want %d (cost_used 12.5)", d.GetUpsertQuotas(), c.want)
			}
		})
	}
}
