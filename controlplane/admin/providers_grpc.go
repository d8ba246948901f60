package admin

import (
	"context"
	"encoding/json"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func (g *grpcServer) ListProviders(ctx context.Context, req *adminv1.ListProvidersRequest) (*adminv1.ListProvidersResponse, error) {
	p, err := g.s.ListProviders(ctx, int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListProvidersResponse{NextCursor: p.NextCursor}
	for _, pr := range p.Items {
		out.Items = append(out.Items, providerToProto(pr))
	}
	return out, nil
}

func (g *grpcServer) GetProvider(ctx context.Context, req *adminv1.GetProviderRequest) (*adminv1.GetProviderResponse, error) {
	p, err := g.s.GetProvider(ctx, req.GetId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetProviderResponse{Provider: providerToProto(p)}, nil
}

func (g *grpcServer) CreateProvider(ctx context.Context, req *adminv1.CreateProviderRequest) (*adminv1.CreateProviderResponse, error) {
	p, err := g.s.CreateProvider(ctx, providerInputFromProto(req.GetProvider()))
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateProviderResponse{Provider: providerToProto(p)}, nil
}

func (g *grpcServer) UpdateProvider(ctx context.Context, req *adminv1.UpdateProviderRequest) (*adminv1.UpdateProviderResponse, error) {
	in := providerInputFromProto(req.GetProvider())
	p, err := g.s.UpdateProvider(ctx, in.ID, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpdateProviderResponse{Provider: providerToProto(p)}, nil
}

func (g *grpcServer) DeleteProvider(ctx context.Context, req *adminv1.DeleteProviderRequest) (*adminv1.DeleteProviderResponse, error) {
	if err := g.s.DeleteProvider(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteProviderResponse{}, nil
}

func (g *grpcServer) CreateCredential(ctx context.Context, req *adminv1.CreateCredentialRequest) (*adminv1.CreateCredentialResponse, error) {
	c := req.GetCredential()
	if c == nil {
		c = &configv1.Credential{}
	}
	in := CredentialInput{ProviderID: c.ProviderId, Secret: c.Secret}
	if c.Weight != 0 {
		w := c.Weight
		in.Weight = &w
	}
	enabled := c.Enabled
	in.Enabled = &enabled
	out, err := g.s.CreateCredential(ctx, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateCredentialResponse{Credential: credentialToProto(out)}, nil
}

func (g *grpcServer) DeleteCredential(ctx context.Context, req *adminv1.DeleteCredentialRequest) (*adminv1.DeleteCredentialResponse, error) {
	if err := g.s.DeleteCredential(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteCredentialResponse{}, nil
}

func providerToProto(p store.Provider) *configv1.Provider {
	out := &configv1.Provider{Id: p.ID, Name: p.Name, ChannelType: p.ChannelType, BaseUrl: p.BaseURL,
		Enabled: p.Enabled, SettingsJson: string(p.Settings)}
	for _, c := range p.Credentials {
		out.Credentials = append(out.Credentials, credentialToProto(c))
	}
	return out
}

func credentialToProto(c store.CredentialInfo) *configv1.Credential {
	return &configv1.Credential{Id: c.ID, ProviderId: c.ProviderID, Weight: c.Weight, Enabled: c.Enabled}
}

func providerInputFromProto(p *configv1.Provider) ProviderInput {
	if p == nil {
		p = &configv1.Provider{}
	}
	enabled := p.Enabled
	return ProviderInput{ID: p.Id, Name: p.Name, ChannelType: p.ChannelType, BaseURL: p.BaseUrl, Enabled: &enabled,
		Settings: json.RawMessage(p.SettingsJson)}
}
