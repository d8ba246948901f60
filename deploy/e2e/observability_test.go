package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The real data plane (app.New, as the binary runs it) after real traffic: a failover between two
// providers at one base URL shows in its /metrics with configured labels, and its request log holds
// one line for the request, without a key or a credential.
func TestObservabilityAfterRealTraffic(t *testing.T) {
	e := dpStart(t, nil)
	r := e.do("POST", "/v1/chat/completions", `{"model":"failover","messages":[{"role":"user","content":"observe me"}]}`,
		"Authorization", "Bearer "+dpKeyMain, "x-mock-fail-first", "1", "x-mock-fail-key", "obs-"+randomHex(4))
	wantStatus(t, r, 200)
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(b)
	for _, want := range []string{
		`tollgate_upstream_failovers_total{provider="alpha1",reason="status_5xx"} 1`,
		`tollgate_upstream_attempts_total{outcome="ok",provider="alpha2"} 1`,
		`tollgate_upstream_attempts_total{outcome="status_5xx",provider="alpha1"} 1`,
		`gen_ai_server_request_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="alpha2",gen_ai_request_model="failover",gen_ai_response_model="m-1-mini"} 1`,
		`tollgate_requests_settled_total{end_state="completed",operation="generate_content",provider="alpha2",route="failover"} 1`,
		`tollgate_cost_microdollars_total{org="1",provider="alpha2",route="failover"} `,
		"go_goroutines ", "process_resident_memory_bytes ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("data plane metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", metrics)
	}
	id := r.header.Get("X-Request-Id")
	var line map[string]any
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, id) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("request log line %q: %v", l, err)
			}
		}
		for _, secret := range []string{dpKeyMain, "sk-one", "sk-two", "observe me"} {
			if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, secret) {
				t.Errorf("request log carries %q: %s", secret, l)
			}
		}
	}
	if line == nil || line["failovers"] != 1.0 || line["route"] != "failover" || line["provider"] != "alpha2" || line["status"] != 200.0 {
		t.Errorf("request log line for %s: %v", id, line)
	}
}
