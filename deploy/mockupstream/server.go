// Package mockupstream is a fake upstream model provider that speaks the alpha (OpenAI), beta (Anthropic)
// and gamma (Gemini) wire dialects. It answers every generate, streaming, token-counting, embedding, image, rerank and
// models endpoint the gateway talks to with realistic, deterministic bodies and usage, serves each dialect's
// batch API (batch.go), and it can be steered
// per request with x-mock-* headers (latency, status codes, usage variants, tool calls, mid-stream errors and
// disconnects). It records what it received so tests can assert on the upstream side of the gateway.
//
// It never calls anything live. It backs `make run`, the integration tests and the proxy benchmarks; see
// docs/mockupstream.md for every endpoint and control.
package mockupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/shared/vocab"
)

// Dialect names used in records and error shapes.
const (
	DialectAlpha = "alpha"
	DialectBeta  = "beta"
	DialectGamma = "gamma"
)

// DefaultMaxRecords is how many recent requests a Server keeps when Options.MaxRecords is zero.
const DefaultMaxRecords = 1000

// maxBody caps the request body the mock reads (a real provider refuses larger ones with 413).
const maxBody = 64 << 20

// Options configures a Server. The zero value is a working mock that accepts any key.
type Options struct {
	// APIKey, when set, is the only key accepted; any other key is answered with the dialect's
	// authentication error (401 for alpha and beta, 400 API_KEY_INVALID for gamma).
	APIKey string
	// MaxRecords is how many recent requests are kept for Requests and GET /_mock/requests.
	// Zero means DefaultMaxRecords; a negative value keeps none (counting still works).
	MaxRecords int
	// Models are the model ids listed by the models endpoints. Empty means DefaultModels.
	Models []string
	// Created is the Unix time reported in created/created_at fields. Zero means 1760000000, which keeps
	// bodies deterministic.
	Created int64
	// Logger receives debug logs. Nil discards them.
	Logger *slog.Logger
	// AdminKey, when set, is the only key the admin report endpoints accept (admin.go).
	AdminKey string
	// Prices are the per-model prices the admin cost reports charge (SetPrices replaces them).
	Prices map[string]Price
	// Clouds are the credentials the cloud endpoints (Bedrock, Vertex AI, Azure OpenAI; cloud.go) accept.
	Clouds CloudOptions
}

// DefaultModels are the ids listed by the models endpoints when Options.Models is empty.
var DefaultModels = []string{"m-1", "m-1-mini", "b-1", "g-1-flash", "emb-1", "img-1", "rr-1"}

// Request is one request the mock received, as recorded for tests.
type Request struct {
	Seq       int64       `json:"seq"`
	Method    string      `json:"method"`
	Path      string      `json:"path"`
	Query     string      `json:"query,omitempty"`
	Header    http.Header `json:"headers"`
	Body      string      `json:"body"`
	Dialect   string      `json:"dialect"`
	Model     string      `json:"model,omitempty"`
	APIKey    string      `json:"api_key,omitempty"`
	Stream    bool        `json:"stream"`
	Status    int         `json:"status"`
	Events    int         `json:"events"`
	Done      bool        `json:"done"`
	Completed bool        `json:"completed"`
	Cancelled bool        `json:"cancelled"`
	Aborted   bool        `json:"aborted"`
	Received  time.Time   `json:"received"`
	Duration  int64       `json:"duration_ms"`
}

// Server is the mock upstream. It implements http.Handler and is safe for concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	created int64
	models  []string

	mu        sync.Mutex
	seq       int64
	records   []*Request // ring buffer of recent requests
	next      int
	failCount map[string]int
	cancelled int64
	changed   chan struct{}
	responses map[string]respObject // created responses by id (GET/DELETE /v1/responses/{id})

	bills    []Bill // every billed answer since Reset (billing.go)
	billSeq  int64
	recon    ReconcileControls
	prices   map[string]Price
	projects map[string]string // API key → project / workspace id (SetProjects)

	cloudSw      CloudSwitches          // cloud.go
	googleTokens map[string]googleToken // access tokens the token endpoint issued (vertex.go)

	batches *batchStore // batches and alpha files (batch.go); its lock is taken before s.mu, never after
}

// New returns a Server configured by opts.
func New(opts Options) *Server {
	s := &Server{opts: opts, log: opts.Logger, created: opts.Created, models: opts.Models}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.created == 0 {
		s.created = 1760000000
	}
	if len(s.models) == 0 {
		s.models = DefaultModels
	}
	if s.opts.MaxRecords == 0 {
		s.opts.MaxRecords = DefaultMaxRecords
	}
	s.failCount = make(map[string]int)
	s.changed = make(chan struct{})
	s.responses = make(map[string]respObject)
	s.prices = opts.Prices
	s.batches = newBatchStore()
	return s
}

// Requests returns copies of the recent requests, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Server) snapshotLocked() []Request {
	out := make([]Request, 0, len(s.records))
	n := len(s.records)
	for i := range n {
		r := s.records[(s.next+i)%n]
		if r != nil {
			out = append(out, *r)
		}
	}
	return out
}

// Count returns how many requests (excluding /_mock/ and /healthz) the server has received since the
// last Reset.
func (s *Server) Count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// Cancellations returns how many requests saw their context cancelled (client gone) before the mock
// finished answering.
func (s *Server) Cancellations() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// Reset forgets every recorded request, every x-mock-fail-first counter, every batch and alpha file, and
// restores the default batch configuration.
func (s *Server) Reset() {
	s.batches.reset()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = s.records[:0]
	s.next = 0
	s.seq = 0
	s.cancelled = 0
	clear(s.failCount)
	s.bills, s.billSeq, s.recon = nil, 0, ReconcileControls{}
	s.cloudSw = CloudSwitches{} // issued access tokens stay valid: a client's cached token outlives a reset
	s.notifyLocked()
}

// Wait blocks until a recorded request satisfies match, or ctx ends. Records are offered to match every
// time one is added or finishes, so a test can wait for e.g. "the upstream saw the cancellation".
func (s *Server) Wait(ctx context.Context, match func(Request) bool) (Request, error) {
	for {
		s.mu.Lock()
		recs := s.snapshotLocked()
		ch := s.changed
		s.mu.Unlock()
		for _, r := range recs {
			if match(r) {
				return r, nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return Request{}, fmt.Errorf("wait for mock request: %w", ctx.Err())
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// record stores a new request and returns the live record (nil when recording is off).
func (s *Server) record(r *http.Request, body []byte, dialect string) *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if s.opts.MaxRecords < 0 {
		return nil
	}
	rec := &Request{
		Seq: s.seq, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(),
		Body: string(body), Dialect: dialect, Received: time.Now(),
	}
	if len(s.records) < s.opts.MaxRecords {
		s.records = append(s.records, rec)
	} else {
		s.records[s.next] = rec
		s.next = (s.next + 1) % len(s.records)
	}
	s.notifyLocked()
	return rec
}

// finish updates a record once the exchange ended.
func (s *Server) finish(x *exchange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x.cancelled {
		s.cancelled++
	}
	if rec := x.rec; rec != nil {
		rec.Model, rec.APIKey, rec.Stream = x.model, x.key, x.stream
		rec.Status, rec.Events = x.status, x.events
		rec.Done, rec.Completed, rec.Cancelled, rec.Aborted = true, x.completed, x.cancelled, x.aborted
		rec.Duration = time.Since(rec.Received).Milliseconds()
	}
	s.keepBillLocked(x)
	s.notifyLocked()
}

// takeFailure reports whether the request keyed by key is still among the first n and counts it.
func (s *Server) takeFailure(key string, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCount[key] >= n {
		return false
	}
	s.failCount[key]++
	return true
}

// controls are the per-request x-mock-* headers.
type controls struct {
	latency    time.Duration
	chunkDelay time.Duration
	status     int
	failFirst  int
	failKey    string
	retryAfter string
	usage      string // "", full, none, aggregate, cached, image_tokens
	usageSet   bool
	chunks     int
	disconnect int // -1 = never
	// stall holds a stream after this many events until its client goes away (x-mock-stall-after; -1 =
	// never): nothing is in flight when the client leaves, so a gateway has read every written event.
	stall       int
	streamError int // -1 = never
	toolCall    bool
	servedTier  string
	downgrade   bool
	// wordBytes pads every answer word to this many bytes (x-mock-word-bytes, at most 1 MiB): with
	// x-mock-chunks it makes the huge streams and bodies the data plane's memory bounds are measured with.
	wordBytes int
	// afterHeaders makes x-mock-disconnect-after: 0 cut a stream after its status line and headers were
	// flushed instead of before any response byte (x-mock-disconnect-headers).
	afterHeaders bool
	// linger holds a finished stream's connection open this long after its terminal event, the way a
	// provider may before it closes the response (x-mock-linger-ms).
	linger time.Duration
	// cutBody cuts a plain (non-stream) 200 answer after half its body (x-mock-cut-body): "length" declares
	// the whole Content-Length and sends less, "chunked" sends chunks without the terminating one. With
	// x-mock-fail-first N only the first N such answers (per x-mock-fail-key) are cut.
	cutBody string
}

func headerInt(h http.Header, name string, def int) int {
	v := h.Get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return def
	}
	return n
}

func parseControls(h http.Header) controls {
	c := controls{
		latency:      time.Duration(headerInt(h, "x-mock-latency-ms", 0)) * time.Millisecond,
		chunkDelay:   time.Duration(headerInt(h, "x-mock-chunk-delay-ms", 0)) * time.Millisecond,
		status:       headerInt(h, "x-mock-status", 0),
		failFirst:    headerInt(h, "x-mock-fail-first", 0),
		failKey:      h.Get("x-mock-fail-key"),
		retryAfter:   h.Get("x-mock-retry-after"),
		usage:        strings.ToLower(strings.TrimSpace(h.Get("x-mock-usage"))),
		chunks:       min(headerInt(h, "x-mock-chunks", 8), 100000),
		disconnect:   headerInt(h, "x-mock-disconnect-after", -1),
		stall:        headerInt(h, "x-mock-stall-after", -1),
		streamError:  headerInt(h, "x-mock-stream-error-after", -1),
		toolCall:     truthy(h.Get("x-mock-tool-call")),
		servedTier:   strings.ToLower(strings.TrimSpace(h.Get("x-mock-served-tier"))),
		downgrade:    truthy(h.Get("x-mock-downgrade")),
		wordBytes:    min(headerInt(h, "x-mock-word-bytes", 0), 1<<20),
		afterHeaders: truthy(h.Get("x-mock-disconnect-headers")),
		linger:       time.Duration(headerInt(h, "x-mock-linger-ms", 0)) * time.Millisecond,
		cutBody:      strings.ToLower(strings.TrimSpace(h.Get("x-mock-cut-body"))),
	}
	c.usageSet = c.usage != ""
	if c.usage == "" {
		c.usage = "full"
	}
	if c.retryAfter == "" {
		c.retryAfter = "1"
	}
	if c.status != 0 && (c.status < 100 || c.status > 599) {
		c.status = 0
	}
	return c
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// exchange is the state of one request being answered.
type exchange struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	body    []byte
	ctl     controls
	dialect string
	cloud   string // the cloud a cloud path belongs to (ProviderBedrock, …); "" for first party
	rec     *Request

	model     string
	key       string
	stream    bool
	status    int
	events    int
	completed bool
	cancelled bool
	aborted   bool
	erred     bool  // a stream ended with an in-stream error
	bill      *Bill // what the answer bills, kept by finish when it completed (billing.go)
	// A stream cut short (cutbill.go): the dialect of the answer, the latest usage its written events
	// reported, and the output text its written events carried (alpha chat): its first bytes and length.
	kind      vocab.Kind
	reported  *Bill
	text      strings.Builder
	textBytes int64
	hash      uint64
}

// ServeHTTP routes the request to the dialect handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == "/healthz":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
		return
	case strings.HasPrefix(path, "/_mock/"):
		s.serveControl(w, r)
		return
	case isAdminPath(path):
		s.serveAdmin(w, r)
		return
	case path == "/token":
		s.serveToken(w, r)
		return
	}

	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	x := &exchange{s: s, w: w, r: r, body: body, dialect: dialectOf(r), cloud: cloudOf(path)}
	if x.cloud != "" {
		x.dialect = cloudDialect(x.cloud, path)
	}
	x.rec = s.record(r, body, x.dialect)
	x.ctl = parseControls(r.Header)
	if x.cloud == "" {
		x.key = apiKey(r, x.dialect)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(path))
	_, _ = h.Write(body)
	x.hash = h.Sum64()
	defer func() {
		if x.r.Context().Err() != nil && !x.completed && !x.aborted {
			x.cancelled = true
		}
		x.settleBill()
		s.finish(x)
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.Debug("mock request", "method", r.Method, "path", path, "status", x.status, "events", x.events,
				"cancelled", x.cancelled, "aborted", x.aborted)
		}
	}()
	if err != nil {
		x.fail(http.StatusBadRequest, "could not read request body")
		return
	}
	if len(body) > maxBody {
		x.fail(http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	if !x.sleep(x.ctl.latency) {
		return
	}
	if x.cloud != "" {
		if !x.cloudAuth() {
			return
		}
	} else if s.opts.APIKey != "" && x.key != s.opts.APIKey {
		x.failAuth()
		return
	}
	if x.dialect == DialectBeta && r.Header.Get("anthropic-version") == "" && isBetaOnly(path) {
		x.fail(http.StatusBadRequest, "anthropic-version: header is required")
		return
	}
	if x.ctl.status >= 300 {
		if x.ctl.failFirst == 0 || s.takeFailure(x.ctl.failKey, x.ctl.failFirst) {
			x.fail(x.ctl.status, "mock failure requested by x-mock-status")
			return
		}
	} else if x.ctl.failFirst > 0 && x.ctl.cutBody == "" && s.takeFailure(x.ctl.failKey, x.ctl.failFirst) {
		x.fail(http.StatusInternalServerError, "mock failure requested by x-mock-fail-first")
		return
	}
	if x.ctl.disconnect == 0 && !x.ctl.afterHeaders {
		x.abort()
		return
	}
	s.route(x, path)
}

func isBetaOnly(path string) bool {
	return path == "/v1/messages" || path == "/v1/messages/count_tokens" || strings.HasPrefix(path, "/v1/messages/batches")
}

// dialectOf decides which dialect's error shape and auth a path uses.
func dialectOf(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1beta/"):
		return DialectGamma
	case strings.HasPrefix(p, "/v1/messages"):
		return DialectBeta
	case strings.HasPrefix(p, "/v1/models") && r.Header.Get("anthropic-version") != "":
		return DialectBeta
	}
	return DialectAlpha
}

// apiKey extracts the credential from the dialect's usual place.
func apiKey(r *http.Request, dialect string) string {
	switch dialect {
	case DialectBeta:
		if k := r.Header.Get("x-api-key"); k != "" {
			return k
		}
	case DialectGamma:
		if k := r.Header.Get("x-goog-api-key"); k != "" {
			return k
		}
		if k := r.URL.Query().Get("key"); k != "" {
			return k
		}
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return a[7:]
	}
	return ""
}

func (s *Server) route(x *exchange, path string) {
	if x.cloud != "" {
		x.routeCloud(path)
		return
	}
	m := x.r.Method
	switch {
	case path == "/v1/files" || strings.HasPrefix(path, "/v1/files/"):
		x.alphaFiles(strings.TrimPrefix(strings.TrimPrefix(path, "/v1/files"), "/"))
	case path == "/v1/batches" || strings.HasPrefix(path, "/v1/batches/"):
		x.alphaBatches(strings.TrimPrefix(strings.TrimPrefix(path, "/v1/batches"), "/"))
	case path == "/v1/messages/batches" || strings.HasPrefix(path, "/v1/messages/batches/"):
		x.betaBatches(strings.TrimPrefix(strings.TrimPrefix(path, "/v1/messages/batches"), "/"))
	case path == "/v1beta/batches" || strings.HasPrefix(path, "/v1beta/batches/"):
		x.gammaBatches(strings.TrimPrefix(strings.TrimPrefix(path, "/v1beta/batches"), "/"))
	case path == "/v1/chat/completions" && m == http.MethodPost:
		x.alphaChat()
	case path == "/v1/responses" && m == http.MethodPost:
		x.alphaResponses()
	case path == "/v1/responses/compact" && m == http.MethodPost:
		x.alphaCompact()
	case path == "/v1/responses/input_tokens" && m == http.MethodPost:
		x.alphaInputTokens()
	case strings.HasPrefix(path, "/v1/responses/"):
		x.alphaStoredResponse(strings.TrimPrefix(path, "/v1/responses/"))
	case path == "/v1/conversations" || strings.HasPrefix(path, "/v1/conversations/"):
		x.alphaConversations(strings.TrimPrefix(strings.TrimPrefix(path, "/v1/conversations"), "/"))
	case path == "/v1/models" && m == http.MethodGet:
		if x.dialect == DialectBeta {
			x.betaModels("")
		} else {
			x.alphaModels("")
		}
	case strings.HasPrefix(path, "/v1/models/") && m == http.MethodGet:
		id := strings.TrimPrefix(path, "/v1/models/")
		if x.dialect == DialectBeta {
			x.betaModels(id)
		} else {
			x.alphaModels(id)
		}
	case path == "/v1/embeddings" && m == http.MethodPost:
		x.alphaEmbeddings()
	case path == "/v1/images/generations" && m == http.MethodPost:
		x.alphaImages(false)
	case path == "/v1/images/edits" && m == http.MethodPost:
		x.alphaImages(true)
	case (path == "/v1/rerank" || path == "/rerank" || path == "/v2/rerank") && m == http.MethodPost:
		x.alphaRerank(path == "/v2/rerank")
	case path == "/v1/messages" && m == http.MethodPost:
		x.betaMessages()
	case path == "/v1/messages/count_tokens" && m == http.MethodPost:
		x.betaCountTokens()
	case path == "/v1beta/models" && m == http.MethodGet:
		x.gammaModels("")
	case strings.HasPrefix(path, "/v1beta/models/"):
		rest := strings.TrimPrefix(path, "/v1beta/models/")
		model, method, ok := strings.Cut(rest, ":")
		switch {
		case !ok && m == http.MethodGet:
			x.gammaModels(rest)
		case ok && m == http.MethodPost:
			x.gammaMethod(model, method)
		default:
			x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s %s", m, path))
		}
	default:
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s %s", m, path))
	}
}

// serveControl answers the /_mock/ endpoints.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_mock/requests" && r.Method == http.MethodGet:
		s.mu.Lock()
		resp := struct {
			Count         int64     `json:"count"`
			Cancellations int64     `json:"cancellations"`
			Requests      []Request `json:"requests"`
		}{s.seq, s.cancelled, s.snapshotLocked()}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	case r.URL.Path == "/_mock/batches" || strings.HasPrefix(r.URL.Path, "/_mock/batches/"):
		s.serveBatchControl(w, r)
	case r.URL.Path == "/_mock/reset" && r.Method == http.MethodPost:
		s.Reset()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"reset":true}`)
	case r.URL.Path == "/_mock/bills" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"bills": s.Bills()})
	case r.URL.Path == "/_mock/billing.csv" && r.Method == http.MethodGet:
		s.serveBillingCSV(w, r)
	case r.URL.Path == "/_mock/reconcile" && r.Method == http.MethodPut:
		var c ReconcileControls
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			http.Error(w, "reconcile controls: "+err.Error(), http.StatusBadRequest)
			return
		}
		if u := c.UnderReport; u != nil && !slices.Contains(UnderReportCategories, u.Category) {
			http.Error(w, fmt.Sprintf("reconcile controls: under_report category %q is not one of %v", u.Category, UnderReportCategories),
				http.StatusBadRequest)
			return
		}
		s.SetReconcile(c)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	case r.URL.Path == "/_mock/clouds" && r.Method == http.MethodPut:
		var c CloudSwitches
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil || (c.TokenDown != "" && c.TokenDown != "503" && c.TokenDown != "refuse") {
			http.Error(w, "cloud switches: want {\"throttle\": bool, \"token_down\": \"\"|\"503\"|\"refuse\"}", http.StatusBadRequest)
			return
		}
		s.SetCloudSwitches(c)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	case r.URL.Path == "/_mock/prices" && r.Method == http.MethodPut:
		var p map[string]Price
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&p); err != nil {
			http.Error(w, "prices: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.SetPrices(p)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p)
	default:
		http.Error(w, "unknown mock control endpoint", http.StatusNotFound)
	}
}

// sleep waits d or until the client goes away; it reports whether to continue.
func (x *exchange) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-x.r.Context().Done():
		x.cancelled = true
		return false
	}
}

// decode unmarshals the JSON body into v, answering 400 in the dialect's shape on failure.
func (x *exchange) decode(v any) bool {
	if len(bytes.TrimSpace(x.body)) == 0 {
		x.fail(http.StatusBadRequest, "request body is empty")
		return false
	}
	if err := json.Unmarshal(x.body, v); err != nil {
		x.fail(http.StatusBadRequest, fmt.Sprintf("invalid JSON body: %v", err))
		return false
	}
	return true
}

// writeJSON answers 200 with v.
func (x *exchange) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		x.s.log.Debug("mockupstream: encode response", "err", err)
		x.fail(http.StatusInternalServerError, "mock could not encode its response")
		return
	}
	x.w.Header().Set("Content-Type", "application/json")
	if x.cutBody() {
		x.status = http.StatusOK
		if x.ctl.cutBody == "length" {
			x.w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		}
		x.w.WriteHeader(http.StatusOK)
		_, _ = x.w.Write(b[:len(b)/2])
		_ = http.NewResponseController(x.w).Flush()
		x.abort()
		return
	}
	x.w.WriteHeader(http.StatusOK)
	x.status = http.StatusOK
	if _, err := x.w.Write(b); err != nil {
		x.cancelled = true
		return
	}
	x.completed = true
}

// cutBody reports whether this plain answer is to be cut mid-body (x-mock-cut-body).
func (x *exchange) cutBody() bool {
	if x.ctl.cutBody != "length" && x.ctl.cutBody != "chunked" {
		return false
	}
	return x.ctl.failFirst == 0 || x.s.takeFailure(x.ctl.failKey, x.ctl.failFirst)
}

// fail answers status with the dialect's error shape.
func (x *exchange) fail(status int, msg string) {
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == 529 {
		h.Set("Retry-After", x.ctl.retryAfter)
	}
	if x.cloud != "" && x.cloudFail(status, msg) {
		return
	}
	var body any
	switch x.dialect {
	case DialectBeta:
		h.Set("request-id", x.requestID())
		body = betaError{Type: "error", Error: betaErrorBody{Type: betaErrorType(status), Message: msg},
			RequestID: x.requestID()}
	case DialectGamma:
		body = gammaError{Error: x.gammaErrorBody(status, msg, "")}
	default:
		h.Set("x-request-id", x.requestID())
		body = alphaError{Error: alphaErrorBody(status, msg)}
	}
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"error":{"message":"mock encode failure"}}`)
	}
	x.w.WriteHeader(status)
	x.status = status
	_, _ = x.w.Write(b)
	x.completed = true
}

// failAuth answers a rejected key.
func (x *exchange) failAuth() {
	if x.dialect == DialectGamma {
		h := x.w.Header()
		h.Set("Content-Type", "application/json")
		b, _ := json.Marshal(gammaError{Error: x.gammaErrorBody(http.StatusBadRequest,
			"API key not valid. Please pass a valid API key.", "API_KEY_INVALID")})
		x.w.WriteHeader(http.StatusBadRequest)
		x.status = http.StatusBadRequest
		_, _ = x.w.Write(b)
		x.completed = true
		return
	}
	x.fail(http.StatusUnauthorized, "invalid x-api-key / bearer token")
}

func (x *exchange) requestID() string { return fmt.Sprintf("req_%016x", x.hash) }

// id formats a deterministic id with prefix.
func (x *exchange) id(prefix string) string { return fmt.Sprintf("%s%016x", prefix, x.hash) }

// --- error shapes ---

type alphaErrorPayload struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type alphaError struct {
	Error alphaErrorPayload `json:"error"`
}

func alphaErrorBody(status int, msg string) alphaErrorPayload {
	typ, code := "server_error", ""
	switch {
	case status == 401:
		typ, code = "authentication_error", "invalid_api_key"
	case status == 403:
		typ = "permission_error"
	case status == 404:
		typ, code = "invalid_request_error", "not_found"
	case status == 429:
		typ, code = "rate_limit_exceeded", "rate_limit_exceeded"
	case status >= 400 && status < 500:
		typ = "invalid_request_error"
	}
	p := alphaErrorPayload{Message: msg, Type: typ}
	if code != "" {
		p.Code = &code
	}
	return p
}

type betaErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type betaError struct {
	Type      string        `json:"type"`
	Error     betaErrorBody `json:"error"`
	RequestID string        `json:"request_id,omitempty"`
}

func betaErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	case 504:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

type gammaErrorPayload struct {
	Code    int              `json:"code"`
	Message string           `json:"message"`
	Status  string           `json:"status"`
	Details []map[string]any `json:"details,omitempty"`
}

type gammaError struct {
	Error gammaErrorPayload `json:"error"`
}

func gammaStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

func (x *exchange) gammaErrorBody(status int, msg, reason string) gammaErrorPayload {
	p := gammaErrorPayload{Code: status, Message: msg, Status: gammaStatus(status)}
	if status == 429 {
		p.Details = []map[string]any{{"@type": "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": x.ctl.retryAfter + "s"}}
	}
	if reason != "" {
		p.Details = append(p.Details, map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": reason, "domain": "googleapis.com"})
	}
	return p
}

// errStopped ends a stream early (mock error or disconnect, or a client that went away).
var errStopped = errors.New("mock stream stopped")
