package admin

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
)

// BatchView is a provider batch as GET /admin/batches answers it (docs/batches.md): attribution, status,
// the reservation (micro-dollars reserved and still held), the exact settled cost and line counts.
type BatchView struct {
	ID              int64      `json:"id"`
	ProviderID      int64      `json:"provider_id"`
	CredentialID    int64      `json:"credential_id"`
	ProviderBatchID string     `json:"provider_batch_id"`
	Dialect         string     `json:"dialect"`
	Endpoint        string     `json:"endpoint"`
	APIKeyID        int64      `json:"api_key_id"`
	UserID          *int64     `json:"user_id"`
	TeamID          *int64     `json:"team_id"`
	OrgID           *int64     `json:"org_id"`
	LogicalModel    string     `json:"logical_model"`
	UpstreamModel   string     `json:"upstream_model"`
	Status          string     `json:"status"`
	Outcome         string     `json:"outcome"`
	ProviderStatus  string     `json:"provider_status"`
	CreatedAt       time.Time  `json:"created_at"`
	ExpiresAt       time.Time  `json:"expires_at"`
	HoldExpiresAt   time.Time  `json:"hold_expires_at"`
	EndedAt         *time.Time `json:"ended_at"`
	SettledAt       *time.Time `json:"settled_at"`
	ReservedMicros  int64      `json:"reserved_micros"`
	HeldMicros      int64      `json:"held_micros"`
	SettledCost     string     `json:"settled_cost"`
	LineCount       int64      `json:"line_count"`
	LinesSucceeded  int64      `json:"lines_succeeded"`
	LinesErrored    int64      `json:"lines_errored"`
	LinesExpired    int64      `json:"lines_expired"`
	LinesCancelled  int64      `json:"lines_cancelled"`
	LastError       string     `json:"last_error"`
}

// BatchQuery filters the batch listing.
type BatchQuery struct {
	OpenOnly        bool
	OrgID, APIKeyID *int64
	Limit           int
	Cursor          string
}

// ListBatches lists provider batches, newest first, a page at a time.
func (s *Service) ListBatches(ctx context.Context, q BatchQuery) (Page[BatchView], error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return Page[BatchView]{}, err
	}
	before, err := decodeCursor(q.Cursor)
	if err != nil {
		return Page[BatchView]{}, err
	}
	bs, err := store.ListBatches(ctx, s.pool, store.BatchFilter{OpenOnly: q.OpenOnly, OrgID: q.OrgID, APIKeyID: q.APIKeyID,
		BeforeID: before, Limit: limit})
	if err != nil {
		return Page[BatchView]{}, storeError(err, "batches")
	}
	views := make([]BatchView, len(bs))
	for i, b := range bs {
		views[i] = batchView(b)
	}
	return page(views, limit, func(b BatchView) int64 { return b.ID }), nil
}

func batchView(b store.Batch) BatchView {
	cost := b.SettledCost
	if d, err := pricing.ParseStoredDecimal(cost); err == nil {
		cost = pricing.FormatDecimal(d)
	}
	return BatchView{ID: b.ID, ProviderID: b.ProviderID, CredentialID: b.CredentialID, ProviderBatchID: b.ProviderBatchID,
		Dialect: b.Dialect, Endpoint: b.Endpoint, APIKeyID: b.APIKeyID, UserID: b.UserID, TeamID: b.TeamID, OrgID: b.OrgID,
		LogicalModel: b.LogicalModel, UpstreamModel: b.UpstreamModel, Status: b.Status, Outcome: b.Outcome,
		ProviderStatus: b.ProviderStatus, CreatedAt: b.CreatedAt, ExpiresAt: b.ExpiresAt, HoldExpiresAt: b.HoldExpiresAt,
		EndedAt: b.EndedAt, SettledAt: b.SettledAt, ReservedMicros: b.ReservedMicros, HeldMicros: b.HeldMicros,
		SettledCost: cost, LineCount: b.LineCount, LinesSucceeded: b.LinesSucceeded, LinesErrored: b.LinesErrored,
		LinesExpired: b.LinesExpired, LinesCancelled: b.LinesCancelled, LastError: b.LastError}
}
