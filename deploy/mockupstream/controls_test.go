package mockupstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestStatusControlPerDialect(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	tests := []struct {
		name, path, body string
		headers          []string
		status           int
		check            func(t *testing.T, m map[string]any)
	}{
		{"alpha 429", "/v1/chat/completions", chatBody, nil, 429, func(t *testing.T, m map[string]any) {
			if str(t, m, "error", "type") != "rate_limit_exceeded" || str(t, m, "error", "code") != "rate_limit_exceeded" ||
				get(t, m, "error", "param") != nil || str(t, m, "error", "message") == "" {
				t.Errorf("alpha error = %v", m)
			}
		}},
		{"alpha 500", "/v1/responses", `{}`, nil, 500, func(t *testing.T, m map[string]any) {
			if str(t, m, "error", "type") != "server_error" || get(t, m, "error", "code") != nil {
				t.Errorf("alpha error = %v", m)
			}
		}},
		{"beta 529", "/v1/messages", betaBody + "}", []string{"anthropic-version", betaVersion}, 529,
			func(t *testing.T, m map[string]any) {
				if str(t, m, "type") != "error" || str(t, m, "error", "type") != "overloaded_error" || str(t, m, "request_id") == "" {
					t.Errorf("beta error = %v", m)
				}
			}},
		{"beta 429", "/v1/messages", betaBody + "}", []string{"anthropic-version", betaVersion}, 429,
			func(t *testing.T, m map[string]any) {
				if str(t, m, "error", "type") != "rate_limit_error" {
					t.Errorf("beta error = %v", m)
				}
			}},
		{"gamma 429", "/v1beta/models/g:generateContent", gammaBody, nil, 429, func(t *testing.T, m map[string]any) {
			d := obj(t, arr(t, m, "error", "details")[0])
			if num(t, m, "error", "code") != 429 || str(t, m, "error", "status") != "RESOURCE_EXHAUSTED" ||
				str(t, d, "retryDelay") != "7s" || str(t, d, "@type") != "type.googleapis.com/google.rpc.RetryInfo" {
				t.Errorf("gamma error = %v", m)
			}
		}},
		{"gamma 503", "/v1beta/models/g:streamGenerateContent?alt=sse", gammaBody, nil, 503, func(t *testing.T, m map[string]any) {
			if str(t, m, "error", "status") != "UNAVAILABLE" {
				t.Errorf("gamma error = %v", m)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := append([]string{"x-mock-status", itoa(tt.status), "x-mock-retry-after", "7"}, tt.headers...)
			r := b.call(t, http.MethodPost, tt.path, tt.body, h...)
			if r.status != tt.status {
				t.Fatalf("status = %d, want %d (%s)", r.status, tt.status, r.body)
			}
			if ra := r.header.Get("Retry-After"); (tt.status == 429 || tt.status >= 503) && ra != "7" {
				t.Errorf("Retry-After = %q, want 7", ra)
			}
			tt.check(t, decodeJSON(t, r.body))
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestFailFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	h := []string{"x-mock-fail-first", "2", "x-mock-fail-key", "k1", "x-mock-status", "503"}
	for i, want := range []int{503, 503, 200, 200} {
		if r := b.call(t, http.MethodPost, "/v1/chat/completions", chatBody, h...); r.status != want {
			t.Errorf("request %d status = %d, want %d", i, r.status, want)
		}
	}
	// another key has its own counter; default status is 500
	if r := b.call(t, http.MethodPost, "/v1/chat/completions", chatBody, "x-mock-fail-first", "1", "x-mock-fail-key", "k2"); r.status != 500 {
		t.Errorf("k2 first = %d, want 500", r.status)
	}
	b.mock.Reset()
	if r := b.call(t, http.MethodPost, "/v1/chat/completions", chatBody, h...); r.status != 503 {
		t.Errorf("after reset = %d, want 503", r.status)
	}
}

func TestUsageVariants(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	m := decodeJSON(t, b.post(t, "/v1/chat/completions", chatBody, "x-mock-usage", "none").body)
	if has(m, "usage") {
		t.Errorf("usage none: %v", m["usage"])
	}
	m = decodeJSON(t, b.post(t, "/v1/chat/completions", chatBody, "x-mock-usage", "aggregate").body)
	if has(m, "usage", "prompt_tokens_details") || num(t, m, "usage", "total_tokens") == 0 {
		t.Errorf("usage aggregate: %v", m["usage"])
	}
	m = decodeJSON(t, b.post(t, "/v1/chat/completions", chatBody, "x-mock-usage", "cached").body)
	prompt := num(t, m, "usage", "prompt_tokens")
	if num(t, m, "usage", "prompt_tokens_details", "cached_tokens") != prompt/2 ||
		num(t, m, "usage", "prompt_tokens_details", "cache_write_tokens") != prompt/4 {
		t.Errorf("usage cached: %v", m["usage"])
	}
	m = decodeJSON(t, b.post(t, "/v1/chat/completions", chatBody, "x-mock-usage", "image_tokens").body)
	if num(t, m, "usage", "prompt_tokens_details", "image_tokens")+num(t, m, "usage", "prompt_tokens_details", "text_tokens") != prompt {
		t.Errorf("usage image_tokens: %v", m["usage"])
	}
	m = decodeJSON(t, b.post(t, "/v1/responses", `{"model":"m","input":"x"}`, "x-mock-usage", "none").body)
	if get(t, m, "usage") != nil {
		t.Errorf("responses usage none: %v", m["usage"])
	}
	m = decodeJSON(t, b.post(t, "/v1/messages", betaBody+"}", "anthropic-version", betaVersion, "x-mock-usage", "none").body)
	if has(m, "usage") {
		t.Errorf("beta usage none: %v", m["usage"])
	}
	m = decodeJSON(t, b.post(t, "/v1beta/models/g:generateContent", gammaBody, "x-mock-usage", "image_tokens").body)
	if d := arr(t, m, "usageMetadata", "promptTokensDetails"); len(d) != 2 || str(t, obj(t, d[1]), "modality") != "IMAGE" {
		t.Errorf("gamma image usage: %v", m["usageMetadata"])
	}
	m = decodeJSON(t, b.post(t, "/v1/images/generations", `{"prompt":"x"}`, "x-mock-usage", "none").body)
	if has(m, "usage") {
		t.Errorf("images usage none: %v", m["usage"])
	}
	// beta stream aggregate: message_delta carries only output_tokens
	evs := parseSSE(t, b.post(t, "/v1/messages", betaBody+`,"stream":true}`, "anthropic-version", betaVersion,
		"x-mock-usage", "aggregate").body)
	md := evs[len(evs)-2].json(t)
	if u := obj(t, md["usage"]); len(u) != 1 || num(t, u, "output_tokens") != 8 {
		t.Errorf("aggregate message_delta usage = %v", u)
	}
}

func TestServedTierOverride(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	m := decodeJSON(t, b.post(t, "/v1/chat/completions", `{"model":"m","messages":[1],"service_tier":"priority"}`,
		"x-mock-served-tier", "flex").body)
	if str(t, m, "service_tier") != "flex" {
		t.Errorf("alpha served tier = %v", m["service_tier"])
	}
	m = decodeJSON(t, b.post(t, "/v1/chat/completions", `{"model":"m","messages":[1],"service_tier":"fast"}`).body)
	if str(t, m, "service_tier") != "priority" {
		t.Errorf("alpha fast = %v, want priority", m["service_tier"])
	}
	m = decodeJSON(t, b.post(t, "/v1/chat/completions", `{"model":"m","messages":[1],"service_tier":"priority"}`,
		"x-mock-downgrade", "1").body)
	if str(t, m, "service_tier") != "default" {
		t.Errorf("alpha downgraded = %v, want default", m["service_tier"])
	}
	r := b.post(t, "/v1beta/models/g:generateContent", gammaBody, "x-mock-served-tier", "flex")
	if r.header.Get(TierHeader) != "flex" {
		t.Errorf("gamma served tier = %q", r.header.Get(TierHeader))
	}
}

func TestLatencyAndChunkDelay(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	start := time.Now()
	b.post(t, "/v1/chat/completions", chatBody, "x-mock-latency-ms", "60")
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("latency = %v, want >= 60ms", d)
	}
	start = time.Now()
	b.post(t, "/v1/chat/completions", `{"model":"m","messages":[1],"stream":true}`, "x-mock-chunks", "3",
		"x-mock-chunk-delay-ms", "20")
	// 3 words + role + finish + [DONE] = 6 writes, 5 gaps
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("stream duration = %v, want >= 100ms", d)
	}
}

func TestStreamFlushesEachEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[1],"stream":true}`))
	req.Header.Set("x-mock-chunk-delay-ms", "2000")
	req.Header.Set("x-mock-chunks", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := b.srv.Client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	start := time.Now()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line = %q, %v", line, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("first event took %v: not flushed", d)
	}
}

func TestChunksControl(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	m := decodeJSON(t, b.post(t, "/v1/chat/completions", chatBody, "x-mock-chunks", "0").body)
	if num(t, m, "usage", "completion_tokens") != 0 {
		t.Errorf("chunks 0 usage = %v", m["usage"])
	}
	evs := parseSSE(t, b.post(t, "/v1/messages", betaBody+`,"stream":true}`, "anthropic-version", betaVersion,
		"x-mock-chunks", "20").body)
	deltas := 0
	for _, e := range evs {
		if e.name == "content_block_delta" {
			deltas++
		}
	}
	if deltas != 20 {
		t.Errorf("deltas = %d, want 20", deltas)
	}
}

func TestDisconnectAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	tests := []struct{ name, path, body string }{
		{"alpha chat", "/v1/chat/completions", `{"model":"m","messages":[1],"stream":true}`},
		{"alpha responses", "/v1/responses", `{"model":"m","input":"x","stream":true}`},
		{"beta", "/v1/messages", betaBody + `,"stream":true}`},
		{"gamma sse", "/v1beta/models/g:streamGenerateContent?alt=sse", gammaBody},
		{"gamma array", "/v1beta/models/g:streamGenerateContent", gammaBody},
		{"images", "/v1/images/generations", `{"prompt":"x","stream":true,"partial_images":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.call(t, http.MethodPost, tt.path, tt.body, "anthropic-version", betaVersion,
				"x-mock-disconnect-after", "2", "x-mock-fail-key", tt.name)
			if r.status != 200 {
				t.Fatalf("status = %d", r.status)
			}
			if !errors.Is(r.err, io.ErrUnexpectedEOF) {
				t.Errorf("body read error = %v, want unexpected EOF (cut stream)", r.err)
			}
			for _, term := range []string{"[DONE]", "response.completed", "message_stop", `"finishReason"`, "completed\n"} {
				if strings.Contains(string(r.body), term) {
					t.Errorf("cut stream contains terminal %q: %s", term, r.body)
				}
			}
			rec, err := b.mock.Wait(testCtx(t), func(rq Request) bool { return rq.Path == strings.Split(tt.path, "?")[0] && rq.Done && rq.Aborted })
			if err != nil || rec.Events != 2 || rec.Completed {
				t.Errorf("record = %+v, %v", rec, err)
			}
		})
	}
}

func TestDisconnectBeforeResponse(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		req, _ := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(chatBody))
		req.Header.Set("x-mock-disconnect-after", "0")
		resp, err := b.srv.Client().Do(req)
		if err == nil {
			_ = resp.Body.Close()
			t.Fatalf("%s: got %d, want a connection error", path, resp.StatusCode)
		}
		rec, werr := b.mock.Wait(testCtx(t), func(r Request) bool { return r.Path == path && r.Done })
		if werr != nil || !rec.Aborted || rec.Status != 0 {
			t.Errorf("%s record = %+v, %v", path, rec, werr)
		}
	}
}

func TestStreamErrorAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	tests := []struct {
		name, path, body string
		check            func(t *testing.T, body []byte)
	}{
		{"alpha chat", "/v1/chat/completions", `{"model":"m","messages":[1],"stream":true}`, func(t *testing.T, body []byte) {
			evs := parseSSE(t, body)
			last := evs[len(evs)-1].json(t)
			if len(evs) != 3 || str(t, last, "error", "type") != "server_error" || strings.Contains(string(body), "[DONE]") {
				t.Errorf("events = %v", evs)
			}
		}},
		{"alpha responses", "/v1/responses", `{"model":"m","input":"x","stream":true}`, func(t *testing.T, body []byte) {
			evs := parseSSE(t, body)
			last := evs[len(evs)-1]
			m := last.json(t)
			if len(evs) != 3 || last.name != "error" || str(t, m, "code") != "server_error" || num(t, m, "sequence_number") != 2 {
				t.Errorf("events = %v", evs)
			}
		}},
		{"beta", "/v1/messages", betaBody + `,"stream":true}`, func(t *testing.T, body []byte) {
			evs := parseSSE(t, body)
			last := evs[len(evs)-1]
			if len(evs) != 3 || last.name != "error" || str(t, last.json(t), "error", "type") != "overloaded_error" {
				t.Errorf("events = %v", evs)
			}
		}},
		{"gamma sse", "/v1beta/models/g:streamGenerateContent?alt=sse", gammaBody, func(t *testing.T, body []byte) {
			evs := parseSSE(t, body)
			if len(evs) != 3 || str(t, evs[2].json(t), "error", "status") != "INTERNAL" {
				t.Errorf("events = %v", evs)
			}
		}},
		{"images", "/v1/images/generations", `{"prompt":"x","stream":true,"partial_images":3}`, func(t *testing.T, body []byte) {
			evs := parseSSE(t, body)
			if len(evs) != 3 || evs[2].name != "error" || str(t, evs[2].json(t), "error", "type") != "server_error" {
				t.Errorf("events = %v", evs)
			}
		}},
		{"gamma array", "/v1beta/models/g:streamGenerateContent", gammaBody, func(t *testing.T, body []byte) {
			chunks := parseGammaArray(t, body)
			if len(chunks) != 3 || num(t, chunks[2], "error", "code") != 500 {
				t.Errorf("chunks = %v", chunks)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.post(t, tt.path, tt.body, "anthropic-version", betaVersion, "x-mock-stream-error-after", "2")
			tt.check(t, r.body)
		})
	}
}

func TestAuthAndRecording(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{APIKey: "sk-good"})
	tests := []struct {
		name, path, body string
		headers          []string
		status           int
		key              string
	}{
		{"alpha ok", "/v1/chat/completions", chatBody, []string{"Authorization", "Bearer sk-good"}, 200, "sk-good"},
		{"alpha bad", "/v1/chat/completions", chatBody, []string{"Authorization", "Bearer sk-bad"}, 401, "sk-bad"},
		{"beta ok", "/v1/messages", betaBody + "}", []string{"x-api-key", "sk-good", "anthropic-version", betaVersion}, 200, "sk-good"},
		{"beta bad", "/v1/messages", betaBody + "}", []string{"x-api-key", "nope", "anthropic-version", betaVersion}, 401, "nope"},
		{"gamma header", "/v1beta/models/g:generateContent", gammaBody, []string{"x-goog-api-key", "sk-good"}, 200, "sk-good"},
		{"gamma query", "/v1beta/models/g:generateContent?key=sk-good", gammaBody, nil, 200, "sk-good"},
		{"gamma bad", "/v1beta/models/g:generateContent", gammaBody, []string{"x-goog-api-key", "x"}, 400, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.call(t, http.MethodPost, tt.path, tt.body, tt.headers...)
			if r.status != tt.status {
				t.Fatalf("status = %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.status == 401 && !strings.Contains(string(r.body), "authentication_error") {
				t.Errorf("body = %s", r.body)
			}
			if tt.status == 400 && !strings.Contains(string(r.body), "API_KEY_INVALID") {
				t.Errorf("body = %s", r.body)
			}
			rec, err := b.mock.Wait(testCtx(t), func(rq Request) bool {
				return rq.Done && rq.APIKey == tt.key && rq.Status == tt.status && rq.Body == tt.body
			})
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if rec.Body != tt.body {
				t.Errorf("recorded body = %q, want %q", rec.Body, tt.body)
			}
		})
	}
}

func TestRecordingEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{MaxRecords: 2})
	b.post(t, "/v1/chat/completions", `{"model":"renamed-1","messages":[1]}`, "Authorization", "Bearer k")
	b.post(t, "/v1beta/models/g-9:generateContent", gammaBody)
	b.post(t, "/v1/embeddings", `{"model":"e","input":"x"}`)
	recs := b.mock.Requests()
	if len(recs) != 2 || recs[0].Model != "g-9" || recs[1].Path != "/v1/embeddings" || recs[0].Dialect != DialectGamma {
		t.Fatalf("records = %+v", recs)
	}
	if b.mock.Count() != 3 {
		t.Errorf("Count = %d, want 3", b.mock.Count())
	}
	r := b.call(t, http.MethodGet, "/_mock/requests", "")
	var got struct {
		Count    int64     `json:"count"`
		Requests []Request `json:"requests"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("decode /_mock/requests: %v", err)
	}
	if got.Count != 3 || len(got.Requests) != 2 || got.Requests[1].Body != `{"model":"e","input":"x"}` ||
		got.Requests[1].Header.Get("Content-Type") != "application/json" || !got.Requests[1].Completed {
		t.Errorf("/_mock/requests = %+v", got)
	}
	if r := b.call(t, http.MethodPost, "/_mock/reset", ""); r.status != 200 {
		t.Errorf("reset = %d", r.status)
	}
	if len(b.mock.Requests()) != 0 || b.mock.Count() != 0 {
		t.Errorf("after reset: %v", b.mock.Requests())
	}
	b.post(t, "/v1/chat/completions", `{"model":"renamed-1","messages":[1]}`, "Authorization", "Bearer k")
	if recs := b.mock.Requests(); len(recs) != 1 || recs[0].Model != "renamed-1" || recs[0].APIKey != "k" ||
		recs[0].Header.Get("Authorization") != "Bearer k" {
		t.Errorf("records = %+v", recs)
	}
	if r := b.call(t, http.MethodGet, "/healthz", ""); r.status != 200 {
		t.Errorf("healthz = %d", r.status)
	}
	if r := b.call(t, http.MethodGet, "/nope", ""); r.status != 404 || !strings.Contains(string(r.body), "invalid_request_error") {
		t.Errorf("unknown route = %d %s", r.status, r.body)
	}
	// disabled recording still counts
	off := setup(t, Options{MaxRecords: -1})
	off.post(t, "/v1/chat/completions", chatBody)
	if off.mock.Count() != 1 || len(off.mock.Requests()) != 0 {
		t.Errorf("recording off: count %d records %d", off.mock.Count(), len(off.mock.Requests()))
	}
}

func TestClientCancellationIsRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, path, body, header string }{
		{"stream", "/v1/chat/completions", `{"model":"m","messages":[1],"stream":true}`, "x-mock-chunk-delay-ms"},
		{"latency", "/v1/messages", betaBody + "}", "x-mock-latency-ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set(tt.header, "5000")
			req.Header.Set("anthropic-version", betaVersion)
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := b.srv.Client().Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}()
			if _, err := b.mock.Wait(ctx, func(r Request) bool { return r.Path == tt.path }); err != nil {
				t.Fatalf("request never arrived: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
			cancel()
			<-done
			wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer wcancel()
			rec, err := b.mock.Wait(wctx, func(r Request) bool { return r.Done })
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if !rec.Cancelled || rec.Completed || b.mock.Cancellations() != 1 {
				t.Errorf("record = %+v, cancellations %d", rec, b.mock.Cancellations())
			}
			if rec.Duration >= 4000 {
				t.Errorf("handler kept going for %dms after cancel", rec.Duration)
			}
		})
	}
}

func TestMain_RunsAndStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- Main(ctx, []string{"-addr", "127.0.0.1:0"}, func(string) string { return "" }, io.Discard,
			func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("Main: %v", err)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	_ = resp.Body.Close()
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Main after cancel = %v, want nil", err)
	}
	if err := Main(context.Background(), []string{"-bogus"}, func(string) string { return "" }, io.Discard, nil); err == nil {
		t.Error("Main with a bad flag = nil, want error")
	}
	if err := Main(context.Background(), nil, func(k string) string {
		if k == "MOCKUPSTREAM_ADDR" {
			return "256.0.0.1:1"
		}
		return ""
	}, io.Discard, nil); err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		t.Errorf("Main with env addr = %v, want listen error naming it", err)
	}
}

// testCtx bounds a Wait so a missing record fails instead of hanging.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestWordBytes: x-mock-word-bytes pads every answer word, so a chat answer of n chunks is n×size bytes of
// text while the reported output stays n tokens.
func TestWordBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	r := b.post(t, "/v1/chat/completions", chatBody, "x-mock-chunks", "3", "x-mock-word-bytes", "1000")
	m := decodeJSON(t, r.body)
	text := str(t, obj(t, arr(t, m, "choices")[0]), "message", "content")
	if len(text) != 3000 || !strings.HasSuffix(text, "~") {
		t.Fatalf("content is %d bytes, want 3000 of padded words", len(text))
	}
	if got := num(t, m, "usage", "completion_tokens"); got != 3 {
		t.Errorf("completion_tokens = %v, want 3", got)
	}
}
