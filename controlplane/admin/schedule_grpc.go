package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

// schedule is the gRPC side of SchedulePriceRule (CreatePriceRule / UpdatePriceRule with effective_at).
func (g *grpcServer) schedule(ctx context.Context, in PriceRuleInput, at *timestamppb.Timestamp) (*configv1.ScheduledPriceRule, error) {
	if err := at.CheckValid(); err != nil {
		return nil, g.err(ctx, invalidFields("invalid scheduled price rule", field("effective_at", "%v", err)))
	}
	t := at.AsTime()
	in.EffectiveAt = &t
	sp, err := g.s.SchedulePriceRule(ctx, in.ID, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out, err := sp.Message()
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return out, nil
}

func (g *grpcServer) ListScheduledPriceRules(ctx context.Context, req *adminv1.ListScheduledPriceRulesRequest) (*adminv1.ListScheduledPriceRulesResponse, error) {
	items, err := g.s.ListScheduledPriceRules(ctx, req.GetPriceRuleId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListScheduledPriceRulesResponse{}
	for _, sp := range items {
		m, err := sp.Message()
		if err != nil {
			return nil, g.err(ctx, err)
		}
		out.Items = append(out.Items, m)
	}
	return out, nil
}

func (g *grpcServer) CancelScheduledPriceRule(ctx context.Context, req *adminv1.CancelScheduledPriceRuleRequest) (*adminv1.CancelScheduledPriceRuleResponse, error) {
	if err := g.s.CancelScheduledPriceRule(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CancelScheduledPriceRuleResponse{}, nil
}

// scheduledInputFromProto reads an ImportRequest's scheduled version as an import element with
// effective_at (unset reads as 1970, which the import's validation refuses as not in the future).
func scheduledInputFromProto(sp *configv1.ScheduledPriceRule) PriceRuleInput {
	in := priceRuleInputFromProto(sp.GetRule())
	t := sp.GetEffectiveAt().AsTime()
	in.EffectiveAt = &t
	return in
}
