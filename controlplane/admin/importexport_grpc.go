package admin

import (
	"context"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func (g *grpcServer) Export(ctx context.Context, _ *adminv1.ExportRequest) (*adminv1.ExportResponse, error) {
	b, err := g.s.Export(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ExportResponse{RoutingRules: routingRulesToProto(b.RoutingRules)}
	for _, r := range b.PriceRules {
		out.PriceRules = append(out.PriceRules, priceRuleToProto(r))
	}
	return out, nil
}

func (g *grpcServer) Import(ctx context.Context, req *adminv1.ImportRequest) (*adminv1.ImportResponse, error) {
	var in ImportBundle
	for _, r := range req.GetPriceRules() {
		in.PriceRules = append(in.PriceRules, priceRuleInputFromProto(r))
	}
	for _, r := range req.GetRoutingRules() {
		in.RoutingRules = append(in.RoutingRules, routingRuleInputFromProto(r))
	}
	for _, sp := range req.GetScheduledPriceRules() {
		in.PriceRules = append(in.PriceRules, scheduledInputFromProto(sp))
	}
	res, err := g.s.Import(ctx, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.ImportResponse{PriceRules: int32(res.PriceRules), RoutingRules: int32(res.RoutingRules),
		ScheduledPriceRules: int32(res.ScheduledPriceRules)}, nil
}
