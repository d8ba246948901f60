package admin

import (
	"context"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func (g *grpcServer) ListRoutes(ctx context.Context, req *adminv1.ListRoutesRequest) (*adminv1.ListRoutesResponse, error) {
	p, err := g.s.ListRoutes(ctx, int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListRoutesResponse{NextCursor: p.NextCursor}
	for _, r := range p.Items {
		out.Items = append(out.Items, routeToProto(r))
	}
	return out, nil
}

func (g *grpcServer) GetRoute(ctx context.Context, req *adminv1.GetRouteRequest) (*adminv1.GetRouteResponse, error) {
	r, err := g.s.GetRoute(ctx, req.GetId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetRouteResponse{Route: routeToProto(r)}, nil
}

func (g *grpcServer) CreateRoute(ctx context.Context, req *adminv1.CreateRouteRequest) (*adminv1.CreateRouteResponse, error) {
	r, err := g.s.CreateRoute(ctx, routeInputFromProto(req.GetRoute()))
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateRouteResponse{Route: routeToProto(r)}, nil
}

func (g *grpcServer) UpdateRoute(ctx context.Context, req *adminv1.UpdateRouteRequest) (*adminv1.UpdateRouteResponse, error) {
	in := routeInputFromProto(req.GetRoute())
	r, err := g.s.UpdateRoute(ctx, in.ID, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpdateRouteResponse{Route: routeToProto(r)}, nil
}

func (g *grpcServer) DeleteRoute(ctx context.Context, req *adminv1.DeleteRouteRequest) (*adminv1.DeleteRouteResponse, error) {
	if err := g.s.DeleteRoute(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteRouteResponse{}, nil
}

func routeToProto(r store.Route) *configv1.Route {
	out := &configv1.Route{Id: r.ID, Name: r.Name, Strategy: r.Strategy, Enabled: r.Enabled, Aliases: r.Aliases}
	for _, m := range r.Members {
		out.Members = append(out.Members, &configv1.RouteMember{ProviderId: m.ProviderID, UpstreamModelId: m.UpstreamModelID,
			Priority: m.Priority, Weight: m.Weight, Enabled: m.Enabled})
	}
	return out
}

func routeInputFromProto(r *configv1.Route) RouteInput {
	if r == nil {
		r = &configv1.Route{}
	}
	enabled := r.Enabled
	in := RouteInput{ID: r.Id, Name: r.Name, Strategy: r.Strategy, Enabled: &enabled, Aliases: r.Aliases}
	for _, m := range r.Members {
		w, e := m.Weight, m.Enabled
		in.Members = append(in.Members, RouteMemberInput{ProviderID: m.ProviderId, UpstreamModelID: m.UpstreamModelId,
			Priority: m.Priority, Weight: &w, Enabled: &e})
	}
	return in
}
