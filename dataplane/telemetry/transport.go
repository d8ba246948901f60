package telemetry

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/dataplane/upstream"
	"github.com/tollgate/tollgate/shared/telemetry"
)

// Transport wraps the upstream transport (upstream.Client.Wrap): each round trip is one attempt of the
// request in its context — counted by provider and outcome, timed to the end of its body, and with
// tracing on run in a client span whose context is sent upstream as traceparent. The provider is the
// one holding the credential on the request, under whose base URL it goes (the proxy does not pass
// the provider down).
func (t *Telemetry) Transport(next http.RoundTripper) http.RoundTripper { return transport{t, next} }

type transport struct {
	t    *Telemetry
	next http.RoundTripper
}

func (tr transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t := tr.t
	a := &attempt{provider: t.lookup().providerOf(req.URL.String(), credential(req.Header)), start: t.o.Now()}
	if t.tracer != nil {
		ctx, span := t.tracer.Start(req.Context(), "upstream "+a.provider, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithTimestamp(a.start), trace.WithAttributes(
				attribute.String("gen_ai.provider.name", a.provider),
				attribute.String("server.address", req.URL.Hostname()),
				attribute.String("http.request.method", req.Method)))
		a.span = span
		// The request is the proxy's: send a copy whose header carries this span's context (the
		// client's own traceparent, relayed with its headers, is replaced).
		out := req.WithContext(ctx)
		out.Header = req.Header.Clone()
		telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(out.Header))
		req = out
	}
	st := fromContext(req.Context())
	resp, err := tr.next.RoundTrip(req)
	switch {
	case err != nil:
		a.reason = "connection"
		if upstream.IsTimeout(err) {
			a.reason = "timeout"
		}
	case resp.StatusCode == http.StatusTooManyRequests:
		a.reason = "status_429"
	case resp.StatusCode >= 500:
		a.reason = "status_5xx"
	}
	if a.span != nil && resp != nil {
		a.span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	}
	outcome := "ok"
	if a.reason != "" {
		outcome = a.reason
		t.upstreamErrors.WithLabelValues(a.provider, a.reason).Inc()
	}
	t.attempts.WithLabelValues(a.provider, outcome).Inc()
	if err != nil || a.reason != "" {
		a.end = t.o.Now() // the proxy fails over: what follows is a drain, not the operation
	} else {
		resp.Body = &body{ReadCloser: resp.Body, a: a, t: t, st: st}
	}
	if st == nil {
		st = &state{}
		defer t.finish(st, nil) // outside Handler: observe the attempt alone, once it ended
	}
	st.mu.Lock()
	st.attempts = append(st.attempts, a)
	st.mu.Unlock()
	return resp, err
}

// credential is the provider secret the proxy set on an upstream request (upstream.SetAuth): Bearer,
// x-api-key or x-goog-api-key. It is only compared with the snapshot's credentials, never kept.
func credential(h http.Header) string {
	if v := h.Get("X-Api-Key"); v != "" {
		return v
	}
	if v := h.Get("X-Goog-Api-Key"); v != "" {
		return v
	}
	if v, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer "); ok {
		return v
	}
	return ""
}

// body marks its attempt's end at Close, and a read failure as a cut answer.
type body struct {
	io.ReadCloser
	a    *attempt
	t    *Telemetry
	st   *state
	once sync.Once
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.lock()
		b.a.cut = true
		b.unlock()
	}
	return n, err
}

func (b *body) Close() error {
	b.once.Do(func() {
		b.lock()
		b.a.end = b.t.o.Now()
		b.unlock()
	})
	return b.ReadCloser.Close()
}

func (b *body) lock() {
	if b.st != nil {
		b.st.mu.Lock()
	}
}

func (b *body) unlock() {
	if b.st != nil {
		b.st.mu.Unlock()
	}
}
