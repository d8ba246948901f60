package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func apiKeyToProto(k store.APIKey) *configv1.ApiKey {
	pk := &configv1.ApiKey{Id: k.ID, UserId: k.UserID, OrgId: k.OrgID, TeamId: k.TeamID, Name: k.Name, Prefix: k.Prefix,
		AllowedModels: k.AllowedModels, RpmLimit: k.RPMLimit, TpmLimit: k.TPMLimit, Enabled: k.Enabled,
		AllowDirectAddressing: k.AllowDirectAddressing, CreatedAt: timestamppb.New(k.CreatedAt), CostDisclosure: k.CostDisclosure}
	if k.ExpiresAt != nil {
		pk.ExpiresAt = timestamppb.New(*k.ExpiresAt)
	}
	if k.PreviousPrefix != nil && k.PreviousExpiresAt != nil {
		pk.PreviousPrefix, pk.PreviousExpiresAt = *k.PreviousPrefix, timestamppb.New(*k.PreviousExpiresAt)
	}
	return pk
}

func userToProto(u store.User) *configv1.User {
	return &configv1.User{Id: u.ID, OrgId: u.OrgID, TeamId: u.TeamID, Name: u.Name, Email: u.Email}
}

func (g *grpcServer) CreateOrg(ctx context.Context, req *adminv1.CreateOrgRequest) (*adminv1.CreateOrgResponse, error) {
	o, err := g.s.CreateOrg(ctx, store.Org{ID: req.GetOrg().GetId(), Name: req.GetOrg().GetName()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateOrgResponse{Org: &configv1.Org{Id: o.ID, Name: o.Name}}, nil
}

func (g *grpcServer) CreateTeam(ctx context.Context, req *adminv1.CreateTeamRequest) (*adminv1.CreateTeamResponse, error) {
	t := req.GetTeam()
	out, err := g.s.CreateTeam(ctx, store.Team{ID: t.GetId(), OrgID: t.GetOrgId(), Name: t.GetName()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateTeamResponse{Team: &configv1.Team{Id: out.ID, OrgId: out.OrgID, Name: out.Name}}, nil
}

func (g *grpcServer) CreateUser(ctx context.Context, req *adminv1.CreateUserRequest) (*adminv1.CreateUserResponse, error) {
	u := req.GetUser()
	out, err := g.s.CreateUser(ctx, store.User{ID: u.GetId(), OrgID: u.GetOrgId(), TeamID: u.TeamId, Name: u.GetName(), Email: u.GetEmail()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateUserResponse{User: &configv1.User{Id: out.ID, OrgId: out.OrgID, TeamId: out.TeamID, Name: out.Name, Email: out.Email}}, nil
}

func (g *grpcServer) CreateApiKey(ctx context.Context, req *adminv1.CreateApiKeyRequest) (*adminv1.CreateApiKeyResponse, error) {
	enabled := req.GetEnabled()
	in := APIKeyInput{UserID: req.GetUserId(), Name: req.GetName(), AllowedModels: req.GetAllowedModels(),
		RPMLimit: req.GetRpmLimit(), TPMLimit: req.GetTpmLimit(), Enabled: &enabled, AllowDirectAddressing: req.GetAllowDirectAddressing(),
		CostDisclosure: req.CostDisclosure}
	if req.ExpiresAt != nil {
		t := req.ExpiresAt.AsTime()
		in.ExpiresAt = &t
	}
	k, err := g.s.CreateAPIKey(ctx, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateApiKeyResponse{ApiKey: apiKeyToProto(k.APIKey), Key: k.Key}, nil
}

func (g *grpcServer) ListApiKeys(ctx context.Context, req *adminv1.ListApiKeysRequest) (*adminv1.ListApiKeysResponse, error) {
	p, err := g.s.ListAPIKeys(ctx, APIKeyQuery{UserID: req.UserId, TeamID: req.TeamId, OrgID: req.OrgId, Prefix: req.GetPrefix(),
		Limit: int(req.GetLimit()), Cursor: req.GetCursor()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListApiKeysResponse{NextCursor: p.NextCursor}
	for _, k := range p.Items {
		out.Items = append(out.Items, apiKeyToProto(k))
	}
	return out, nil
}

func (g *grpcServer) GetApiKey(ctx context.Context, req *adminv1.GetApiKeyRequest) (*adminv1.GetApiKeyResponse, error) {
	k, err := g.s.GetAPIKey(ctx, req.GetId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetApiKeyResponse{ApiKey: apiKeyToProto(k)}, nil
}

func (g *grpcServer) UpdateApiKey(ctx context.Context, req *adminv1.UpdateApiKeyRequest) (*adminv1.UpdateApiKeyResponse, error) {
	p := APIKeyPatch{Name: req.Name, Enabled: req.Enabled, RPMLimit: req.RpmLimit, TPMLimit: req.TpmLimit,
		AllowDirectAddressing: req.AllowDirectAddressing}
	if req.GetSetCostDisclosure() {
		p.CostDisclosure = OptionalBool{Set: true, Value: req.CostDisclosure}
	}
	if req.GetSetAllowedModels() {
		m := req.GetAllowedModels()
		if m == nil {
			m = []string{}
		}
		p.AllowedModels = &m
	}
	if req.GetSetExpiresAt() {
		p.ExpiresAt.Set = true
		if req.ExpiresAt != nil {
			if err := req.GetExpiresAt().CheckValid(); err != nil {
				return nil, g.err(ctx, invalidFields("invalid api key", field("expires_at", "%v", err)))
			}
			t := req.GetExpiresAt().AsTime()
			p.ExpiresAt.Value = &t
		}
	}
	k, err := g.s.UpdateAPIKey(ctx, req.GetId(), p)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpdateApiKeyResponse{ApiKey: apiKeyToProto(k)}, nil
}

func (g *grpcServer) DeleteApiKey(ctx context.Context, req *adminv1.DeleteApiKeyRequest) (*adminv1.DeleteApiKeyResponse, error) {
	if err := g.s.DeleteAPIKey(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteApiKeyResponse{}, nil
}

func (g *grpcServer) RotateApiKey(ctx context.Context, req *adminv1.RotateApiKeyRequest) (*adminv1.RotateApiKeyResponse, error) {
	k, err := g.s.RotateAPIKey(ctx, req.GetId(), RotateInput{GraceSeconds: req.GetGraceSeconds()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.RotateApiKeyResponse{ApiKey: apiKeyToProto(k.APIKey), Key: k.Key}, nil
}

func (g *grpcServer) ListOrgs(ctx context.Context, req *adminv1.ListOrgsRequest) (*adminv1.ListOrgsResponse, error) {
	p, err := g.s.ListOrgs(ctx, int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListOrgsResponse{NextCursor: p.NextCursor}
	for _, o := range p.Items {
		out.Items = append(out.Items, &configv1.Org{Id: o.ID, Name: o.Name})
	}
	return out, nil
}

func (g *grpcServer) UpdateOrg(ctx context.Context, req *adminv1.UpdateOrgRequest) (*adminv1.UpdateOrgResponse, error) {
	o, err := g.s.UpdateOrg(ctx, req.GetOrg().GetId(), store.Org{Name: req.GetOrg().GetName()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpdateOrgResponse{Org: &configv1.Org{Id: o.ID, Name: o.Name}}, nil
}

func (g *grpcServer) DeleteOrg(ctx context.Context, req *adminv1.DeleteOrgRequest) (*adminv1.DeleteOrgResponse, error) {
	if err := g.s.DeleteOrg(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteOrgResponse{}, nil
}

func (g *grpcServer) ListTeams(ctx context.Context, req *adminv1.ListTeamsRequest) (*adminv1.ListTeamsResponse, error) {
	p, err := g.s.ListTeams(ctx, TenantQuery{OrgID: req.OrgId, Limit: int(req.GetLimit()), Cursor: req.GetCursor()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListTeamsResponse{NextCursor: p.NextCursor}
	for _, t := range p.Items {
		out.Items = append(out.Items, &configv1.Team{Id: t.ID, OrgId: t.OrgID, Name: t.Name})
	}
	return out, nil
}

func (g *grpcServer) UpdateTeam(ctx context.Context, req *adminv1.UpdateTeamRequest) (*adminv1.UpdateTeamResponse, error) {
	t := req.GetTeam()
	out, err := g.s.UpdateTeam(ctx, t.GetId(), store.Team{OrgID: t.GetOrgId(), Name: t.GetName()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpdateTeamResponse{Team: &configv1.Team{Id: out.ID, OrgId: out.OrgID, Name: out.Name}}, nil
}

func (g *grpcServer) DeleteTeam(ctx context.Context, req *adminv1.DeleteTeamRequest) (*adminv1.DeleteTeamResponse, error) {
	if err := g.s.DeleteTeam(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteTeamResponse{}, nil
}

func (g *grpcServer) ListUsers(ctx context.Context, req *adminv1.ListUsersRequest) (*adminv1.ListUsersResponse, error) {
	p, err := g.s.ListUsers(ctx, TenantQuery{OrgID: req.OrgId, TeamID: req.TeamId, Limit: int(req.GetLimit()), Cursor: req.GetCursor()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListUsersResponse{NextCursor: p.NextCursor}
	for _, u := range p.Items {
		out.Items = append(out.Items, userToProto(u))
	}
	return out, nil
}

func (g *grpcServer) UpdateUser(ctx context.Context, req *adminv1.UpdateUserRequest) (*adminv1.UpdateUserResponse, error) {
	u := req.GetUser()
	out, err := g.s.UpdateUser(ctx, u.GetId(), store.User{OrgID: u.GetOrgId(), TeamID: u.TeamId, Name: u.GetName(), Email: u.GetEmail()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpdateUserResponse{User: userToProto(out)}, nil
}

func (g *grpcServer) DeleteUser(ctx context.Context, req *adminv1.DeleteUserRequest) (*adminv1.DeleteUserResponse, error) {
	if err := g.s.DeleteUser(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteUserResponse{}, nil
}

func (g *grpcServer) GetModelPolicy(ctx context.Context, _ *adminv1.GetModelPolicyRequest) (*adminv1.GetModelPolicyResponse, error) {
	p, err := g.s.GetModelPolicy(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.GetModelPolicyResponse{Policy: modelPolicyToProto(p)}
	for _, pp := range p.Providers {
		out.Providers = append(out.Providers, &adminv1.ProviderUnpricedPolicy{ProviderId: pp.ProviderID, Name: pp.Name, UnpricedPolicy: pp.UnpricedPolicy})
	}
	return out, nil
}

// SetModelPolicy sets both fields of the gateway-wide policy.
func (g *grpcServer) SetModelPolicy(ctx context.Context, req *adminv1.SetModelPolicyRequest) (*adminv1.SetModelPolicyResponse, error) {
	up, direct := req.GetPolicy().GetUnpricedPolicy(), req.GetPolicy().GetDirectAddressing()
	p, err := g.s.SetModelPolicy(ctx, ModelPolicyInput{UnpricedPolicy: &up, DirectAddressing: &direct})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.SetModelPolicyResponse{Policy: modelPolicyToProto(p)}, nil
}

func (g *grpcServer) SetProviderUnpricedPolicy(ctx context.Context, req *adminv1.SetProviderUnpricedPolicyRequest) (*adminv1.SetProviderUnpricedPolicyResponse, error) {
	if err := g.s.SetProviderUnpricedPolicy(ctx, req.GetProviderId(), req.UnpricedPolicy); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.SetProviderUnpricedPolicyResponse{}, nil
}

func (g *grpcServer) ListUnpricedModels(ctx context.Context, req *adminv1.ListUnpricedModelsRequest) (*adminv1.ListUnpricedModelsResponse, error) {
	ms, err := g.s.ListUnpricedModels(ctx, timeOf(req.GetSince()))
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListUnpricedModelsResponse{}
	for _, m := range ms {
		out.Items = append(out.Items, &adminv1.UnpricedModel{ProviderId: m.ProviderID, UpstreamModel: m.UpstreamModel,
			Requests: m.Requests, FirstSeen: timestamppb.New(m.FirstSeen), LastSeen: timestamppb.New(m.LastSeen)})
	}
	return out, nil
}
