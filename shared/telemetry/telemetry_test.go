package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/shared/telemetry"
)

func TestTracingFromEnv(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		env     map[string]string
		on, err bool
	}{
		{name: "off by default", env: map[string]string{}},
		{name: "exporter otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{name: "endpoint alone", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{name: "traces endpoint alone", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{name: "exporter none wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true},
		{name: "unknown protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := telemetry.TracingFromEnv(context.Background(), func(k string) string { return c.env[k] }, "test")
			if (err != nil) != c.err {
				t.Fatalf("err = %v, want error %v", err, c.err)
			}
			if (tr.Provider != nil) != c.on {
				t.Errorf("tracing on = %v, want %v", tr.Provider != nil, c.on)
			}
			if tr.Shutdown != nil {
				_ = tr.Shutdown(context.Background())
			}
		})
	}
}

func TestMetricsServerServesRegistry(t *testing.T) {
	t.Parallel()
	reg := telemetry.NewRegistry()
	m, err := telemetry.NewMetricsServer("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = m.Server.Serve(m.Listener) }()
	t.Cleanup(func() { _ = m.Server.Close() })
	resp, err := http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"go_goroutines ", "process_cpu_seconds_total ", "go_gc_duration_seconds"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if _, err := telemetry.NewMetricsServer(m.Addr(), reg); err == nil || !strings.Contains(err.Error(), "TOLLGATE_METRICS_ADDR") {
		t.Errorf("binding a taken address: %v", err)
	}
}

// collector is a real OTLP/gRPC trace receiver on loopback.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.names = append(c.names, sp.GetName())
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports spans to an OTLP/gRPC collector named by the standard variables.
func TestTracingExportsOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	// The exporter reads the OTEL_EXPORTER_OTLP_* variables from the process environment itself.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	tr, err := telemetry.TracingFromEnv(context.Background(), func(k string) string { return env[k] }, "test")
	if err != nil || tr.Provider == nil {
		t.Fatalf("TracingFromEnv = %+v, %v", tr, err)
	}
	_, span := tr.Provider.Tracer("test").Start(context.Background(), "chat m-1")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil { // flushes the batch
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.names) != 1 || c.names[0] != "chat m-1" {
		t.Fatalf("collector received spans %v, want [chat m-1]", c.names)
	}
}
