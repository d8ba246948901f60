package app

import (
	"context"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// reclaimer gives the memory a burst of traffic left behind back to the operating system once the data
// plane has been idle for a while. The collector is paced by allocation, so after a load ends nothing
// triggers it: the heap the burst grew (up to GOGC% above the live heap) and the per-connection buffers
// parked in sync.Pools stay resident indefinitely (docs/benchmarks.md, "Memory at 128 connections").
// After idle ticks with no request started, it runs debug.FreeOSMemory twice, one tick apart: the first
// collection moves the pools' buffers to their victim caches, the second frees them, and each returns the
// freed pages at once instead of leaving them to the background scavenger. It then sleeps until the next
// request: an idle data plane costs two collections per burst, not one per tick.
type reclaimer struct {
	started atomic.Uint64 // requests started, ever
	free    func()        // debug.FreeOSMemory; tests count calls
}

func newReclaimer() *reclaimer { return &reclaimer{free: debug.FreeOSMemory} }

// wrap counts every request h serves.
func (r *reclaimer) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.started.Add(1)
		h.ServeHTTP(w, req)
	})
}

// run reclaims after idle (> 0) without a request started, checking every idle/2, until ctx ends.
func (r *reclaimer) run(ctx context.Context, idle time.Duration) {
	t := time.NewTicker(idle / 2)
	defer t.Stop()
	seen := r.started.Load()
	quiet := 0 // ticks since the last request started
	freed := 2 // collections run since that request; 2 means nothing left to reclaim
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := r.started.Load(); n != seen {
			seen, quiet, freed = n, 0, 0
			continue
		}
		quiet++
		if quiet >= 2 && freed < 2 { // idle for at least `idle`
			r.free()
			freed++
		}
	}
}
