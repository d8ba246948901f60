package app

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/testkit"
)

func testEnv(dbURL string) func(string) string {
	env := map[string]string{
		"TOLLGATE_DATABASE_URL": dbURL,
		"TOLLGATE_ADMIN_TOKEN":  "admin-token-for-tests-0123",
		"TOLLGATE_SECRET_KEY":   strings.Repeat("11", 32),
		"TOLLGATE_DP_TOKEN":     "dp-token-for-tests-0123",
		"TOLLGATE_CP_HTTP_ADDR": "127.0.0.1:0",
		"TOLLGATE_CP_GRPC_ADDR": "127.0.0.1:0",
	}
	return func(k string) string { return env[k] }
}

func TestMainRefusesBadConfigNamingTheSetting(t *testing.T) {
	var stderr bytes.Buffer
	env := func(k string) string {
		if k == "TOLLGATE_ADMIN_TOKEN" {
			return ""
		}
		return testEnv("postgres://127.0.0.1:1/x")(k)
	}
	err := Main(context.Background(), []string{"serve"}, io.Discard, &stderr, env)
	if err == nil || !strings.Contains(err.Error(), "TOLLGATE_ADMIN_TOKEN") {
		t.Fatalf("Main(serve) without admin token = %v, want an error naming TOLLGATE_ADMIN_TOKEN", err)
	}
	if err := Main(context.Background(), []string{"bogus"}, io.Discard, &stderr, env); err == nil {
		t.Fatal("Main(bogus) = nil, want an error")
	}
}

func TestMigrateCommandIsIdempotent(t *testing.T) {
	db := storetest.New(t)
	for i := 0; i < 2; i++ {
		var stderr bytes.Buffer
		if err := Main(context.Background(), []string{"migrate", "-database-url", db.URL}, io.Discard, &stderr, testEnv(db.URL)); err != nil {
			t.Fatalf("migrate run %d: %v\n%s", i, err, stderr.String())
		}
		if i == 1 && !strings.Contains(stderr.String(), `"count":0`) {
			t.Fatalf("second migrate applied something: %s", stderr.String())
		}
	}
}

func TestServeHealthAndGracefulStop(t *testing.T) {
	db := storetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testkit.Buffer
	errc := make(chan error, 1)
	addrc := make(chan string, 1)
	go func() {
		cfgEnv := testEnv(db.URL)
		srv, err := newFromEnv(ctx, cfgEnv, &logs)
		if err != nil {
			errc <- err
			return
		}
		addrc <- srv.HTTPAddr()
		errc <- srv.Run(ctx)
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("serve: %v", err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		}
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run after cancel = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Fatalf("logs are not JSON with a stop record:\n%s", logs.String())
	}
}
