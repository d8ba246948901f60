package telemetry_test

import (
	"context"
	"crypto/sha256"
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

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/proxy"
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
			Implementation: "passthrough", Enabled: true}},
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
	o := proxy.Options{Snapshot: current, Upstream: up, Recorder: discardRecorder{}}
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

func (discardRecorder) Record(context.Context, *settlementv1.SettlementRecord, admission.Hold) error {
	return nil
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
