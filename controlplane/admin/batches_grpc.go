package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

func (g *grpcServer) ListBatches(ctx context.Context, req *adminv1.ListBatchesRequest) (*adminv1.ListBatchesResponse, error) {
	p, err := g.s.ListBatches(ctx, BatchQuery{OpenOnly: req.GetOpenOnly(), OrgID: req.OrgId, APIKeyID: req.ApiKeyId,
		Limit: int(req.GetLimit()), Cursor: req.GetCursor()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListBatchesResponse{NextCursor: p.NextCursor}
	for _, b := range p.Items {
		out.Items = append(out.Items, &adminv1.Batch{
			Hold: &settlementv1.BatchHold{BatchId: b.ID, ProviderId: b.ProviderID, ProviderBatchId: b.ProviderBatchID,
				ApiKeyId: b.APIKeyID, UserId: deref(b.UserID), TeamId: b.TeamID, OrgId: deref(b.OrgID),
				ReservedMicros: b.ReservedMicros, HeldMicros: b.HeldMicros, HoldExpiresAt: timestamppb.New(b.HoldExpiresAt),
				Status: b.Status, Outcome: b.Outcome, Settled: b.SettledAt != nil, SettledCost: b.SettledCost,
				LineCount: b.LineCount, LinesSucceeded: b.LinesSucceeded, LinesErrored: b.LinesErrored,
				LinesExpired: b.LinesExpired, LinesCancelled: b.LinesCancelled},
			CredentialId: b.CredentialID, Dialect: b.Dialect, Endpoint: b.Endpoint, LogicalModel: b.LogicalModel,
			UpstreamModel: b.UpstreamModel, ProviderStatus: b.ProviderStatus, CreatedAt: timestamppb.New(b.CreatedAt),
			ExpiresAt: timestamppb.New(b.ExpiresAt), EndedAt: optTimestamp(b.EndedAt), SettledAt: optTimestamp(b.SettledAt),
			LastError: b.LastError})
	}
	return out, nil
}
