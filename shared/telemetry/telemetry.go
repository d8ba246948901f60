// Package telemetry is what both planes share of their observability: the Prometheus registry every
// component registers its metrics on (with the Go runtime and process collectors), its /metrics handler
// and the optional listener that serves it off the client port, and the OpenTelemetry tracer provider
// configured from the standard OTEL_* variables (off unless asked for). docs/observability.md.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// NewRegistry returns a registry holding the Go runtime and process collectors; components add theirs.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus exposition formats (text, or OpenMetrics when asked for).
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true})
}

// MetricsServer is the /metrics listener of TOLLGATE_METRICS_ADDR (with /livez, so a probe can target
// it): bound by NewMetricsServer, served by the process.Server the caller builds from Server and Listener.
type MetricsServer struct {
	Server   *http.Server
	Listener net.Listener
}

// NewMetricsServer binds addr and serves reg's /metrics on it.
func NewMetricsServer(addr string, reg *prometheus.Registry) (*MetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s (TOLLGATE_METRICS_ADDR): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(reg))
	return &MetricsServer{Listener: ln, Server: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr is the bound address.
func (m *MetricsServer) Addr() string { return m.Listener.Addr().String() }

// Tracing is the tracer provider of a process: Provider is nil when tracing is off, and Shutdown flushes
// the spans still batched (a no-op when off).
type Tracing struct {
	Provider trace.TracerProvider
	Shutdown func(context.Context) error
}

// TracingFromEnv configures tracing from the standard OpenTelemetry variables, read through getenv.
// Tracing is off unless OTEL_TRACES_EXPORTER is "otlp" or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) is set, and always off with
// OTEL_SDK_DISABLED=true. The exporter speaks OTLP over HTTP/protobuf (OTEL_EXPORTER_OTLP_PROTOCOL
// "http/protobuf", the default) or gRPC ("grpc"; any other value is refused rather than silently ignored)
// and reads its endpoint,
// headers, timeout and TLS settings from the OTEL_EXPORTER_OTLP_* variables; the sampler comes from
// OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on) and the resource from
// OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES, with service the default service name.
func TracingFromEnv(ctx context.Context, getenv func(string) string, service string) (Tracing, error) {
	off := Tracing{Shutdown: func(context.Context) error { return nil }}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return off, nil
	}
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	switch {
	case exporter == "none":
		return off, nil
	case exporter == "otlp", exporter == "" && endpoint:
	case exporter == "":
		return off, nil
	default:
		return off, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported (otlp or none)", exporter)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx) // endpoint, headers, TLS and timeout from OTEL_EXPORTER_OTLP_*
	case "grpc":
		exp, err = otlptracegrpc.New(ctx) // likewise, and OTEL_EXPORTER_OTLP_INSECURE
	default:
		return off, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported (http/protobuf or grpc)", proto)
	}
	if err != nil {
		return off, fmt.Errorf("otlp trace exporter: %w", err)
	}
	return NewTracing(ctx, sdktrace.WithBatcher(exp), service)
}

// NewTracing builds a tracer provider over an exporter option (sdktrace.WithBatcher, or
// sdktrace.WithSyncer of an in-memory exporter in tests) with the resource of service.
func NewTracing(ctx context.Context, exporter sdktrace.TracerProviderOption, service string) (Tracing, error) {
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the default name.
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(service)), resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return Tracing{}, fmt.Errorf("trace resource: %w", err)
	}
	if r, err := resource.Merge(resource.Default(), res); err == nil {
		res = r
	}
	tp := sdktrace.NewTracerProvider(exporter, sdktrace.WithResource(res))
	return Tracing{Provider: tp, Shutdown: tp.Shutdown}, nil
}

// Propagator is the W3C trace-context (and baggage) propagator both planes use.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Text is g's exposition in the Prometheus text format, as a scrape of /metrics reads it.
func Text(g prometheus.Gatherer) (string, error) {
	mfs, err := g.Gather()
	if err != nil {
		return "", fmt.Errorf("gather metrics: %w", err)
	}
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return "", fmt.Errorf("encode metrics: %w", err)
		}
	}
	return b.String(), nil
}
