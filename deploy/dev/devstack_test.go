package dev

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/testkit"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestMakeRunStackServesEveryExample builds the real binaries, starts the stack the way `make run` does
// (against the test Postgres and Redis), and performs every example request the banner prints, each
// answering 200 in its own dialect's shape, and the same request through the SDK the banner names for it.
func TestMakeRunStackServesEveryExample(t *testing.T) {
	db := storetest.New(t)
	bin := buildStackBinaries(t)
	redisURL := os.Getenv("TOLLGATE_TEST_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	prefix := fmt.Sprintf("test:devstack:%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		opts, err := redis.ParseURL(redisURL)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, prefix+"*").Result()
		for _, k := range keys {
			rdb.Del(ctx, k)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logs testkit.Buffer
	st, err := Start(ctx, Options{
		BinDir: bin, DatabaseURL: db.URL, RedisURL: redisURL, RedisKeyPrefix: prefix,
		DataPlane: freeAddr(t), AdminHTTP: freeAddr(t), GRPC: freeAddr(t), Mock: freeAddr(t),
		Log: &logs,
	})
	if err != nil {
		t.Fatalf("Start: %v\nlogs:\n%s", err, logs.String())
	}
	defer st.Stop()
	banner := st.Banner()
	for _, e := range Examples(st.Model) {
		line := e.CurlLine("http://"+st.DataPlane, st.APIKey)
		if !strings.Contains(banner, line) || !strings.Contains(line, st.APIKey) {
			t.Fatalf("the banner does not print %q:\n%s", line, banner)
		}
		runCurlLine(t, ctx, line, nil)
		// The SDKs the banner names answer too, with the base URL it prints for them.
		text, err := sdkText(t, ctx, e, "http://"+st.DataPlane, st.APIKey, st.Model)
		if err != nil || text == "" {
			t.Errorf("%s through the %s: %q, %v", e.Dialect, e.SDK, text, err)
		}
	}
}

// buildStackBinaries builds the binaries Start runs, and devstack itself, into a temporary directory.
func buildStackBinaries(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"github.com/tollgate/tollgate/controlplane/cmd/controlplane",
		"github.com/tollgate/tollgate/dataplane/cmd/dataplane",
		"github.com/tollgate/tollgate/deploy/mockupstream/cmd/mockupstream",
		"github.com/tollgate/tollgate/deploy/dev/cmd/devstack")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startFails runs Start (recovering a panic as a test failure) and returns its error, which must be set.
func startFails(t *testing.T, o Options) error {
	t.Helper()
	var logs testkit.Buffer
	o.Log = &logs
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var st *Stack
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Start panicked: %v", r)
			}
		}()
		st, err = Start(ctx, o)
	}()
	if err == nil {
		st.Stop()
		t.Fatal("Start succeeded, want an error")
	}
	if st != nil {
		t.Errorf("Start returned a stack with its error")
	}
	return err
}

func wantMessage(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

// TestStartMissingBinaryNamesItAndTheFix: a missing binary is an error naming it and `make build`.
func TestStartMissingBinaryNamesItAndTheFix(t *testing.T) {
	dir := t.TempDir()
	err := startFails(t, Options{BinDir: dir, DatabaseURL: "postgres://x@127.0.0.1:1/x", RedisURL: "redis://127.0.0.1:1/0",
		DataPlane: freeAddr(t), AdminHTTP: freeAddr(t), GRPC: freeAddr(t), Mock: freeAddr(t)})
	wantMessage(t, err, "controlplane", dir, "make build")
}

// TestStartTakenPortNamesTheSettingThatMovesIt: a taken port is an error naming the address and the
// flag and environment variable that move it.
func TestStartTakenPortNamesTheSettingThatMovesIt(t *testing.T) {
	bin := buildStackBinaries(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = startFails(t, Options{BinDir: bin, DatabaseURL: "postgres://x@127.0.0.1:1/x", RedisURL: "redis://127.0.0.1:1/0",
		DataPlane: freeAddr(t), AdminHTTP: ln.Addr().String(), GRPC: freeAddr(t), Mock: freeAddr(t)})
	wantMessage(t, err, ln.Addr().String(), "-admin-addr", "TOLLGATE_DEV_ADMIN_ADDR")
}

// TestStartFailureStopsWhatAlreadyStarted: the control plane dies at start (its database is unreachable)
// after the mock upstream is up. Start reports the control plane's own error and the fix, and the mock
// upstream it had started is gone.
func TestStartFailureStopsWhatAlreadyStarted(t *testing.T) {
	bin := buildStackBinaries(t)
	mock := freeAddr(t)
	err := startFails(t, Options{BinDir: bin, DatabaseURL: "postgres://x@127.0.0.1:1/x?connect_timeout=2", RedisURL: "redis://127.0.0.1:1/0",
		DataPlane: freeAddr(t), AdminHTTP: freeAddr(t), GRPC: freeAddr(t), Mock: mock})
	wantMessage(t, err, "controlplane exited", "127.0.0.1:1", "TOLLGATE_DATABASE_URL")
	if c, err := net.DialTimeout("tcp", mock, time.Second); err == nil {
		c.Close()
		t.Errorf("the mock upstream still listens on %s after Start failed", mock)
	}
}

// TestFlagsAndEnvironmentSetThePorts: every address is a flag with an environment fallback.
func TestFlagsAndEnvironmentSetThePorts(t *testing.T) {
	env := map[string]string{"TOLLGATE_DEV_DP_ADDR": "127.0.0.1:18080", "TOLLGATE_DEV_MOCK_ADDR": "127.0.0.1:19999",
		"TOLLGATE_DATABASE_URL": "postgres://db", "TOLLGATE_REDIS_URL": "redis://r"}
	o, err := ParseFlags([]string{"-bin", "out", "-admin-addr", "127.0.0.1:18081", "-grpc-addr", "127.0.0.1:19090"},
		func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{BinDir: "out", DataPlane: "127.0.0.1:18080", AdminHTTP: "127.0.0.1:18081", GRPC: "127.0.0.1:19090",
		Mock: "127.0.0.1:19999", DatabaseURL: "postgres://db", RedisURL: "redis://r"}
	if o != want {
		t.Fatalf("ParseFlags = %+v, want %+v", o, want)
	}
	if _, err := ParseFlags([]string{"-dp-addr", "nonsense"}, func(string) string { return "" }, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "-dp-addr") {
		t.Fatalf("ParseFlags(bad address) = %v, want an error naming -dp-addr", err)
	}
}
