package telemetry_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
	"github.com/tollgate/tollgate/shared/snapshot"
	sharedtelemetry "github.com/tollgate/tollgate/shared/telemetry"
)

// canned answers every upstream call in process, so the benchmark measures the gateway, not a network.
type canned struct{}

const cannedBody = `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`

func (canned) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(cannedBody)), ContentLength: int64(len(cannedBody)), Request: r}, nil
}

// benchHandler is the data plane's request path (proxy, recorder, admitter and upstream seams) with
// the given instrumentation: "none" (the proxy alone), "off" (telemetry without tracing), "on"
// (tracing every request into a batching exporter that discards).
func benchHandler(b *testing.B, mode string) http.Handler {
	b.Helper()
	kh := sha256.Sum256([]byte(clientKey))
	s := &snapshotv1.Snapshot{Version: 1,
		PriceRules: []*configv1.PriceRule{{Id: 1, MatchType: "exact", ModelMatch: "m", InputPrice: "1", OutputPrice: "1",
			CacheReadPrice: "0", CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0", ImageOutputPrice: "0", Enabled: true}},
		Providers: []*configv1.Provider{{Id: 1, Name: "p", ChannelType: "alpha", BaseUrl: "http://upstream.invalid", Enabled: true,
			Credentials: []*configv1.Credential{{Id: 1, Secret: "s", Weight: 1, Enabled: true}}}},
		RoutingRules: []*configv1.RoutingRule{{Id: 1, ProviderId: 1, Operation: "generate_content", Kind: "alpha_chat_completions",
			Implementation: "passthrough", Enabled: true},
			// beta messages clients reach the alpha provider translated (BenchmarkRequestPath10KB)
			{Id: 2, ProviderId: 1, Operation: "generate_content", Kind: "beta_messages", Implementation: "transform_to",
				DestOperation: proto.String("generate_content"), DestKind: proto.String("alpha_chat_completions"), Enabled: true}},
		Routes:  []*configv1.Route{{Id: 1, Name: "chat", Enabled: true, Members: []*configv1.RouteMember{{ProviderId: 1, UpstreamModelId: "m", Priority: 1, Weight: 1, Enabled: true}}}},
		ApiKeys: []*configv1.ApiKey{{Id: 4, UserId: 5, OrgId: 6, Prefix: keyPrefix, KeyHash: kh[:], Enabled: true}},
	}
	snap, err := snapshot.Compile(s)
	if err != nil {
		b.Fatal(err)
	}
	current := func() *snapshot.Compiled { return snap }
	up := upstream.New(upstream.Options{})
	up.Wrap(func(http.RoundTripper) http.RoundTripper { return canned{} })
	o := proxy.Options{Snapshot: current, Upstream: up, Recorder: discardRecorder{}, Transformer: &proxy.Translator{},
		LocalUsage: proxy.CountLocally}
	if mode == "none" {
		return proxy.New(o)
	}
	var tp trace.TracerProvider
	if mode == "on" {
		tr, err := sharedtelemetry.NewTracing(context.Background(), sdktrace.WithBatcher(tracetest.NewNoopExporter()), "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
		tp = tr.Provider
	}
	tel := telemetry.New(telemetry.Options{Registerer: prometheus.NewRegistry(), Tracer: tp, Snapshot: current,
		RequestLog: slog.DiscardHandler, LogSample: 1})
	up.Wrap(tel.Transport)
	o.Recorder = tel.Recorder(o.Recorder)
	return tel.Handler(proxy.New(o))
}

// discardRecorder keeps nothing (the test recorder would grow for b.N requests).
type discardRecorder struct{}

func (discardRecorder) Record(_ context.Context, o settle.Outcome, _ admission.Hold) (*settlementv1.SettlementRecord, error) {
	return settle.BuildRecord(o), nil // the record settle.Recorder would append
}

// BenchmarkRequestPath serves one non-streamed chat request per iteration, in process.
func BenchmarkRequestPath(b *testing.B) {
	body := `{"model":"chat","messages":[{"role":"user","content":"hello"}]}`
	for _, mode := range []string{"none", "off", "on"} {
		b.Run("telemetry="+mode, func(b *testing.B) {
			h := benchHandler(b, mode)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+clientKey)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Traceparent", "00-"+clientTraceID+"-00f067aa0ba902b7-01")
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}

// BenchmarkRequestPath10KB serves one non-streamed ~10 KB conversation per iteration, in process, with
// telemetry on (tracing off) as the data plane runs: the bodies of deploy/loadgen/bench.sh's transform mode
// (a system prompt, one tool, 16 turns each with a tool call and its result), as alpha chat passed through
// and as beta messages translated to alpha chat and the answer back (docs/benchmarks.md, "Request path").
func BenchmarkRequestPath10KB(b *testing.B) {
	alpha, beta := conversation10KB()
	for _, bc := range []struct{ name, path, body string }{
		{"passthrough", "/v1/chat/completions", alpha},
		{"transform", "/v1/messages", beta},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := benchHandler(b, "off")
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, bc.path, strings.NewReader(bc.body))
				req.Header.Set("Authorization", "Bearer "+clientKey)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Anthropic-Version", "2023-06-01")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// conversation10KB returns bench.sh's transform-mode conversation as alpha chat and as beta messages.
func conversation10KB() (alpha, beta string) {
	const p = "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. " +
		"The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. "
	const schema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`
	var bm, am strings.Builder
	am.WriteString(`{"role":"system","content":"You are terse."}`)
	for i := range 16 {
		if i > 0 {
			bm.WriteByte(',')
		}
		fmt.Fprintf(&bm, `{"role":"user","content":"%d %s"},{"role":"assistant","content":[{"type":"text","text":"%s"},`+
			`{"type":"tool_use","id":"toolu_%d","name":"get_weather","input":{"city":"Oslo","days":3}}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":"{\"temp_c\":4}"}]}`, i, p, p, i, i)
		fmt.Fprintf(&am, `,{"role":"user","content":"%d %s"},{"role":"assistant","content":"%s","tool_calls":[{"id":"call_%d",`+
			`"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\",\"days\":3}"}}]},`+
			`{"role":"tool","tool_call_id":"call_%d","content":"{\"temp_c\":4}"}`, i, p, p, i, i)
	}
	beta = `{"model":"chat","max_tokens":512,"system":"You are terse.","messages":[` + bm.String() +
		`],"tools":[{"name":"get_weather","input_schema":` + schema + `}]}`
	alpha = `{"model":"chat","max_completion_tokens":512,"messages":[` + am.String() +
		`],"tools":[{"type":"function","function":{"name":"get_weather","parameters":` + schema + `}}]}`
	return alpha, beta
}
