package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/settle"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/telemetry"
	"github.com/tollgate/tollgate/shared/vocab"
)

func randFloat() float64 { return rand.Float64() }

// state is one client request's observations, shared by the seams through the request's context.
type state struct {
	start time.Time
	span  trace.Span // nil with tracing off

	mu        sync.Mutex
	rec       *settlementv1.SettlementRecord
	admission string
	attempts  []*attempt
	arr       [2]*attempt
}

// attempt is one upstream round trip.
type attempt struct {
	provider   string
	reason     string // "" when the transport saw a usable answer
	start, end time.Time
	span       trace.Span
	cut        bool // its body failed after the headers
}

type stateKey struct{}

func fromContext(ctx context.Context) *state {
	st, _ := ctx.Value(stateKey{}).(*state)
	return st
}

// Handler wraps the client handler: every request is timed and logged, and with tracing on runs in a
// server span continuing the client's W3C trace context.
func (t *Telemetry) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &state{start: t.o.Now()}
		st.attempts = st.arr[:0]
		ctx := context.WithValue(r.Context(), stateKey{}, st)
		if t.tracer != nil {
			ctx = telemetry.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, st.span = t.tracer.Start(ctx, "tollgate request", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithTimestamp(st.start), trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			// A handler that aborts its response (http.ErrAbortHandler after an upstream cut) has settled:
			// it is observed like any other, then the panic continues.
			t.finish(st, sw)
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// statusWriter keeps the status a handler wrote; Unwrap keeps http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Recorder is the proxy's settlement recorder (proxy.Recorder).
type Recorder interface {
	Record(ctx context.Context, o settle.Outcome, hold admission.Hold) (*settlementv1.SettlementRecord, error)
}

// Recorder wraps next: the record next built for the request is kept for the request's observations.
func (t *Telemetry) Recorder(next Recorder) Recorder { return recorder{t, next} }

type recorder struct {
	t    *Telemetry
	next Recorder
}

func (r recorder) Record(ctx context.Context, o settle.Outcome, hold admission.Hold) (*settlementv1.SettlementRecord, error) {
	rec, err := r.next.Record(ctx, o, hold)
	if rec == nil {
		return rec, err
	}
	if st := fromContext(ctx); st != nil {
		st.mu.Lock()
		st.rec = rec
		st.mu.Unlock()
	} else {
		// Not behind Handler (a test's bare proxy): observe the record alone.
		r.t.finish(&state{start: r.t.o.Now().Add(-time.Duration(rec.GetLatencyMs()) * time.Millisecond), rec: rec}, nil)
	}
	return rec, err
}

// Admitter is the proxy's admitter (proxy.Admitter).
type Admitter interface {
	Admit(ctx context.Context, req admission.Request) (admission.Hold, error)
	Refund(ctx context.Context, h admission.Hold) error
}

// Admitter wraps next, counting admission outcomes.
func (t *Telemetry) Admitter(next Admitter) Admitter { return admitter{t, next} }

type admitter struct {
	t    *Telemetry
	next Admitter
}

func (a admitter) Admit(ctx context.Context, req admission.Request) (admission.Hold, error) {
	h, err := a.next.Admit(ctx, req)
	outcome := "admitted"
	var rl *admission.RateLimitError
	switch {
	case err == nil:
	case errors.As(err, &rl):
		outcome = "rate_limited"
		limit := "other"
		if rl.Limit == "rpm" || rl.Limit == "tpm" {
			limit = rl.Limit
		}
		a.t.rateLimited.WithLabelValues(limit).Inc()
	case errors.Is(err, admission.ErrQuotaExceeded):
		outcome = "quota_exceeded"
	case errors.Is(err, admission.ErrFailedClosed):
		outcome = "unavailable_refused"
	case ctx.Err() != nil:
		outcome = "cancelled"
	default:
		outcome = "unavailable_admitted"
	}
	a.t.admissions.WithLabelValues(outcome).Inc()
	if st := fromContext(ctx); st != nil {
		st.mu.Lock()
		st.admission = outcome
		st.mu.Unlock()
	}
	return h, err
}

func (a admitter) Refund(ctx context.Context, h admission.Hold) error { return a.next.Refund(ctx, h) }

// genAIOperation is gen_ai.operation.name: the GenAI conventions' well-known value where one fits,
// else Tollgate's operation name (a fixed vocabulary).
func genAIOperation(op string) string {
	switch vocab.Operation(op) {
	case vocab.OpGenerateContent, vocab.OpStreamGenerateContent:
		return "chat"
	case vocab.OpCreateEmbedding:
		return "embeddings"
	case "":
		return none
	}
	return op
}

// finish observes a request once its handler returned (sw nil: a record seen outside Handler).
func (t *Telemetry) finish(st *state, sw *statusWriter) {
	now := t.o.Now()
	st.mu.Lock()
	rec, adm := st.rec, st.admission
	attempts := make([]attempt, len(st.attempts))
	for i, a := range st.attempts {
		attempts[i] = *a
	}
	st.mu.Unlock()
	n := t.lookup()
	latency := now.Sub(st.start)
	status := 0
	if sw != nil {
		status = sw.status
	}
	op, genOp, route, provider, respModel, endState := none, none, none, none, none, "refused"
	if rec != nil {
		status = int(rec.GetHttpStatus())
		op, genOp = rec.GetOperation(), genAIOperation(rec.GetOperation())
		route, provider = n.route(rec.GetRouteId()), n.provider(rec.GetProviderId())
		respModel = n.model(provider, rec.GetUpstreamModel())
		endState = rec.GetEndState()
	}
	if status == 0 {
		status = http.StatusOK // a handler that wrote nothing answered 200
	}
	errType := ""
	switch {
	case status >= 400:
		errType = strconv.Itoa(status)
	case rec != nil && endState != string(vocab.EndCompleted):
		errType = endState
	}
	if sw != nil {
		t.serverDuration.WithLabelValues(genOp, route, provider, respModel, errType).Observe(latency.Seconds())
	}
	failovers := 0
	for i, a := range attempts {
		reason := a.reason
		if reason == "" && a.cut {
			reason = "cut"
		}
		if reason == "" && i < len(attempts)-1 {
			reason = "cut" // answered, yet the proxy tried again: the answer broke before reaching the client
		}
		if reason != "" && a.reason == "" {
			t.upstreamErrors.WithLabelValues(a.provider, reason).Inc()
		}
		if reason != "" && i < len(attempts)-1 {
			failovers++
			t.failovers.WithLabelValues(a.provider, reason).Inc()
		}
		model := respModel
		if a.provider != provider {
			// Another candidate: its model is the route member's (the record names the last one's).
			model = unknown
			if m, ok := n.memberModel[[2]string{route, a.provider}]; ok {
				model = m
			}
		}
		end := a.end
		if end.IsZero() {
			end = now
		}
		t.clientDuration.WithLabelValues(genOp, model, a.provider, reason).Observe(end.Sub(a.start).Seconds())
		if a.span != nil {
			a.span.SetName(genOp + " " + model)
			a.span.SetAttributes(attribute.String("gen_ai.operation.name", genOp), attribute.String("gen_ai.request.model", model))
			if a.provider == provider && rec != nil {
				a.span.SetAttributes(attribute.String("gen_ai.response.model", respModel))
			}
			if reason != "" {
				a.span.SetAttributes(attribute.String("error.type", reason))
				a.span.SetStatus(codes.Error, reason)
			}
			a.span.End(trace.WithTimestamp(end))
		}
	}
	if rec != nil {
		tk := rec.GetTokens()
		in := tk.GetInput() + tk.GetCacheRead() + tk.GetCacheCreation_5M() + tk.GetCacheCreation_30M() + tk.GetCacheCreation_1H()
		out := tk.GetOutput() + tk.GetImageOutput()
		if status < 400 && endState == string(vocab.EndCompleted) {
			if fb := rec.GetFirstByteMs(); fb > 0 {
				t.ttft.WithLabelValues(genOp, route, provider, respModel).Observe(float64(fb) / 1000)
			}
		}
		if in > 0 || out > 0 {
			t.tokenUsage.WithLabelValues(genOp, route, provider, respModel, "input").Observe(float64(in))
			t.tokenUsage.WithLabelValues(genOp, route, provider, respModel, "output").Observe(float64(out))
		}
		for _, c := range [...]struct {
			name string
			v    int64
		}{{"input", tk.GetInput()}, {"output", tk.GetOutput()}, {"cache_read", tk.GetCacheRead()},
			{"cache_creation_5m", tk.GetCacheCreation_5M()}, {"cache_creation_30m", tk.GetCacheCreation_30M()},
			{"cache_creation_1h", tk.GetCacheCreation_1H()}, {"image_output", tk.GetImageOutput()}} {
			if c.v > 0 {
				t.tokens.WithLabelValues(route, provider, c.name).Add(float64(c.v))
			}
		}
		if micros, err := pricing.ParseMicros(rec.GetCost()); err == nil && micros > 0 {
			t.cost.WithLabelValues(itoa(rec.GetOrgId()), route, provider).Add(float64(micros))
		}
		t.requests.WithLabelValues(route, provider, op, endState).Inc()
	}
	if st.span != nil {
		s := st.span
		s.SetName(genOp + " " + route)
		s.SetAttributes(attribute.Int("http.response.status_code", status))
		if rec != nil {
			tk := rec.GetTokens()
			s.SetAttributes(
				attribute.String("gen_ai.operation.name", genOp),
				attribute.String("gen_ai.request.model", route),
				attribute.String("gen_ai.response.model", respModel),
				attribute.String("gen_ai.provider.name", provider),
				attribute.Int64("gen_ai.usage.input_tokens", tk.GetInput()+tk.GetCacheRead()+tk.GetCacheCreation_5M()+tk.GetCacheCreation_30M()+tk.GetCacheCreation_1H()),
				attribute.Int64("gen_ai.usage.output_tokens", tk.GetOutput()+tk.GetImageOutput()),
				attribute.Int64("gen_ai.usage.cache_read.input_tokens", tk.GetCacheRead()),
				attribute.Int64("gen_ai.usage.cache_creation.input_tokens", tk.GetCacheCreation_5M()+tk.GetCacheCreation_30M()+tk.GetCacheCreation_1H()),
				attribute.Int64("tollgate.usage.image_output_tokens", tk.GetImageOutput()),
				attribute.String("tollgate.request_id", rec.GetRequestId()),
				attribute.String("tollgate.operation", op),
				attribute.String("tollgate.cost", rec.GetCost()),
				attribute.String("tollgate.end_state", endState),
				attribute.Int("tollgate.failovers", failovers),
			)
		} else if sw != nil {
			s.SetAttributes(attribute.String("tollgate.request_id", sw.Header().Get("X-Request-Id")))
		}
		if errType != "" {
			s.SetAttributes(attribute.String("error.type", errType))
		}
		if status >= 500 {
			s.SetStatus(codes.Error, errType)
		}
		s.End(trace.WithTimestamp(now))
	}
	t.log(st, sw, rec, status, endState, route, provider, adm, latency, len(attempts), failovers)
}

// log writes the request's one log line: never a secret (the key by its prefix), never the prompt or
// the answer, never the path or query (a key may ride in the query).
func (t *Telemetry) log(st *state, sw *statusWriter, rec *settlementv1.SettlementRecord, status int, endState, route, provider, adm string,
	latency time.Duration, attempts, failovers int) {
	h := t.o.RequestLog
	if h == nil {
		return
	}
	ok := status < 400 && (rec == nil || endState == string(vocab.EndCompleted))
	if ok && t.o.LogSample < 1 && (t.o.LogSample <= 0 || t.o.Rand() >= t.o.LogSample) {
		return
	}
	r := slog.NewRecord(t.o.Now(), slog.LevelInfo, "request", 0)
	if rec == nil {
		id := ""
		if sw != nil {
			id = sw.Header().Get("X-Request-Id")
		}
		r.AddAttrs(slog.String("request_id", id), slog.Int("status", status), slog.String("end_state", endState),
			slog.Int64("latency_ms", latency.Milliseconds()))
		_ = h.Handle(context.Background(), r)
		return
	}
	prefix := ""
	if snap := t.o.Snapshot(); snap != nil {
		if k := snap.KeyByID(rec.GetApiKeyId()); k != nil {
			prefix = k.Prefix
		}
	}
	tk := rec.GetTokens()
	r.AddAttrs(
		slog.String("request_id", rec.GetRequestId()),
		slog.String("key_prefix", prefix),
		slog.Int64("org_id", rec.GetOrgId()), slog.Int64("team_id", rec.GetTeamId()), slog.Int64("user_id", rec.GetUserId()),
		slog.String("route", route), slog.String("provider", provider), slog.String("upstream_model", rec.GetUpstreamModel()),
		slog.String("operation", rec.GetOperation()), slog.String("kind", rec.GetInboundKind()),
		slog.String("implementation", rec.GetImplementation()),
		slog.Int("status", status), slog.String("end_state", endState),
		slog.String("admission", adm),
		slog.Int64("latency_ms", latency.Milliseconds()), slog.Int64("ttfb_ms", rec.GetFirstByteMs()),
		slog.GroupAttrs("tokens", slog.Int64("input", tk.GetInput()), slog.Int64("output", tk.GetOutput()),
			slog.Int64("cache_read", tk.GetCacheRead()), slog.Int64("cache_creation_5m", tk.GetCacheCreation_5M()),
			slog.Int64("cache_creation_30m", tk.GetCacheCreation_30M()), slog.Int64("cache_creation_1h", tk.GetCacheCreation_1H()),
			slog.Int64("image_output", tk.GetImageOutput())),
		slog.String("usage_source", rec.GetSource()),
		slog.String("cost", rec.GetCost()),
		slog.String("billing_flag", rec.GetBillingFlag()),
		slog.Int("attempts", attempts), slog.Int("failovers", failovers),
	)
	_ = h.Handle(context.Background(), r)
}
