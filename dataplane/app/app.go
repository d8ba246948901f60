// Package app wires a data plane together: configuration, Redis, the snapshot syncer, the client-facing
// HTTP API (every dialect), health and metrics, and graceful shutdown that finishes in-flight requests and
// flushes settlements. Main is the whole program, so tests drive it exactly as the binary does.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/shared/metrics"
	"github.com/tollgate/tollgate/shared/process"
)

const usage = `usage: dataplane serve [flags]

Run "dataplane serve -h" for the flags.
`

// Main runs the data plane with args (without the program name).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing command")
	}
	switch args[0] {
	case "serve":
		cfg, err := config.Load(args[1:], getenv, stderr)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		log, err := process.NewLogger(stderr, cfg.LogLevel)
		if err != nil {
			return err
		}
		srv, err := New(ctx, cfg, log)
		if err != nil {
			return err
		}
		return srv.Run(ctx)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// Server is a data plane with its listener bound, ready to Run.
type Server struct {
	Config  config.Config
	Log     *slog.Logger
	Redis   *redis.Client
	Metrics *metrics.Registry
	Mux     *http.ServeMux

	ln net.Listener
	// snapshotVersion reports the held snapshot's version; ok is false until the first one arrives.
	snapshotVersion func() (version int64, ok bool)
}

// New connects Redis, binds the listener and registers every handler. Nothing is served until Run.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("TOLLGATE_REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(opts)
	s := &Server{Config: cfg, Log: log, Redis: rdb, Metrics: metrics.NewRegistry(), Mux: http.NewServeMux(),
		snapshotVersion: func() (int64, bool) { return 0, false }}
	process.HealthHandlers(s.Mux, s.ready)
	s.Mux.Handle("GET /metrics", s.Metrics.Handler())
	if s.ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("listen %s (TOLLGATE_DP_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	return s, nil
}

func (s *Server) ready(ctx context.Context) (map[string]any, error) {
	v, ok := s.snapshotVersion()
	if !ok {
		return nil, errors.New("no snapshot received yet")
	}
	detail := map[string]any{"snapshot_version": fmt.Sprint(v)}
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		return detail, fmt.Errorf("redis: %w", err)
	}
	return detail, nil
}

// Addr is the bound client API address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends, then stops accepting, finishes in-flight requests and closes Redis.
func (s *Server) Run(ctx context.Context) error {
	httpSrv := &http.Server{Handler: s.Mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn)}
	s.Log.Info("data plane listening", "http", s.Addr(), "node", s.Config.NodeID)
	return process.Run(ctx, s.Log, s.Config.ShutdownTimeout,
		[]process.Server{process.HTTPServer("http", httpSrv, s.ln)},
		func(context.Context) error { return s.Redis.Close() })
}
