// Package proxy owns the data plane's client-facing HTTP handler: the request path (docs/dataplane.md) for
// every dialect. For each request it enforces the body limit, classifies the path into an operation key,
// authenticates the key by hash against the snapshot, resolves the model to candidates, checks the key's
// allowed models, runs admission (rate limits and quota reservation), dispatches per each candidate's
// compiled routing cell — passthrough with only the model renamed, transform_to through the translator,
// local model listing, or the unsupported-operation error — with failover across credentials and
// candidates before the first byte reached the client, relays the answer (flushing every stream event),
// and hands exactly one settlement record per dispatched request to the recorder.
package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ericlagergren/decimal"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/dataplane/routing"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/dataplane/upstream"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Admitter reserves quota and enforces rate limits before the upstream call (dataplane/admission).
type Admitter interface {
	Admit(ctx context.Context, req admission.Request) (admission.Hold, error)
	Refund(ctx context.Context, h admission.Hold) error
}

// Recorder takes the facts of how a dispatched request ended, with the admission hold to release once the
// control plane has settled it; it builds the request's one settlement record, appends it and returns it
// (settle.Recorder).
type Recorder interface {
	Record(ctx context.Context, o settle.Outcome, hold admission.Hold) (*settlementv1.SettlementRecord, error)
}

// LocalUsageFunc counts usage locally when the upstream reported none: reqBody is the request body, output
// the first bytes of the text relayed to the client when it was collected (alpha chat streams), else "",
// and outputBytes the length of the whole text (output is bounded, the stream is not). found=false leaves
// the record without local usage.
type LocalUsageFunc func(kind vocab.Kind, op vocab.Operation, model string, reqBody []byte, output string, outputBytes int64) (u usage.Usage, found bool)

// Options configure a Handler.
type Options struct {
	// Snapshot returns the current compiled snapshot, nil until the first one arrived.
	Snapshot func() *snapshot.Compiled
	Upstream *upstream.Client
	// Admitter is nil to skip admission (tests); Recorder nil drops records (tests).
	Admitter Admitter
	Recorder Recorder
	// Costs answers the cost lookup and keeps its markers (dataplane/reqcost); nil answers the lookup 404.
	Costs CostLookup
	// Transformer serves transform_to cells; nil answers them as unsupported.
	Transformer Transformer
	// LocalUsage is the local token counter used when the upstream reports no usage (may be nil).
	LocalUsage   LocalUsageFunc
	MaxBodyBytes int64
	// HoldAnswerBytes is how much of a plain (non-stream) upstream answer is held before its headers reach
	// the client, so an answer the upstream cuts before its end is a failed attempt, not a truncated 200
	// (default DefaultHoldAnswerBytes; docs/dataplane.md step 12).
	HoldAnswerBytes int64
	// BodyReadTimeout bounds reading a request body, from the end of the headers to its last byte (0: no
	// bound of the handler's own; the server's timeouts still apply).
	BodyReadTimeout time.Duration
	Log             *slog.Logger
	Metrics         prometheus.Registerer
	Selector        *routing.Selector
	Now             func() time.Time
}

// DefaultHoldAnswerBytes is the default Options.HoldAnswerBytes: larger than any generation answer (a
// 128k-token output is about 0.5 MB of JSON) and than most image and embeddings answers, small enough that
// a few hundred held at once fit in a data plane's memory.
const DefaultHoldAnswerBytes = 4 << 20

// Handler is the client-facing handler. It is safe for concurrent use.
type Handler struct {
	o        Options
	pool     sync.Pool
	requests *prometheus.CounterVec
	counters sync.Map // countKey → prometheus.Counter
}

// New builds a Handler.
func New(o Options) *Handler {
	if o.Selector == nil {
		o.Selector = routing.New(nil)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 32 << 20
	}
	if o.HoldAnswerBytes <= 0 {
		o.HoldAnswerBytes = DefaultHoldAnswerBytes
	}
	h := &Handler{o: o}
	h.pool.New = func() any { return &call{pt: passthroughResponder{now: h.o.Now, holdMax: h.o.HoldAnswerBytes}} }
	if o.Metrics != nil {
		h.requests = promauto.With(o.Metrics).NewCounterVec(prometheus.CounterOpts{Name: "tollgate_dp_requests_total",
			Help: "Client requests by operation, implementation and status class."}, []string{"operation", "implementation", "status"})
	}
	return h
}

// call is the per-request state, pooled.
type call struct {
	reqID    string
	start    time.Time
	class    Class
	req      jsonkit.Request // the decision members of a JSON body (readRequest)
	snap     *snapshot.Compiled
	key      *snapshot.APIKey
	model    string // logical model as the client named it
	modelAt  [2]int // byte range of the body's model value
	route    *snapshot.Route
	usable   []candidateCell
	hold     admission.Hold
	reqTier  string
	estimate int64
	// bodyRead is set once the whole body was read: a refusal before (from the headers, or a body cut by
	// its deadline) closes the connection instead of leaving net/http to drain a maybe endless body.
	bodyRead bool
	// dispatched is set once the request reaches admission and dispatch; settled once its record is
	// written, so it is written exactly once.
	dispatched, settled bool
	// abortClient is set when a relayed response was cut by the upstream: the client connection is
	// aborted (after settlement) instead of ending the response cleanly.
	abortClient bool
	// stored is set for a stored-resource request (resolveStored): its one candidate is the provider
	// holding the resource, storedPath the upstream path; it is not billed.
	stored     bool
	storedPath string
	// maxCost is the request's cost cap (X-Tollgate-Max-Cost), nil when it sets none.
	maxCost *decimal.Big
	// h is the handler serving the call; disclose says the key is shown its costs (Compiled.DisclosesCost),
	// askCost that the client asked for its stream's cost (docs/cost.md); trailers that the cost trailers
	// were declared; out is the attempt being answered and absorbed that its result was kept (absorb).
	h                 *Handler
	disclose, askCost bool
	// usageChunk says an alpha chat client asked for usage OpenRouter's way ("usage": {"include": true}):
	// its stream keeps the usage chunk (with the cost when disclosed).
	usageChunk         bool
	trailers, absorbed bool
	out                outbound
	// told is the price the answer's headers told, from toldFrom's inputs (toldSet): the record reuses it
	// when its inputs are unchanged.
	told     settle.Priced
	toldFrom priceInputs
	toldSet  bool

	body    []byte
	patch   []byte
	cands   [8]routing.Candidate
	usableA [8]candidateCell
	creds   [4]snapshot.Credential
	scopes  [4]admission.ScopeQuota

	// outcome
	cand       candidateCell
	credID     int64
	status     int
	firstByte  time.Time
	end        vocab.EndState
	usage      usage.Usage
	usageFound bool
	source     vocab.UsageSource
	pt         passthroughResponder // the responder of passthrough cells
}

type candidateCell struct {
	routing.Candidate
	cell snapshot.Cell
}

// poisonReleased, set by tests only, overwrites a released call's body before it is pooled: a Transform
// still reading the body it was lent (Transformer.Begin) would then see the poison, or race under -race.
var poisonReleased bool

func (h *Handler) release(c *call) {
	const keep = 1 << 20
	if poisonReleased {
		for i := range c.body {
			c.body[i] = 0xff
		}
	}
	body, patch := c.body[:0], c.patch[:0]
	if cap(body) > keep {
		body = nil
	}
	if cap(patch) > keep {
		patch = nil
	}
	c.pt.reset(keep)
	*c = call{body: body, patch: patch, pt: c.pt}
	h.pool.Put(c)
}

// ServeHTTP serves one client request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.pool.Get().(*call)
	defer h.release(c)
	defer func() {
		// Nothing is lost: a request that reached dispatch still settles if the dispatch code panics.
		if p := recover(); p != nil {
			if c.dispatched && !c.settled {
				c.status, c.end = http.StatusInternalServerError, vocab.EndUpstreamError
				h.settle(r.Context(), c)
			}
			panic(p)
		}
	}()
	c.start, c.h = h.o.Now(), h
	c.reqID = newRequestID()
	w.Header()["X-Request-Id"] = []string{c.reqID}
	if err := h.serve(w, r, c); err != nil {
		h.answer(w, r, c, err)
	}
}

// answer is the one place a gateway error reaches the client: in the inbound dialect's shape, with the
// client-visible message only (the cause is logged), and the connection closed when the body was not read
// to its end. A client that went away during dispatch is not answered: the request is recorded as 499,
// client_dropped — the one place a cancellation is mapped. A request that reached dispatch settles here.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, c *call, err error) {
	e := httperr.As(err)
	if c.dispatched && r.Context().Err() != nil {
		c.status, c.end = statusClientClosed, vocab.EndClientDropped
		h.finish(r.Context(), w, c)
		return
	}
	if e.Status >= 500 {
		h.o.Log.Warn("request failed", "request_id", c.reqID, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	kind := c.class.Kind
	if kind == "" {
		kind = pathFamily(r.URL.Path)
	}
	if !c.bodyRead && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		// Refused before the body's end: the connection closes after the refusal. Connection: close alone
		// does not stop net/http from reading up to 256 KiB of the unread body after the handler returns
		// (it closes the body before the connection), which a client trickling it holds for as long as
		// it likes; a read deadline already passed makes that read fail at once.
		w.Header()["Connection"] = []string{"close"}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now()) // only reads: the refusal is still written
	}
	c.status = e.Status
	if c.dispatched && c.end == "" {
		c.end = vocab.EndUpstreamError
	}
	if c.dispatched && c.disclose {
		setCost(w.Header(), h.price(c)) // a refusal after dispatch has a record too (cost 0 unless work was done)
	}
	httperr.Write(w, kind, e)
	if !c.dispatched {
		h.count(c, e.Status)
		return
	}
	h.finish(r.Context(), w, c)
}

type countKey struct {
	op     vocab.Operation
	impl   vocab.Implementation
	status string
}

// count increments tollgate_dp_requests_total; counters are cached per label set so the hot path neither
// allocates nor takes the registry's lock.
func (h *Handler) count(c *call, status int) {
	if h.requests == nil {
		return
	}
	class := "5xx"
	switch {
	case status < 300:
		class = "2xx"
	case status < 400:
		class = "3xx"
	case status < 500:
		class = "4xx"
	}
	k := countKey{c.class.Op, c.cand.cell.Impl, class}
	if v, ok := h.counters.Load(k); ok {
		v.(prometheus.Counter).Inc()
		return
	}
	ctr := h.requests.WithLabelValues(string(k.op), string(k.impl), class)
	h.counters.Store(k, ctr)
	ctr.Inc()
}

// pathFamily picks the error dialect of a request that did not classify.
func pathFamily(path string) vocab.Kind {
	switch {
	case strings.HasPrefix(path, "/v1beta/"), strings.HasPrefix(path, "/v1/models/") && strings.Contains(path, ":"):
		return vocab.KindGamma
	case strings.HasPrefix(path, "/v1/messages"):
		return vocab.KindBeta
	}
	return vocab.KindAlpha
}

// serve runs the request path; an error returned is answered by ServeHTTP (nothing was written yet).
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, c *call) error {
	// The path and the headers decide the dialect and the key: an unauthenticated request is refused
	// before a byte of its body is read (docs/dataplane.md "Memory bounded by what was received").
	class, ok := Classify(r.Method, r.URL.Path, r.URL.RawQuery, r.Header)
	if !ok {
		if id, ok := costLookupID(r.URL.Path); ok && r.Method == http.MethodGet {
			return h.lookupCost(w, r, c, id)
		}
		if r.URL.Path == estimatePath && r.Method == http.MethodPost {
			return h.estimateCost(w, r, c)
		}
		return httperr.NotFound(r.Method, r.URL.Path)
	}
	c.class = class
	if err := h.authenticate(r, c); err != nil {
		return err
	}
	snap, key := c.snap, c.key
	if c.disclose = snap.DisclosesCost(key); c.disclose {
		c.askCost = asksCost(r)
	}
	if err := h.readBody(w, r, c); err != nil {
		return err
	}
	if err := h.readRequest(r, c); err != nil {
		return err
	}
	if err := readCostCap(r, c); err != nil {
		return err
	}
	if c.class.Kind == vocab.KindAlphaChatCompletions && c.class.ModelInBody {
		if err := h.usageInclude(r, c); err != nil {
			return err
		}
	}
	class = c.class
	if class.Op == vocab.OpListModels {
		list, ok := h.listModels(snap, key, class.Kind)
		if !ok {
			return httperr.Unsupported(class.Op, class.Kind, "")
		}
		writeJSON(w, http.StatusOK, list)
		c.status, c.end, c.firstByte = http.StatusOK, vocab.EndCompleted, h.o.Now()
		h.finish(r.Context(), w, c) // recorded at cost 0, like every answered request
		return nil
	}
	if err := h.candidates(r, c); err != nil {
		return err
	}
	if c.usable[0].cell.Impl == vocab.ImplLocal {
		c.cand = c.usable[0]
		writeJSON(w, http.StatusOK, h.getModel(snap, c.route, c.model, class.Kind))
		c.status, c.end, c.firstByte = http.StatusOK, vocab.EndCompleted, h.o.Now()
		h.finish(r.Context(), w, c)
		return nil
	}
	c.dispatched = true
	if err := h.applyCostCap(c); err != nil {
		c.cand, c.end = c.usable[0], vocab.EndRejected // refused before any upstream call or reservation
		return err
	}
	if err := h.admit(r.Context(), c); err != nil {
		// Refused by admission (rate limit or quota): nothing was reserved; the refusal is recorded as a
		// rejected row at cost 0 so operators see refused traffic.
		c.cand, c.end = c.usable[0], vocab.EndRejected
		return err
	}
	if err := h.dispatch(w, r, c); err != nil {
		return err
	}
	h.finish(r.Context(), w, c)
	if c.abortClient {
		panic(http.ErrAbortHandler) // settled already; net/http aborts the response without logging
	}
	return nil
}

// candidates resolves the request's usable candidates into c.usable: the model's route (or scoped
// provider) after the key's permission, each candidate whose cell can serve the request; for a stored
// resource the provider holding it (resolveStored). A request referring to stored resources of one
// provider (previous_response_id, conversation) is served there only.
func (h *Handler) candidates(r *http.Request, c *call) error {
	if err := h.resolveModel(r, c); err != nil {
		if errors.Is(err, errStoredResource) {
			return h.resolveStored(r, c)
		}
		return err
	}
	var pin int64
	if c.class.Kind == vocab.KindAlphaResponses && c.class.ModelInBody {
		body, p, err := decodeBodyIDs(c.body)
		if err != nil {
			return httperr.Malformed(err.Error(), err)
		}
		if p != 0 {
			c.body, pin = append(c.body[:0], body...), p
			if err := h.readRequest(r, c); err != nil { // the members' offsets moved
				return err
			}
		}
	}
	sel, err := h.o.Selector.Select(c.snap, c.model, c.cands[:0])
	if err != nil {
		return httperr.UnknownModel(c.model)
	}
	c.route = sel.Route
	if !routing.Permitted(c.key, c.model, sel.Route) {
		return httperr.Forbidden(c.model)
	}
	if pin != 0 {
		// Pinned before the unpriced policy, so a pinned provider that refuses the model says so.
		kept := sel.Candidates[:0]
		for _, cand := range sel.Candidates {
			if cand.Provider.ID == pin {
				kept = append(kept, cand)
			}
		}
		sel.Candidates = kept
	}
	if c.billable() {
		// An unpriced model on a provider whose policy is deny is refused here, before any upstream call.
		if sel.Candidates, err = routing.Priced(c.snap, c.model, sel.Candidates, c.start); err != nil {
			return err
		}
	}
	c.usable = c.usableA[:0]
	for _, cand := range sel.Candidates {
		cell := cand.Provider.Cell(c.class.Op, c.class.Kind)
		if h.servable(cell, c.class) {
			c.usable = append(c.usable, candidateCell{cand, cell})
		}
	}
	if len(c.usable) == 0 {
		if pin != 0 {
			e := httperr.Malformed(fmt.Sprintf("the stored response or conversation referred to is not held by a provider serving model %q", c.model), nil)
			e.Param = "previous_response_id"
			return e
		}
		return httperr.Unsupported(c.class.Op, c.class.Kind, "")
	}
	return nil
}

// servable reports whether a cell can serve the request: passthrough; local for model get; transform_to
// when a transformer handles the pair.
func (h *Handler) servable(cell snapshot.Cell, class Class) bool {
	switch cell.Impl {
	case vocab.ImplPassthrough:
		return true
	case vocab.ImplLocal:
		return class.Op == vocab.OpGetModel || class.Op == vocab.OpListModels
	case vocab.ImplTransformTo:
		return h.o.Transformer != nil && h.o.Transformer.Supports(class, cell)
	}
	return false
}

// readBody reads the request body into c.body. The buffer grows with the bytes received — never from the
// declared Content-Length, so a client that declares 32 MiB and sends 4 KiB costs 4 KiB — and the whole
// body must arrive within BodyReadTimeout (a body trickled a byte at a time is cut with a 408).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, c *call) error {
	limit := h.o.MaxBodyBytes
	if r.ContentLength > limit {
		return httperr.TooLarge(limit)
	}
	if r.Body == nil || r.Body == http.NoBody {
		c.bodyRead = true
		return nil
	}
	rc := http.NewResponseController(w)
	if h.o.BodyReadTimeout > 0 {
		// Not supported by every ResponseWriter (tests); the server's own timeouts still apply then.
		_ = rc.SetReadDeadline(h.o.Now().Add(h.o.BodyReadTimeout))
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }() // a long streamed answer is not cut
	}
	buf := c.body[:0]
	for {
		if len(buf) == cap(buf) {
			// Grow by what arrived (append doubles), starting small; never by what was declared.
			buf = slices.Grow(buf, min(max(cap(buf), minBodyGrow), maxBodyGrow))
		}
		n, err := r.Body.Read(buf[len(buf):min(int64(cap(buf)), limit+1)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			c.body = buf
			return httperr.TooLarge(limit)
		}
		if errors.Is(err, io.EOF) {
			c.bodyRead = true
			break
		}
		if err != nil {
			c.body = buf
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return &httperr.Error{Status: http.StatusRequestTimeout, Code: httperr.CodeInvalidRequest,
					Message: fmt.Sprintf("the request body did not arrive within %s", h.o.BodyReadTimeout), Cause: err}
			}
			return httperr.Malformed("could not read the request body", fmt.Errorf("read body: %w", err))
		}
	}
	c.body = buf
	return nil
}

// Body buffers grow by at least minBodyGrow and at most maxBodyGrow bytes at a time.
const (
	minBodyGrow = 4 << 10
	maxBodyGrow = 1 << 20
)

// clientKey returns the gateway key from the dialect's usual place: Authorization Bearer, x-api-key,
// x-goog-api-key, then the key query parameter.
func clientKey(r *http.Request) string {
	if v := r.Header.Get("Authorization"); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return strings.TrimSpace(v[7:])
		}
	}
	if v := r.Header.Get("X-Api-Key"); v != "" {
		return v
	}
	if v := r.Header.Get("X-Goog-Api-Key"); v != "" {
		return v
	}
	if q := r.URL.RawQuery; strings.Contains(q, "key=") {
		for q != "" {
			var kv string
			kv, q, _ = strings.Cut(q, "&")
			if v, ok := strings.CutPrefix(kv, "key="); ok {
				if u, err := url.QueryUnescape(v); err == nil {
					return u
				}
			}
		}
	}
	return ""
}

func (h *Handler) resolveModel(r *http.Request, c *call) error {
	class := c.class
	switch {
	case class.PathModel != "":
		c.model = class.PathModel
	case class.Multipart:
		if c.model == "" {
			e := httperr.Malformed(errNoModel.Error(), errNoModel)
			e.Param = "model"
			return e
		}
	case class.ModelInBody:
		m, err := bodyModel(c.body, c.req)
		if err != nil {
			if errors.Is(err, errNoModel) && class.Op == vocab.OpCreateConversation {
				return errStoredResource // created at the default provider (resolveStored)
			}
			e := httperr.Malformed(err.Error(), err)
			e.Param = "model"
			return e
		}
		c.model, c.modelAt = m, c.req.Model
	default:
		return errStoredResource // routed by the id it names (resolveStored)
	}
	return nil
}

// errStoredResource says a request names no model: a stored-resource request, routed by resolveStored.
var errStoredResource = errors.New("stored-resource request")

// billable reports whether an operation goes through quota admission and settlement pricing.
func billable(op vocab.Operation) bool {
	switch op {
	case vocab.OpGenerateContent, vocab.OpStreamGenerateContent, vocab.OpCreateEmbedding,
		vocab.OpCreateImage, vocab.OpEditImage, vocab.OpRerank:
		return true
	}
	return false
}

// billable reports whether the request goes through quota admission and settlement pricing.
// A stored-resource request (retrieving, deleting, cancelling a response; conversations) is not.
func (c *call) billable() bool { return !c.stored && billable(c.class.Op) }

// admit runs the key's rate limits and, for billable operations, quota reservation (docs/settlement.md). A Redis
// failure (or no answer within the Redis timeout) follows the operator's admission policy: open admits
// the request without a reservation (logged; settlement still records the cost), closed refuses it with
// 503 (docs/dataplane.md, "Redis outage").
func (h *Handler) admit(ctx context.Context, c *call) error {
	if h.o.Admitter == nil {
		return nil
	}
	key := c.key
	req := admission.Request{ID: c.reqID, KeyID: key.ID, RPMLimit: int64(key.RPMLimit), TPMLimit: key.TPMLimit,
		EstimateTokens: pricing.BytesPerTokenEstimator(len(c.body))}
	if c.billable() {
		// Every limited scope is checked, whatever the estimate: an exhausted scope refuses even a request
		// whose estimate is 0 (an output-only price). A key with no limited scope and no rate limit keeps
		// the fast path below (no Redis round trip).
		c.reqTier = tierOf(c.req) // the body was read once, by readRequest
		c.estimate = h.estimate(c)
		// The org, team, user and key quotas (docs/budgets.md, "Model").
		req.Scopes = admission.QuotaScopes(c.snap, key, c.scopes[:0])
		req.EstimateMicros = c.estimate
	}
	if req.RPMLimit == 0 && req.TPMLimit == 0 && len(req.Scopes) == 0 && !admission.ScopeRateLimited(c.snap, key) {
		if c.disclose && h.o.Costs != nil {
			h.markAsync(ctx, c) // the admission script writes the marker; without it, written on its own
		}
		return nil // nothing to check: no Redis round trip
	}
	hold, err := h.o.Admitter.Admit(ctx, req)
	if err == nil {
		c.hold = hold
		return nil
	}
	var rl *admission.RateLimitError
	switch {
	case errors.As(err, &rl):
		return httperr.RateLimited(rateLimitMessage(rl), rl.RetryAfter)
	case errors.Is(err, admission.ErrQuotaExceeded):
		var qe *admission.QuotaError
		msg := "quota exhausted"
		if errors.As(err, &qe) {
			msg = fmt.Sprintf("the %s quota is exhausted", qe.Scope)
		}
		return httperr.QuotaExceeded(msg)
	case errors.Is(err, admission.ErrFailedClosed):
		if !errors.Is(err, admission.ErrUnavailable) { // the failure that started the pause was logged
			h.o.Log.Error("admission unavailable; refusing the request (admission fails closed)", "request_id", c.reqID, "err", err)
		}
		return &httperr.Error{Status: http.StatusServiceUnavailable, Code: "admission_unavailable",
			Message: "quota admission is temporarily unavailable; retry shortly", RetryAfter: time.Second, Cause: err}
	case ctx.Err() != nil:
		return fmt.Errorf("admission: %w", err) // the client went away (answer records it)
	}
	if !errors.Is(err, admission.ErrUnavailable) { // the failure that started the pause was logged
		h.o.Log.Error("admission unavailable; admitting without reservation", "request_id", c.reqID, "err", err)
	}
	return nil
}

// estimate is the quota estimate of a billable request: the largest over its usable candidates, so that
// a failover to a pricier provider never serves on a hold sized for a cheaper one (docs/dataplane.md,
// "Admission").
func (h *Handler) estimate(c *call) int64 {
	var est int64
	for _, u := range c.usable {
		rule := c.snap.ResolvePriceAt(u.Provider.ID, u.UpstreamModel, c.start)
		est = max(est, pricing.EstimateMicros(rule, len(c.body), c.reqTier))
	}
	return est
}

// finish ends a request whose response has been written: a response of declared length is complete once
// its bytes are written, so it is sent to the client now, and then the request settles (the record is
// appended before the handler returns). The client does not wait for the settlement round trip, and the
// record is exactly as durable as before: the handler — and so the connection and a graceful shutdown —
// still waits for it. A stream (no declared length) ends when the handler returns, after its record.
func (h *Handler) finish(ctx context.Context, w http.ResponseWriter, c *call) {
	if !c.abortClient && w.Header().Get("Content-Length") != "" {
		_ = http.NewResponseController(w).Flush() // a client already gone is the settle's business, not an error here
	}
	h.settle(ctx, c)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// newRequestID returns a random 128-bit id in hex, prefixed "req_".
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var out [4 + 32]byte
	copy(out[:], "req_")
	hex.Encode(out[4:], b[:])
	return string(out[:])
}

// rateLimitMessage is the client text of a rate-limit refusal: which limit, and whose when it is not the
// key's own (a team's or org's limit is shared by all of its keys).
func rateLimitMessage(rl *admission.RateLimitError) string {
	if rl.Scope == "" || rl.Scope == vocab.ScopeKey {
		return fmt.Sprintf("rate limit exceeded (%s)", rl.Limit)
	}
	return fmt.Sprintf("rate limit exceeded (%s of the %s)", rl.Limit, rl.Scope)
}
