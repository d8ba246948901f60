package admin

import (
	"context"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func (g *grpcServer) GetGatewaySettings(ctx context.Context, _ *adminv1.GetGatewaySettingsRequest) (*adminv1.GetGatewaySettingsResponse, error) {
	gs, err := g.s.GetGatewaySettings(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetGatewaySettingsResponse{Settings: &configv1.GatewaySettings{CostDisclosure: gs.CostDisclosure}}, nil
}

// SetGatewaySettings changes the fields present in the request.
func (g *grpcServer) SetGatewaySettings(ctx context.Context, req *adminv1.SetGatewaySettingsRequest) (*adminv1.SetGatewaySettingsResponse, error) {
	gs, err := g.s.SetGatewaySettings(ctx, GatewaySettingsInput{CostDisclosure: req.CostDisclosure})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.SetGatewaySettingsResponse{Settings: &configv1.GatewaySettings{CostDisclosure: gs.CostDisclosure}}, nil
}
