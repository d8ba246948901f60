package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
)

// ServiceName is the full gRPC name of AdminService; MethodPrefix prefixes its full method names.
const (
	ServiceName  = "tollgate.admin.v1.AdminService"
	MethodPrefix = "/" + ServiceName + "/"
)

// grpcReadMethods are the AdminService methods a viewer may call.
var grpcReadMethods = map[string]bool{
	"ListPriceRules": true, "GetPriceRule": true, "QuotePrice": true, "ListProviders": true, "GetProvider": true,
	"ListRoutingRules": true, "ListRoutes": true, "GetRoute": true, "GetQuota": true, "ListUsages": true, "Export": true,
	"ListAdminTokens": true, "ListQuotaAdjustments": true, "GetSnapshotStatus": true, "ListQuotaPeriods": true,
	"GetPriceRuleProvenance": true, "GetPriceRuleHistory": true, "RepricePriceRules": true,
	"ListScheduledPriceRules": true,
	"ListApiKeys":             true, "GetApiKey": true, "ListOrgs": true, "ListTeams": true, "ListUsers": true, "GetModelPolicy": true,
	"ListUnpricedModels": true, "GetQuotaAlerts": true, "ListWebhookEndpoints": true, "ListAlertEvents": true,
	"GetSpend":                    true,
	"ListDataPlaneTokens":         true,
	"ListReconciliationProviders": true, "ListReconciliationRuns": true, "GetReconciliationRun": true,
	"GetReconciliationDrift": true,
}

// grpcCodes maps error codes to gRPC codes; used only here, at the gRPC boundary.
var grpcCodes = map[Code]codes.Code{
	CodeInvalid:          codes.InvalidArgument,
	CodeValidation:       codes.InvalidArgument,
	CodeUnauthenticated:  codes.Unauthenticated,
	CodePermissionDenied: codes.PermissionDenied,
	CodeNotFound:         codes.NotFound,
	CodeConflict:         codes.AlreadyExists,
	CodeInUse:            codes.FailedPrecondition,
	CodeTooLarge:         codes.ResourceExhausted,
	CodeInternal:         codes.Internal,
}

// AuthorizeGRPC checks the "authorization: Bearer <token>" metadata of an AdminService call:
// viewers may call the read methods, admins every method. It returns a gRPC status error. It is
// the authorizer app.Server.AuthorizeService installs for ServiceName.
func (s *Service) AuthorizeGRPC(ctx context.Context, fullMethod string) error {
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			header = v[0]
		}
	}
	need := RoleAdmin
	if grpcReadMethods[strings.TrimPrefix(fullMethod, MethodPrefix)] {
		need = RoleViewer
	}
	if _, err := s.authorize(ctx, header, need); err != nil {
		return s.grpcError(fullMethod, err)
	}
	return nil
}

// UnaryInterceptor authorizes AdminService calls (only those: other services on the same server
// keep their own checks) for servers that do not use app.Server's authorizer table.
func (s *Service) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, MethodPrefix) {
			if err := s.AuthorizeGRPC(ctx, info.FullMethod); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	}
}

// grpcError turns a service error into a status with error details: BadRequest field violations
// for invalid input, PreconditionFailure violations naming referencing resources.
func (s *Service) grpcError(method string, err error) error {
	if err == nil {
		return nil
	}
	var ae *Error
	if !errors.As(err, &ae) {
		ae = &Error{Code: CodeInternal, Message: "internal error", Cause: err}
	}
	code, ok := grpcCodes[ae.Code]
	if !ok {
		code = codes.Internal
	}
	if code == codes.Internal {
		s.log.Error("admin rpc failed", "method", method, "err", err)
	}
	msg := ae.Message
	for _, d := range ae.Details {
		msg += "; " + detailPath(d) + d.Message
	}
	st := status.New(code, msg)
	var detail protoadapt.MessageV1
	switch {
	case len(ae.Details) > 0 && ae.Code == CodeInUse:
		pf := &errdetails.PreconditionFailure{}
		for _, d := range ae.Details {
			pf.Violations = append(pf.Violations, &errdetails.PreconditionFailure_Violation{
				Type: "REFERENCED_BY", Subject: fmt.Sprintf("%s/%d", d.Resource, d.ID), Description: d.Message})
		}
		detail = pf
	case len(ae.Details) > 0:
		br := &errdetails.BadRequest{}
		for _, d := range ae.Details {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
				Field: strings.TrimSuffix(detailPath(d), ": "), Description: d.Message})
		}
		detail = br
	}
	if detail != nil {
		if withDetails, err := st.WithDetails(detail); err == nil {
			st = withDetails
		}
	}
	return st.Err()
}

// detailPath renders where a detail points: "price_rules[3].pricing_tiers_json[0].multiplier: ".
func detailPath(d Detail) string {
	var b strings.Builder
	b.WriteString(d.Section)
	if d.Index != nil {
		fmt.Fprintf(&b, "[%d]", *d.Index)
	}
	if d.TierIndex != nil {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		fmt.Fprintf(&b, "pricing_tiers_json[%d]", *d.TierIndex)
	}
	if d.Field != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(d.Field)
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + ": "
}

// grpcServer implements AdminService over the Service.
type grpcServer struct {
	adminv1.UnimplementedAdminServiceServer
	s *Service
}

// NewGRPC returns the AdminService implementation backed by s. Register it with
// adminv1.RegisterAdminServiceServer and authorize it with AuthorizeGRPC (or UnaryInterceptor).
func NewGRPC(s *Service) adminv1.AdminServiceServer { return &grpcServer{s: s} }

func (g *grpcServer) err(ctx context.Context, err error) error {
	method, _ := grpc.Method(ctx)
	return g.s.grpcError(method, err)
}

// --- conversions -------------------------------------------------------------------------------

// tierJSON is one pricing_tiers_json entry with the spec's keys.
type tierJSON struct {
	MinPromptTokens       *int64  `json:"min_prompt_tokens,omitempty"`
	ServiceTier           *string `json:"service_tier,omitempty"`
	Multiplier            *string `json:"multiplier,omitempty"`
	InputPrice            *string `json:"input_price,omitempty"`
	OutputPrice           *string `json:"output_price,omitempty"`
	CacheReadPrice        *string `json:"cache_read_price,omitempty"`
	CacheCreation5mPrice  *string `json:"cache_creation_5m_price,omitempty"`
	CacheCreation30mPrice *string `json:"cache_creation_30m_price,omitempty"`
	CacheCreation1hPrice  *string `json:"cache_creation_1h_price,omitempty"`
	ImageOutputPrice      *string `json:"image_output_price,omitempty"`
}

func tiersToJSON(ts []*configv1.TierEntry) json.RawMessage {
	out := make([]tierJSON, len(ts))
	for i, t := range ts {
		e := tierJSON{ServiceTier: t.ServiceTier, Multiplier: t.Multiplier, InputPrice: t.InputPrice,
			OutputPrice: t.OutputPrice, CacheReadPrice: t.CacheReadPrice, CacheCreation5mPrice: t.CacheCreation_5MPrice,
			CacheCreation30mPrice: t.CacheCreation_30MPrice, CacheCreation1hPrice: t.CacheCreation_1HPrice,
			ImageOutputPrice: t.ImageOutputPrice}
		if t.MinPromptTokens != 0 || t.ServiceTier == nil {
			n := t.MinPromptTokens
			e.MinPromptTokens = &n
		}
		out[i] = e
	}
	b, _ := json.Marshal(out) // plain strings and integers: cannot fail
	return b
}

// tiersFromJSON converts stored (validated) tier JSON; numbers written as JSON numbers keep their text.
func tiersFromJSON(raw json.RawMessage) []*configv1.TierEntry {
	var entries []map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&entries); err != nil {
		return nil
	}
	out := make([]*configv1.TierEntry, len(entries))
	for i, e := range entries {
		t := &configv1.TierEntry{}
		if v, ok := e["min_prompt_tokens"]; ok {
			n, _ := strconv.ParseInt(jsonText(v), 10, 64)
			t.MinPromptTokens = n
		}
		for key, dst := range map[string]**string{"service_tier": &t.ServiceTier, "multiplier": &t.Multiplier,
			"input_price": &t.InputPrice, "output_price": &t.OutputPrice, "cache_read_price": &t.CacheReadPrice,
			"cache_creation_5m_price": &t.CacheCreation_5MPrice, "cache_creation_30m_price": &t.CacheCreation_30MPrice,
			"cache_creation_1h_price": &t.CacheCreation_1HPrice, "image_output_price": &t.ImageOutputPrice} {
			if v, ok := e[key]; ok && string(v) != "null" {
				s := jsonText(v)
				*dst = &s
			}
		}
		out[i] = t
	}
	return out
}

// jsonText is a JSON string's value or a JSON number's literal text.
func jsonText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(v))
}

func priceRuleInputFromProto(r *configv1.PriceRule) PriceRuleInput {
	if r == nil {
		r = &configv1.PriceRule{}
	}
	enabled := r.Enabled
	return PriceRuleInput{Enabled: &enabled, RuleInput: pricing.RuleInput{ID: r.Id, ProviderID: r.ProviderId,
		MatchType: r.MatchType, ModelMatch: r.ModelMatch, InputPrice: r.InputPrice, OutputPrice: r.OutputPrice,
		CacheReadPrice: r.CacheReadPrice, CacheCreation5mPrice: r.CacheCreation_5MPrice,
		CacheCreation30mPrice: r.CacheCreation_30MPrice, CacheCreation1hPrice: r.CacheCreation_1HPrice,
		ImageOutputPrice: r.ImageOutputPrice, PricingTiersJSON: tiersToJSON(r.PricingTiersJson)}}
}

func priceRuleToProto(r store.PriceRule) *configv1.PriceRule {
	out := &configv1.PriceRule{Id: r.ID, ProviderId: r.ProviderID, MatchType: r.MatchType, ModelMatch: r.ModelMatch,
		InputPrice: r.InputPrice, OutputPrice: r.OutputPrice, CacheReadPrice: r.CacheReadPrice,
		CacheCreation_5MPrice: r.CacheCreation5mPrice, CacheCreation_30MPrice: r.CacheCreation30mPrice,
		CacheCreation_1HPrice: r.CacheCreation1hPrice, ImageOutputPrice: r.ImageOutputPrice, Enabled: r.Enabled,
		PricingTiersJson: tiersFromJSON(r.PricingTiersJSON)}
	if !r.UpdatedAt.IsZero() {
		out.UpdatedAt = timestamppb.New(r.UpdatedAt)
	}
	return out
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

func quotaToProto(q store.Quota) *configv1.Quota {
	out := &configv1.Quota{Scope: q.Scope, ScopeId: q.ScopeID, CostLimit: q.CostLimit, CostUsed: q.CostUsed, AdjustEpoch: q.AdjustEpoch,
		Period: q.Period, TimeZone: q.TimeZone, PeriodId: q.PeriodID, RpmLimit: q.RPMLimit, TpmLimit: q.TPMLimit}
	if q.PeriodStart != nil && q.PeriodEnd != nil {
		out.PeriodStart, out.PeriodEnd = timestamppb.New(*q.PeriodStart), timestamppb.New(*q.PeriodEnd)
	}
	return out
}

func adminTokenToProto(t store.AdminToken) *adminv1.AdminToken {
	return &adminv1.AdminToken{Id: t.ID, Name: t.Name, Role: t.Role, CreatedAt: timestamppb.New(t.CreatedAt)}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func usageToProto(u store.StoredUsage) *adminv1.Usage {
	return &adminv1.Usage{Id: u.ID, Record: &settlementv1.SettlementRecord{
		RequestId: u.RequestID, ApiKeyId: deref(u.APIKeyID), UserId: deref(u.UserID), TeamId: u.TeamID,
		OrgId: deref(u.OrgID), RouteId: deref(u.RouteID), ProviderId: deref(u.ProviderID),
		CredentialId: deref(u.CredentialID), LogicalModel: u.LogicalModel, UpstreamModel: u.UpstreamModel,
		Operation: u.Operation, InboundKind: u.InboundKind, Implementation: u.Implementation, DestKind: u.DestKind,
		Tokens: &settlementv1.TokenCounts{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens,
			CacheCreation_5M: u.CacheCreation5mTokens, CacheCreation_30M: u.CacheCreation30mTokens,
			CacheCreation_1H: u.CacheCreation1hTokens, ImageOutput: u.ImageOutputTokens},
		RequestedTier: u.RequestedTier, ReportedTier: u.ReportedTier, PriceRuleId: deref(u.PriceRuleID), PriceRuleVersion: deref(u.PriceRuleVersion),
		SnapshotVersion: u.SnapshotVersion, Cost: u.Cost, Source: u.Source, EndState: u.EndState,
		HttpStatus: u.HTTPStatus, LatencyMs: u.LatencyMS, FirstByteMs: u.FirstByteMS,
		CreatedAt: timestamppb.New(u.CreatedAt), BillingFlag: u.BillingFlag, FlagDetail: u.FlagDetail,
		AdmittedAt: optTimestamp(u.AdmittedAt)}, Kind: u.Kind, AdjustmentId: deref(u.AdjustmentID), Reason: derefString(u.Reason)}
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// --- price rules -------------------------------------------------------------------------------

func (g *grpcServer) ListPriceRules(ctx context.Context, req *adminv1.ListPriceRulesRequest) (*adminv1.ListPriceRulesResponse, error) {
	p, err := g.s.ListPriceRules(ctx, int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListPriceRulesResponse{NextCursor: p.NextCursor}
	for _, r := range p.Items {
		out.Items = append(out.Items, priceRuleToProto(r))
	}
	return out, nil
}

func (g *grpcServer) GetPriceRule(ctx context.Context, req *adminv1.GetPriceRuleRequest) (*adminv1.GetPriceRuleResponse, error) {
	r, err := g.s.GetPriceRule(ctx, req.GetId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetPriceRuleResponse{Rule: priceRuleToProto(r)}, nil
}

func (g *grpcServer) CreatePriceRule(ctx context.Context, req *adminv1.CreatePriceRuleRequest) (*adminv1.CreatePriceRuleResponse, error) {
	in := priceRuleInputFromProto(req.GetRule())
	if req.EffectiveAt != nil {
		if in.ID == 0 {
			return nil, g.err(ctx, invalidFields("invalid price rule", field("effective_at",
				"a new rule takes effect when created: create it disabled now and schedule enabling it")))
		}
		sp, err := g.schedule(ctx, in, req.GetEffectiveAt())
		if err != nil {
			return nil, err
		}
		return &adminv1.CreatePriceRuleResponse{Scheduled: sp}, nil
	}
	r, err := g.s.CreatePriceRule(ctx, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreatePriceRuleResponse{Rule: priceRuleToProto(r)}, nil
}

func (g *grpcServer) UpdatePriceRule(ctx context.Context, req *adminv1.UpdatePriceRuleRequest) (*adminv1.UpdatePriceRuleResponse, error) {
	in := priceRuleInputFromProto(req.GetRule())
	if req.EffectiveAt != nil {
		sp, err := g.schedule(ctx, in, req.GetEffectiveAt())
		if err != nil {
			return nil, err
		}
		return &adminv1.UpdatePriceRuleResponse{Scheduled: sp}, nil
	}
	r, err := g.s.UpdatePriceRule(ctx, in.ID, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpdatePriceRuleResponse{Rule: priceRuleToProto(r)}, nil
}

func (g *grpcServer) DeletePriceRule(ctx context.Context, req *adminv1.DeletePriceRuleRequest) (*adminv1.DeletePriceRuleResponse, error) {
	if err := g.s.DeletePriceRule(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeletePriceRuleResponse{}, nil
}

func (g *grpcServer) QuotePrice(ctx context.Context, req *adminv1.QuotePriceRequest) (*adminv1.QuotePriceResponse, error) {
	u := req.GetUsage()
	qr := QuoteRequest{ProviderID: req.ProviderId, Model: req.GetModel(), ServiceTier: req.GetServiceTier(),
		Usage: QuoteUsage{InputTokens: u.GetInput(), OutputTokens: u.GetOutput(), CacheReadTokens: u.GetCacheRead(),
			CacheCreation5mTokens: u.GetCacheCreation_5M(), CacheCreation30mTokens: u.GetCacheCreation_30M(),
			CacheCreation1hTokens: u.GetCacheCreation_1H(), ImageOutputTokens: u.GetImageOutput()}}
	if req.At != nil {
		at := req.GetAt().AsTime()
		qr.At = &at
	}
	q, err := g.s.Quote(ctx, qr)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.QuotePriceResponse{PriceRuleId: q.PriceRuleID, Cost: q.Cost, CostMicros: q.CostMicros,
		Rates: &adminv1.Rates{InputPrice: q.Rates.InputPrice, OutputPrice: q.Rates.OutputPrice,
			CacheReadPrice: q.Rates.CacheReadPrice, CacheCreation_5MPrice: q.Rates.CacheCreation5mPrice,
			CacheCreation_30MPrice: q.Rates.CacheCreation30mPrice, CacheCreation_1HPrice: q.Rates.CacheCreation1hPrice,
			ImageOutputPrice: q.Rates.ImageOutputPrice},
		PromptTier: int32(q.PromptTier), ServiceTier: int32(q.ServiceTier)}, nil
}

// --- providers, credentials, routing rules -----------------------------------------------------

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

// --- routes ------------------------------------------------------------------------------------

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

// --- tenancy, quotas, usages -------------------------------------------------------------------

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
		RPMLimit: req.GetRpmLimit(), TPMLimit: req.GetTpmLimit(), Enabled: &enabled, AllowDirectAddressing: req.GetAllowDirectAddressing()}
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

func (g *grpcServer) GetQuota(ctx context.Context, req *adminv1.GetQuotaRequest) (*adminv1.GetQuotaResponse, error) {
	q, err := g.s.GetQuota(ctx, req.GetScope(), req.GetScopeId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetQuotaResponse{Quota: quotaToProto(q)}, nil
}

func (g *grpcServer) SetQuota(ctx context.Context, req *adminv1.SetQuotaRequest) (*adminv1.SetQuotaResponse, error) {
	q, err := g.s.SetQuota(ctx, req.GetScope(), req.GetScopeId(), QuotaInput{CostLimit: req.CostLimit, Period: req.Period,
		TimeZone: req.TimeZone, RPMLimit: req.RpmLimit, TPMLimit: req.TpmLimit})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.SetQuotaResponse{Quota: quotaToProto(q)}, nil
}

func (g *grpcServer) AdjustQuota(ctx context.Context, req *adminv1.AdjustQuotaRequest) (*adminv1.AdjustQuotaResponse, error) {
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			header = v[0]
		}
	}
	who, err := g.s.Authenticate(ctx, header)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out, err := g.s.AdjustQuota(ctx, who, req.GetScope(), req.GetScopeId(), AdjustmentInput{Amount: req.GetAmount(), Reason: req.GetReason(),
		PeriodAt: timeOf(req.GetPeriodAt())})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.AdjustQuotaResponse{Adjustment: adjustmentToProto(out.Adjustment), Quota: quotaToProto(out.Quota)}, nil
}

func (g *grpcServer) ListQuotaAdjustments(ctx context.Context, req *adminv1.ListQuotaAdjustmentsRequest) (*adminv1.ListQuotaAdjustmentsResponse, error) {
	p, err := g.s.ListQuotaAdjustments(ctx, req.GetScope(), req.GetScopeId(), int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListQuotaAdjustmentsResponse{NextCursor: p.NextCursor}
	for _, a := range p.Items {
		out.Items = append(out.Items, adjustmentToProto(a))
	}
	return out, nil
}

func adjustmentToProto(a store.QuotaAdjustment) *adminv1.QuotaAdjustment {
	return &adminv1.QuotaAdjustment{Id: a.ID, Scope: a.Scope, ScopeId: a.ScopeID, Amount: a.Amount,
		CostUsedBefore: a.CostUsedBefore, CostUsedAfter: a.CostUsedAfter, Reason: a.Reason, ActorName: a.ActorName,
		ActorRole: a.ActorRole, CreatedAt: timestamppb.New(a.CreatedAt), PeriodStart: optTimestamp(a.PeriodStart)}
}

func optTimestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func (g *grpcServer) GetSnapshotStatus(ctx context.Context, _ *adminv1.GetSnapshotStatusRequest) (*adminv1.GetSnapshotStatusResponse, error) {
	st, err := g.s.SnapshotStatus(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.GetSnapshotStatusResponse{PublishedVersion: st.PublishedVersion, Failing: st.Failing}
	for _, d := range st.DataPlanes {
		w := &adminv1.WatchingDataPlane{NodeId: d.NodeID, Peer: d.Peer, TokenId: d.TokenID,
			ConnectedSince: timestamppb.New(d.ConnectedSince), Version: d.Version}
		if d.LastSentAt != nil {
			w.LastSentAt = timestamppb.New(*d.LastSentAt)
		}
		out.DataPlanes = append(out.DataPlanes, w)
	}
	if r := st.Rejected; r != nil {
		out.Rejected = &adminv1.SnapshotRejection{Version: r.Version, Stage: r.Stage, At: timestamppb.New(r.At), Error: r.Error}
		for _, p := range r.Problems {
			out.Rejected.Problems = append(out.Rejected.Problems, &adminv1.SnapshotProblem{Resource: p.Resource, Id: p.ID,
				Name: p.Name, Field: p.Field, Message: p.Message})
		}
	}
	return out, nil
}

func (g *grpcServer) ListUsages(ctx context.Context, req *adminv1.ListUsagesRequest) (*adminv1.ListUsagesResponse, error) {
	p, err := g.s.ListUsages(ctx, UsageQuery{Since: timeOf(req.Since), Until: timeOf(req.Until), APIKeyID: req.ApiKeyId,
		UserID: req.UserId, TeamID: req.TeamId, OrgID: req.OrgId, RouteID: req.RouteId, ProviderID: req.ProviderId,
		EndState: req.GetEndState(), LogicalModel: req.GetLogicalModel(), UpstreamModel: req.GetUpstreamModel(),
		Operation: req.GetOperation(), RequestID: req.GetRequestId(), Kind: req.GetKind(), Limit: int(req.GetLimit()), Cursor: req.GetCursor()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListUsagesResponse{NextCursor: p.NextCursor}
	for _, u := range p.Items {
		out.Items = append(out.Items, usageToProto(u))
	}
	return out, nil
}

// --- import/export, admin tokens ---------------------------------------------------------------

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

// --- quota periods (docs/budgets.md) -----------------------------------------------------------

func (g *grpcServer) ListQuotaPeriods(ctx context.Context, req *adminv1.ListQuotaPeriodsRequest) (*adminv1.ListQuotaPeriodsResponse, error) {
	p, err := g.s.ListQuotaPeriods(ctx, req.GetScope(), req.GetScopeId(), int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListQuotaPeriodsResponse{NextCursor: p.NextCursor}
	for _, qp := range p.Items {
		out.Items = append(out.Items, &adminv1.QuotaPeriod{PeriodId: qp.PeriodID, Period: qp.Period, TimeZone: qp.TimeZone,
			Start: timestamppb.New(qp.Start), End: timestamppb.New(qp.End), CostLimit: qp.CostLimit, CostUsed: qp.CostUsed,
			Requests: qp.Requests, Adjustments: qp.Adjustments, Closed: qp.Closed})
	}
	return out, nil
}
