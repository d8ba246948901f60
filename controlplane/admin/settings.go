package admin

import (
	"context"

	"github.com/tollgate/tollgate/controlplane/store"
)

// GatewaySettings are the gateway-wide switches that are not model policy (docs/admin-api.md, "Gateway
// settings").
type GatewaySettings struct {
	// CostDisclosure shows callers what their requests cost (docs/cost.md) for keys without their own
	// switch.
	CostDisclosure bool `json:"cost_disclosure"`
}

// GatewaySettingsInput changes the settings present; absent fields keep their value.
type GatewaySettingsInput struct {
	CostDisclosure *bool `json:"cost_disclosure"`
}

// GetGatewaySettings reads the gateway-wide settings.
func (s *Service) GetGatewaySettings(ctx context.Context) (GatewaySettings, error) {
	gs, err := store.GetGatewaySettings(ctx, s.pool)
	if err != nil {
		return GatewaySettings{}, storeError(err, "gateway settings")
	}
	return GatewaySettings{CostDisclosure: gs.GetCostDisclosure()}, nil
}

// SetGatewaySettings changes the settings present in in (the next snapshot carries them) and answers them
// all. An input without fields changes nothing and bumps no revision.
func (s *Service) SetGatewaySettings(ctx context.Context, in GatewaySettingsInput) (GatewaySettings, error) {
	if in.CostDisclosure == nil {
		return s.GetGatewaySettings(ctx)
	}
	gs, err := store.SetGatewaySettings(ctx, s.pool, in.CostDisclosure)
	if err != nil {
		return GatewaySettings{}, storeError(err, "gateway settings")
	}
	return GatewaySettings{CostDisclosure: gs.GetCostDisclosure()}, nil
}
