package admin

import (
	"context"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func (g *grpcServer) GetQuota(ctx context.Context, req *adminv1.GetQuotaRequest) (*adminv1.GetQuotaResponse, error) {
	q, err := g.s.GetQuota(ctx, req.GetScope(), req.GetScopeId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetQuotaResponse{Quota: quotaToProto(q)}, nil
}

func (g *grpcServer) SetQuota(ctx context.Context, req *adminv1.SetQuotaRequest) (*adminv1.SetQuotaResponse, error) {
	q, err := g.s.SetQuota(ctx, req.GetScope(), req.GetScopeId(), QuotaInput{CostLimit: req.CostLimit, Period: req.Period,
		TimeZone: req.TimeZone, RPMLimit: req.RpmLimit, TPMLimit: req.TpmLimit})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.SetQuotaResponse{Quota: quotaToProto(q)}, nil
}

func (g *grpcServer) AdjustQuota(ctx context.Context, req *adminv1.AdjustQuotaRequest) (*adminv1.AdjustQuotaResponse, error) {
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			header = v[0]
		}
	}
	who, err := g.s.Authenticate(ctx, header)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out, err := g.s.AdjustQuota(ctx, who, req.GetScope(), req.GetScopeId(), AdjustmentInput{Amount: req.GetAmount(), Reason: req.GetReason(),
		PeriodAt: timeOf(req.GetPeriodAt())})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.AdjustQuotaResponse{Adjustment: adjustmentToProto(out.Adjustment), Quota: quotaToProto(out.Quota)}, nil
}

func (g *grpcServer) ListQuotaAdjustments(ctx context.Context, req *adminv1.ListQuotaAdjustmentsRequest) (*adminv1.ListQuotaAdjustmentsResponse, error) {
	p, err := g.s.ListQuotaAdjustments(ctx, req.GetScope(), req.GetScopeId(), int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListQuotaAdjustmentsResponse{NextCursor: p.NextCursor}
	for _, a := range p.Items {
		out.Items = append(out.Items, adjustmentToProto(a))
	}
	return out, nil
}

func (g *grpcServer) ListQuotaPeriods(ctx context.Context, req *adminv1.ListQuotaPeriodsRequest) (*adminv1.ListQuotaPeriodsResponse, error) {
	p, err := g.s.ListQuotaPeriods(ctx, req.GetScope(), req.GetScopeId(), int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListQuotaPeriodsResponse{NextCursor: p.NextCursor}
	for _, qp := range p.Items {
		out.Items = append(out.Items, &adminv1.QuotaPeriod{PeriodId: qp.PeriodID, Period: qp.Period, TimeZone: qp.TimeZone,
			Start: timestamppb.New(qp.Start), End: timestamppb.New(qp.End), CostLimit: qp.CostLimit, CostUsed: qp.CostUsed,
			Requests: qp.Requests, Adjustments: qp.Adjustments, Closed: qp.Closed})
	}
	return out, nil
}

func quotaToProto(q store.Quota) *configv1.Quota {
	out := &configv1.Quota{Scope: q.Scope, ScopeId: q.ScopeID, CostLimit: q.CostLimit, CostUsed: q.CostUsed, AdjustEpoch: q.AdjustEpoch,
		Period: q.Period, TimeZone: q.TimeZone, PeriodId: q.PeriodID, RpmLimit: q.RPMLimit, TpmLimit: q.TPMLimit}
	if q.PeriodStart != nil && q.PeriodEnd != nil {
		out.PeriodStart, out.PeriodEnd = timestamppb.New(*q.PeriodStart), timestamppb.New(*q.PeriodEnd)
	}
	return out
}

func adjustmentToProto(a store.QuotaAdjustment) *adminv1.QuotaAdjustment {
	return &adminv1.QuotaAdjustment{Id: a.ID, Scope: a.Scope, ScopeId: a.ScopeID, Amount: a.Amount,
		CostUsedBefore: a.CostUsedBefore, CostUsedAfter: a.CostUsedAfter, Reason: a.Reason, ActorName: a.ActorName,
		ActorRole: a.ActorRole, CreatedAt: timestamppb.New(a.CreatedAt), PeriodStart: optTimestamp(a.PeriodStart)}
}
