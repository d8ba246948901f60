package app

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// The control plane's /metrics, on its own listener (TOLLGATE_METRICS_ADDR), reports every quota's
// budget burn from the database, and promtool accepts the exposition.
func TestQuotaBurnOnTheMetricsListener(t *testing.T) {
	db := storetest.New(t)
	if _, err := db.Pool.Exec(t.Context(), `INSERT INTO orgs (id, name) VALUES (7, 'acme');
		INSERT INTO quotas (scope, scope_id, cost_limit, cost_used) VALUES ('org', 7, 20, 5.5);
		INSERT INTO users (id, org_id, name) VALUES (9, 7, 'u');
		INSERT INTO quotas (scope, scope_id, cost_limit, cost_used) VALUES ('user', 9, NULL, 1.25)`); err != nil {
		t.Fatal(err)
	}
	base := testEnv(db.URL)
	env := func(k string) string {
		if k == "TOLLGATE_METRICS_ADDR" {
			return "127.0.0.1:0"
		}
		return base(k)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := newFromEnv(ctx, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx) }()
	resp, err := http.Get("http://" + srv.MetricsServer.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := string(b)
	for _, want := range []string{
		`tollgate_quota_used_ratio{id="7",scope="org"} 0.275`,
		`tollgate_quota_used_microdollars{id="7",scope="org"} 5.5e+06`,
		`tollgate_quota_limit_microdollars{id="7",scope="org"} 2e+07`,
		`tollgate_quota_used_microdollars{id="9",scope="user"} 1.25e+06`,
		"tollgate_quota_scrape_error 0", "tollgate_settlement_batches_total 0", "go_goroutines ",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, `tollgate_quota_used_ratio{id="9"`) {
		t.Error("an unlimited quota has a burn ratio")
	}
	if resp, err := http.Get("http://" + srv.HTTPAddr() + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the admin port still serves /metrics")
		}
	}
	if promtool, err := exec.LookPath("promtool"); err != nil {
		t.Error("promtool not found: install Debian's prometheus package (`make test` installs it: .ci/testtools)")
	} else {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(m)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
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
}
