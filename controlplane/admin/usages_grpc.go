package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

func (g *grpcServer) ListUsages(ctx context.Context, req *adminv1.ListUsagesRequest) (*adminv1.ListUsagesResponse, error) {
	p, err := g.s.ListUsages(ctx, UsageQuery{Since: timeOf(req.Since), Until: timeOf(req.Until), APIKeyID: req.ApiKeyId,
		UserID: req.UserId, TeamID: req.TeamId, OrgID: req.OrgId, RouteID: req.RouteId, ProviderID: req.ProviderId, BatchID: req.BatchId,
		EndState: req.GetEndState(), LogicalModel: req.GetLogicalModel(), UpstreamModel: req.GetUpstreamModel(),
		Operation: req.GetOperation(), RequestID: req.GetRequestId(), Kind: req.GetKind(), Limit: int(req.GetLimit()), Cursor: req.GetCursor()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListUsagesResponse{NextCursor: p.NextCursor}
	for _, u := range p.Items {
		out.Items = append(out.Items, usageToProto(u))
	}
	return out, nil
}

func usageToProto(u store.StoredUsage) *adminv1.Usage {
	return &adminv1.Usage{Id: u.ID, Record: &settlementv1.SettlementRecord{
		RequestId: u.RequestID, ApiKeyId: deref(u.APIKeyID), UserId: deref(u.UserID), TeamId: u.TeamID,
		OrgId: deref(u.OrgID), RouteId: deref(u.RouteID), ProviderId: deref(u.ProviderID),
		CredentialId: deref(u.CredentialID), LogicalModel: u.LogicalModel, UpstreamModel: u.UpstreamModel,
		Operation: u.Operation, InboundKind: u.InboundKind, Implementation: u.Implementation, DestKind: u.DestKind,
		Tokens: &settlementv1.TokenCounts{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens,
			CacheCreation_5M: u.CacheCreation5mTokens, CacheCreation_30M: u.CacheCreation30mTokens,
			CacheCreation_1H: u.CacheCreation1hTokens, ImageOutput: u.ImageOutputTokens},
		RequestedTier: u.RequestedTier, ReportedTier: u.ReportedTier, PriceRuleId: deref(u.PriceRuleID), PriceRuleVersion: deref(u.PriceRuleVersion),
		SnapshotVersion: u.SnapshotVersion, Cost: u.Cost, Source: u.Source, EndState: u.EndState,
		HttpStatus: u.HTTPStatus, LatencyMs: u.LatencyMS, FirstByteMs: u.FirstByteMS,
		CreatedAt: timestamppb.New(u.CreatedAt), BillingFlag: u.BillingFlag, FlagDetail: u.FlagDetail,
		AdmittedAt: optTimestamp(u.AdmittedAt)}, Kind: u.Kind, AdjustmentId: deref(u.AdjustmentID), Reason: derefString(u.Reason),
		BatchId: deref(u.BatchID), CustomId: derefString(u.CustomID)}
}
