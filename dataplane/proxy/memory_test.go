package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
