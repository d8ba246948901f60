package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/shared/process"
)

// TestReadinessOnFrozenRedis freezes Redis (SIGSTOP) under /readyz, with the data plane's own Redis
// client: the probe answers while Redis is still frozen, not ready under the closed admission policy
// (every request needing admission would be refused) and ready but degraded under open; once Redis is
// thawed, both are ready with Redis ok.
func TestReadinessOnFrozenRedis(t *testing.T) {
	srv := admissiontest.StartServer(t)
	for _, policy := range []string{"open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			cfg := config.Config{RedisURL: srv.URL(), RedisTimeout: 200 * time.Millisecond, AdmissionOnRedisFailure: policy}
			rdb, err := newRedis(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Close() })
			s := &Server{Config: cfg, Redis: rdb, snapshotVersion: func() (int64, bool) { return 7, true }}
			mux := http.NewServeMux()
			process.HealthHandlers(mux, s.ready)
			web := httptest.NewServer(mux)
			t.Cleanup(web.Close)
			probe := func() (int, map[string]any, bool) {
				t.Helper()
				type answer struct {
					code        int
					body        map[string]any
					err         error
					whileFrozen bool
				}
				ch := make(chan answer, 1)
				go func() {
					resp, err := http.Get(web.URL + "/readyz")
					if err != nil {
						ch <- answer{err: err}
						return
					}
					defer resp.Body.Close()
					var body map[string]any
					err = json.NewDecoder(resp.Body).Decode(&body)
					ch <- answer{resp.StatusCode, body, err, srv.Stopped()}
				}()
				select {
				case a := <-ch:
					if a.err != nil {
						t.Fatal(a.err)
					}
					return a.code, a.body, a.whileFrozen
				case <-time.After(20 * time.Second):
					t.Fatal("/readyz still waiting on Redis after 20s")
					return 0, nil, false
				}
			}
			if code, body, _ := probe(); code != http.StatusOK || body["redis"] != "ok" {
				t.Fatalf("/readyz with Redis up: %d %v", code, body)
			}
			srv.Stop()
			// Hold connections on the frozen server too, as in-flight requests would.
			for range 4 {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					defer cancel()
					_ = rdb.Get(ctx, "k").Err()
				}()
			}
			code, body, whileFrozen := probe()
			srv.Cont()
			if !whileFrozen {
				t.Fatalf("/readyz answered only after Redis was thawed: %d %v", code, body)
			}
			redisState, _ := body["redis"].(string)
			if !strings.HasPrefix(redisState, "unavailable") || body["admission_on_redis_failure"] != policy {
				t.Errorf("/readyz detail %v, want redis unavailable and the policy named", body)
			}
			want := http.StatusOK
			if policy == "closed" {
				want = http.StatusServiceUnavailable
			}
			if code != want {
				t.Errorf("/readyz on a frozen Redis under %s: %d, want %d (%v)", policy, code, want, body)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				code, body, _ := probe()
				if code == http.StatusOK && body["redis"] == "ok" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz after the thaw: %d %v", code, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
