package admin

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/dptoken"
	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

// CreateDataPlaneToken stores a new data-plane token with scopes (dptoken.Scopes) and returns it with the
// token shown this once.
func (s *Service) CreateDataPlaneToken(ctx context.Context, name string, scopes []string) (store.DataPlaneToken, string, error) {
	var details []Detail
	if name == "" || len(name) > 200 {
		details = append(details, field("name", "required, at most 200 bytes"))
	}
	scopes, err := dptoken.CheckScopes(scopes)
	if err != nil {
		details = append(details, field("scopes", "%v", err))
	}
	if len(details) > 0 {
		return store.DataPlaneToken{}, "", invalidFields("invalid data-plane token", details...)
	}
	tok, hash, err := dptoken.NewToken()
	if err != nil {
		return store.DataPlaneToken{}, "", err
	}
	t, err := store.InsertDataPlaneToken(ctx, s.pool, name, scopes, hash)
	if err != nil {
		return store.DataPlaneToken{}, "", storeError(err, "data-plane token")
	}
	return t, tok, nil
}

// ListDataPlaneTokens lists data-plane tokens (metadata only), revoked ones included.
func (s *Service) ListDataPlaneTokens(ctx context.Context) ([]store.DataPlaneToken, error) {
	ts, err := store.ListDataPlaneTokens(ctx, s.pool)
	return ts, storeError(err, "data-plane tokens")
}

// RevokeDataPlaneToken revokes a data-plane token: its next call is refused on every control plane and
// its open Watch streams close (dptoken.Checker.Revocations). Revoking twice keeps the first time.
func (s *Service) RevokeDataPlaneToken(ctx context.Context, id int64) (store.DataPlaneToken, error) {
	if err := checkID(id, "id"); err != nil {
		return store.DataPlaneToken{}, err
	}
	t, err := store.RevokeDataPlaneToken(ctx, s.pool, id)
	return t, storeError(err, fmt.Sprintf("data-plane token %d", id))
}

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
