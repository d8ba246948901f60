package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func (g *grpcServer) CreateAdminToken(ctx context.Context, req *adminv1.CreateAdminTokenRequest) (*adminv1.CreateAdminTokenResponse, error) {
	t, tok, err := g.s.CreateAdminToken(ctx, req.GetName(), req.GetRole())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateAdminTokenResponse{AdminToken: adminTokenToProto(t), Token: tok}, nil
}

func (g *grpcServer) ListAdminTokens(ctx context.Context, _ *adminv1.ListAdminTokensRequest) (*adminv1.ListAdminTokensResponse, error) {
	ts, err := g.s.ListAdminTokens(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListAdminTokensResponse{}
	for _, t := range ts {
		out.Items = append(out.Items, adminTokenToProto(t))
	}
	return out, nil
}

func (g *grpcServer) DeleteAdminToken(ctx context.Context, req *adminv1.DeleteAdminTokenRequest) (*adminv1.DeleteAdminTokenResponse, error) {
	if err := g.s.DeleteAdminToken(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteAdminTokenResponse{}, nil
}

func adminTokenToProto(t store.AdminToken) *adminv1.AdminToken {
	return &adminv1.AdminToken{Id: t.ID, Name: t.Name, Role: t.Role, CreatedAt: timestamppb.New(t.CreatedAt)}
}
