package admin

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func reconcileProviderToProto(p store.ReconcileProvider) *adminv1.ReconciliationProvider {
	return &adminv1.ReconciliationProvider{ProviderId: p.ProviderID, Kind: p.Kind, BaseUrl: p.BaseURL, HasAdminKey: p.HasAdminKey,
		Enabled: p.Enabled, BucketBy: p.BucketBy, LateHours: p.LateHours, TokensAbs: p.TokensAbs, TokensRel: p.TokensRel,
		CostAbs: p.CostAbs, CostRel: p.CostRel, UpdatedAt: timestamppb.New(p.UpdatedAt)}
}

func reconcileTokensToProto(t store.ReportTokens) *adminv1.ReconciliationTokens {
	return &adminv1.ReconciliationTokens{Input: t.Input, Output: t.Output, CacheRead: t.CacheRead, CacheCreation_5M: t.Cache5m,
		CacheCreation_30M: t.Cache30m, CacheCreation_1H: t.Cache1h, ImageOutput: t.ImageOut}
}

func reconcileRunToProto(r store.ReconcileRun) (*adminv1.ReconciliationRun, error) {
	out := &adminv1.ReconciliationRun{Id: r.ID, ProviderId: r.ProviderID, Day: r.Day.Format(time.DateOnly), Trigger: r.Trigger,
		Status: r.Status, Error: r.Error, Provisional: r.Provisional, ImportCount: r.ImportCount, LedgerTokens: r.LedgerTokens,
		ProviderTokens: r.ProviderTokens, LedgerCost: r.LedgerCost, ProviderCost: r.ProviderCost, SourceUpstream: r.SourceUpstream,
		SourceLocal: r.SourceLocal, SourceEstimated: r.SourceEstimated, StartedAt: timestamppb.New(r.StartedAt),
		FinishedAt: timestamppb.New(r.FinishedAt)}
	for _, l := range r.Lines {
		pl := &adminv1.ReconciliationLine{Id: l.ID, Kind: l.Kind, KeyRef: l.KeyRef, ProjectRef: l.ProjectRef, Model: l.Model,
			Tier: l.Tier, Ledger: reconcileTokensToProto(l.Ledger), LedgerRequests: l.LedgerRequests, ProviderRequests: l.ProviderRequests,
			LedgerCost: l.LedgerCost, ProviderCost: l.ProviderCost, SourceUpstream: l.SourceUpstream, SourceLocal: l.SourceLocal,
			SourceEstimated: l.SourceEstimated, Cause: l.Cause, Detail: l.Detail}
		if l.Provider != nil {
			pl.Provider = reconcileTokensToProto(*l.Provider)
		}
		var uses []struct {
			ID      *int64 `json:"price_rule_id"`
			Version *int32 `json:"version"`
			Rows    int64  `json:"rows"`
		}
		if len(l.PriceRules) > 0 {
			if err := json.Unmarshal(l.PriceRules, &uses); err != nil {
				return nil, err
			}
		}
		for _, u := range uses {
			pl.PriceRules = append(pl.PriceRules, &adminv1.ReconciliationPriceRuleUse{PriceRuleId: u.ID, Version: u.Version, Rows: u.Rows})
		}
		out.Lines = append(out.Lines, pl)
	}
	return out, nil
}

func (g *grpcServer) ListReconciliationProviders(ctx context.Context, _ *adminv1.ListReconciliationProvidersRequest) (*adminv1.ListReconciliationProvidersResponse, error) {
	ps, err := g.s.ListReconcileProviders(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListReconciliationProvidersResponse{}
	for _, p := range ps {
		out.Items = append(out.Items, reconcileProviderToProto(p))
	}
	return out, nil
}

func (g *grpcServer) SetReconciliationProvider(ctx context.Context, req *adminv1.SetReconciliationProviderRequest) (*adminv1.SetReconciliationProviderResponse, error) {
	p, err := g.s.PutReconcileProvider(ctx, req.GetProviderId(), ReconcileProviderInput{Kind: req.GetKind(), BaseURL: req.GetBaseUrl(),
		AdminKey: req.AdminKey, Enabled: req.Enabled, BucketBy: req.GetBucketBy(), LateHours: req.LateHours, TokensAbs: req.TokensAbs,
		TokensRel: req.TokensRel, CostAbs: req.CostAbs, CostRel: req.CostRel})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.SetReconciliationProviderResponse{Provider: reconcileProviderToProto(p)}, nil
}

func (g *grpcServer) SetReconciliationCredentialRef(ctx context.Context, req *adminv1.SetReconciliationCredentialRefRequest) (*adminv1.SetReconciliationCredentialRefResponse, error) {
	if err := g.s.SetCredentialRef(ctx, req.GetCredentialId(), req.GetKeyRef(), req.GetProjectRef()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.SetReconciliationCredentialRefResponse{}, nil
}

func (g *grpcServer) RunReconciliation(ctx context.Context, req *adminv1.RunReconciliationRequest) (*adminv1.RunReconciliationResponse, error) {
	r, err := g.s.RunReconciliation(ctx, req.GetProviderId(), req.GetDay(), req.Reimport == nil || req.GetReimport())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	pr, err := reconcileRunToProto(r)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.RunReconciliationResponse{Run: pr}, nil
}

func (g *grpcServer) ListReconciliationRuns(ctx context.Context, req *adminv1.ListReconciliationRunsRequest) (*adminv1.ListReconciliationRunsResponse, error) {
	p, err := g.s.ListReconcileRuns(ctx, ReconcileRunQuery{ProviderID: req.ProviderId, From: req.GetFromDay(), To: req.GetToDay(),
		Status: req.GetStatus(), Limit: int(req.GetLimit()), Cursor: req.GetCursor()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListReconciliationRunsResponse{NextCursor: p.NextCursor}
	for _, r := range p.Items {
		pr, err := reconcileRunToProto(r)
		if err != nil {
			return nil, g.err(ctx, err)
		}
		out.Items = append(out.Items, pr)
	}
	return out, nil
}

func (g *grpcServer) GetReconciliationRun(ctx context.Context, req *adminv1.GetReconciliationRunRequest) (*adminv1.GetReconciliationRunResponse, error) {
	r, err := g.s.GetReconcileRun(ctx, req.GetId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	pr, err := reconcileRunToProto(r)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetReconciliationRunResponse{Run: pr}, nil
}

func (g *grpcServer) GetReconciliationDrift(ctx context.Context, req *adminv1.GetReconciliationDriftRequest) (*adminv1.GetReconciliationDriftResponse, error) {
	pts, err := g.s.GetDrift(ctx, req.GetFromDay(), req.GetToDay(), req.ProviderId)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.GetReconciliationDriftResponse{}
	for _, p := range pts {
		out.Items = append(out.Items, &adminv1.ReconciliationDriftPoint{ProviderId: p.ProviderID, Day: p.Day, Model: p.Model, RunId: p.RunID,
			Provisional: p.Provisional, LedgerTokens: p.LedgerTokens, ProviderTokens: p.ProviderTokens, TokensDrift: p.TokensDrift,
			LedgerCost: p.LedgerCost, ProviderCost: p.ProviderCost, CostDrift: p.CostDrift, Causes: p.Causes})
	}
	return out, nil
}
