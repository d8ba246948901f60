package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

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
		{name: "grpc refused", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: true},
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
