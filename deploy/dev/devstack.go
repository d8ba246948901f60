// Package dev runs the local development stack behind `make run`: Postgres and Redis (from
// TOLLGATE_DATABASE_URL / TOLLGATE_REDIS_URL when set, else throwaway instances started from the installed
// binaries), the mock upstream, a control plane and a data plane, seeded through the admin API with a demo
// provider, route, price rule, tenant, quota and API key. It prints the admin token and a curl line that
// works, and stops everything it started when its context ends.
package dev

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options configure a stack. Zero values take the defaults a newcomer expects.
type Options struct {
	BinDir      string // where controlplane, dataplane and mockupstream binaries are
	DatabaseURL string // empty: start a throwaway Postgres
	RedisURL    string // empty: start a throwaway Redis
	// RedisKeyPrefix namespaces the data plane's Redis keys (TOLLGATE_REDIS_KEY_PREFIX); tests sharing a
	// Redis server set a unique one.
	RedisKeyPrefix string
	DataPlane      string // data plane listen address (default 127.0.0.1:8080)
	AdminHTTP      string // control plane admin address (default 127.0.0.1:8081)
	GRPC           string // control plane gRPC address (default 127.0.0.1:9090)
	Mock           string // mock upstream address (default 127.0.0.1:9999)
	WorkDir        string // throwaway state (default a temp dir)
	Log            io.Writer
}

// Stack is a running local stack.
type Stack struct {
	AdminToken string
	APIKey     string
	DataPlane  string
	AdminHTTP  string
	Model      string

	procs    []*exec.Cmd
	cleanups []func()
	log      io.Writer
}

// CurlLine is the command that performs a chat completion through the data plane.
func (s *Stack) CurlLine() string {
	return fmt.Sprintf(`curl -sS http://%s/v1/chat/completions -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"model":"%s","messages":[{"role":"user","content":"Hello from Tollgate"}]}'`,
		s.DataPlane, s.APIKey, s.Model)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start brings the stack up and seeds it. On error everything already started is stopped.
func Start(ctx context.Context, o Options) (st *Stack, err error) {
	if o.Log == nil {
		o.Log = os.Stderr
	}
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&o.BinDir, "bin")
	def(&o.DataPlane, "127.0.0.1:8080")
	def(&o.AdminHTTP, "127.0.0.1:8081")
	def(&o.GRPC, "127.0.0.1:9090")
	def(&o.Mock, "127.0.0.1:9999")
	st = &Stack{AdminToken: "tga-" + randHex(20), DataPlane: o.DataPlane, AdminHTTP: o.AdminHTTP, Model: "demo-model", log: o.Log}
	defer func() {
		if err != nil {
			st.Stop()
		}
	}()
	for _, b := range []string{"controlplane", "dataplane", "mockupstream"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("binary %s missing in %s (run make build): %w", b, o.BinDir, err)
		}
	}
	for _, addr := range []string{o.DataPlane, o.AdminHTTP, o.GRPC, o.Mock} {
		if err := portFree(addr); err != nil {
			return nil, err
		}
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "tollgate-dev-")
		if err != nil {
			return nil, fmt.Errorf("work dir: %w", err)
		}
		o.WorkDir = dir
		st.cleanups = append(st.cleanups, func() { os.RemoveAll(dir) })
	}
	if o.DatabaseURL == "" {
		if o.DatabaseURL, err = st.startPostgres(ctx, o.WorkDir); err != nil {
			return nil, err
		}
	}
	if o.RedisURL == "" {
		if o.RedisURL, err = st.startRedis(ctx, o.WorkDir); err != nil {
			return nil, err
		}
	}
	dpToken := "tgdp-" + randHex(20)
	env := append(os.Environ(),
		"TOLLGATE_DATABASE_URL="+o.DatabaseURL,
		"TOLLGATE_REDIS_URL="+o.RedisURL,
		"TOLLGATE_REDIS_KEY_PREFIX="+o.RedisKeyPrefix,
		"TOLLGATE_ADMIN_TOKEN="+st.AdminToken,
		"TOLLGATE_SECRET_KEY="+randHex(32),
		"TOLLGATE_DP_TOKEN="+dpToken,
		"TOLLGATE_CP_HTTP_ADDR="+o.AdminHTTP,
		"TOLLGATE_CP_GRPC_ADDR="+o.GRPC,
		"TOLLGATE_DP_HTTP_ADDR="+o.DataPlane,
		"TOLLGATE_CP_ENDPOINTS="+o.GRPC,
		"TOLLGATE_NODE_ID=dev-dp-1",
		"MOCKUPSTREAM_ADDR="+o.Mock,
	)
	if err := st.spawn(env, filepath.Join(o.BinDir, "mockupstream"), "-addr", o.Mock); err != nil {
		return nil, err
	}
	if err := st.spawn(env, filepath.Join(o.BinDir, "controlplane"), "serve"); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+o.AdminHTTP+"/readyz", 60*time.Second); err != nil {
		return nil, fmt.Errorf("control plane did not become ready: %w", err)
	}
	if err := st.seed(ctx, "http://"+o.Mock); err != nil {
		return nil, fmt.Errorf("seed demo data: %w", err)
	}
	if err := st.spawn(env, filepath.Join(o.BinDir, "dataplane"), "serve"); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+o.DataPlane+"/readyz", 60*time.Second); err != nil {
		return nil, fmt.Errorf("data plane did not become ready: %w", err)
	}
	return st, nil
}

func portFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("address %s is taken (stop what uses it or pass another): %w", addr, err)
	}
	return ln.Close()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// findBinary looks in PATH and then in Debian's versioned PostgreSQL directories.
func findBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	sort.Strings(matches)
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("%s not found", name)
}

func (st *Stack) startPostgres(ctx context.Context, work string) (string, error) {
	initdb, err1 := findBinary("initdb")
	postgres, err2 := findBinary("postgres")
	if err1 != nil || err2 != nil {
		return "", errors.New("no TOLLGATE_DATABASE_URL and no PostgreSQL server binaries found: " +
			"install them (Debian: apt-get install postgresql) or set TOLLGATE_DATABASE_URL")
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(work, "pg")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	// PostgreSQL refuses to run as root: run it as the postgres user when we are root.
	var asUser []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", errors.New("running as root needs a 'postgres' system user for the throwaway database (Debian's postgresql package creates it), or set TOLLGATE_DATABASE_URL")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{work, dir} {
			if err := os.Chown(d, uid, gid); err != nil {
				return "", fmt.Errorf("chown %s: %w", d, err)
			}
		}
		asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) *exec.Cmd {
		full := append(append([]string{}, asUser...), args...)
		return exec.CommandContext(ctx, full[0], full[1:]...)
	}
	if out, err := run(initdb, "-D", dir, "-U", "tollgate", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %w\n%s", err, out)
	}
	full := append(append([]string{}, asUser...), postgres, "-D", dir, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := st.start(cmd); err != nil {
		return "", fmt.Errorf("start postgres: %w", err)
	}
	fmt.Fprintf(st.log, "devstack: throwaway Postgres on 127.0.0.1:%d\n", port)
	if err := waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", port), 30*time.Second); err != nil {
		return "", fmt.Errorf("postgres did not start: %w", err)
	}
	createdb, err := findBinary("createdb")
	if err == nil {
		// The server accepts TCP a moment before it accepts logins; retry briefly.
		for i := 0; ; i++ {
			out, err := exec.CommandContext(ctx, createdb, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "tollgate", "tollgate").CombinedOutput()
			if err == nil {
				break
			}
			if i == 20 {
				return "", fmt.Errorf("createdb: %w\n%s", err, out)
			}
			time.Sleep(250 * time.Millisecond)
		}
		return fmt.Sprintf("postgres://tollgate@127.0.0.1:%d/tollgate?sslmode=disable", port), nil
	}
	return fmt.Sprintf("postgres://tollgate@127.0.0.1:%d/postgres?sslmode=disable", port), nil
}

func (st *Stack) startRedis(ctx context.Context, work string) (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("no TOLLGATE_REDIS_URL and no redis-server found: install it (Debian: apt-get install redis-server) or set TOLLGATE_REDIS_URL")
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", work)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := st.start(cmd); err != nil {
		return "", fmt.Errorf("start redis: %w", err)
	}
	fmt.Fprintf(st.log, "devstack: throwaway Redis on 127.0.0.1:%d\n", port)
	if err := waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", port), 15*time.Second); err != nil {
		return "", fmt.Errorf("redis did not start: %w", err)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", port), nil
}

func (st *Stack) spawn(env []string, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = st.log, st.log
	if err := st.start(cmd); err != nil {
		return fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	return nil
}

// start runs a long-lived child in its own process group, so a terminal's Ctrl-C reaches only devstack,
// which then stops the children in reverse order (the data plane flushes settlements while Redis and the
// control plane are still up).
func (st *Stack) start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	st.procs = append(st.procs, cmd)
	return nil
}

// Stop terminates every process in reverse start order and removes throwaway state.
func (st *Stack) Stop() {
	for i := len(st.procs) - 1; i >= 0; i-- {
		p := st.procs[i]
		if p.Process != nil && p.ProcessState == nil {
			_ = p.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = p.Process.Kill()
				<-done
			}
		}
	}
	st.procs = nil
	for i := len(st.cleanups) - 1; i >= 0; i-- {
		st.cleanups[i]()
	}
	st.cleanups = nil
}

func waitTCP(ctx context.Context, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("timed out after %s: %w", limit, last)
}

// seed creates the demo configuration through the admin REST API, like an operator would.
func (st *Stack) seed(ctx context.Context, mockURL string) error {
	call := func(method, path string, body any, out any) error {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+st.AdminHTTP+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+st.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				return fmt.Errorf("%s %s: decode %s: %w", method, path, raw, err)
			}
		}
		return nil
	}
	var provider, org, user struct {
		ID int64 `json:"id"`
	}
	if err := call("POST", "/admin/providers", map[string]any{"name": "demo", "channel_type": "alpha", "base_url": mockURL, "enabled": true}, &provider); err != nil {
		return err
	}
	if err := call("POST", fmt.Sprintf("/admin/providers/%d/credentials", provider.ID), map[string]any{"secret": "sk-demo-upstream", "weight": 1, "enabled": true}, nil); err != nil {
		return err
	}
	if err := call("POST", "/admin/routes", map[string]any{"name": st.Model, "strategy": "priority", "enabled": true,
		"aliases": []string{"demo"}, "members": []map[string]any{{"provider_id": provider.ID, "upstream_model_id": "mock-1", "priority": 0, "weight": 1, "enabled": true}}}, nil); err != nil {
		return err
	}
	if err := call("POST", "/admin/price-rules", map[string]any{"provider_id": nil, "match_type": "exact", "model_match": "mock-1",
		"input_price": "2.50", "output_price": "10.00", "cache_read_price": "1.25", "cache_creation_5m_price": "3.125",
		"cache_creation_30m_price": "3.75", "cache_creation_1h_price": "5.00", "image_output_price": "40.00", "enabled": true,
		"pricing_tiers_json": []any{map[string]any{"min_prompt_tokens": 0, "service_tier": "flex", "multiplier": "0.5"}}}, nil); err != nil {
		return err
	}
	if err := call("POST", "/admin/orgs", map[string]any{"name": "demo-org"}, &org); err != nil {
		return err
	}
	if err := call("POST", "/admin/users", map[string]any{"org_id": org.ID, "name": "demo-user", "email": "demo@example.com"}, &user); err != nil {
		return err
	}
	if err := call("PUT", fmt.Sprintf("/admin/quotas/org/%d", org.ID), map[string]any{"cost_limit": "100.00"}, nil); err != nil {
		return err
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := call("POST", "/admin/api-keys", map[string]any{"user_id": user.ID, "name": "demo-key", "allowed_models": []string{}, "enabled": true}, &key); err != nil {
		return err
	}
	if key.Key == "" {
		return errors.New("api key creation answered no key")
	}
	st.APIKey = key.Key
	return nil
}
