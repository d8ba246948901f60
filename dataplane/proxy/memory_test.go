package proxy

import (
	"bufio"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// countingBody is a request body that records how many bytes were read from it: it yields n bytes of
// JSON-ish filler, then EOF.
type countingBody struct {
	n, read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.read >= b.n {
		return 0, io.EOF
	}
	k := min(len(p), b.n-b.read)
	for i := range p[:k] {
		p[i] = ' '
	}
	b.read += k
	return k, nil
}

func (b *countingBody) Close() error { return nil }

// TestUnauthenticatedBodyNeverRead: a request without a valid key is refused from its headers; not a
// byte of its body is read (so it never gets a body buffer) and the connection is closed, not drained.
func TestUnauthenticatedBodyNeverRead(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { t.Error("upstream called") })
	for _, auth := range []string{"", "Bearer wrong-key"} {
		body := &countingBody{n: 4 << 10}
		req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		req.Body, req.ContentLength = body, 32<<20
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", rec.Code)
		}
		if body.read != 0 {
			t.Errorf("auth %q: %d body bytes read before the key was checked", auth, body.read)
		}
		if rec.Header().Get("Connection") != "close" {
			t.Errorf("auth %q: connection kept for an unread body", auth)
		}
	}
}

// TestBodyBufferGrowsWithBytesReceived: an authenticated client declaring a 32 MiB Content-Length and
// sending 4 KiB costs kilobytes, not the declared size.
func TestBodyBufferGrowsWithBytesReceived(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {})
	b.h.o.MaxBodyBytes = 64 << 20
	serve := func() {
		req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		req.Body, req.ContentLength = &countingBody{n: 4 << 10}, 32<<20
		req.Header.Set("Authorization", "Bearer client-key")
		b.h.ServeHTTP(httptest.NewRecorder(), req)
	}
	serve() // warm the pool
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 10
	for range n {
		serve()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 1<<20 {
		t.Fatalf("%d bytes allocated per request sending 4 KiB (declared 32 MiB), want < 1 MiB", per)
	}
}

// TestTrickledBodyCut: a body trickled a byte at a time is cut when BodyReadTimeout passes — the client
// gets a 408 and the connection ends — instead of being held for as long as the client likes.
func TestTrickledBodyCut(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { t.Error("upstream called") })
	b.h.o.BodyReadTimeout = 300 * time.Millisecond
	srv := httptest.NewServer(b.h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer client-key\r\nContent-Length: 1000\r\n\r\n{")
	var stop atomic.Bool
	go func() { // one byte every 50 ms: never idle long enough for an idle timeout
		for !stop.Load() {
			time.Sleep(50 * time.Millisecond)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	defer stop.Store(true)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails the test instead of blocking it
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive") {
		t.Fatalf("status %d %s, want 408", resp.StatusCode, body)
	}
}

// discardWriter is a ResponseWriter that keeps nothing of the body (httptest.ResponseRecorder keeps it
// all, which would hide what the handler itself holds).
type discardWriter struct {
	h      http.Header
	status int
	n      int64
}

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) WriteHeader(s int) {
	if d.status == 0 {
		d.status = s
	}
}
func (d *discardWriter) Write(p []byte) (int, error) {
	d.WriteHeader(200)
	d.n += int64(len(p))
	return len(p), nil
}
func (d *discardWriter) Flush() {}

// allocatedBy returns the bytes allocated (by every goroutine, so also the test's upstream) while f ran.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLargeBufferedResponseUsageFound: usage reported after 40 MB of a non-streaming answer is found
// (the old capture kept the first 16 MiB, then dropped it and billed nothing), and relaying it keeps
// megabytes, not the body.
func TestLargeBufferedResponseUsageFound(t *testing.T) {
	const size = 40 << 20
	chunk := []byte(strings.Repeat("x", 64<<10))
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"`)
		for range size / len(chunk) {
			_, _ = w.Write(chunk)
		}
		_, _ = io.WriteString(w, `"}}],"usage":{"prompt_tokens":10,"completion_tokens":10000000}}`)
	})
	dw := &discardWriter{h: http.Header{}}
	alloc := allocatedBy(func() {
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"chat","messages":[]}`))
		req.Header.Set("Authorization", "Bearer client-key")
		b.h.ServeHTTP(dw, req)
	})
	if dw.status != 200 || dw.n < size {
		t.Fatalf("status %d, %d bytes relayed", dw.status, dw.n)
	}
	if len(b.rec.recs) != 1 || b.rec.recs[0].GetTokens().GetOutput() != 10_000_000 || b.rec.recs[0].GetSource() != "upstream" {
		t.Fatalf("record %v, want 10M output tokens from the upstream", b.rec.recs)
	}
	t.Logf("relaying %d MB allocated %d KB", dw.n>>20, alloc>>10)
	if alloc > 8<<20 {
		t.Errorf("relaying a %d MB answer allocated %d MB, want < 8 MB", size>>20, alloc>>20)
	}
}

// TestLongStreamFlatMemory: a long stream without upstream usage is relayed and counted locally in flat
// memory: the text kept for counting is bounded and the whole length is still counted.
func TestLongStreamFlatMemory(t *testing.T) {
	const events = 4096
	text := strings.Repeat("word ", 3<<10) // 15 KiB of text per event, 60 MiB in all
	event := []byte(`data: {"choices":[{"delta":{"content":"` + text + `"}}]}` + "\n\n")
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range events {
			_, _ = w.Write(event)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	var kept int
	var total int64
	b.h.o.LocalUsage = func(_ vocab.Kind, _ vocab.Operation, _ string, _ []byte, out string, outBytes int64) (usage.Usage, bool) {
		kept, total = len(out), outBytes
		return usage.Usage{Output: outBytes / 5}, true
	}
	dw := &discardWriter{h: http.Header{}}
	alloc := allocatedBy(func() {
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"chat","stream":true,"messages":[]}`))
		req.Header.Set("Authorization", "Bearer client-key")
		b.h.ServeHTTP(dw, req)
	})
	if want := int64(events * len(text)); total != want || kept > maxCollectedText {
		t.Fatalf("local count saw %d bytes kept, %d in all; want ≤ %d kept, %d in all", kept, total, maxCollectedText, want)
	}
	if len(b.rec.recs) != 1 || b.rec.recs[0].GetSource() != "local" {
		t.Fatalf("records %v", b.rec.recs)
	}
	t.Logf("relaying a %d MB stream allocated %d KB", dw.n>>20, alloc>>10)
	// The stream's events are decoded one by one (a few allocations each); the text is not kept.
	if perByte := float64(alloc) / float64(dw.n); alloc > 32<<20 {
		t.Errorf("relaying a %d MB stream allocated %d MB (%.2f per byte), want < 32 MB", dw.n>>20, alloc>>20, perByte)
	}
}

// TestExtrapolate: the local output count of a text longer than what was kept scales with its length.
func TestExtrapolate(t *testing.T) {
	for _, tt := range []struct{ tokens, kept, total, want int64 }{
		{100, 1000, 1000, 100}, {100, 1000, 4000, 400}, {0, 0, 5, 0}, {7, 10, 5, 7},
		{1 << 40, 1, 1 << 40, 1<<63 - 1},
	} {
		if got := extrapolate(tt.tokens, tt.kept, tt.total); got != tt.want {
			t.Errorf("extrapolate(%d, %d, %d) = %d, want %d", tt.tokens, tt.kept, tt.total, got, tt.want)
		}
	}
}

// TestReleaseDropsHugeBuffers: a request that needed huge buffers does not leave them pinned in the pool.
func TestReleaseDropsHugeBuffers(t *testing.T) {
	h := New(Options{})
	c := &call{body: make([]byte, 0, 8<<20), patch: make([]byte, 0, 8<<20)}
	c.pt.up.pending = make([]byte, 0, 8<<20)
	big := "data: " + strings.Repeat("x", 4<<20) + "\n\n"
	c.pt.sseD = sse.NewDecoder(strings.NewReader(big))
	c.pt.arrD = jsonkit.NewJSONArrayDecoder(strings.NewReader("[" + strings.Repeat(" ", 8) + `"` + strings.Repeat("y", 4<<20) + `"]`))
	if _, err := c.pt.sseD.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.pt.arrD.Next(); err != nil {
		t.Fatal(err)
	}
	h.release(c)
	sseKept, arrKept := 0, 0
	if c.pt.sseD != nil {
		sseKept = c.pt.sseD.Footprint()
	}
	if c.pt.arrD != nil {
		arrKept = c.pt.arrD.Footprint()
	}
	for name, n := range map[string]int{"body": cap(c.body), "patch": cap(c.patch), "pending events": cap(c.pt.up.pending),
		"sse decoder": sseKept, "array decoder": arrKept} {
		if n > 1<<20 {
			t.Errorf("%s buffer of %d bytes kept in the pool", name, n)
		}
	}
}
