package mockupstream

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultAddr is where the mockupstream binary listens unless -addr or MOCKUPSTREAM_ADDR say otherwise.
const DefaultAddr = "127.0.0.1:9999"

// Main runs the mock upstream as a program until ctx ends, then shuts down gracefully. args are the
// command-line arguments without the program name; getenv supplies environment fallbacks; logs go to
// stderr as JSON. ready, when non-nil, receives the bound address once the listener is up.
func Main(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer,
	ready func(addr string)) error {
	fs := flag.NewFlagSet("mockupstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defAddr := DefaultAddr
	if v := getenv("MOCKUPSTREAM_ADDR"); v != "" {
		defAddr = v
	}
	addr := fs.String("addr", defAddr, "listen address (env MOCKUPSTREAM_ADDR)")
	apiKey := fs.String("api-key", getenv("MOCKUPSTREAM_API_KEY"),
		"when set, the only API key accepted (env MOCKUPSTREAM_API_KEY)")
	debug := fs.Bool("debug", false, "log at debug level")
	applyClouds := cloudFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parse flags: %w", err)
	}
	var clouds CloudOptions
	if err := applyClouds(&clouds); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	srv := &http.Server{
		Handler:           New(Options{APIKey: *apiKey, Logger: log, Clouds: clouds}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	log.Info("mockupstream listening", "addr", ln.Addr().String(), "auth_required", *apiKey != "")
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("mockupstream shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
