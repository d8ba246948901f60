package admin

import (
	"context"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func (g *grpcServer) ListRoutingRules(ctx context.Context, req *adminv1.ListRoutingRulesRequest) (*adminv1.ListRoutingRulesResponse, error) {
	rs, err := g.s.ListRoutingRules(ctx, req.GetProviderId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.ListRoutingRulesResponse{Items: routingRulesToProto(rs)}, nil
}

func (g *grpcServer) UpsertRoutingRules(ctx context.Context, req *adminv1.UpsertRoutingRulesRequest) (*adminv1.UpsertRoutingRulesResponse, error) {
	in := make([]RoutingRuleInput, len(req.GetRules()))
	for i, r := range req.GetRules() {
		in[i] = routingRuleInputFromProto(r)
	}
	rs, err := g.s.UpsertRoutingRules(ctx, req.GetProviderId(), in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpsertRoutingRulesResponse{Items: routingRulesToProto(rs)}, nil
}

func (g *grpcServer) ResetRoutingRules(ctx context.Context, req *adminv1.ResetRoutingRulesRequest) (*adminv1.ResetRoutingRulesResponse, error) {
	rs, err := g.s.ResetRoutingRules(ctx, req.GetProviderId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.ResetRoutingRulesResponse{Items: routingRulesToProto(rs)}, nil
}

func (g *grpcServer) DeleteRoutingRule(ctx context.Context, req *adminv1.DeleteRoutingRuleRequest) (*adminv1.DeleteRoutingRuleResponse, error) {
	if err := g.s.DeleteRoutingRule(ctx, req.GetProviderId(), req.GetOperation(), req.GetKind()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteRoutingRuleResponse{}, nil
}

func routingRuleToProto(r store.RoutingRule) *configv1.RoutingRule {
	return &configv1.RoutingRule{Id: r.ID, ProviderId: r.ProviderID, Operation: r.Operation, Kind: r.Kind,
		Implementation: r.Implementation, DestOperation: r.DestOperation, DestKind: r.DestKind,
		SortOrder: r.SortOrder, Enabled: r.Enabled}
}

func routingRulesToProto(rs []store.RoutingRule) []*configv1.RoutingRule {
	out := make([]*configv1.RoutingRule, len(rs))
	for i, r := range rs {
		out[i] = routingRuleToProto(r)
	}
	return out
}

func routingRuleInputFromProto(r *configv1.RoutingRule) RoutingRuleInput {
	if r == nil {
		r = &configv1.RoutingRule{}
	}
	enabled := r.Enabled
	return RoutingRuleInput{ID: r.Id, ProviderID: r.ProviderId, Operation: r.Operation, Kind: r.Kind,
		Implementation: r.Implementation, DestOperation: r.DestOperation, DestKind: r.DestKind,
		SortOrder: r.SortOrder, Enabled: &enabled}
}
