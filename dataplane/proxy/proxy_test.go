package proxy

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/routing"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/dataplane/upstream"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

type fakeAdmitter struct {
	err  error
	mu   sync.Mutex // concurrent requests (TestTransformerBodyIsLentUnchanged)
	reqs []admission.Request
}

func (f *fakeAdmitter) Admit(_ context.Context, r admission.Request) (admission.Hold, error) {
	r.Scopes = append([]admission.ScopeQuota(nil), r.Scopes...) // the proxy reuses its array
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if f.err != nil {
		return admission.Hold{}, f.err
	}
	return admission.Hold{Micros: r.EstimateMicros, KeyID: r.KeyID}, nil
}

func (f *fakeAdmitter) Refund(context.Context, admission.Hold) error { return nil }

type fakeRecorder struct {
	gate atomic.Pointer[chan struct{}] // when set, Record waits for the channel to close
	done atomic.Int32                  // Record calls that returned
	mu   sync.Mutex
	recs []*settlementv1.SettlementRecord
}

func (f *fakeRecorder) Record(_ context.Context, o settle.Outcome, h admission.Hold) (*settlementv1.SettlementRecord, error) {
	if g := f.gate.Load(); g != nil {
		<-*g
	}
	defer f.done.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := settle.BuildRecord(o) // the record settle.Recorder would append
	rec.PendingMicros = h.Micros
	f.recs = append(f.recs, rec)
	return rec, nil
}

type testBundle struct {
	h     *Handler
	adm   *fakeAdmitter
	rec   *fakeRecorder
	up    *httptest.Server
	mu    sync.Mutex
	calls []string // Authorization of every upstream call
}

func setup(t *testing.T, upstreamHandler func(w http.ResponseWriter, r *http.Request), mutate ...func(*snapshotv1.Snapshot)) *testBundle {
	t.Helper()
	b := &testBundle{adm: &fakeAdmitter{}, rec: &fakeRecorder{}}
	b.up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.calls = append(b.calls, r.Header.Get("Authorization"))
		b.mu.Unlock()
		upstreamHandler(w, r)
	}))
	t.Cleanup(b.up.Close)
	kh := sha256.Sum256([]byte("client-key"))
	s := &snapshotv1.Snapshot{
		Version: 3,
		PriceRules: []*configv1.PriceRule{{Id: 9, MatchType: "exact", ModelMatch: "m-1", InputPrice: "1", OutputPrice: "1",
			CacheReadPrice: "0", CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0", ImageOutputPrice: "0", Enabled: true}},
		Providers: []*configv1.Provider{{Id: 1, Name: "p", ChannelType: "alpha", BaseUrl: b.up.URL, Enabled: true,
			Credentials: []*configv1.Credential{{Id: 1, Secret: "s1", Weight: 1, Enabled: true}, {Id: 2, Secret: "s2", Weight: 1, Enabled: true}}}},
		RoutingRules: []*configv1.RoutingRule{
			{Id: 1, ProviderId: 1, Operation: "generate_content", Kind: "alpha_chat_completions", Implementation: "passthrough", Enabled: true},
			{Id: 2, ProviderId: 1, Operation: "stream_generate_content", Kind: "alpha_chat_completions", Implementation: "passthrough", Enabled: true},
		},
		Routes:  []*configv1.Route{{Id: 1, Name: "chat", Enabled: true, Members: []*configv1.RouteMember{{ProviderId: 1, UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}}},
		ApiKeys: []*configv1.ApiKey{{Id: 4, UserId: 5, OrgId: 6, KeyHash: kh[:], Enabled: true, RpmLimit: 1_000_000}},
		Quotas:  []*configv1.Quota{{Scope: "org", ScopeId: 6, CostLimit: strPtr("10"), CostUsed: "0"}},
	}
	for _, m := range mutate {
		m(s)
	}
	snap, err := snapshot.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	up := upstream.New(upstream.Options{ConnectTimeout: time.Second, IdleTimeout: time.Second, ResponseHeaderTimeout: 5 * time.Second,
		CredentialCooldown: time.Minute, IntN: func(int) int { return 0 }})
	b.h = New(Options{Snapshot: func() *snapshot.Compiled { return snap }, Upstream: up, Admitter: b.adm, Recorder: b.rec,
		Selector: routing.New(func(int) int { return 0 })})
	return b
}

func strPtr(s string) *string { return &s }

func (b *testBundle) post(t *testing.T, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer client-key")
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	return rec
}

func TestCredentialFailover(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer s1" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"chat.completion","echo":` + string(body) + `,"usage":{"prompt_tokens":1000000,"completion_tokens":0}}`))
	})
	rec := b.post(t, `{"model":"chat","messages":[]}`)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"model":"m-1"`) {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	if len(b.calls) != 2 || b.calls[0] != "Bearer s1" || b.calls[1] != "Bearer s2" {
		t.Fatalf("upstream calls %v, want s1 then s2", b.calls)
	}
	if len(b.rec.recs) != 1 {
		t.Fatalf("%d records, want 1", len(b.rec.recs))
	}
	r := b.rec.recs[0]
	if r.GetCredentialId() != 2 || r.GetEndState() != "completed" || r.GetCost() != "1" || r.GetPriceRuleId() != 9 ||
		r.GetSource() != "upstream" || r.GetPendingMicros() <= 0 || r.GetImplementation() != "passthrough" {
		t.Errorf("record %v", r)
	}
	if a := b.adm.reqs; len(a) != 1 || a[0].RPMLimit != 1_000_000 || len(a[0].Scopes) != 1 || a[0].Scopes[0].LimitMicros != 10_000_000 {
		t.Errorf("admission requests %+v", a)
	}
	// Credential 1 is cooling down now: the next request tries credential 2 first.
	b.calls = nil
	_ = b.post(t, `{"model":"chat","messages":[]}`)
	if len(b.calls) != 1 || b.calls[0] != "Bearer s2" {
		t.Errorf("calls after cooldown %v, want only s2", b.calls)
	}
}

func TestAdmissionErrors(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { t.Error("upstream called") })
	b.adm.err = &admission.RateLimitError{RetryAfter: 1500 * time.Millisecond, Limit: "rpm"}
	rec := b.post(t, `{"model":"chat"}`)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "2" {
		t.Errorf("rate limited: %d %v", rec.Code, rec.Header())
	}
	b.adm.err = &admission.QuotaError{Scope: vocab.ScopeOrg, ID: 6}
	rec = b.post(t, `{"model":"chat"}`)
	if rec.Code != 402 || !strings.Contains(rec.Body.String(), "insufficient_quota") {
		t.Errorf("quota: %d %s", rec.Code, rec.Body)
	}
	b.adm.err = errors.New("redis down")
	b.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	rec = b.post(t, `{"model":"chat"}`)
	if rec.Code != 200 {
		t.Errorf("redis down: %d %s, want admitted", rec.Code, rec.Body)
	}
	// Refusals are recorded as rejected rows at cost 0; the admitted request as completed.
	if len(b.rec.recs) != 3 {
		t.Fatalf("%d records, want 3 (two refusals, one admitted)", len(b.rec.recs))
	}
	for i, want := range []struct {
		status int32
		end    vocab.EndState
	}{{429, vocab.EndRejected}, {402, vocab.EndRejected}, {200, vocab.EndCompleted}} {
		r := b.rec.recs[i]
		if r.GetHttpStatus() != want.status || r.GetEndState() != string(want.end) {
			t.Errorf("record %d = status %d end %s, want %d %s", i, r.GetHttpStatus(), r.GetEndState(), want.status, want.end)
		}
		if want.end == vocab.EndRejected && (r.GetCost() != "0" || r.GetPendingMicros() != 0) {
			t.Errorf("rejected record %d cost %q pending %d, want 0 and nothing reserved", i, r.GetCost(), r.GetPendingMicros())
		}
	}
}

func TestStreamFlushAndUsage(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, ev := range []string{`{"choices":[{"delta":{"content":"a"}}]}`,
			`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`, `[DONE]`} {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
			f.Flush()
		}
	})
	// The client did not ask for usage: the gateway did, and leaves the usage chunk out of the client's stream.
	rec := b.post(t, `{"model":"chat","stream":true}`)
	if rec.Code != 200 || !rec.Flushed || strings.Count(rec.Body.String(), "data: ") != 2 || strings.Contains(rec.Body.String(), "usage") {
		t.Fatalf("stream %d flushed=%v %q", rec.Code, rec.Flushed, rec.Body)
	}
	r := b.rec.recs[0]
	if r.GetOperation() != "stream_generate_content" || r.GetTokens().GetInput() != 5 || r.GetTokens().GetOutput() != 2 {
		t.Errorf("record %v", r)
	}
}

func BenchmarkServeHTTP(b *testing.B) {
	tb := setup(&testing.T{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"chat.completion","usage":{"prompt_tokens":3,"completion_tokens":2}}`))
	})
	defer tb.up.Close()
	tb.h.o.Admitter = nil
	body := `{"model":"chat","messages":[{"role":"user","content":"hello"}]}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer client-key")
		rec := httptest.NewRecorder()
		tb.h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
		tb.rec.recs = tb.rec.recs[:0]
	}
}

func TestLocalUsageForStreamWithoutUsage(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{`{"choices":[{"delta":{"content":"Hello"}}]}`, `{"choices":[{"delta":{"content":" world"}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}`, `[DONE]`} {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
		}
	})
	var output string
	b.h.o.LocalUsage = func(kind vocab.Kind, op vocab.Operation, model string, req []byte, out string, _ int64) (usage.Usage, bool) {
		output = out
		return usage.Usage{Input: 11, Output: 3}, true
	}
	rec := b.post(t, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if output != "Hello world{}" {
		t.Errorf("collected output %q, want %q", output, "Hello world{}")
	}
	r := b.rec.recs[0]
	if r.GetSource() != "local" || r.GetTokens().GetInput() != 11 || r.GetTokens().GetOutput() != 3 {
		t.Errorf("record %v", r)
	}
}

func TestListModelsRecordedAtCostZero(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { t.Error("upstream called") }, func(s *snapshotv1.Snapshot) {
		s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: 9, ProviderId: 1, Operation: "list_models", Kind: "alpha", Implementation: "local", Enabled: true})
	})
	req := httptest.NewRequest("GET", "/v1/models", nil)
	req.Header.Set("Authorization", "Bearer client-key")
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"chat"`) {
		t.Fatalf("GET /v1/models = %d %s", rec.Code, rec.Body)
	}
	if len(b.rec.recs) != 1 {
		t.Fatalf("%d records, want 1", len(b.rec.recs))
	}
	r := b.rec.recs[0]
	if r.GetOperation() != string(vocab.OpListModels) || r.GetCost() != "0" || r.GetEndState() != string(vocab.EndCompleted) || r.GetProviderId() != 0 {
		t.Errorf("record = %v, want list_models completed at cost 0 with no provider", r)
	}
}

// panicWriter panics on the first body write, standing in for any bug in the relay path.
type panicWriter struct{ *httptest.ResponseRecorder }

func (p panicWriter) Write([]byte) (int, error) { panic("relay bug") }

func TestPanicDuringDispatchStillSettlesOnce(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"usage":{"prompt_tokens":1}}`)) })
	req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"chat","messages":[]}`))
	req.Header.Set("Authorization", "Bearer client-key")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic was swallowed; net/http must still see it")
			}
		}()
		b.h.ServeHTTP(panicWriter{httptest.NewRecorder()}, req)
	}()
	if len(b.rec.recs) != 1 {
		t.Fatalf("%d records after a panic, want exactly 1", len(b.rec.recs))
	}
	if r := b.rec.recs[0]; r.GetEndState() != string(vocab.EndUpstreamError) || r.GetHttpStatus() != 500 {
		t.Errorf("record after panic = %v, want upstream_error 500", r)
	}
}

// A response of declared length reaches the client before the settlement record is appended; a stream
// ends only after it (Handler.finish). The handler always returns after the record.
func TestResponseSentBeforeRecordStreamEndsAfter(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"chat.completion","usage":{"prompt_tokens":3,"completion_tokens":2}}`)
	})
	srv := httptest.NewServer(b.h)
	t.Cleanup(srv.Close)
	post := func(body string) (string, error) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer client-key")
		resp, err := srv.Client().Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		return string(got), err
	}

	t.Run("non-streaming: the client has the whole body while the record is still being appended", func(t *testing.T) {
		gate := make(chan struct{})
		b.rec.gate.Store(&gate)
		defer b.rec.gate.Store(nil)
		before := b.rec.done.Load()
		type result struct {
			body string
			err  error
		}
		got := make(chan result, 1)
		go func() { body, err := post(`{"model":"chat","messages":[]}`); got <- result{body, err} }()
		select {
		case r := <-got:
			pending := b.rec.done.Load() == before
			close(gate)
			if r.err != nil || !strings.Contains(r.body, `"chat.completion"`) {
				t.Fatalf("body %q, err %v", r.body, r.err)
			}
			if !pending {
				t.Fatal("the record was appended without waiting for the gate")
			}
		case <-time.After(5 * time.Second):
			close(gate)
			t.Fatal("the response did not reach the client while its record was pending")
		}
		for b.rec.done.Load() == before { // the handler finishes its record once the gate opens
			time.Sleep(time.Millisecond)
		}
	})
	t.Run("streaming: the stream ends after its record", func(t *testing.T) {
		gate := make(chan struct{})
		b.rec.gate.Store(&gate)
		defer b.rec.gate.Store(nil)
		before := b.rec.done.Load()
		time.AfterFunc(50*time.Millisecond, func() { close(gate) })
		body, err := post(`{"model":"chat","stream":true,"messages":[]}`)
		if err != nil || !strings.Contains(body, "[DONE]") {
			t.Fatalf("body %q, err %v", body, err)
		}
		if b.rec.done.Load() != before+1 {
			t.Fatal("the stream ended before its settlement record was appended")
		}
	})
}
