package proxy_test

// BenchmarkPassthroughStream measures what the data plane spends per event of a passthrough stream, the
// most common traffic (docs/benchmarks.md, "Passthrough stream"). It is written against the package's
// exported API only (New, Options) and a loopback upstream, so the same file measures the handler before
// and after its dialect code is reorganised.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/proxy"
	"github.com/tollgate/tollgate/dataplane/routing"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/dataplane/upstream"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/testkit"
)

// passthroughEvents is the length of every benchmarked stream, in SSE events.
const passthroughEvents = 200

// passthroughCase is one recorded streamed answer of ../shared/wire/realwire.jsonl, stretched to
// passthroughEvents events, and the client request that reaches it.
type passthroughCase struct {
	name   string
	id     string // the corpus interaction
	path   string
	header [2]string
	// request edits the recorded request (nil: sent as recorded, the model renamed to the route).
	request func(map[string]json.RawMessage)
	// isDelta tells the content deltas, the events repeated to stretch the stream.
	isDelta func(event string) bool
}

var passthroughCases = []passthroughCase{
	// A beta messages stream with a thinking block and a text block (118 events recorded).
	{name: "beta_messages", id: "rw-msg-s-007", path: "/v1/messages", header: [2]string{"anthropic-version", "2023-06-01"},
		isDelta: func(ev string) bool { return strings.Contains(ev, `"type":"content_block_delta"`) }},
	// An alpha chat stream whose client asked for the usage chunk: relayed byte for byte.
	{name: "alpha_chat/client_asked_usage", id: "rw-chat-s-026", path: "/v1/chat/completions",
		isDelta: func(ev string) bool { return strings.Contains(ev, `"delta":{"content":`) }},
	// The same stream for a client that did not ask: the gateway asks and leaves the usage chunk out.
	{name: "alpha_chat/gateway_asked_usage", id: "rw-chat-s-026", path: "/v1/chat/completions",
		request: func(m map[string]json.RawMessage) { delete(m, "stream_options") },
		isDelta: func(ev string) bool { return strings.Contains(ev, `"delta":{"content":`) }},
	// An alpha responses stream: its usage is in the terminal event's response object.
	{name: "alpha_responses", id: "rw-resp-s-022", path: "/v1/responses",
		isDelta: func(ev string) bool { return strings.Contains(ev, `"type":"response.output_text.delta"`) }},
	// A gamma stream with thoughts and tool-use prompt tokens: usageMetadata on every chunk.
	{name: "gamma", id: "rw-gen-s-007", path: "/v1beta/models/bench:streamGenerateContent?alt=sse",
		isDelta: func(ev string) bool { return strings.Contains(ev, `"text"`) }},
}

// Each case runs through the gateway's handler and through the floor, a bare httputil.ReverseProxy to the
// same upstream in the same process: gateway minus floor is what the data plane adds per event.
func BenchmarkPassthroughStream(b *testing.B) {
	corpus := readPassthroughCorpus(b)
	for _, c := range passthroughCases {
		x, ok := corpus[c.id]
		if !ok {
			b.Fatalf("interaction %s not in the recorded corpus", c.id)
		}
		stream := stretchStream(b, x.ResponseBody, c.isDelta)
		h, up, rec := passthroughHandler(b, x.Dialect, x.ResponseHeaders["content-type"], stream)
		floor := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(up) }}
		body := passthroughRequest(b, x.Request, c.request)
		serve := func(h http.Handler) *countingWriter {
			req := httptest.NewRequest("POST", c.path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer client-key")
			req.Header.Set("Content-Type", "application/json")
			if c.header[0] != "" {
				req.Header.Set(c.header[0], c.header[1])
			}
			w := &countingWriter{header: http.Header{}}
			h.ServeHTTP(w, req)
			return w
		}
		b.Run(c.name+"/gateway", func(b *testing.B) {
			// Once untimed: the stream is relayed whole and billed what the upstream reported.
			w := serve(h)
			if w.code != 200 || w.flushes == 0 || w.n < len(stream)/2 {
				b.Fatalf("status %d, %d flushes, %d of %d bytes", w.code, w.flushes, w.n, len(stream))
			}
			r := rec.last()
			if r.GetTokens().GetInput() != x.Expected.Input || r.GetTokens().GetOutput() != x.Expected.Output {
				b.Fatalf("billed %d in / %d out, the upstream reported %d / %d",
					r.GetTokens().GetInput(), r.GetTokens().GetOutput(), x.Expected.Input, x.Expected.Output)
			}
			measurePassthrough(b, len(stream), func() *countingWriter { return serve(h) })
		})
		b.Run(c.name+"/floor", func(b *testing.B) {
			if w := serve(floor); w.code != 200 || w.n != len(stream) {
				b.Fatalf("floor: status %d, %d of %d bytes", w.code, w.n, len(stream))
			}
			measurePassthrough(b, len(stream), func() *countingWriter { return serve(floor) })
		})
	}
}

// measurePassthrough times serve and reports per event: wall time, the process's CPU and allocations.
func measurePassthrough(b *testing.B, streamLen int, serve func() *countingWriter) {
	b.SetBytes(int64(streamLen))
	b.ReportAllocs()
	cpu0, mallocs0 := processCPU(b), mallocs()
	for b.Loop() {
		if w := serve(); w.code != 200 {
			b.Fatal(w.code)
		}
	}
	cpu, allocs := processCPU(b)-cpu0, mallocs()-mallocs0
	events := float64(b.N * passthroughEvents)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
	// The whole process's CPU (handler, loopback upstream, collector): on a shared machine closer to what
	// the relay costs than the wall time.
	b.ReportMetric(float64(cpu.Nanoseconds())/events, "cpu-ns/event")
	b.ReportMetric(float64(allocs)/events, "allocs/event")
}

// rwRow is the part of a realwire.jsonl line the benchmark uses (../shared/wire/README.md).
type rwRow struct {
	ID              string            `json:"id"`
	Dialect         string            `json:"dialect"`
	Request         json.RawMessage   `json:"request"`
	ResponseHeaders map[string]string `json:"response_headers"`
	ResponseBody    string            `json:"response_body"`
	Expected        struct {
		Input  int64 `json:"input_tokens"`
		Output int64 `json:"output_tokens"`
	} `json:"expected"`
}

func readPassthroughCorpus(b *testing.B) map[string]*rwRow {
	b.Helper()
	f, err := os.Open(testkit.Shared(b, "wire", "realwire.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	want := map[string]bool{}
	for _, c := range passthroughCases {
		want[c.id] = true
	}
	out := map[string]*rwRow{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var id struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &id); err != nil {
			b.Fatal(err)
		}
		if !want[id.ID] {
			continue
		}
		x := &rwRow{}
		if err := json.Unmarshal(sc.Bytes(), x); err != nil {
			b.Fatal(err)
		}
		out[x.ID] = x
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// stretchStream repeats the content deltas of a recorded stream in place (each delta followed by its
// copies, the order of everything else kept) until it has passthroughEvents events.
func stretchStream(b *testing.B, recorded string, isDelta func(string) bool) string {
	b.Helper()
	var events, deltas []string
	sep := "\n\n"
	if strings.Contains(recorded, "\r\n\r\n") { // gamma's events end with CRLF CRLF
		sep = "\r\n\r\n"
	}
	for _, ev := range strings.Split(recorded, sep) {
		if strings.TrimSpace(ev) == "" {
			continue
		}
		events = append(events, ev)
		if isDelta(ev) {
			deltas = append(deltas, ev)
		}
	}
	extra := passthroughEvents - len(events)
	if len(deltas) == 0 || extra < 0 {
		b.Fatalf("recorded stream has %d events, %d deltas; want at most %d events and a delta", len(events), len(deltas), passthroughEvents)
	}
	var out strings.Builder
	j := 0
	for _, ev := range events {
		n := 1
		if isDelta(ev) {
			n += (j+1)*extra/len(deltas) - j*extra/len(deltas)
			j++
		}
		for range n {
			out.WriteString(ev)
			out.WriteString(sep)
		}
	}
	return out.String()
}

// passthroughRequest is the recorded request under the route's name, edited.
func passthroughRequest(b *testing.B, recorded json.RawMessage, edit func(map[string]json.RawMessage)) string {
	b.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(recorded, &m); err != nil {
		b.Fatal(err)
	}
	m["model"] = json.RawMessage(`"bench"`)
	if edit != nil {
		edit(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return string(out)
}

// passthroughHandler is a Handler whose one route passes the dialect's streams through to a loopback
// upstream (returned) answering every request with stream in one write; no admission, records built and kept.
func passthroughHandler(b *testing.B, dialect, contentType, stream string) (*proxy.Handler, *url.URL, *lastRecorder) {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(stream))
	}))
	b.Cleanup(up.Close)
	channel, _, _ := strings.Cut(dialect, "_")
	kh := sha256.Sum256([]byte("client-key"))
	s := &snapshotv1.Snapshot{
		Version: 1,
		PriceRules: []*configv1.PriceRule{{Id: 1, MatchType: "exact", ModelMatch: "m-1", InputPrice: "1", OutputPrice: "3",
			CacheReadPrice: "0.1", CacheCreation_5MPrice: "1.25", CacheCreation_30MPrice: "1.7", CacheCreation_1HPrice: "2",
			ImageOutputPrice: "7", Enabled: true}},
		Providers: []*configv1.Provider{{Id: 1, Name: "p", ChannelType: channel, BaseUrl: up.URL, Enabled: true,
			Credentials: []*configv1.Credential{{Id: 1, Secret: "s1", Weight: 1, Enabled: true}}}},
		RoutingRules: []*configv1.RoutingRule{
			{Id: 1, ProviderId: 1, Operation: "generate_content", Kind: dialect, Implementation: "passthrough", Enabled: true},
			{Id: 2, ProviderId: 1, Operation: "stream_generate_content", Kind: dialect, Implementation: "passthrough", Enabled: true},
		},
		Routes: []*configv1.Route{{Id: 1, Name: "bench", Enabled: true, Members: []*configv1.RouteMember{{ProviderId: 1,
			UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}}},
		ApiKeys: []*configv1.ApiKey{{Id: 1, UserId: 1, OrgId: 1, KeyHash: kh[:], Enabled: true}},
	}
	snap, err := snapshot.Compile(s)
	if err != nil {
		b.Fatal(err)
	}
	rec := &lastRecorder{}
	h := proxy.New(proxy.Options{
		Snapshot: func() *snapshot.Compiled { return snap },
		Upstream: upstream.New(upstream.Options{ConnectTimeout: time.Second, IdleTimeout: time.Minute,
			ResponseHeaderTimeout: 5 * time.Second, CredentialCooldown: time.Minute, IntN: func(int) int { return 0 }}),
		Recorder: rec,
		Selector: routing.New(func(int) int { return 0 }),
	})
	u, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	return h, u, rec
}

// lastRecorder builds each request's settlement record, as the data plane's recorder does, and keeps the last.
type lastRecorder struct {
	mu  sync.Mutex
	rec *settlementv1.SettlementRecord
}

func (l *lastRecorder) Record(_ context.Context, o settle.Outcome, h admission.Hold) (*settlementv1.SettlementRecord, error) {
	r := settle.BuildRecord(o)
	r.PendingMicros = h.Micros
	l.mu.Lock()
	l.rec = r
	l.mu.Unlock()
	return r, nil
}

func (l *lastRecorder) last() *settlementv1.SettlementRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

// processCPU is the process's user + system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mallocs is the number of heap objects the process allocated so far (every goroutine's).
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// countingWriter is the client: it counts what it is sent and keeps none of it, so the figures are the
// handler's and not a recorder's growing buffer.
type countingWriter struct {
	header  http.Header
	code    int
	n       int
	flushes int
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}

func (w *countingWriter) Flush() { w.flushes++ }
