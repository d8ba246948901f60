// Package telemetry instruments the data plane's request path from outside the proxy, at four seams:
// HTTP middleware around the client handler (server span, W3C trace-context extraction, request duration
// of every request, the request log line), a decorator of the proxy's Recorder (every dispatched request
// hands it exactly one settlement record: route, provider, model, tokens, cost, end state, TTFB), one of
// its Admitter (admission outcomes) and a wrapper of the upstream transport (one client span and one
// operation-duration observation per upstream attempt, trace context propagated upstream, failovers).
// The seams share one per-request state carried in the request's context. Every label value comes from
// the snapshot (route, provider and upstream-model names, org ids) or from a fixed vocabulary, never from
// raw client input. docs/observability.md.
package telemetry

import (
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/shared/snapshot"
)

// Options configure a Telemetry.
type Options struct {
	// Registerer takes the metrics (required).
	Registerer prometheus.Registerer
	// Tracer is nil with tracing off: no span is started and no header is touched.
	Tracer trace.TracerProvider
	// RequestLog receives one JSON line per request (nil: none), whatever the process log level.
	RequestLog slog.Handler
	// LogSample is the fraction of successful requests logged (0..1); a request that did not complete
	// with a status below 400 is always logged.
	LogSample float64
	// Snapshot resolves ids in records and upstream URLs to configured names.
	Snapshot func() *snapshot.Compiled
	// Now and Rand are the clock and the sampling source (defaults: time.Now, math/rand/v2).
	Now  func() time.Time
	Rand func() float64
}

// Telemetry holds the instruments. It is safe for concurrent use.
type Telemetry struct {
	o      Options
	tracer trace.Tracer
	names  atomic.Pointer[names]

	serverDuration *prometheus.HistogramVec
	ttft           *prometheus.HistogramVec
	tokenUsage     *prometheus.HistogramVec
	clientDuration *prometheus.HistogramVec
	tokens         *prometheus.CounterVec
	cost           *prometheus.CounterVec
	requests       *prometheus.CounterVec
	attempts       *prometheus.CounterVec
	upstreamErrors *prometheus.CounterVec
	failovers      *prometheus.CounterVec
	admissions     *prometheus.CounterVec
	rateLimited    *prometheus.CounterVec
}

// Bucket boundaries the GenAI semantic conventions recommend.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	ttftBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// Label names. The gen_ai_* families use the OpenTelemetry GenAI attribute names (dots become
// underscores in Prometheus); Tollgate's own families use short names.
const (
	lOp        = "gen_ai_operation_name"
	lReqModel  = "gen_ai_request_model"
	lRespModel = "gen_ai_response_model"
	lProvider  = "gen_ai_provider_name"
	lErrType   = "error_type"
	lTokenType = "gen_ai_token_type"
)

// New registers the instruments on o.Registerer.
func New(o Options) *Telemetry {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = randFloat
	}
	if o.Snapshot == nil {
		o.Snapshot = func() *snapshot.Compiled { return nil }
	}
	f := promauto.With(o.Registerer)
	t := &Telemetry{o: o,
		serverDuration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "gen_ai_server_request_duration_seconds",
			Help: "Client request duration, from the request's headers to the handler's end (gen_ai.server.request.duration); every request, the unrouted ones labelled _none.", Buckets: durationBuckets},
			[]string{lOp, lReqModel, lProvider, lRespModel, lErrType}),
		ttft: f.NewHistogramVec(prometheus.HistogramOpts{Name: "gen_ai_server_time_to_first_token_seconds",
			Help: "Time to the first byte of a successful answer relayed to the client (gen_ai.server.time_to_first_token).", Buckets: ttftBuckets},
			[]string{lOp, lReqModel, lProvider, lRespModel}),
		tokenUsage: f.NewHistogramVec(prometheus.HistogramOpts{Name: "gen_ai_client_token_usage",
			Help: "Tokens per settled request by type, input including cached and cache-written tokens, output including image output (gen_ai.client.token.usage).", Buckets: tokenBuckets},
			[]string{lOp, lReqModel, lProvider, lRespModel, lTokenType}),
		clientDuration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "gen_ai_client_operation_duration_seconds",
			Help: "Duration of one upstream attempt, from sending the request to the end of its response body (gen_ai.client.operation.duration).", Buckets: durationBuckets},
			[]string{lOp, lReqModel, lProvider, lErrType}),
		tokens: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_tokens_total",
			Help: "Settled tokens by route, provider and each of the seven token categories."},
			[]string{"route", "provider", "category"}),
		cost: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_cost_microdollars_total",
			Help: "Settled cost in micro-dollars (exact integers) by org id, route and provider, as priced by the data plane."},
			[]string{"org", "route", "provider"}),
		requests: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_requests_settled_total",
			Help: "Dispatched requests by route, provider, operation and end state (completed, upstream_error, upstream_interrupted, client_dropped, rejected)."},
			[]string{"route", "provider", "operation", "end_state"}),
		attempts: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_upstream_attempts_total",
			Help: "Upstream attempts by provider and outcome (ok, or the failure reason)."},
			[]string{"provider", "outcome"}),
		upstreamErrors: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_upstream_errors_total",
			Help: "Failed upstream attempts by provider and reason: status_429, status_5xx, timeout, connection, cut (a response that failed after its headers)."},
			[]string{"provider", "reason"}),
		failovers: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_upstream_failovers_total",
			Help: "Failed upstream attempts followed by another attempt of the same request, by the provider failed over from and the reason."},
			[]string{"provider", "reason"}),
		admissions: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_admission_total",
			Help: "Admission calls by outcome: admitted, rate_limited, quota_exceeded, unavailable_admitted (Redis failed, admission open), unavailable_refused (admission closed)."},
			[]string{"outcome"}),
		rateLimited: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_rate_limit_refusals_total",
			Help: "Requests refused by a key's rate limit, by limit (rpm or tpm)."},
			[]string{"limit"}),
	}
	if o.Tracer != nil {
		t.tracer = o.Tracer.Tracer("github.com/tollgate/tollgate/dataplane/telemetry")
	}
	return t
}

// Label values for what configuration does not name.
const (
	none    = "_none"    // the request was not routed (refused before a route was chosen)
	unknown = "_unknown" // an id or URL the current snapshot does not name
)

// names maps the ids and base URLs of one snapshot to configured names.
type names struct {
	snap   *snapshot.Compiled
	routes map[int64]string
	// bases are the providers' base URLs (longest first) with their names.
	bases []base
	// models holds every (provider name, upstream model) pair the routes configure.
	models map[[2]string]struct{}
	// bySecret maps a credential's secret to the providers holding it: the credential the proxy put on
	// an upstream request names its provider even when providers share a base URL.
	bySecret map[string][]base
	// memberModel maps (route name, provider name) to the route member's upstream model.
	memberModel map[[2]string]string
}

type base struct{ url, name string }

func (t *Telemetry) lookup() *names {
	snap := t.o.Snapshot()
	n := t.names.Load()
	if n != nil && n.snap == snap {
		return n
	}
	n = &names{snap: snap, routes: map[int64]string{}, models: map[[2]string]struct{}{}, bySecret: map[string][]base{},
		memberModel: map[[2]string]string{}}
	if snap != nil {
		seen := map[int64]bool{}
		for _, r := range snap.Routes() {
			n.routes[r.ID] = r.Name
			for _, g := range r.Groups {
				for _, m := range g {
					if m.Provider != nil {
						n.models[[2]string{m.Provider.Name, m.UpstreamModel}] = struct{}{}
						if k := [2]string{r.Name, m.Provider.Name}; n.memberModel[k] == "" {
							n.memberModel[k] = m.UpstreamModel
						}
					}
					if p := m.Provider; p != nil && !seen[p.ID] {
						seen[p.ID] = true
						n.bases = append(n.bases, base{p.BaseURL, p.Name})
						for _, c := range p.Credentials {
							if c.Secret != "" {
								n.bySecret[c.Secret] = append(n.bySecret[c.Secret], base{p.BaseURL, p.Name})
							}
						}
					}
				}
			}
		}
		// Longest base first, so a provider at https://h/v1/x wins over one at https://h/v1.
		slices.SortStableFunc(n.bases, func(a, b base) int { return len(b.url) - len(a.url) })
	}
	t.names.Store(n)
	return n
}

func (n *names) route(id int64) string {
	if id == 0 {
		return none
	}
	if s, ok := n.routes[id]; ok {
		return s
	}
	return unknown
}

func (n *names) provider(id int64) string {
	if id == 0 {
		return none
	}
	if n.snap != nil {
		if p := n.snap.Provider(id); p != nil {
			return p.Name
		}
	}
	return unknown
}

// providerOf names the provider of an upstream request: among the providers holding the credential
// the request carries (secret), the one whose base URL prefixes url; without a known credential (a
// provider configured without one), the provider whose base URL prefixes url.
func (n *names) providerOf(url, secret string) string {
	if cands := n.bySecret[secret]; secret != "" && len(cands) > 0 {
		for _, b := range cands {
			if under(url, b.url) {
				return b.name
			}
		}
	}
	for _, b := range n.bases {
		if under(url, b.url) {
			return b.name
		}
	}
	return unknown
}

// under reports whether url is base or below it.
func under(url, base string) bool {
	if len(url) < len(base) || url[:len(base)] != base {
		return false
	}
	return len(url) == len(base) || url[len(base)] == '/' || url[len(base)] == '?' || url[len(base)] == ':'
}

// model returns name when the snapshot configures it as an upstream model of provider on some route,
// else unknown: an upstream model comes from configuration, but a record's is checked all the same.
func (n *names) model(provider, name string) string {
	if name == "" {
		return none
	}
	if _, ok := n.models[[2]string{provider, name}]; ok {
		return name
	}
	return unknown
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
