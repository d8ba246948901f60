package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func dataPlaneTokenToProto(t store.DataPlaneToken) *adminv1.DataPlaneToken {
	out := &adminv1.DataPlaneToken{Id: t.ID, Name: t.Name, Scopes: t.Scopes, CreatedAt: timestamppb.New(t.CreatedAt)}
	if t.RevokedAt != nil {
		out.RevokedAt = timestamppb.New(*t.RevokedAt)
	}
	return out
}

func (g *grpcServer) CreateDataPlaneToken(ctx context.Context, req *adminv1.CreateDataPlaneTokenRequest) (*adminv1.CreateDataPlaneTokenResponse, error) {
	t, tok, err := g.s.CreateDataPlaneToken(ctx, req.GetName(), req.GetScopes())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateDataPlaneTokenResponse{DataplaneToken: dataPlaneTokenToProto(t), Token: tok}, nil
}

func (g *grpcServer) ListDataPlaneTokens(ctx context.Context, _ *adminv1.ListDataPlaneTokensRequest) (*adminv1.ListDataPlaneTokensResponse, error) {
	ts, err := g.s.ListDataPlaneTokens(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListDataPlaneTokensResponse{}
	for _, t := range ts {
		out.Items = append(out.Items, dataPlaneTokenToProto(t))
	}
	return out, nil
}

func (g *grpcServer) RevokeDataPlaneToken(ctx context.Context, req *adminv1.RevokeDataPlaneTokenRequest) (*adminv1.RevokeDataPlaneTokenResponse, error) {
	t, err := g.s.RevokeDataPlaneToken(ctx, req.GetId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.RevokeDataPlaneTokenResponse{DataplaneToken: dataPlaneTokenToProto(t)}, nil
}
