package process

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// drainStack serves /readyz (behind a Drain) and /work on loopback under Run.
type drainStack struct {
	url    string
	cancel context.CancelFunc
	done   chan error
}

func startDrainStack(t *testing.T, delay time.Duration) *drainStack {
	t.Helper()
	mux := http.NewServeMux()
	d := NewDrain(delay)
	HealthHandlers(mux, d.Ready(func(context.Context) (map[string]any, error) { return nil, nil }))
	mux.HandleFunc("GET /work", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "done") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	ctx, cancel := context.WithCancel(context.Background())
	s := &drainStack{url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { s.done <- Run(ctx, log, 5*time.Second, []Server{d.Server(srv), HTTPServer("http", srv, ln)}) }()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// get returns the status and whether the server asked to close the connection (Connection: close).
func (s *drainStack) get(path string) (int, bool, error) {
	resp, err := http.Get(s.url + path)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Close, nil
}

// waitRun fails t unless Run returns within a generous bound (a hang, not a timing check).
func (s *drainStack) waitRun(t *testing.T) {
	t.Helper()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		s.done <- nil
	case <-time.After(time.Minute):
		t.Fatal("Run did not return")
	}
}

// TestDrainDropsReadinessBeforeTheListenerCloses: once shutdown begins /readyz answers 503 "draining"
// while ordinary requests are still served (with Connection: close), and only after the delay does the
// listener close.
func TestDrainDropsReadinessBeforeTheListenerCloses(t *testing.T) {
	s := startDrainStack(t, 3*time.Second)
	if code, _, err := s.get("/readyz"); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz before shutdown = %d, %v; want 200", code, err)
	}
	s.cancel()
	for i := 0; ; i++ {
		code, _, err := s.get("/readyz")
		if err != nil {
			t.Fatalf("/readyz during the drain: %v (the listener closed before readiness dropped)", err)
		}
		if code == http.StatusServiceUnavailable {
			break
		}
		if i > 1000 {
			t.Fatalf("/readyz stayed %d after shutdown began", code)
		}
		time.Sleep(time.Millisecond)
	}
	code, closing, err := s.get("/work")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/work during the drain = %d, %v; want 200 (still serving)", code, err)
	}
	if !closing {
		t.Error("/work during the drain: no Connection: close (keep-alive still on)")
	}
	s.waitRun(t)
	if _, _, err := s.get("/work"); err == nil {
		t.Fatal("/work after Run returned: still served")
	}
}

// TestDrainSkippedWhenReadinessWasNeverProbed: with nothing health-checking the process, the (here
// hour-long) delay does not hold up shutdown.
func TestDrainSkippedWhenReadinessWasNeverProbed(t *testing.T) {
	s := startDrainStack(t, time.Hour)
	if code, _, err := s.get("/work"); err != nil || code != http.StatusOK {
		t.Fatalf("/work = %d, %v", code, err)
	}
	s.cancel()
	s.waitRun(t)
}

// TestDrainEndsWhenAServerFails: a server failing during the drain ends it and Run reports the failure.
func TestDrainEndsWhenAServerFails(t *testing.T) {
	d := NewDrain(time.Hour)
	_, _ = d.Ready(func(context.Context) (map[string]any, error) { return nil, nil })(context.Background()) // probed
	fail := make(chan struct{})
	failing := Server{Name: "failing", Serve: func() error { <-fail; return errors.New("boom") }, Stop: func(context.Context) error { return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, []Server{d.Server(), failing})
	}()
	cancel()
	for !d.Draining() {
		time.Sleep(time.Millisecond)
	}
	close(fail)
	select {
	case err := <-done:
		if err == nil || err.Error() != "failing: boom" {
			t.Fatalf("Run = %v, want failing: boom", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return")
	}
}
