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
	"net/http/httptest"
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
	"github.com/tollgate/tollgate/deploy/mockupstream"
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

// redisClient is a client of the shared Redis (RedisURL), closed when the test ends.
func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
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
	code, raw := c.adminRaw(t, p, method, path, body)
	if (want == 0 && code >= 300) || (want != 0 && code != want) {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}

// adminREST is admin for a test whose point is the status: it returns the status, decodes a 2xx answer
// into out (if not nil) and logs the body of any other.
func (c *cluster) adminREST(t testing.TB, p *cp, method, path string, body, out any) int {
	t.Helper()
	code, raw := c.adminRaw(t, p, method, path, body)
	if out != nil && code < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	if code >= 300 {
		t.Logf("%s %s: %d %s", method, path, code, raw)
	}
	return code
}

// adminRaw sends one admin REST call (body, if not nil, as JSON; a json.RawMessage as it is) and returns
// the status and the answer's body.
func (c *cluster) adminRaw(t testing.TB, p *cp, method, path string, body any) (int, []byte) {
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
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, raw
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

// stack is the harness most end-to-end tests run on: a real control plane on a fresh Postgres database
// (the cluster), a real data plane on the shared Redis under a key prefix of its own, and the mock upstream,
// configured through the admin REST API. Tests of several control planes or data planes use the cluster
// directly; a data plane fed a hand-built snapshot without a control plane is startDataPlane's (dpStart).
type stack struct {
	t       *testing.T
	c       *cluster
	mu      sync.Mutex // guards cp (replaced by a restart)
	cp      *cp
	mock    *mockupstream.Server
	mockURL string
	dp      *dp
	rdb     *redis.Client
	prefix  string
	// dpRedisURL, when set, is the data plane's Redis instead of RedisURL (an outage proxy).
	dpRedisURL string
	// dpEnv adds to (or overrides) the data plane's environment.
	dpEnv map[string]string
	// dpTweak changes the data plane's loaded configuration.
	dpTweak func(*dpconfig.Config)
}

// newStack starts a stack whose data plane has the default settings.
func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackWith(t, nil)
}

// newStackWith is newStack with the stack's data-plane settings (prefix, dpRedisURL, dpEnv, dpTweak) set
// by configure before the data plane starts.
func newStackWith(t *testing.T, configure func(*stack)) *stack {
	t.Helper()
	c := newCluster(t)
	s := &stack{t: t, c: c}
	s.cp = c.startCP("cp", "")
	s.mock, s.mockURL = startMock(t, mockupstream.Options{})
	if configure != nil {
		configure(s)
	}
	if s.prefix == "" {
		s.prefix = redisPrefix(t, "e2e-st:")
	}
	s.rdb = redisClient(t)
	s.dp = s.startDP("dp")
	return s
}

// startDP starts a data plane on the stack's control plane, Redis prefix and data-plane settings (a test
// that replaces the stack's data plane calls it again).
func (s *stack) startDP(name string) *dp {
	s.t.Helper()
	env := map[string]string{"TOLLGATE_SHUTDOWN_TIMEOUT": "10s"}
	if s.dpRedisURL != "" {
		env["TOLLGATE_REDIS_URL"] = s.dpRedisURL
	}
	for k, v := range s.dpEnv {
		env[k] = v
	}
	return s.c.startDPWith(name, []string{s.controlPlane().srv.GRPCAddr()}, dpOptions{prefix: s.prefix, env: env, tweak: s.dpTweak})
}

func (s *stack) controlPlane() *cp {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cp
}

// restartCP starts a new control plane on the gRPC address of the stopped one.
func (s *stack) restartCP(grpcAddr string) {
	p := s.c.startCP("cp2", grpcAddr)
	s.mu.Lock()
	s.cp = p
	s.mu.Unlock()
}

// admin calls the admin REST API and decodes the answer into out (if not nil); any status >= 300 fails t.
func (s *stack) admin(t *testing.T, method, path string, body, out any) {
	t.Helper()
	s.c.admin(t, s.controlPlane(), method, path, body, out, 0)
}

// sync waits until the data plane serves the configuration committed so far.
func (s *stack) sync(t *testing.T) {
	t.Helper()
	s.c.sync(t, s.dp)
}

type response struct {
	status int
	header http.Header
	body   string
	reqID  string
	err    error
}

// send sends a client request to the data plane; hdr are name, value pairs. It does not fail the test
// (safe from goroutines); r.err says what went wrong.
func (s *stack) send(ctx context.Context, method, path, body string, hdr ...string) response {
	return send(ctx, "http://"+s.dp.srv.Addr(), method, path, body, hdr...)
}

// send sends a client request to the gateway at base (its scheme and address); hdr are name, value pairs.
// A body without a Content-Type header is sent as application/json.
func send(ctx context.Context, base, method, path, body string, hdr ...string) response {
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return response{err: err}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b), reqID: resp.Header.Get("X-Request-Id"), err: err}
}

// do is send that fails t on a transport error and checks the status.
func (s *stack) do(t *testing.T, wantStatus int, method, path, body string, hdr ...string) response {
	t.Helper()
	r := s.send(context.Background(), method, path, body, hdr...)
	if r.err != nil {
		t.Fatalf("%s %s: %v", method, path, r.err)
	}
	if r.status != wantStatus {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, wantStatus, r.body)
	}
	if r.reqID == "" {
		t.Fatalf("%s %s: no X-Request-Id", method, path)
	}
	return r
}

// usages lists the usage rows of a key through the admin API.
func (s *stack) usages(t *testing.T, keyID int64) []store.StoredUsage {
	t.Helper()
	var page struct {
		Items []store.StoredUsage `json:"items"`
	}
	s.admin(t, "GET", fmt.Sprintf("/admin/usages?api_key_id=%d&limit=500", keyID), nil, &page)
	return page.Items
}

// waitUsages polls GET /admin/usages until the key has n rows (bounded) and returns them; it fails if more
// than n appear.
func (s *stack) waitUsages(t *testing.T, keyID int64, n int) []store.StoredUsage {
	t.Helper()
	deadline := time.Now().Add(25 * time.Second)
	for {
		rows := s.usages(t, keyID)
		if len(rows) > n {
			t.Fatalf("key %d has %d usage rows, want %d: %+v", keyID, len(rows), n, rows)
		}
		if len(rows) == n {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %d has %d usage rows after 25s, want %d: %+v", keyID, len(rows), n, rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startMock serves the mock upstream on loopback until the test ends and returns it with its base URL.
func startMock(t testing.TB, o mockupstream.Options) (*mockupstream.Server, string) {
	t.Helper()
	m := mockupstream.New(o)
	up := httptest.NewServer(m)
	t.Cleanup(up.Close)
	return m, up.URL
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
