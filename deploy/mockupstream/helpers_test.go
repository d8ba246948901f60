package mockupstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type testBundle struct {
	mock *Server
	srv  *httptest.Server
}

func setup(t *testing.T, opts Options) *testBundle {
	t.Helper()
	m := New(opts)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return &testBundle{mock: m, srv: srv}
}

type result struct {
	status int
	header http.Header
	body   []byte
	err    error // body read error (e.g. a cut stream)
}

// call sends a request; headers are name/value pairs.
func (b *testBundle) call(t *testing.T, method, path, body string, headers ...string) result {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, rerr := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: data, err: rerr}
}

// post is call with POST and a fatal check for status 200.
func (b *testBundle) post(t *testing.T, path, body string, headers ...string) result {
	t.Helper()
	r := b.call(t, http.MethodPost, path, body, headers...)
	if r.status != http.StatusOK || r.err != nil {
		t.Fatalf("POST %s = %d (%v) %s, want 200", path, r.status, r.err, r.body)
	}
	return r
}

func decodeJSON(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return m
}

type sseEvent struct {
	name string
	data string
}

func (e sseEvent) json(t *testing.T) map[string]any {
	t.Helper()
	return decodeJSON(t, []byte(e.data))
}

// parseSSE splits an SSE body into events (event + data lines, blank-line separated).
func parseSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == "":
			if cur.data != "" || cur.name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.data != "" || cur.name != "" {
		out = append(out, cur)
	}
	return out
}

func names(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.name
	}
	return out
}

// num reads a nested number field by path ("usage", "prompt_tokens").
func num(t *testing.T, m map[string]any, path ...string) int {
	t.Helper()
	v := get(t, m, path...)
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%v = %#v, want a number", path, v)
	}
	return int(f)
}

func str(t *testing.T, m map[string]any, path ...string) string {
	t.Helper()
	v := get(t, m, path...)
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%v = %#v, want a string", path, v)
	}
	return s
}

func get(t *testing.T, m map[string]any, path ...string) any {
	t.Helper()
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%v: %q is not inside an object (%#v)", path, p, cur)
		}
		cur, ok = mm[p]
		if !ok {
			t.Fatalf("%v: missing %q in %v", path, p, mm)
		}
	}
	return cur
}

func has(m map[string]any, path ...string) bool {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = mm[p]; !ok {
			return false
		}
	}
	return true
}

func arr(t *testing.T, m map[string]any, path ...string) []any {
	t.Helper()
	v, ok := get(t, m, path...).([]any)
	if !ok {
		t.Fatalf("%v is not an array", path)
	}
	return v
}

func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%#v is not an object", v)
	}
	return m
}

const (
	betaVersion = "2023-06-01"
	chatBody    = `{"model":"m-1","messages":[{"role":"user","content":"hello there"}]}`
	toolSchema  = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`
)

// tamperClient changes each request after the SDK signed it.
type tamperClient struct {
	c   *http.Client
	mod func(*http.Request)
}

func (tc tamperClient) Do(r *http.Request) (*http.Response, error) {
	tc.mod(r)
	return tc.c.Do(r)
}

func ioNopCloser(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
