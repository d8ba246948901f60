package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	cpapp "github.com/tollgate/tollgate/controlplane/app"
	cpconfig "github.com/tollgate/tollgate/controlplane/config"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	dpapp "github.com/tollgate/tollgate/dataplane/app"
	dpconfig "github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/process"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/testkit"
)

// RedisURL is the real Redis the data planes use; each data plane gets its own key prefix.
const RedisURL = "redis://127.0.0.1:6379/0"

// cluster is a shared Postgres database with the settings every process of one test uses.
type cluster struct {
	t        testing.TB
	db       *storetest.DB
	box      *secret.Box
	secret   string
	dpToken  string
	adminTok string
	// logs collects every process's log; it is printed when the test fails.
	logs *testkit.Buffer
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	key := randomHex(32)
	raw, _ := hex.DecodeString(key)
	box, err := secret.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, db: storetest.New(t), box: box, secret: key, dpToken: "dp-" + randomHex(16),
		adminTok: "admin-" + randomHex(16), logs: &testkit.Buffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("process logs:\n%s", c.logs.String())
		}
	})
	return c
}

// cp is one control-plane replica, run in-process exactly as the binary runs it.
type cp struct {
	name   string
	srv    *cpapp.Server
	cancel context.CancelFunc
	done   chan error
}

// startCP starts a control plane; grpcAddr "" picks a free loopback port (a restart passes the old one).
func (c *cluster) startCP(name, grpcAddr string, extraEnv ...string) *cp {
	c.t.Helper()
	if grpcAddr == "" {
		grpcAddr = "127.0.0.1:0"
	}
	env := map[string]string{
		"TOLLGATE_DATABASE_URL":     c.db.URL,
		"TOLLGATE_ADMIN_TOKEN":      c.adminTok,
		"TOLLGATE_SECRET_KEY":       c.secret,
		"TOLLGATE_DP_TOKEN":         c.dpToken,
		"TOLLGATE_CP_HTTP_ADDR":     "127.0.0.1:0",
		"TOLLGATE_CP_GRPC_ADDR":     grpcAddr,
		"TOLLGATE_LOG_LEVEL":        "info",
		"TOLLGATE_SHUTDOWN_TIMEOUT": "5s",
	}
	for i := 0; i+1 < len(extraEnv); i += 2 {
		env[extraEnv[i]] = extraEnv[i+1]
	}
	cfg, err := cpconfig.Load(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		c.t.Fatalf("%s config: %v", name, err)
	}
	log, err := process.NewLogger(prefixWriter{name, c.logs}, cfg.LogLevel)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var srv *cpapp.Server
	// A restart may find the port still held for a moment.
	for deadline := time.Now().Add(10 * time.Second); ; {
		srv, err = cpapp.New(ctx, cfg, log)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		cancel()
		c.t.Fatalf("%s: %v", name, err)
	}
	p := &cp{name: name, srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- srv.Run(ctx) }()
	c.t.Cleanup(p.stop)
	return p
}

// stop shuts the control plane down (idempotent) and waits for it.
func (p *cp) stop() {
	p.cancel()
	<-p.done
	p.done <- nil // later stops return at once
}

// dp is one data plane, run in-process exactly as the binary runs it.
type dp struct {
	name   string
	srv    *dpapp.Server
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// stop shuts the data plane down gracefully (idempotent) and returns Run's result.
func (d *dp) stop() error {
	d.once.Do(func() {
		d.cancel()
		d.err = <-d.done
	})
	return d.err
}

// dpOptions are what one test's data plane differs in; the zero value is a plane on the shared Redis
// under a fresh key prefix, logging into the cluster's log.
type dpOptions struct {
	// prefix is the Redis key prefix; "" picks a fresh one under "e2e:", deleted when the test ends.
	prefix string
	// env is added to (or overrides) the default environment.
	env map[string]string
	// tweak changes the loaded configuration (settings the environment does not carry).
	tweak func(*dpconfig.Config)
	// logs receives the plane's log; nil is the cluster's log with each line prefixed by the plane's name.
	logs io.Writer
}

// startDP starts a data plane on the control-plane endpoints; extraEnv are name, value pairs added to (or
// overriding) its environment.
func (c *cluster) startDP(name string, endpoints []string, extraEnv ...string) *dp {
	c.t.Helper()
	env := map[string]string{}
	for i := 0; i+1 < len(extraEnv); i += 2 {
		env[extraEnv[i]] = extraEnv[i+1]
	}
	return c.startDPWith(name, endpoints, dpOptions{env: env})
}

// startDPWith is startDP with options.
func (c *cluster) startDPWith(name string, endpoints []string, o dpOptions) *dp {
	c.t.Helper()
	if o.logs == nil {
		o.logs = prefixWriter{name, c.logs}
	}
	return startDataPlane(c.t, name, c.dpToken, endpoints, o)
}

// startDataPlane starts a data plane with the token dpToken on the control-plane endpoints (a real control
// plane's, or a stand-in's for a test without one); it stops when the test ends.
func startDataPlane(t testing.TB, name, dpToken string, endpoints []string, o dpOptions) *dp {
	t.Helper()
	if o.prefix == "" {
		o.prefix = redisPrefix(t, "e2e:")
	}
	if o.logs == nil {
		o.logs = io.Discard
	}
	env := map[string]string{
		"TOLLGATE_REDIS_URL":        RedisURL,
		"TOLLGATE_REDIS_KEY_PREFIX": o.prefix,
		"TOLLGATE_DP_HTTP_ADDR":     "127.0.0.1:0",
		"TOLLGATE_CP_ENDPOINTS":     strings.Join(endpoints, ","),
		"TOLLGATE_DP_TOKEN":         dpToken,
		"TOLLGATE_NODE_ID":          name,
		"TOLLGATE_LOG_LEVEL":        "info",
		"TOLLGATE_SHUTDOWN_TIMEOUT": "5s",
	}
	for k, v := range o.env {
		env[k] = v
	}
	cfg, err := dpconfig.Load(nil, func(k string) string { return env[k] }, o.logs)
	if err != nil {
		t.Fatalf("%s config: %v", name, err)
	}
	if o.tweak != nil {
		o.tweak(&cfg)
	}
	log, err := process.NewLogger(o.logs, cfg.LogLevel)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := dpapp.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("%s: %v", name, err)
	}
	d := &dp{name: name, srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { d.done <- srv.Run(ctx) }()
	t.Cleanup(func() { _ = d.stop() })
	return d
}

// redisPrefix returns a fresh Redis key prefix starting with tag, whose keys are deleted when the test
// ends (after the data planes using it have stopped, since cleanups run in reverse order of
// registration). The Redis server is shared, so tests never FLUSHDB.
func redisPrefix(t testing.TB, tag string) string {
	t.Helper()
	prefix := tag + randomHex(6) + ":"
	cleanupRedisPrefix(t, prefix)
	return prefix
}

// cleanupRedisPrefix deletes every key under prefix when the test ends.
func cleanupRedisPrefix(t testing.TB, prefix string) {
	t.Helper()
	t.Cleanup(func() {
		opts, err := redis.ParseURL(RedisURL)
		if err != nil {
			t.Errorf("cleanup redis: %v", err)
			return
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleanup redis prefix %s: %v", prefix, err)
		}
	})
}

// admin calls control plane p's admin REST API with the bootstrap token and decodes the answer into out
// (if not nil). want is the status the call must answer; 0 accepts any status below 300.
func (c *cluster) admin(t testing.TB, p *cp, method, path string, body, out any, want int) {
	t.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+p.srv.HTTPAddr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.adminTok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if (want == 0 && resp.StatusCode >= 300) || (want != 0 && resp.StatusCode != want) {
		t.Fatalf("%s %s: %s %s, want %d", method, path, resp.Status, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}

// sync waits until data plane d serves the configuration committed to the cluster's database so far.
func (c *cluster) sync(t testing.TB, d *dp) {
	t.Helper()
	rev, err := store.Revision(context.Background(), c.db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	d.wait(t, rev)
}

type prefixWriter struct {
	name string
	w    io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.w, "%s: %s", p.name, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// readyz returns /readyz's status code and snapshot_version.
func (d *dp) readyz(t testing.TB) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + d.srv.Addr() + "/readyz")
	if err != nil {
		t.Fatalf("%s /readyz: %v", d.name, err)
	}
	defer resp.Body.Close()
	var body struct {
		SnapshotVersion string `json:"snapshot_version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s /readyz body: %v", d.name, err)
	}
	return resp.StatusCode, body.SnapshotVersion
}

// wantReady asserts /readyz answers 200 with version v.
func (d *dp) wantReady(t testing.TB, v int64) {
	t.Helper()
	code, got := d.readyz(t)
	if code != http.StatusOK || got != fmt.Sprint(v) {
		t.Fatalf("%s /readyz = %d {snapshot_version: %q}, want 200 {snapshot_version: %q}", d.name, code, got, fmt.Sprint(v))
	}
}

// wait blocks until the data plane serves at least version v and returns what it serves.
func (d *dp) wait(t testing.TB, v int64) *snapshot.Compiled {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := d.srv.Syncer.Wait(ctx, v)
	if err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
	return c
}

func (d *dp) version() int64 {
	v, _ := d.srv.Syncer.Version()
	return v
}

// exec runs SQL on db and returns the revision after it.
func exec(t testing.TB, db *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
	rev, err := store.Revision(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// seed writes a small working configuration: one provider with a credential and default-looking routing
// cells, a route with an alias, a price rule for the route's model, a key and a quota.
func (c *cluster) seed() int64 {
	c.t.Helper()
	sealed, err := c.box.Seal([]byte("sk-upstream-secret"))
	if err != nil {
		c.t.Fatal(err)
	}
	keyHash := sha256.Sum256([]byte("tg-e2e-key"))
	ctx := context.Background()
	tx, err := c.db.Pool.Begin(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{sql: `INSERT INTO providers (id, name, channel_type, base_url) VALUES (1, 'alpha-1', 'alpha', 'http://127.0.0.1:9')`},
		{sql: `INSERT INTO credentials (provider_id, secret_ciphertext) VALUES (1, $1)`, args: []any{sealed}},
		{sql: `INSERT INTO routing_rules (provider_id, operation, kind, implementation, sort_order) VALUES
			(1, 'generate_content', 'alpha_chat_completions', 'passthrough', 0),
			(1, 'stream_generate_content', 'alpha_chat_completions', 'passthrough', 1),
			(1, 'list_models', 'alpha', 'local', 2)`},
		{sql: `INSERT INTO routes (id, name) VALUES (1, 'e2e-model')`},
		{sql: `INSERT INTO route_aliases (alias, route_id) VALUES ('e2e-alias', 1)`},
		{sql: `INSERT INTO route_members (route_id, provider_id, upstream_model_id) VALUES (1, 1, 'up-model')`},
		{sql: `INSERT INTO price_rules (id, provider_id, match_type, model_match, input_price, output_price, cache_read_price,
			cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price)
			VALUES (1, 1, 'exact', 'up-model', 1.25, 10, 0.125, 1.5, 1.75, 2, 40)`},
		{sql: `INSERT INTO orgs (id, name) VALUES (1, 'acme')`},
		{sql: `INSERT INTO users (id, org_id, name) VALUES (1, 1, 'ann')`},
		{sql: `INSERT INTO api_keys (user_id, key_hash, prefix) VALUES (1, $1, 'tg-e2e')`, args: []any{keyHash[:]}},
		{sql: `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 100)`},
		// The explicit ids above did not advance the sequences.
		{sql: `SELECT setval(pg_get_serial_sequence(t, 'id'), 1000) FROM unnest(ARRAY['providers', 'routes', 'price_rules',
			'orgs', 'users']) AS t`},
	} {
		if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
			c.t.Fatalf("seed %q: %v", q.sql, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		c.t.Fatal(err)
	}
	rev, err := store.Revision(ctx, c.db.Pool)
	if err != nil {
		c.t.Fatal(err)
	}
	return rev
}

// inputPrice is the input price the data plane would charge for provider 1's up-model.
func inputPrice(t testing.TB, c *snapshot.Compiled) string {
	t.Helper()
	r := c.Prices.Resolve(1, "up-model")
	if r == nil {
		t.Fatalf("snapshot %d: no price rule for (1, up-model)", c.Version)
	}
	return pricing.FormatDecimal(r.Prices[pricing.CatInput])
}
