// Package snapshot compiles a Snapshot message into the immutable, indexed form the data plane serves
// from: the price-rule index (memoised resolution per provider and model), each provider's routing table
// from its enabled rows ordered by sort_order, routes and aliases, and API keys by hash. Both planes run
// Compile: the control plane refuses to publish a snapshot that does not compile, and a data plane keeps
// its last good snapshot when a new one fails.
package snapshot

import (
	"errors"
	"time"

	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// Compiled is a validated, indexed snapshot. It is never mutated after Compile returns; the data plane
// holds the current one behind an atomic.Pointer and swaps it whole.
type Compiled struct {
	Version int64
	BuiltAt time.Time
}

// Compile validates and indexes s.
func Compile(s *snapshotv1.Snapshot) (*Compiled, error) {
	if s == nil {
		return nil, errors.New("compile snapshot: nil")
	}
	if s.GetVersion() <= 0 {
		return nil, errors.New("compile snapshot: version must be positive")
	}
	return &Compiled{Version: s.GetVersion(), BuiltAt: s.GetBuiltAt().AsTime()}, nil
}
