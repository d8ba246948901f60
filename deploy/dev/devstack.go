// Package dev runs the local development stack behind `make run`: Postgres and Redis (from
// TOLLGATE_DATABASE_URL / TOLLGATE_REDIS_URL when set, else throwaway instances started from the installed
// binaries), the mock upstream, a control plane and a data plane, seeded through the admin API with a demo
// provider, route, price rule, tenant, quota and API key. It prints the admin token and one working
// request per dialect (examples.go), and stops everything it started when its context ends.
package dev

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
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
	"sync"
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

// addrSettings are the listen addresses `make run` lets you move: flag, environment variable, default.
var addrSettings = []struct {
	flag, env, def, what string
	field                func(*Options) *string
}{
	{"dp-addr", "TOLLGATE_DEV_DP_ADDR", "127.0.0.1:8080", "data plane (client API)", func(o *Options) *string { return &o.DataPlane }},
	{"admin-addr", "TOLLGATE_DEV_ADMIN_ADDR", "127.0.0.1:8081", "control plane admin REST and console", func(o *Options) *string { return &o.AdminHTTP }},
	{"grpc-addr", "TOLLGATE_DEV_GRPC_ADDR", "127.0.0.1:9090", "control plane gRPC", func(o *Options) *string { return &o.GRPC }},
	{"mock-addr", "TOLLGATE_DEV_MOCK_ADDR", "127.0.0.1:9999", "mock upstream", func(o *Options) *string { return &o.Mock }},
}

// ParseFlags reads devstack's flags, each with an environment fallback (getenv), and checks the addresses.
func ParseFlags(args []string, getenv func(string) string, out io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("devstack", flag.ContinueOnError)
	fs.SetOutput(out)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&o.BinDir, "bin", env("TOLLGATE_DEV_BIN", "bin"), "directory holding the built binaries (TOLLGATE_DEV_BIN)")
	fs.StringVar(&o.DatabaseURL, "database-url", getenv("TOLLGATE_DATABASE_URL"), "use this Postgres instead of a throwaway one (TOLLGATE_DATABASE_URL)")
	fs.StringVar(&o.RedisURL, "redis-url", getenv("TOLLGATE_REDIS_URL"), "use this Redis instead of a throwaway one (TOLLGATE_REDIS_URL)")
	for _, a := range addrSettings {
		fs.StringVar(a.field(&o), a.flag, env(a.env, a.def), fmt.Sprintf("%s listen address (%s)", a.what, a.env))
	}
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	for _, a := range addrSettings {
		if _, _, err := net.SplitHostPort(*a.field(&o)); err != nil {
			errs = append(errs, fmt.Errorf("-%s (%s): want host:port: %w", a.flag, a.env, err))
		}
	}
	return o, errors.Join(errs...)
}

// Stack is a running local stack.
type Stack struct {
	AdminToken string
	APIKey     string
	DataPlane  string
	AdminHTTP  string
	Model      string

	procs    []*proc
	cleanups []func()
	log      io.Writer
}

// proc is a child process; done closes when it has exited (one goroutine waits for it).
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *tail
	done chan struct{}
	err  error // the exit status, once done
	// stopSignal asks the process to stop (SIGTERM unless set).
	stopSignal syscall.Signal
}

// tail keeps the last bytes a child wrote, to quote when it dies.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start brings the stack up and seeds it. On error everything already started is stopped, and the
// error names the cause and the fix.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.Log == nil {
		o.Log = os.Stderr
	}
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&o.BinDir, "bin")
	for _, a := range addrSettings {
		def(a.field(&o), a.def)
	}
	st := &Stack{AdminToken: "tga-" + randHex(20), DataPlane: o.DataPlane, AdminHTTP: o.AdminHTTP, Model: DemoModel, log: o.Log}
	if err := st.start(ctx, o); err != nil {
		st.Stop()
		return nil, err
	}
	return st, nil
}

// start does Start's work; the caller stops whatever it started when it fails.
func (st *Stack) start(ctx context.Context, o Options) (err error) {
	for _, b := range []string{"controlplane", "dataplane", "mockupstream"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("binary %s missing in %s: run make build (or pass -bin DIR): %w", b, o.BinDir, err)
		}
	}
	for _, a := range addrSettings {
		if err := portFree(*a.field(&o)); err != nil {
			return fmt.Errorf("%s: %w; stop what uses it or move ours with -%s ADDR (env %s)", a.what, err, a.flag, a.env)
		}
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "tollgate-dev-")
		if err != nil {
			return fmt.Errorf("work dir: %w", err)
		}
		o.WorkDir = dir
		st.cleanups = append(st.cleanups, func() { os.RemoveAll(dir) })
	}
	if o.DatabaseURL == "" {
		if o.DatabaseURL, err = st.startPostgres(ctx, o.WorkDir); err != nil {
			return err
		}
	}
	if o.RedisURL == "" {
		if o.RedisURL, err = st.startRedis(ctx, o.WorkDir); err != nil {
			return err
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
		// No balancer sits in front of a dev stack, so the drain wait at shutdown would tell no one. It
		// must be off explicitly: devstack itself asks /readyz while waiting for the planes, and a process
		// whose readiness was ever asked waits the drain delay when it stops (shared/process.Drain).
		"TOLLGATE_DRAIN_DELAY=0",
		"MOCKUPSTREAM_ADDR="+o.Mock,
	)
	mock, err := st.spawn(env, filepath.Join(o.BinDir, "mockupstream"), "-addr", o.Mock)
	if err != nil {
		return err
	}
	if err := waitTCP(ctx, o.Mock, 15*time.Second, mock); err != nil {
		return fmt.Errorf("mock upstream did not start: %w", err)
	}
	cp, err := st.spawn(env, filepath.Join(o.BinDir, "controlplane"), "serve")
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://"+o.AdminHTTP+"/readyz", 60*time.Second, cp); err != nil {
		return fmt.Errorf("control plane did not become ready: %w\nfix: check TOLLGATE_DATABASE_URL (or unset it for a throwaway Postgres)", err)
	}
	if err := st.seed(ctx, "http://"+o.Mock); err != nil {
		return fmt.Errorf("seed demo data: %w\nfix: use an empty database (or unset TOLLGATE_DATABASE_URL for a throwaway one)", err)
	}
	dp, err := st.spawn(env, filepath.Join(o.BinDir, "dataplane"), "serve")
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://"+o.DataPlane+"/readyz", 60*time.Second, dp); err != nil {
		return fmt.Errorf("data plane did not become ready: %w\nfix: check TOLLGATE_REDIS_URL (or unset it for a throwaway Redis)", err)
	}
	return nil
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
	// PostgreSQL refuses to run as root: run it as the postgres user when we are root. The server is
	// started directly with that user's credentials rather than through runuser or su, so the signal
	// that stops it reaches the server itself (runuser, signalled, waits 2 s before it exits).
	var cred *syscall.SysProcAttr
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
		cred = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	}
	asPostgres := func(cmd *exec.Cmd) *exec.Cmd {
		cmd.Dir = dir // the postgres user may not read our working directory
		if cred != nil {
			attr := *cred
			cmd.SysProcAttr = &attr
		}
		return cmd
	}
	initCmd := asPostgres(exec.CommandContext(ctx, initdb, "-D", dir, "-U", "tollgate", "--auth=trust", "-E", "UTF8", "--no-sync"))
	if out, err := initCmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %w\n%s", err, out)
	}
	cmd := asPostgres(exec.Command(postgres, "-D", dir, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"))
	pg, err := st.run("postgres", cmd, true)
	if err != nil {
		return "", fmt.Errorf("%w (or set TOLLGATE_DATABASE_URL)", err)
	}
	// SIGINT is PostgreSQL's fast shutdown: it does not wait for clients to disconnect.
	pg.stopSignal = syscall.SIGINT
	fmt.Fprintf(st.log, "devstack: throwaway Postgres on 127.0.0.1:%d\n", port)
	if err := waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", port), 30*time.Second, pg); err != nil {
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
	rd, err := st.run("redis-server", cmd, true)
	if err != nil {
		return "", fmt.Errorf("%w (or set TOLLGATE_REDIS_URL)", err)
	}
	fmt.Fprintf(st.log, "devstack: throwaway Redis on 127.0.0.1:%d\n", port)
	if err := waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", port), 15*time.Second, rd); err != nil {
		return "", fmt.Errorf("redis did not start: %w", err)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", port), nil
}

func (st *Stack) spawn(env []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	return st.run(filepath.Base(bin), cmd, false)
}

// run starts a long-lived child in its own process group, so a terminal's Ctrl-C reaches only devstack,
// which then stops the children in reverse order (the data plane flushes settlements while Redis and the
// control plane are still up). The child's output goes to the stack's log (quiet: nowhere) and its tail
// is kept to quote if it dies.
func (st *Stack) run(name string, cmd *exec.Cmd, quiet bool) (*proc, error) {
	p := &proc{name: name, cmd: cmd, out: &tail{}, done: make(chan struct{}), stopSignal: syscall.SIGTERM}
	var w io.Writer = p.out
	if !quiet {
		w = io.MultiWriter(st.log, p.out)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	st.procs = append(st.procs, p)
	return p, nil
}

// exited is the error for a child that ended while we waited for it, quoting its last output.
func (p *proc) exited() error {
	out := p.out.String()
	if out == "" {
		out = "(no output)"
	}
	return fmt.Errorf("%s exited (%v) before it was ready; its last output:\n%s", p.name, p.err, out)
}

// Stop terminates every process in reverse start order and removes throwaway state. It is safe on a
// partly started stack and more than once.
func (st *Stack) Stop() {
	for i := len(st.procs) - 1; i >= 0; i-- {
		p := st.procs[i]
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(p.stopSignal)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // the whole group
			<-p.done
		}
	}
	st.procs = nil
	for i := len(st.cleanups) - 1; i >= 0; i-- {
		st.cleanups[i]()
	}
	st.cleanups = nil
}

// waitTCP waits until addr accepts connections; p (if not nil) is the process that should listen there.
func waitTCP(ctx context.Context, addr string, limit time.Duration, p *proc) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		if err := pause(ctx, 100*time.Millisecond, p); err != nil {
			return err
		}
	}
}

// pause waits d, or returns early with an error when ctx ends or p exits.
func pause(ctx context.Context, d time.Duration, p *proc) error {
	var done <-chan struct{}
	if p != nil {
		done = p.done
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return p.exited()
	case <-time.After(d):
		return nil
	}
}

// waitHTTP waits until url answers 200; p (if not nil) is the process serving it.
func waitHTTP(ctx context.Context, url string, limit time.Duration, p *proc) error {
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
		if err := pause(ctx, 200*time.Millisecond, p); err != nil {
			return err
		}
	}
	return fmt.Errorf("timed out after %s: %w", limit, last)
}

// SeedDemo waits for the control plane whose admin API is at adminAddr (host:port) and seeds the demo
// configuration `make run` uses (provider at mockURL, route demo-model, price rule, org, user, quota, key).
// It returns the new API key. The compose file's seed service runs it (`devstack seed`).
func SeedDemo(ctx context.Context, adminAddr, adminToken, mockURL string) (apiKey string, err error) {
	if err := waitHTTP(ctx, "http://"+adminAddr+"/readyz", 2*time.Minute, nil); err != nil {
		return "", fmt.Errorf("control plane at %s not ready: %w", adminAddr, err)
	}
	st := &Stack{AdminHTTP: adminAddr, AdminToken: adminToken, Model: DemoModel}
	if err := st.seed(ctx, mockURL); err != nil {
		return "", fmt.Errorf("seed demo data: %w (a second run finds the demo already there: that is fine)", err)
	}
	return st.APIKey, nil
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
