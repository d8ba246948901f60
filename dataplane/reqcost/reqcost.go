// Package reqcost is the source of the data plane's cost lookup (GET /v1/requests/{request_id}/cost,
// docs/cost.md "Cost by request id"): the settled row from the control plane (SettlementService.
// GetRequestCost, with the data-plane token), else the request's cost-lookup marker in Redis, which
// admission writes (admission.Keys.RequestCost: the id of the key that made the request, for 24 hours) and
// which says the request is known to that key but not settled yet.
package reqcost

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// Options configure a Source.
type Options struct {
	// ControlPlane is the client the settled rows are asked from.
	ControlPlane *cpclient.Client
	// Redis holds the markers; Prefix and Shards are admission's key layout (the marker lives in the shard of
	// the key's organisation, like every key of the request).
	Redis  redis.Cmdable
	Prefix string
	Shards int
	// Timeout bounds each call (control plane and Redis; default 2 s).
	Timeout time.Duration
}

// Source answers cost lookups. It is safe for concurrent use.
type Source struct {
	o      Options
	shards admission.Shards
}

// New returns a Source.
func New(o Options) *Source {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	return &Source{o: o, shards: admission.NewShards(o.Shards)}
}

// markerTTL is the lifetime of a marker written outside the admission script (admit.lua writes the same).
const markerTTL = 24 * time.Hour

// Settled answers the settled row of requestID made with keyID; found is false when the control plane has
// none (NOT_FOUND: unknown, another key's, or not settled yet). An error means the control plane could not
// answer (every endpoint tried once).
func (s *Source) Settled(ctx context.Context, keyID int64, requestID string) (*settlementv1.RequestCost, bool, error) {
	if s.o.ControlPlane == nil {
		return nil, false, errors.New("no control plane configured")
	}
	req := &settlementv1.GetRequestCostRequest{ApiKeyId: keyID, RequestId: requestID}
	var err error
	for range 2 { // the endpoint in turn, then the next one
		cc, endpoint := s.o.ControlPlane.Current()
		callCtx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		var resp *settlementv1.GetRequestCostResponse
		resp, err = settlementv1.NewSettlementServiceClient(cc).GetRequestCost(callCtx, req)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return resp.GetCost(), resp.GetCost() != nil, nil
		case codes.NotFound:
			return nil, false, nil
		}
		err = fmt.Errorf("control plane %s: GetRequestCost: %w", endpoint, err)
		if ctx.Err() != nil {
			return nil, false, err
		}
		s.o.ControlPlane.Rotate()
	}
	return nil, false, err
}

// Made reports whether keyID made requestID: its marker, in the shard of the key's organisation, names
// the key. A marker naming another key, or none, is false alike.
func (s *Source) Made(ctx context.Context, orgID, keyID int64, requestID string) (bool, error) {
	if !admission.ValidRequestID(requestID) {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	v, err := s.o.Redis.Get(ctx, s.key(orgID, requestID)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read cost-lookup marker: %w", err)
	}
	return v == strconv.FormatInt(keyID, 10), nil
}

// Mark writes the marker of a request admitted without the admission script (a key with no limit and
// no quota: admission makes no Redis round trip for it).
func (s *Source) Mark(ctx context.Context, orgID, keyID int64, requestID string) error {
	if !admission.ValidRequestID(requestID) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	if err := s.o.Redis.Set(ctx, s.key(orgID, requestID), keyID, markerTTL).Err(); err != nil {
		return fmt.Errorf("write cost-lookup marker: %w", err)
	}
	return nil
}

func (s *Source) key(orgID int64, requestID string) string {
	return admission.Keys{Prefix: s.o.Prefix, Tag: s.shards.Tag(orgID)}.RequestCost(requestID)
}
