package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/testkit"
)

func TestReclaimAfterIdle(t *testing.T) {
	var freed atomic.Int32
	r := &reclaimer{free: func() { freed.Add(1) }}
	h := r.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serve := func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) }

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	const idle = 40 * time.Millisecond
	go func() { defer close(done); r.run(ctx, idle) }()
	defer func() { cancel(); <-done }()

	// Never busy: nothing to reclaim.
	time.Sleep(5 * idle)
	if n := freed.Load(); n != 0 {
		t.Fatalf("reclaimed %d times before any request", n)
	}
	// Busy, then idle: two collections (pools' primary then victim caches), then nothing more.
	for range 20 {
		serve()
		time.Sleep(idle / 10)
	}
	if n := freed.Load(); n != 0 {
		t.Fatalf("reclaimed %d times while requests kept arriving", n)
	}
	testkit.WaitFor(t, "two reclaims after the burst", func() bool { return freed.Load() == 2 })
	time.Sleep(5 * idle)
	if n := freed.Load(); n != 2 {
		t.Fatalf("reclaimed %d times after one burst, want 2", n)
	}
	// Another burst: two more.
	serve()
	testkit.WaitFor(t, "two more after the next burst", func() bool { return freed.Load() == 4 })
}
