package app

import (
	"bytes"
	"context"
	"io"
	"sync"

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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
