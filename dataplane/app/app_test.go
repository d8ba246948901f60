package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/shared/process"
	"github.com/tollgate/tollgate/shared/testkit"
)

func TestMainRefusesBadConfigNamingTheSetting(t *testing.T) {
	env := func(k string) string {
		if k == "TOLLGATE_REDIS_URL" {
			return "memcached://x"
		}
		return "" // also no TOLLGATE_DP_TOKEN
	}
	err := Main(context.Background(), []string{"serve"}, io.Discard, io.Discard, env)
	if err == nil || !strings.Contains(err.Error(), "TOLLGATE_REDIS_URL") || !strings.Contains(err.Error(), "TOLLGATE_DP_TOKEN") {
		t.Fatalf("Main(serve) = %v, want errors naming TOLLGATE_REDIS_URL and TOLLGATE_DP_TOKEN", err)
	}
}

// TestNotReadyWithoutSnapshotAndGracefulStop: with no control plane reachable the data plane is alive
// (/healthz) but not ready (/readyz 503), and it stops cleanly on cancel.
func TestNotReadyWithoutSnapshotAndGracefulStop(t *testing.T) {
	// An address nothing listens on: the control plane is away.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadCP := ln.Addr().String()
	ln.Close()
	env := map[string]string{
		"TOLLGATE_DP_TOKEN":            "dp-token-for-tests-0123",
		"TOLLGATE_DP_HTTP_ADDR":        "127.0.0.1:0",
		"TOLLGATE_CP_ENDPOINTS":        deadCP,
		"TOLLGATE_REDIS_URL":           "redis://127.0.0.1:6379/0",
		"TOLLGATE_REDIS_KEY_PREFIX":    "t-app-" + t.Name() + ":",
		"TOLLGATE_NODE_ID":             "dp-test",
		"TOLLGATE_IDLE_TIMEOUT":        "300ms",
		"TOLLGATE_READ_HEADER_TIMEOUT": "300ms",
	}
	cfg, err := config.Load(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, cfg.RedisKeyPrefix+"*").Result()
		for _, k := range keys {
			rdb.Del(ctx, k)
		}
		rdb.Close()
	})
	var logs testkit.Buffer
	log, _ := process.NewLogger(&logs, "info")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := New(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx) }()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "snapshot") {
		t.Fatalf("/readyz without a snapshot = %d %s, want 503 naming the snapshot", code, body)
	}
	if code, _ := get("/metrics"); code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	// Client connection timeouts (TOLLGATE_IDLE_TIMEOUT, TOLLGATE_READ_HEADER_TIMEOUT are 300ms here): an
	// idle keep-alive connection and one whose headers never end are closed by the server.
	idle, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_, _ = io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	slow, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_, _ = io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
	for name, c := range map[string]net.Conn{"idle keep-alive": idle, "unfinished headers": slow} {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails instead of blocking
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("%s connection not closed by the server: %v", name, err)
		}
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run after cancel = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
}

// With a snapshot but Redis unreachable, the data plane stays ready (it serves degraded: admission
// without reservations, settlement records spilled) and says so in the detail.
func TestReadyWithoutRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	s := &Server{Redis: rdb, snapshotVersion: func() (int64, bool) { return 7, true }}
	detail, err := s.ready(context.Background())
	if err != nil {
		t.Fatalf("ready = %v, want ready while Redis is down", err)
	}
	if r, _ := detail["redis"].(string); !strings.HasPrefix(r, "unavailable: ") || detail["snapshot_version"] != "7" {
		t.Fatalf("detail %v, want snapshot_version 7 and redis unavailable", detail)
	}
	s.snapshotVersion = func() (int64, bool) { return 0, false }
	if _, err := s.ready(context.Background()); err == nil {
		t.Fatal("ready without a snapshot = nil, want an error")
	}
}

// TOLLGATE_METRICS_ADDR moves /metrics off the client port onto its own listener, which serves the
// data plane's families and the Go and process collectors and stops with the process.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadCP := ln.Addr().String()
	ln.Close()
	env := map[string]string{
		"TOLLGATE_DP_TOKEN":         "dp-token-for-tests-0123",
		"TOLLGATE_DP_HTTP_ADDR":     "127.0.0.1:0",
		"TOLLGATE_METRICS_ADDR":     "127.0.0.1:0",
		"TOLLGATE_CP_ENDPOINTS":     deadCP,
		"TOLLGATE_REDIS_URL":        "redis://127.0.0.1:6379/0",
		"TOLLGATE_REDIS_KEY_PREFIX": "t-app-" + t.Name() + ":",
		"TOLLGATE_NODE_ID":          "dp-test",
	}
	cfg, err := config.Load(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := process.NewLogger(io.Discard, "error")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := New(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx) }()
	get := func(addr, path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(srv.MetricsServer.Addr(), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics on the metrics listener = %d", code)
	}
	for _, want := range []string{"tollgate_snapshot_disconnected_seconds ", "tollgate_settle_outbox_length ", "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// On the client port /metrics is no longer an operational endpoint: it is a client path (the proxy's 404).
	if code, body := get(srv.Addr(), "/metrics"); code == http.StatusOK || strings.Contains(body, "go_goroutines") {
		t.Errorf("client port still serves metrics: %d", code)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run after cancel = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
	if _, err := http.Get("http://" + srv.MetricsServer.Addr() + "/metrics"); err == nil {
		t.Error("the metrics listener outlived Run")
	}
}

// TOLLGATE_PPROF_ADDR (WithPprof) serves the runtime profiles on a listener of their own, never on the
// client port, and the listener stops with the process; without it nothing is listening.
func TestPprofOnItsOwnListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadCP := ln.Addr().String()
	ln.Close()
	env := map[string]string{
		"TOLLGATE_DP_TOKEN":         "dp-token-for-tests-0123",
		"TOLLGATE_DP_HTTP_ADDR":     "127.0.0.1:0",
		"TOLLGATE_CP_ENDPOINTS":     deadCP,
		"TOLLGATE_REDIS_URL":        "redis://127.0.0.1:6379/0",
		"TOLLGATE_REDIS_KEY_PREFIX": "t-app-" + t.Name() + ":",
		"TOLLGATE_NODE_ID":          "dp-test",
	}
	cfg, err := config.Load(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := process.NewLogger(io.Discard, "error")
	off, err := New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if off.PprofAddr() != "" {
		t.Errorf("profiling listens on %s without TOLLGATE_PPROF_ADDR", off.PprofAddr())
	}
	off.ln.Close()
	off.Syncer.Close()
	off.Forwarder.Close()
	off.Redis.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := New(ctx, cfg, log, WithPprof("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx) }()
	get := func(addr, path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(srv.PprofAddr(), "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("/debug/pprof/goroutine on the pprof listener = %d %.80q", code, body)
	}
	if code, body := get(srv.Addr(), "/debug/pprof/goroutine?debug=1"); code == http.StatusOK || strings.Contains(body, "goroutine profile") {
		t.Errorf("the client port serves profiles: %d", code)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run after cancel = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
	if _, err := http.Get("http://" + srv.PprofAddr() + "/debug/pprof/"); err == nil {
		t.Error("the pprof listener outlived Run")
	}
}
