package telemetry_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/proxy"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/dataplane/telemetry"
	"github.com/tollgate/tollgate/dataplane/upstream"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/snapshot"
	sharedtelemetry "github.com/tollgate/tollgate/shared/telemetry"
	"github.com/tollgate/tollgate/shared/testkit"
)

const (
	clientKey     = "tg-secret-client-key-0123456789"
	keyPrefix     = "tg-secr"
	badSecret     = "sk-upstream-bad-credential"
	goodSecret    = "sk-upstream-good-credential"
	prompt        = "PROMPT-TEXT-NEVER-LOGGED"
	answer        = "ANSWER-TEXT-NEVER-LOGGED"
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
)

type admitter struct{ err error }

func (a *admitter) Admit(_ context.Context, r admission.Request) (admission.Hold, error) {
	if a.err != nil {
		return admission.Hold{}, a.err
	}
	return admission.Hold{Micros: r.EstimateMicros, KeyID: r.KeyID}, nil
}

func (a *admitter) Refund(context.Context, admission.Hold) error { return nil }

type recorder struct {
	mu   sync.Mutex
	recs []*settlementv1.SettlementRecord
}

func (r *recorder) Record(_ context.Context, o settle.Outcome, _ admission.Hold) (*settlementv1.SettlementRecord, error) {
	rec := settle.BuildRecord(o) // the record settle.Recorder would append
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return rec, nil
}

func (r *recorder) last(t *testing.T) *settlementv1.SettlementRecord {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) == 0 {
		t.Fatal("no settlement record")
	}
	return r.recs[len(r.recs)-1]
}

// gateway is a data plane's request path assembled as dataplane/app does it, served by a real HTTP
// server, in front of two real upstreams: "bad" (priority 1, answers 503) and "good" (priority 2).
type gateway struct {
	srv      *httptest.Server
	reg      *prometheus.Registry
	adm      *admitter
	rec      *recorder
	log      *testkit.Buffer
	spans    *tracetest.InMemoryExporter
	upstream chan http.Header // headers of every call that reached "good"
	// handlers counts client requests still being handled: a response of declared length reaches the
	// client before its handler returns (the record and the request's metrics come after), so chat waits.
	handlers sync.WaitGroup
}

func newGateway(t *testing.T, tracing bool) *gateway { return newGatewayOpts(t, tracing, false) }

// newGatewayOpts with sharedBase puts both providers at one base URL (one server answering 503 to the
// "bad" credential), as two accounts of one vendor are.
func newGatewayOpts(t *testing.T, tracing, sharedBase bool) *gateway {
	t.Helper()
	g := &gateway{reg: sharedtelemetry.NewRegistry(), adm: &admitter{}, rec: &recorder{}, log: &testkit.Buffer{},
		upstream: make(chan http.Header, 16)}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(bad.Close)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		g.upstream <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m-good","choices":[{"index":0,"message":{"role":"assistant","content":"`+
			answer+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1100,"completion_tokens":700,"total_tokens":1800}}`)
	}))
	t.Cleanup(good.Close)
	badURL, goodURL := bad.URL, good.URL
	if sharedBase {
		shared := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer "+badSecret {
				bad.Config.Handler.ServeHTTP(w, r)
				return
			}
			good.Config.Handler.ServeHTTP(w, r)
		}))
		t.Cleanup(shared.Close)
		badURL, goodURL = shared.URL, shared.URL
	}
	kh := sha256.Sum256([]byte(clientKey))
	cred := func(id int64, secret string) []*configv1.Credential {
		return []*configv1.Credential{{Id: id, Secret: secret, Weight: 1, Enabled: true}}
	}
	rules := func(pid int64) []*configv1.RoutingRule {
		return []*configv1.RoutingRule{{Id: pid, ProviderId: pid, Operation: "generate_content", Kind: "alpha_chat_completions",
			Implementation: "passthrough", Enabled: true}}
	}
	price := func(id int64, model string) *configv1.PriceRule {
		return &configv1.PriceRule{Id: id, MatchType: "exact", ModelMatch: model, InputPrice: "2", OutputPrice: "10",
			CacheReadPrice: "0", CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0",
			ImageOutputPrice: "0", Enabled: true}
	}
	limit := "100"
	s := &snapshotv1.Snapshot{
		Version:    3,
		BuiltAt:    nil,
		PriceRules: []*configv1.PriceRule{price(1, "m-bad"), price(2, "m-good")},
		Providers: []*configv1.Provider{
			{Id: 1, Name: "bad", ChannelType: "alpha", BaseUrl: badURL, Enabled: true, Credentials: cred(1, badSecret)},
			{Id: 2, Name: "good", ChannelType: "alpha", BaseUrl: goodURL, Enabled: true, Credentials: cred(2, goodSecret)},
		},
		RoutingRules: append(rules(1), rules(2)...),
		Routes: []*configv1.Route{{Id: 7, Name: "chat", Enabled: true, Members: []*configv1.RouteMember{
			{ProviderId: 1, UpstreamModelId: "m-bad", Priority: 1, Weight: 1, Enabled: true},
			{ProviderId: 2, UpstreamModelId: "m-good", Priority: 2, Weight: 1, Enabled: true}}}},
		ApiKeys: []*configv1.ApiKey{{Id: 4, UserId: 5, OrgId: 6, TeamId: proto.Int64(8), Prefix: keyPrefix, KeyHash: kh[:], Enabled: true, RpmLimit: 1000}},
		Quotas:  []*configv1.Quota{{Scope: "org", ScopeId: 6, CostLimit: &limit, CostUsed: "0"}},
	}
	snap, err := snapshot.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	current := func() *snapshot.Compiled { return snap }
	var tp trace.TracerProvider
	if tracing {
		g.spans = tracetest.NewInMemoryExporter()
		tracing, err := sharedtelemetry.NewTracing(context.Background(), sdktrace.WithSyncer(g.spans), "tollgate-dataplane-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tracing.Shutdown(context.Background()) })
		tp = tracing.Provider
	}
	tel := telemetry.New(telemetry.Options{Registerer: g.reg, Tracer: tp, Snapshot: current,
		RequestLog: slog.NewJSONHandler(g.log, nil), LogSample: 1})
	up := upstream.New(upstream.Options{ConnectTimeout: time.Second, IdleTimeout: time.Minute, ResponseHeaderTimeout: 10 * time.Second})
	t.Cleanup(up.Close)
	up.Wrap(tel.Transport)
	h := proxy.New(proxy.Options{Snapshot: current, Upstream: up, Admitter: tel.Admitter(g.adm), Recorder: tel.Recorder(g.rec)})
	mux := http.NewServeMux()
	served := tel.Handler(h)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.handlers.Add(1)
		defer g.handlers.Done()
		served.ServeHTTP(w, r)
	}))
	mux.Handle("GET /metrics", sharedtelemetry.Handler(g.reg))
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gateway) chat(t *testing.T, model string, header map[string]string) *http.Response {
	t.Helper()
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"` + prompt + `"}]}`
	req, err := http.NewRequest(http.MethodPost, g.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	g.handlers.Wait() // the request's record, metrics and log line are written when its handler returns
	return resp
}

func (g *gateway) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(g.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantSeries(t *testing.T, metrics string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(metrics, l) {
			t.Errorf("metrics lack %s", l)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", metrics)
	}
}

// logLines parses the request log.
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("request log line is not JSON: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// A request that fails over from "bad" to "good": the scrape after it carries its route, provider,
// model, tokens, cost, failover and attempts, with configured label values only.
func TestMetricsAfterFailover(t *testing.T) {
	t.Parallel()
	g := newGateway(t, false)
	if resp := g.chat(t, "chat", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rec := g.rec.last(t)
	micros, err := pricing.ParseMicros(rec.GetCost())
	if err != nil || micros <= 0 {
		t.Fatalf("record cost %q: %v", rec.GetCost(), err)
	}
	m := g.scrape(t)
	wantSeries(t, m,
		`gen_ai_server_request_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="good",gen_ai_request_model="chat",gen_ai_response_model="m-good"} 1`,
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="good",gen_ai_request_model="chat",gen_ai_response_model="m-good",gen_ai_token_type="input"} 1100`,
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="good",gen_ai_request_model="chat",gen_ai_response_model="m-good",gen_ai_token_type="output"} 700`,
		`gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="good",gen_ai_request_model="chat",gen_ai_response_model="m-good"} 1`,
		`gen_ai_client_operation_duration_seconds_count{error_type="status_5xx",gen_ai_operation_name="chat",gen_ai_provider_name="bad",gen_ai_request_model="m-bad"} 1`,
		`gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="good",gen_ai_request_model="m-good"} 1`,
		`tollgate_tokens_total{category="input",provider="good",route="chat"} 1100`,
		`tollgate_tokens_total{category="output",provider="good",route="chat"} 700`,
		`tollgate_cost_microdollars_total{org="6",provider="good",route="chat"} `+itoa(micros)+"\n",
		`tollgate_requests_settled_total{end_state="completed",operation="generate_content",provider="good",route="chat"} 1`,
		`tollgate_upstream_attempts_total{outcome="status_5xx",provider="bad"} 1`,
		`tollgate_upstream_attempts_total{outcome="ok",provider="good"} 1`,
		`tollgate_upstream_errors_total{provider="bad",reason="status_5xx"} 1`,
		`tollgate_upstream_failovers_total{provider="bad",reason="status_5xx"} 1`,
		`tollgate_admission_total{outcome="admitted"} 1`,
		"go_goroutines ", "process_cpu_seconds_total ",
	)
	lines := logLines(t, g.log.String())
	if len(lines) != 1 {
		t.Fatalf("want one request log line, got %d:\n%s", len(lines), g.log.String())
	}
	l := lines[0]
	for k, want := range map[string]any{"msg": "request", "request_id": rec.GetRequestId(), "key_prefix": keyPrefix,
		"org_id": 6.0, "team_id": 8.0, "user_id": 5.0, "route": "chat", "provider": "good", "upstream_model": "m-good",
		"operation": "generate_content", "kind": "alpha_chat_completions", "status": 200.0, "end_state": "completed",
		"cost": rec.GetCost(), "failovers": 1.0, "attempts": 2.0, "admission": "admitted"} {
		if l[k] != want {
			t.Errorf("log %s = %v, want %v", k, l[k], want)
		}
	}
	if tk, _ := l["tokens"].(map[string]any); tk["input"] != 1100.0 || tk["output"] != 700.0 {
		t.Errorf("log tokens = %v", l["tokens"])
	}
	for _, k := range []string{"latency_ms", "ttfb_ms"} {
		if _, ok := l[k].(float64); !ok {
			t.Errorf("log lacks %s: %v", k, l)
		}
	}
}

// Two providers at one base URL (two accounts of one vendor) are told apart by the credential each
// attempt carries.
func TestProvidersSharingABaseURL(t *testing.T) {
	t.Parallel()
	g := newGatewayOpts(t, false, true)
	if resp := g.chat(t, "chat", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	wantSeries(t, g.scrape(t),
		`tollgate_upstream_failovers_total{provider="bad",reason="status_5xx"} 1`,
		`tollgate_upstream_attempts_total{outcome="ok",provider="good"} 1`,
		`tollgate_upstream_attempts_total{outcome="status_5xx",provider="bad"} 1`)
}

// The request log and the metrics never carry a secret, the prompt, the answer, or what the client
// named: an unknown model is refused and observed under fixed label values.
func TestNoSecretsPromptsOrClientInput(t *testing.T) {
	t.Parallel()
	g := newGateway(t, false)
	g.chat(t, "chat", nil)
	const hostile = "evil-model-name-from-a-client"
	if resp := g.chat(t, hostile, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown model: status %d", resp.StatusCode)
	}
	m, logs := g.scrape(t), g.log.String()
	for _, secret := range []string{clientKey, badSecret, goodSecret, prompt, answer, hostile} {
		if strings.Contains(logs, secret) {
			t.Errorf("request log carries %q:\n%s", secret, logs)
		}
		if strings.Contains(m, secret) {
			t.Errorf("metrics carry %q", secret)
		}
	}
	wantSeries(t, m, `gen_ai_server_request_duration_seconds_count{error_type="404",gen_ai_operation_name="_none",gen_ai_provider_name="_none",gen_ai_request_model="_none",gen_ai_response_model="_none"} 1`)
	lines := logLines(t, logs)
	if len(lines) != 2 || lines[1]["status"] != 404.0 || lines[1]["end_state"] != "refused" || lines[1]["request_id"] == "" {
		t.Errorf("refused request's log line: %v", lines)
	}
}

func TestRateLimitRefusalsAndSampling(t *testing.T) {
	t.Parallel()
	g := newGateway(t, false)
	g.adm.err = &admission.RateLimitError{Limit: "rpm", RetryAfter: time.Second}
	if resp := g.chat(t, "chat", nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d", resp.StatusCode)
	}
	wantSeries(t, g.scrape(t), `tollgate_rate_limit_refusals_total{limit="rpm"} 1`, `tollgate_admission_total{outcome="rate_limited"} 1`,
		`tollgate_requests_settled_total{end_state="rejected",operation="generate_content",provider="bad",route="chat"} 1`)
	if l := logLines(t, g.log.String()); len(l) != 1 || l[0]["admission"] != "rate_limited" || l[0]["end_state"] != "rejected" {
		t.Errorf("refusal log: %v", l)
	}
}

func TestRequestLogSampling(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var buf testkit.Buffer
	next := 0.0
	tel := telemetry.New(telemetry.Options{Registerer: reg, RequestLog: slog.NewJSONHandler(&buf, nil), LogSample: 0.5,
		Rand: func() float64 { next = 0.9 - next; return next }}) // 0.9, 0, 0.9, 0, …
	h := tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	for range 4 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/ok", nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/fail", nil))
	lines := logLines(t, buf.String())
	if len(lines) != 3 { // two of four successes, and the failure whatever the sample
		t.Fatalf("sampled lines: %d\n%s", len(lines), buf.String())
	}
	if lines[2]["status"] != 502.0 {
		t.Errorf("the failure was not logged: %v", lines[2])
	}
}

// With tracing on: one server span continuing the client's W3C trace, one client span per upstream
// attempt under it, each attempt's context sent upstream, and the GenAI attributes on the server span.
func TestSpans(t *testing.T) {
	t.Parallel()
	g := newGateway(t, true)
	parent := "00-" + clientTraceID + "-00f067aa0ba902b7-01"
	resp := g.chat(t, "chat", map[string]string{"traceparent": parent})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	spans := g.spans.GetSpans()
	var server tracetest.SpanStub
	var clients []tracetest.SpanStub
	for _, s := range spans {
		switch s.SpanKind {
		case trace.SpanKindServer:
			server = s
		case trace.SpanKindClient:
			clients = append(clients, s)
		}
	}
	if server.SpanContext.TraceID().String() != clientTraceID {
		t.Fatalf("server span trace %s, want the client's %s (spans %d)", server.SpanContext.TraceID(), clientTraceID, len(spans))
	}
	if server.Parent.SpanID().String() != "00f067aa0ba902b7" || !server.Parent.IsRemote() {
		t.Errorf("server span parent %v, want the client's span", server.Parent)
	}
	attrs := map[string]string{}
	for _, a := range server.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "chat",
		"gen_ai.response.model": "m-good", "gen_ai.provider.name": "good", "gen_ai.usage.input_tokens": "1100",
		"gen_ai.usage.output_tokens": "700", "tollgate.request_id": resp.Header.Get("X-Request-Id"),
		"tollgate.cost": g.rec.last(t).GetCost(), "tollgate.end_state": "completed", "tollgate.failovers": "1",
		"http.response.status_code": "200"} {
		if attrs[k] != want {
			t.Errorf("server span %s = %q, want %q", k, attrs[k], want)
		}
	}
	if server.Name != "chat chat" {
		t.Errorf("server span name %q", server.Name)
	}
	if len(clients) != 2 {
		t.Fatalf("want 2 client spans (one per attempt), got %d", len(clients))
	}
	providers := []string{}
	for _, c := range clients {
		if c.Parent.SpanID() != server.SpanContext.SpanID() {
			t.Errorf("client span %q is not a child of the server span", c.Name)
		}
		for _, a := range c.Attributes {
			if a.Key == "gen_ai.provider.name" {
				providers = append(providers, a.Value.AsString())
			}
		}
	}
	if strings.Join(providers, ",") != "bad,good" {
		t.Errorf("client spans' providers %v", providers)
	}
	if clients[0].Status.Code.String() != "Error" {
		t.Errorf("the failed attempt's span status %v", clients[0].Status)
	}
	up := <-g.upstream
	want := "00-" + clientTraceID + "-" + clients[1].SpanContext.SpanID().String() + "-01"
	if got := up.Get("Traceparent"); got != want {
		t.Errorf("upstream traceparent %q, want the attempt's span %q", got, want)
	}
}

// With tracing off no span is made and the client's traceparent reaches the upstream untouched.
func TestTracingOffPassesTraceparent(t *testing.T) {
	t.Parallel()
	g := newGateway(t, false)
	parent := "00-" + clientTraceID + "-00f067aa0ba902b7-01"
	g.chat(t, "chat", map[string]string{"traceparent": parent})
	if got := (<-g.upstream).Get("Traceparent"); got != parent {
		t.Errorf("upstream traceparent %q, want the client's %q", got, parent)
	}
}

// promtool accepts the exposition after real traffic.
func TestPromtoolCheckMetrics(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (`make test` installs it: .ci/testtools)")
	}
	g := newGateway(t, false)
	g.chat(t, "chat", nil)
	g.chat(t, "no-such-model", nil)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(g.scrape(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
