package app

import (
	"context"
	"io"

	"github.com/tollgate/tollgate/controlplane/config"
	"github.com/tollgate/tollgate/shared/process"
)

// newFromEnv builds a Server the way Main does, logging to w.
func newFromEnv(ctx context.Context, getenv func(string) string, w io.Writer) (*Server, error) {
	cfg, err := config.Load(nil, getenv, io.Discard)
	if err != nil {
		return nil, err
	}
	log, err := process.NewLogger(w, "info")
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg, log)
}
