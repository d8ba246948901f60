package admin

import (
	"context"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

// grpcPrincipal names the caller of a gRPC call from its authorization metadata.
func (g *grpcServer) grpcPrincipal(ctx context.Context) string {
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			header = v[0]
		}
	}
	return g.s.principalName(ctx, header)
}

func (g *grpcServer) PlanPriceCatalog(ctx context.Context, req *adminv1.PlanPriceCatalogRequest) (*adminv1.PlanPriceCatalogResponse, error) {
	in := CatalogPlanRequest{Format: req.GetFormat(), Document: req.GetDocument(), Files: req.GetFiles(),
		ProviderMap: req.GetProviderMap(), OnlyMapped: req.GetOnlyMapped(), StartsWithAsContains: req.GetStartsWithAsContains()}
	if req.At != nil {
		at := req.GetAt().AsTime()
		in.At = &at
	}
	p, err := g.s.PlanCatalog(ctx, g.grpcPrincipal(ctx), in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.CatalogPlan{Id: p.ID, Format: p.Format, Digest: p.Digest, CreatedAt: timestamppb.New(p.CreatedAt),
		CreatedBy: p.CreatedBy, Entries: int32(p.Entries)}
	for _, a := range p.Added {
		out.Added = append(out.Added, &adminv1.CatalogPlanRule{EntryId: a.EntryID, Rule: priceRuleToProto(store.PriceRule{RuleInput: a.Rule}), Notes: a.Notes})
	}
	for _, c := range p.Changed {
		pc := &adminv1.CatalogPlanChange{EntryId: c.EntryID, PriceRuleId: c.PriceRuleID, OperatorEdited: c.OperatorEdited,
			Rule: priceRuleToProto(store.PriceRule{RuleInput: c.Rule}), Notes: c.Notes}
		for _, f := range c.Fields {
			pc.Fields = append(pc.Fields, &adminv1.CatalogFieldChange{Field: f.Field, Old: f.Old, New: f.New})
		}
		out.Changed = append(out.Changed, pc)
	}
	for _, u := range p.Unchanged {
		out.Unchanged = append(out.Unchanged, &adminv1.CatalogPlanUnchanged{EntryId: u.EntryID, PriceRuleId: u.PriceRuleID, ProvenanceOnly: u.ProvenanceOnly})
	}
	for _, s := range p.Skipped {
		out.Skipped = append(out.Skipped, &adminv1.CatalogSkipped{EntryId: s.EntryID, Reason: s.Reason})
	}
	if len(p.ChannelTypeScopes) > 0 {
		out.ChannelTypeScopes = make(map[string]*adminv1.CatalogProviderScope, len(p.ChannelTypeScopes))
		for name, ids := range p.ChannelTypeScopes {
			out.ChannelTypeScopes[name] = &adminv1.CatalogProviderScope{ProviderIds: ids}
		}
	}
	return &adminv1.PlanPriceCatalogResponse{Plan: out}, nil
}

func (g *grpcServer) ApplyPriceCatalog(ctx context.Context, req *adminv1.ApplyPriceCatalogRequest) (*adminv1.ApplyPriceCatalogResponse, error) {
	in := CatalogApplyRequest{PlanID: req.GetPlanId(), Exclude: req.GetExclude(), ConfirmOperatorEdited: req.GetConfirmOperatorEdited()}
	if req.EffectiveAt != nil {
		t := req.GetEffectiveAt().AsTime()
		in.EffectiveAt = &t
	}
	res, err := g.s.ApplyCatalog(ctx, g.grpcPrincipal(ctx), in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.ApplyPriceCatalogResponse{PlanId: res.PlanID, Added: int32(res.Added), Changed: int32(res.Changed),
		Excluded: int32(res.Excluded), AppliedAt: timestamppb.New(res.AppliedAt), Scheduled: int32(res.Scheduled)}, nil
}

func (g *grpcServer) GetPriceRuleProvenance(ctx context.Context, req *adminv1.GetPriceRuleProvenanceRequest) (*adminv1.GetPriceRuleProvenanceResponse, error) {
	p, err := g.s.GetProvenance(ctx, req.GetPriceRuleId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetPriceRuleProvenanceResponse{Provenance: &adminv1.PriceRuleProvenance{PriceRuleId: p.PriceRuleID,
		Catalog: p.Catalog, FileDigest: p.FileDigest, EntryId: p.EntryID, ImportedAt: timestamppb.New(p.ImportedAt),
		ImportedBy: p.ImportedBy, PlanId: p.PlanID}}, nil
}

func (g *grpcServer) GetPriceRuleHistory(ctx context.Context, req *adminv1.GetPriceRuleHistoryRequest) (*adminv1.GetPriceRuleHistoryResponse, error) {
	vs, err := g.s.PriceRuleHistory(ctx, req.GetPriceRuleId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.GetPriceRuleHistoryResponse{}
	for _, v := range vs {
		in, err := v.Input()
		if err != nil {
			return nil, g.err(ctx, err)
		}
		pv := &adminv1.PriceRuleVersion{Version: v.Version, ValidFrom: timestamppb.New(v.ValidFrom), ChangedBy: v.ChangedBy,
			Rule: priceRuleToProto(store.PriceRule{RuleInput: in})}
		if v.ValidTo != nil {
			pv.ValidTo = timestamppb.New(*v.ValidTo)
		}
		out.Items = append(out.Items, pv)
	}
	return out, nil
}

func (g *grpcServer) RepricePriceRules(ctx context.Context, req *adminv1.RepricePriceRulesRequest) (*adminv1.RepricePriceRulesResponse, error) {
	var in RepriceRequest
	var details []Detail
	for _, f := range []struct {
		name string
		ts   *timestamppb.Timestamp
		dst  **time.Time
	}{{"from", req.GetFrom(), &in.From}, {"to", req.GetTo(), &in.To}, {"at", req.GetAt(), &in.At}} {
		if f.ts == nil {
			continue
		}
		if err := f.ts.CheckValid(); err != nil {
			details = append(details, field(f.name, "%v", err))
			continue
		}
		t := f.ts.AsTime()
		*f.dst = &t
	}
	if details != nil {
		return nil, g.err(ctx, invalidFields("invalid re-pricing request", details...))
	}
	for _, r := range req.GetRules() {
		in.Rules = append(in.Rules, priceRuleInputFromProto(r))
	}
	rep, err := g.s.Reprice(ctx, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.RepricePriceRulesResponse{From: timestamppb.New(rep.From), To: timestamppb.New(rep.To), Basis: rep.Basis,
		Usages: rep.Usages, Charged: rep.Charged, Repriced: rep.Repriced, Difference: rep.Difference}
	for _, l := range rep.ByModel {
		out.ByModel = append(out.ByModel, &adminv1.RepriceLine{ProviderId: l.ProviderID, Model: l.Model, Usages: l.Usages,
			Charged: l.Charged, Repriced: l.Repriced, Difference: l.Difference})
	}
	return out, nil
}
