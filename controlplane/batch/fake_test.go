package batch_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProvider serves the three dialects' batch APIs with their public shapes: alpha GET /v1/batches/{id}
// and /v1/files/{id}/content, beta GET /v1/messages/batches/{id} and its results_url, gamma
// GET /v1beta/batches/{id} (an operation with inlined responses or a responses file) and
// /download/v1beta/files/{id}:download?alt=media. Every call checks the dialect's credential header.
type fakeProvider struct {
	srv *httptest.Server

	mu     sync.Mutex
	alpha  map[string]*alphaFake
	beta   map[string]*betaFake
	gamma  map[string]*gammaFake
	files  map[string][]string // alpha and gamma files: id → JSONL lines
	pause  chan struct{}       // when set, a results stream stops after pauseAfter lines until it is closed
	after  int
	perLn  time.Duration // a pause before every line written (a slow provider)
	reads  int           // results streams opened
	badKey int           // calls refused for a wrong credential
}

type alphaFake struct {
	status           string
	output, errorsID string
}

type betaFake struct {
	status   string
	lines    []string
	canceled bool
	expired  int
}

type gammaFake struct {
	state  string
	inline []string // inlined responses (JSON objects)
	file   string   // files/…
}

const (
	alphaKey = "sk-alpha-secret"
	betaKey  = "sk-beta-secret"
	gammaKey = "gamma-secret"
)

func newFakeProvider(t testing.TB) *fakeProvider {
	f := &fakeProvider{alpha: map[string]*alphaFake{}, beta: map[string]*betaFake{}, gamma: map[string]*gammaFake{}, files: map[string][]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeProvider) authorized(r *http.Request) bool {
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/messages/"):
		return r.Header.Get("X-Api-Key") == betaKey && r.Header.Get("Anthropic-Version") != ""
	case strings.HasPrefix(r.URL.Path, "/v1beta/"), strings.HasPrefix(r.URL.Path, "/download/v1beta/"):
		return r.Header.Get("X-Goog-Api-Key") == gammaKey
	}
	return r.Header.Get("Authorization") == "Bearer "+alphaKey
}

func (f *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(r) {
		f.mu.Lock()
		f.badKey++
		f.mu.Unlock()
		http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
		return
	}
	p := r.URL.Path
	f.mu.Lock()
	switch {
	case strings.HasPrefix(p, "/v1/batches/"):
		b := f.alpha[strings.TrimPrefix(p, "/v1/batches/")]
		f.mu.Unlock()
		if b == nil {
			http.NotFound(w, r)
			return
		}
		f.alphaBatch(w, strings.TrimPrefix(p, "/v1/batches/"), b)
	case strings.HasPrefix(p, "/v1/files/") && strings.HasSuffix(p, "/content"):
		lines, ok := f.files[strings.TrimSuffix(strings.TrimPrefix(p, "/v1/files/"), "/content")]
		f.reads++
		f.mu.Unlock()
		if !ok {
			http.Error(w, `{"error":{"message":"No such File object","type":"invalid_request_error"}}`, http.StatusNotFound)
			return
		}
		f.stream(w, r, lines)
	case strings.HasPrefix(p, "/v1/messages/batches/") && strings.HasSuffix(p, "/results"):
		b := f.beta[strings.TrimSuffix(strings.TrimPrefix(p, "/v1/messages/batches/"), "/results")]
		f.reads++
		f.mu.Unlock()
		if b == nil {
			http.NotFound(w, r)
			return
		}
		f.stream(w, r, b.lines)
	case strings.HasPrefix(p, "/v1/messages/batches/"):
		id := strings.TrimPrefix(p, "/v1/messages/batches/")
		b := f.beta[id]
		f.mu.Unlock()
		if b == nil {
			http.NotFound(w, r)
			return
		}
		f.betaBatch(w, id, b)
	case strings.HasPrefix(p, "/v1beta/batches/"):
		name := strings.TrimPrefix(p, "/v1beta/")
		b := f.gamma[name]
		f.mu.Unlock()
		if b == nil {
			http.NotFound(w, r)
			return
		}
		f.gammaOperation(w, name, b)
	case strings.HasPrefix(p, "/download/v1beta/files/") && strings.HasSuffix(p, ":download") && r.URL.Query().Get("alt") == "media":
		lines := f.files[strings.TrimSuffix(strings.TrimPrefix(p, "/download/v1beta/"), ":download")]
		f.reads++
		f.mu.Unlock()
		f.stream(w, r, lines)
	default:
		f.mu.Unlock()
		http.NotFound(w, r)
	}
}

// stream writes JSONL lines, flushing each, honouring the pause and the per-line delay.
func (f *fakeProvider) stream(w http.ResponseWriter, r *http.Request, lines []string) {
	w.Header().Set("Content-Type", "application/jsonl")
	f.mu.Lock()
	pause, after, perLine := f.pause, f.after, f.perLn
	f.mu.Unlock()
	fl, _ := w.(http.Flusher)
	for i, l := range lines {
		if pause != nil && i == after {
			select {
			case <-pause:
			case <-r.Context().Done():
				return
			}
		}
		if perLine > 0 {
			select {
			case <-time.After(perLine):
			case <-r.Context().Done():
				return
			}
		}
		if _, err := fmt.Fprintln(w, l); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

func (f *fakeProvider) alphaBatch(w http.ResponseWriter, id string, b *alphaFake) {
	f.mu.Lock()
	status, out, errs := b.status, b.output, b.errorsID
	f.mu.Unlock()
	nullable := func(s string) string {
		if s == "" {
			return "null"
		}
		return fmt.Sprintf("%q", s)
	}
	completed := "null"
	if status == "completed" {
		completed = "1765170000"
	}
	fmt.Fprintf(w, `{"id":%q,"object":"batch","endpoint":"/v1/chat/completions","errors":null,"input_file_id":"file-in",
"completion_window":"24h","status":%q,"output_file_id":%s,"error_file_id":%s,"created_at":1765160000,
"in_progress_at":1765160010,"expires_at":1765246400,"finalizing_at":null,"completed_at":%s,"failed_at":null,
"expired_at":null,"cancelling_at":null,"cancelled_at":null,"request_counts":{"total":4,"completed":3,"failed":1},
"metadata":{}}`, id, status, nullable(out), nullable(errs), completed)
}

func (f *fakeProvider) betaBatch(w http.ResponseWriter, id string, b *betaFake) {
	f.mu.Lock()
	status, canceled, expired := b.status, b.canceled, b.expired
	f.mu.Unlock()
	ended, results, cancel := "null", "null", "null"
	if status == "ended" {
		ended = `"2026-12-08T01:00:00Z"`
		results = fmt.Sprintf("%q", f.srv.URL+"/v1/messages/batches/"+id+"/results")
	}
	if canceled {
		cancel = `"2026-12-08T00:30:00Z"`
	}
	fmt.Fprintf(w, `{"id":%q,"type":"message_batch","processing_status":%q,"request_counts":{"processing":0,
"succeeded":2,"errored":1,"canceled":1,"expired":%d},"ended_at":%s,"created_at":"2026-12-08T00:00:00Z",
"expires_at":"2026-12-09T00:00:00Z","archived_at":null,"cancel_initiated_at":%s,"results_url":%s}`,
		id, status, expired, ended, cancel, results)
}

func (f *fakeProvider) gammaOperation(w http.ResponseWriter, name string, b *gammaFake) {
	f.mu.Lock()
	state, inline, file := b.state, b.inline, b.file
	f.mu.Unlock()
	done := state == "BATCH_STATE_SUCCEEDED" || state == "BATCH_STATE_FAILED" || state == "BATCH_STATE_CANCELLED" || state == "BATCH_STATE_EXPIRED"
	output := "{}"
	switch {
	case !done:
	case file != "":
		output = fmt.Sprintf(`{"responsesFile":%q}`, file)
	default:
		output = `{"inlinedResponses":{"inlinedResponses":[` + strings.Join(inline, ",") + `]}}`
	}
	meta := fmt.Sprintf(`{"@type":"type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
"model":"models/g-1","displayName":"nightly","state":%q,"createTime":"2026-12-08T00:00:00Z",
"updateTime":"2026-12-08T01:00:00Z","batchStats":{"requestCount":"2","successfulRequestCount":"1"}`, state)
	if done {
		meta += `,"endTime":"2026-12-08T01:00:00Z","output":` + output
	}
	meta += "}"
	resp := ""
	if done {
		resp = `,"response":` + strings.Replace(output, "{", `{"@type":"type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",`, 1)
	}
	fmt.Fprintf(w, `{"name":%q,"metadata":%s,"done":%t%s}`, name, meta, done, resp)
}

// Result lines in each dialect's shape.

func alphaOK(custom string, in, out int64) string {
	return fmt.Sprintf(`{"id":"batch_req_%s","custom_id":%q,"response":{"status_code":200,"request_id":"req_%s","body":{"id":"chatcmpl-%s","object":"chat.completion","created":1765160100,"model":"a-1-2025-01-01","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_1"}},"error":null}`,
		custom, custom, custom, custom, in, out, in+out)
}

func alphaFailed(custom string) string {
	return fmt.Sprintf(`{"id":"batch_req_%s","custom_id":%q,"response":{"status_code":400,"request_id":"req_%s","body":{"error":{"message":"Invalid 'messages'.","type":"invalid_request_error","param":"messages","code":null}}},"error":null}`, custom, custom, custom)
}

func alphaExpired(custom string) string {
	return fmt.Sprintf(`{"id":"batch_req_%s","custom_id":%q,"response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}`, custom, custom)
}

func betaOK(custom string, in, out, cacheRead int64) string {
	return fmt.Sprintf(`{"custom_id":%q,"result":{"type":"succeeded","message":{"id":"msg_%s","type":"message","role":"assistant","model":"b-1","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":%d,"service_tier":"batch"}}}}`,
		custom, custom, in, cacheRead, out)
}

func betaEnded(custom, typ string) string {
	if typ == "errored" {
		return fmt.Sprintf(`{"custom_id":%q,"result":{"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}}}`, custom)
	}
	return fmt.Sprintf(`{"custom_id":%q,"result":{"type":%q}}`, custom, typ)
}

func gammaResponse(in, out int64) string {
	return fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d},"modelVersion":"g-1","responseId":"r1"}`, in, out, in+out)
}

func gammaFileOK(key string, in, out int64) string {
	return fmt.Sprintf(`{"key":%q,"response":%s}`, key, gammaResponse(in, out))
}

func gammaFileErr(key string) string {
	return fmt.Sprintf(`{"key":%q,"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}`, key)
}
