package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestRefusalClosesTrickledBody: a request refused before its body was read — no key, a wrong key, an
// unknown path, a declared body over the limit — gets its refusal and then the connection is closed within
// a couple of seconds, while the client is still trickling the body; net/http must not go on draining a
// body nobody will use.
func TestRefusalClosesTrickledBody(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { t.Error("upstream called") })
	b.h.o.MaxBodyBytes = 1 << 20
	srv := httptest.NewServer(b.h)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"no_key", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", http.StatusUnauthorized},
		{"wrong_key", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 1000\r\n\r\n", http.StatusUnauthorized},
		{"unknown_path", "POST /v1/nothing HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer client-key\r\nContent-Length: 1000\r\n\r\n", http.StatusNotFound},
		{"declared_too_large", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer client-key\r\nContent-Length: 2000000\r\n\r\n", http.StatusRequestEntityTooLarge},
		{"chunked_no_key", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.head); err != nil {
				t.Fatal(err)
			}
			var stop atomic.Bool
			defer stop.Store(true)
			go func() { // a byte every 300 ms for as long as the connection takes it
				chunk := "1\r\n \r\n"
				for !stop.Load() {
					b := " "
					if tc.name == "chunked_no_key" {
						b = chunk
					}
					if _, err := io.WriteString(conn, b); err != nil {
						return
					}
					time.Sleep(300 * time.Millisecond)
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no refusal: %v", err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("status %d, Connection: close %v; want %d and the connection closed", resp.StatusCode, resp.Close, tc.status)
			}
			answered := time.Now()
			_ = conn.SetReadDeadline(answered.Add(2 * time.Second))
			_, err = br.ReadByte()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the connection was still open 2 s after the %d, reading the trickled body", tc.status)
			}
			if err == nil {
				t.Fatal("more bytes after the refusal, want the connection closed")
			}
			t.Logf("closed %v after the refusal (%v)", time.Since(answered).Round(time.Millisecond), err)
		})
	}
}
