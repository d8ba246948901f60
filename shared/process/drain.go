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
// refused. Requests that still arrive during the window are served normally, with keep-alive off so
// clients move to fresh connections (which the balancer sends elsewhere). Only then does the grace period
// (the shutdown timeout) start, in which in-flight requests and streams finish.
//
// The wait is skipped when /readyz has not been asked since the process started: nothing is
// health-checking it (a single instance, `make run`, a test), so waiting would tell no one.
type Drain struct {
	delay    time.Duration
	draining atomic.Bool
	probed   atomic.Bool
	http     []*http.Server

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

// Server is the drain as one of Run's servers: Run begins it (readiness drops, keep-alive goes off on
// every one of servers, the delay passes) before it stops any server and before the grace period starts.
func (d *Drain) Server(servers ...*http.Server) Server {
	d.http = servers
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
	for _, s := range d.http {
		s.SetKeepAlivesEnabled(false)
	}
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
