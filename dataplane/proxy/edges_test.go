package proxy

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/tokencount"
	"github.com/tollgate/tollgate/deploy/mockupstream"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// setupMock serves the handler on loopback in front of the real mock upstream (deploy/mockupstream).
func setupMock(t *testing.T, mutate ...func(*snapshotv1.Snapshot)) (*testBundle, *httptest.Server, *mockupstream.Server) {
	t.Helper()
	mock := mockupstream.New(mockupstream.Options{})
	b := setup(t, mock.ServeHTTP, mutate...)
	b.h.o.LocalUsage = CountLocally
	b.h.o.Transformer = &Translator{}
	front := httptest.NewServer(b.h)
	t.Cleanup(front.Close)
	return b, front, mock
}

// postTo posts body to path with the x-mock-* controls in hdr.
func postTo(t *testing.T, front *httptest.Server, path, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", front.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer client-key")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// chatRequest posts an alpha chat request with the x-mock-* controls in hdr.
func chatRequest(t *testing.T, front *httptest.Server, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", front.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer client-key")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// oneRecord waits for the request's settlement record (the handler settles after the client's answer).
func oneRecord(t *testing.T, b *testBundle) *settlementv1.SettlementRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.rec.done.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no settlement record")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a second record, if any, is not missed
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	if len(b.rec.recs) != 1 {
		t.Fatalf("%d records, want exactly 1", len(b.rec.recs))
	}
	return b.rec.recs[0]
}

// checkCounted asserts a record settled from local counting with at least minOutput output tokens; in a
// build without the tokenizer (-tags notokenizer) from the admission estimate instead, as documented.
func checkCounted(t *testing.T, r *settlementv1.SettlementRecord, minOutput int64) {
	t.Helper()
	if !tokencount.Supported() {
		if r.GetSource() != "estimated" || r.GetTokens().GetInput() == 0 || r.GetCost() == "0" {
			t.Fatalf("record source %s tokens %v cost %s end %s, want the estimate billed (no tokenizer)",
				r.GetSource(), r.GetTokens(), r.GetCost(), r.GetEndState())
		}
		return
	}
	if r.GetSource() != "local" || r.GetTokens().GetOutput() < minOutput || r.GetTokens().GetInput() == 0 || r.GetCost() == "0" {
		t.Fatalf("record source %s tokens %v cost %s end %s, want local counting with >= %d output tokens",
			r.GetSource(), r.GetTokens(), r.GetCost(), r.GetEndState(), minOutput)
	}
}

// A client that read a stream to its terminal event and left while the upstream held the connection open
// got the whole answer: the record says completed, not client_dropped.
func TestStreamReadToEndIsCompleted(t *testing.T) {
	b, front, _ := setupMock(t)
	resp := chatRequest(t, front, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-linger-ms": "5000"})
	sc := bufio.NewScanner(resp.Body)
	sawDone := false
	for sc.Scan() {
		if sc.Text() == "data: [DONE]" {
			sawDone = true
			break
		}
	}
	resp.Body.Close() // the client leaves right after the last byte, as SDKs do
	if !sawDone {
		t.Fatal("stream ended before [DONE]")
	}
	r := oneRecord(t, b)
	if r.GetEndState() != "completed" || r.GetHttpStatus() != 200 {
		t.Fatalf("record end %s status %d, want completed 200", r.GetEndState(), r.GetHttpStatus())
	}
}

// An upstream that sent its headers and cut the connection before any body byte: the client gets a 502
// in its dialect (never an empty 200) and the one record says what the client saw.
func TestUpstreamCutBeforeFirstByteIs502(t *testing.T) {
	b, front, mock := setupMock(t)
	resp := chatRequest(t, front, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-disconnect-after": "0", "x-mock-disconnect-headers": "1"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"code":"upstream_failed"`) {
		t.Fatalf("client got %d %q, want a 502 alpha error", resp.StatusCode, body)
	}
	if n := mock.Count(); n != 2 {
		t.Fatalf("upstream called %d times, want 2 (both credentials, nothing had reached the client)", n)
	}
	r := oneRecord(t, b)
	if r.GetHttpStatus() != 502 || r.GetEndState() != "upstream_error" || r.GetCost() != "0" {
		t.Fatalf("record status %d end %s cost %s, want 502 upstream_error 0", r.GetHttpStatus(), r.GetEndState(), r.GetCost())
	}
}

// Every candidate answering 429: the client gets 429 with the upstream's Retry-After, in its dialect.
func TestAllCandidatesRateLimitedIs429(t *testing.T) {
	b, front, _ := setupMock(t)
	resp := chatRequest(t, front, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-status": "429", "x-mock-retry-after": "7"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" ||
		!strings.Contains(string(body), `"type":"rate_limit_exceeded"`) {
		t.Fatalf("client got %d Retry-After %q %s, want 429 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	r := oneRecord(t, b)
	if r.GetHttpStatus() != 429 || r.GetEndState() != "upstream_error" {
		t.Fatalf("record status %d end %s, want 429 upstream_error", r.GetHttpStatus(), r.GetEndState())
	}
}

// A stream that delivered 300 deltas and then the upstream's in-stream error, without usage: what was
// delivered is billed, counted locally.
func TestInStreamErrorBillsDelivered(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "include_usage"}[includeUsage], func(t *testing.T) {
			b, front, _ := setupMock(t)
			body := `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			if includeUsage {
				body = `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
			}
			resp := chatRequest(t, front, body, map[string]string{"x-mock-chunks": "300", "x-mock-stream-error-after": "300"})
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(got), `"error"`) {
				t.Fatalf("the client did not get the in-stream error: %.200s", got)
			}
			r := oneRecord(t, b)
			if r.GetEndState() != "upstream_interrupted" {
				t.Fatalf("record end %s, want upstream_interrupted", r.GetEndState())
			}
			checkCounted(t, r, 250)
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7", 7 * time.Second, true},
		{" 0 ", 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"99999999999", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), 0, false},
	} {
		d, ok := parseRetryAfter(tc.in, now)
		if d != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, d, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"7", "", "-3", "Wed, 21 Oct 2015 07:28:00 GMT", "86400", "86401", "1e3"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseRetryAfter(s, now)
		if (!ok && d != 0) || d < 0 || d > maxRetryAfter*time.Second {
			t.Fatalf("parseRetryAfter(%q) = %v, %v: out of bounds", s, d, ok)
		}
	})
}

// A buffered passthrough answer without usage: its output is counted locally from the relayed body, not
// only the prompt.
func TestLocalCountOfBufferedOutput(t *testing.T) {
	b, front, _ := setupMock(t)
	resp := chatRequest(t, front, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-usage": "none", "x-mock-chunks": "60"})
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	checkCounted(t, oneRecord(t, b), 50)
}

// A transformed stream (beta client, alpha chat upstream) whose upstream reported no usage: counted locally
// (prompt and relayed output), not estimated.
func TestLocalCountOfTransformedStream(t *testing.T) {
	dest, op := "alpha_chat_completions", "stream_generate_content"
	b, front, _ := setupMock(t, func(s *snapshotv1.Snapshot) {
		s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: 3, ProviderId: 1, Operation: op, Kind: "beta_messages",
			Implementation: "transform_to", DestOperation: &op, DestKind: &dest, Enabled: true})
	})
	resp := postTo(t, front, "/v1/messages", `{"model":"chat","max_tokens":500,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-usage": "none", "x-mock-chunks": "60"})
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(got), "message_stop") {
		t.Fatalf("client got %d %.300s", resp.StatusCode, got)
	}
	checkCounted(t, oneRecord(t, b), 50)
}

// An alpha chat stream whose client did not ask for usage: the gateway asks the upstream (so cache and
// reasoning tokens are billed as reported, source upstream) and the client does not get the usage chunk.
func TestAlphaChatStreamAsksForUsage(t *testing.T) {
	for name, body := range map[string]string{
		"absent":       `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hello there, a prompt of some length"}]}`,
		"false":        `{"model":"chat","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hello there, a prompt of some length"}]}`,
		"other option": `{"stream_options":{"x":1},"model":"chat","stream":true,"messages":[{"role":"user","content":"hello there, a prompt of some length"}]}`,
		"null":         `{"model":"chat","stream_options":null,"stream":true,"messages":[{"role":"user","content":"hello there, a prompt of some length"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			b, front, mock := setupMock(t)
			resp := chatRequest(t, front, body, map[string]string{"x-mock-usage": "cached", "x-mock-chunks": "20"})
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(got), `"usage":{`) || !strings.Contains(string(got), "data: [DONE]") {
				t.Fatalf("client stream carries a usage chunk it did not ask for, or is cut:\n%s", got)
			}
			r := oneRecord(t, b)
			if r.GetSource() != "upstream" || r.GetTokens().GetCacheRead() == 0 || r.GetEndState() != "completed" {
				t.Fatalf("record source %s tokens %v end %s, want the upstream's usage with cache reads", r.GetSource(), r.GetTokens(), r.GetEndState())
			}
			sent := mock.Requests()[0].Body
			if !strings.Contains(sent, `"include_usage":true`) {
				t.Fatalf("upstream body does not ask for usage: %s", sent)
			}
		})
	}
	// A client that asked keeps its usage chunk.
	b, front, _ := setupMock(t)
	resp := chatRequest(t, front, `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, nil)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(got), `"usage":{`) {
		t.Fatalf("the usage chunk the client asked for is missing:\n%s", got)
	}
	_ = oneRecord(t, b)
}

// gammaRules adds gamma cells to the test snapshot: generate_content through alpha chat, model list and get
// answered locally.
func gammaRules(s *snapshotv1.Snapshot) {
	gen, dest := "generate_content", "alpha_chat_completions"
	s.RoutingRules = append(s.RoutingRules,
		&configv1.RoutingRule{Id: 10, ProviderId: 1, Operation: gen, Kind: "gamma_generate_content", Implementation: "transform_to",
			DestOperation: &gen, DestKind: &dest, Enabled: true},
		&configv1.RoutingRule{Id: 11, ProviderId: 1, Operation: "list_models", Kind: "gamma", Implementation: "local", Enabled: true},
		&configv1.RoutingRule{Id: 12, ProviderId: 1, Operation: "get_model", Kind: "gamma", Implementation: "local", Enabled: true},
		&configv1.RoutingRule{Id: 13, ProviderId: 1, Operation: "list_models", Kind: "alpha", Implementation: "local", Enabled: true})
}

func getWith(t *testing.T, front *httptest.Server, path string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", front.URL+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The gamma dialect under /v1/ (the gamma SDK's default): generation and a gamma-shaped model list that
// advertises only the methods the gateway serves for the model.
func TestGammaUnderV1(t *testing.T) {
	_, front, _ := setupMock(t, gammaRules)
	resp := postTo(t, front, "/v1/models/chat:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"candidates"`) {
		t.Fatalf("POST /v1/models/chat:generateContent = %d %s", resp.StatusCode, body)
	}
	status, list := getWith(t, front, "/v1/models", map[string]string{"x-goog-api-key": "client-key"})
	if status != 200 || !strings.Contains(list, `"models":[`) || !strings.Contains(list, `"supportedGenerationMethods":["generateContent"]`) {
		t.Fatalf("gamma GET /v1/models = %d %s, want the gamma list advertising generateContent only", status, list)
	}
	status, list = getWith(t, front, "/v1beta/models?key=client-key", nil)
	if status != 200 || !strings.Contains(list, `"supportedGenerationMethods":["generateContent"]`) {
		t.Fatalf("GET /v1beta/models = %d %s", status, list)
	}
}

// list_models obeys the routing cells like every other operation: no enabled row, unsupported.
func TestListModelsObeysCells(t *testing.T) {
	_, front, _ := setupMock(t)
	status, body := getWith(t, front, "/v1/models", map[string]string{"Authorization": "Bearer client-key"})
	if status != 400 || !strings.Contains(body, `"code":"unsupported_operation"`) {
		t.Fatalf("GET /v1/models without a list_models row = %d %s, want the unsupported-operation error", status, body)
	}
	status, body = getWith(t, front, "/v1/models", map[string]string{"x-api-key": "client-key", "anthropic-version": "2023-06-01"})
	if status != 400 || !strings.Contains(body, `"message":"unsupported_operation: `) {
		t.Fatalf("beta GET /v1/models = %d %s, want a machine-readable unsupported-operation error", status, body)
	}
}

// A gamma passthrough under /v1/ reaches the upstream at its /v1beta/ path, whether or not the model is
// renamed.
func TestGammaV1PassthroughPath(t *testing.T) {
	_, front, mock := setupMock(t, func(s *snapshotv1.Snapshot) {
		s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: 20, ProviderId: 1, Operation: "stream_generate_content",
			Kind: "gamma_generate_content", Implementation: "passthrough", Enabled: true})
		s.Routes = append(s.Routes, &configv1.Route{Id: 2, Name: "m-1", Enabled: true,
			Members: []*configv1.RouteMember{{ProviderId: 1, UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}})
	})
	for _, model := range []string{"chat", "m-1"} {
		resp := postTo(t, front, "/v1/models/"+model+":streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"candidates"`) {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, body)
		}
		reqs := mock.Requests()
		if got := reqs[len(reqs)-1].Path; got != "/v1beta/models/m-1:streamGenerateContent" {
			t.Fatalf("%s: upstream path %s, want /v1beta/models/m-1:streamGenerateContent", model, got)
		}
	}
}

// The same cut through a transform_to stream (beta client, alpha chat upstream): a 502 in the beta shape,
// after failing over, never a 200 with an in-stream error.
func TestTransformedCutBeforeFirstByteIs502(t *testing.T) {
	dest, op := "alpha_chat_completions", "stream_generate_content"
	b, front, mock := setupMock(t, func(s *snapshotv1.Snapshot) {
		s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: 3, ProviderId: 1, Operation: op, Kind: "beta_messages",
			Implementation: "transform_to", DestOperation: &op, DestKind: &dest, Enabled: true})
	})
	resp := postTo(t, front, "/v1/messages", `{"model":"chat","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-disconnect-after": "0", "x-mock-disconnect-headers": "1"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"type":"api_error"`) {
		t.Fatalf("client got %d %q, want a 502 beta error", resp.StatusCode, body)
	}
	if n := mock.Count(); n != 2 {
		t.Fatalf("upstream called %d times, want 2 (both credentials)", n)
	}
	r := oneRecord(t, b)
	if r.GetHttpStatus() != 502 || r.GetEndState() != "upstream_error" || r.GetCost() != "0" {
		t.Fatalf("record status %d end %s cost %s, want 502 upstream_error 0", r.GetHttpStatus(), r.GetEndState(), r.GetCost())
	}
}

// BenchmarkStreamRelay compares the byte-for-byte relay of an alpha chat stream whose client asked for
// usage with the event-by-event relay that drops the usage chunk the gateway asked for (200 chunks).
func BenchmarkStreamRelay(b *testing.B) {
	var stream strings.Builder
	for range 200 {
		stream.WriteString("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" lorem\"}}],\"usage\":null}\n\n")
	}
	stream.WriteString("data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":200}}\n\ndata: [DONE]\n\n")
	payload := stream.String()
	tb := setup(&testing.T{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, payload)
	})
	defer tb.up.Close()
	tb.h.o.Admitter = nil
	for name, body := range map[string]string{
		"client_asked_usage":  `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`,
		"gateway_asked_usage": `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hello"}]}`,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
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
		})
	}
}
