// Package process owns what both binaries do the same way around their work: the JSON logger, the
// health endpoints, and running servers until the context ends, then shutting them down gracefully.
package process

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// NewLogger returns a JSON slog logger at the named level (debug, info, warn, error).
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// ParseLevel validates a log level name.
func ParseLevel(level string) error {
	var l slog.Level
	return l.UnmarshalText([]byte(strings.ToLower(level)))
}

// ReadyFunc reports readiness: nil when ready, else the reason. The detail map is added to the JSON body.
type ReadyFunc func(ctx context.Context) (detail map[string]any, err error)

// HealthHandlers registers /healthz (the process is alive) and /readyz (ready to take traffic).
func HealthHandlers(mux *http.ServeMux, ready ReadyFunc) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		detail, err := ready(r.Context())
		body := map[string]any{"status": "ready"}
		for k, v := range detail {
			body[k] = v
		}
		if err != nil {
			body["status"] = "not ready"
			body["reason"] = err.Error()
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
		writeJSON(w, http.StatusOK, body)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is something Run starts and later stops.
type Server struct {
	Name string
	// Serve blocks serving until Stop is called; it must return nil (or http.ErrServerClosed) after Stop.
	Serve func() error
	// Stop shuts down gracefully within ctx.
	Stop func(ctx context.Context) error
	// Drain, when set, runs before any server is stopped and before the grace period starts (see Drain).
	Drain func(ctx context.Context)
}

// HTTPServer adapts an http.Server listening on ln.
func HTTPServer(name string, srv *http.Server, ln net.Listener) Server {
	return Server{
		Name:  name,
		Serve: func() error { return srv.Serve(ln) },
		Stop:  srv.Shutdown,
	}
}

// Run serves every server until ctx is done or one fails, then drains (each server's Drain, e.g. the
// Drain's delay), then stops them all in order within grace, then runs the after hooks (e.g. flushing
// settlements, closing pools) in order. A failed server skips the drain: the process is already broken.
func Run(ctx context.Context, log *slog.Logger, grace time.Duration, servers []Server, after ...func(context.Context) error) error {
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			log.Info("serving", "server", s.Name)
			err := s.Serve()
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			if err != nil {
				err = fmt.Errorf("%s: %w", s.Name, err)
			}
			errc <- err
		}()
	}
	var first error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case first = <-errc:
		log.Error("server failed; shutting down", "err", first)
	}
	if first == nil {
		drainCtx, stopDrain := context.WithCancel(context.WithoutCancel(ctx))
		failed := make(chan error, 1)
		go func() { // a server failing during the drain ends it (ones ending cleanly with ctx do not)
			for {
				select {
				case err := <-errc:
					if err == nil {
						continue
					}
					stopDrain()
					failed <- err
				case <-drainCtx.Done():
					failed <- nil
				}
				return
			}
		}()
		for _, s := range servers {
			if s.Drain != nil {
				log.Info("draining", "server", s.Name)
				s.Drain(drainCtx)
			}
		}
		stopDrain()
		first = <-failed
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	for _, s := range servers {
		if err := s.Stop(stopCtx); err != nil {
			log.Warn("graceful stop incomplete", "server", s.Name, "err", err)
		}
	}
	for _, f := range after {
		if err := f(stopCtx); err != nil {
			log.Warn("shutdown hook failed", "err", err)
			if first == nil {
				first = err
			}
		}
	}
	log.Info("stopped")
	return first
}

// DurationFlag registers a duration flag whose default comes from def (typically an environment value).
// A malformed def stores -1 so the caller's Validate reports the setting by name rather than panicking.
func DurationFlag(fs *flag.FlagSet, d *time.Duration, name, def, usage string) {
	v := durationValue{d}
	if err := v.Set(def); err != nil {
		*d = -1
	}
	fs.Var(v, name, usage)
}

type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}
