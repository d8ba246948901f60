package process

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ErrDraining is the readiness reason while a process drains before it stops.
var ErrDraining = errors.New("draining: shutting down")

// Drain is the window between "send me no more traffic" and "stop listening": when shutdown begins,
// /readyz answers 503 at once while every listener stays open for Delay, so a load balancer's health
// check (HAProxy, a Kubernetes readiness probe) takes the process out of rotation before connections are
// refused. Requests that still arrive during the window are served normally and answered with
// "Connection: close", so clients holding a persistent connection move to a fresh one (which the balancer
// sends elsewhere). Idle connections are left alone until the listeners close: closing them at once would
// race a balancer that still reuses them (it sees an empty answer; HAProxy then drops its client's
// connection). Only then does the grace period (the shutdown timeout) start, in which in-flight requests
// and streams finish.
//
// The wait is skipped when /readyz has not been asked since the process started: nothing is
// health-checking it (a single instance, `make run`, a test), so waiting would tell no one.
type Drain struct {
	delay    time.Duration
	draining atomic.Bool
	probed   atomic.Bool

	stopOnce sync.Once
	stopped  chan struct{}
}

// NewDrain returns a drain of delay (0: none).
func NewDrain(delay time.Duration) *Drain {
	return &Drain{delay: delay, stopped: make(chan struct{})}
}

// Ready wraps a readiness check: while draining it reports ErrDraining without asking next.
func (d *Drain) Ready(next ReadyFunc) ReadyFunc {
	return func(ctx context.Context) (map[string]any, error) {
		d.probed.Store(true)
		if d.draining.Load() {
			return nil, ErrDraining
		}
		return next(ctx)
	}
}

// Draining reports whether the drain has begun.
func (d *Drain) Draining() bool { return d.draining.Load() }

// Server is the drain as one of Run's servers: Run begins it (readiness drops, the delay passes) before
// it stops any server and before the grace period starts. It wraps the handler of each of servers so that
// answers given while draining close their connection.
func (d *Drain) Server(servers ...*http.Server) Server {
	for _, s := range servers {
		next := s.Handler
		if next == nil {
			next = http.DefaultServeMux
		}
		s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if d.draining.Load() {
				w.Header().Set("Connection", "close")
			}
			next.ServeHTTP(w, r)
		})
	}
	return Server{
		Name:  "drain",
		Serve: func() error { <-d.stopped; return nil },
		Drain: d.begin,
		Stop:  func(context.Context) error { d.stopOnce.Do(func() { close(d.stopped) }); return nil },
	}
}

// begin drops readiness and waits out the delay (skipped when nothing ever probed readiness).
func (d *Drain) begin(ctx context.Context) {
	d.draining.Store(true)
	if d.delay <= 0 || !d.probed.Load() {
		return
	}
	t := time.NewTimer(d.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
