package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// grpcClient serves AdminService (with the admin interceptor) and health (open) on loopback.
func (b *testBundle) grpcClient(t *testing.T) (adminv1.AdminServiceClient, *grpc.ClientConn) {
	t.Helper()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(b.svc.UnaryInterceptor()))
	adminv1.RegisterAdminServiceServer(srv, admin.NewGRPC(b.svc))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return adminv1.NewAdminServiceClient(conn), conn
}

func withToken(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

func fieldViolations(err error) []string {
	var out []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.FieldViolations {
				out = append(out, v.Field)
			}
		}
	}
	return out
}

func protoRule(kv ...any) *configv1.PriceRule {
	r := &configv1.PriceRule{MatchType: "exact", ModelMatch: "model-a", InputPrice: "1.50", OutputPrice: "6.000",
		CacheReadPrice: "0.15", CacheCreation_5MPrice: "1.875", CacheCreation_30MPrice: "2.5", CacheCreation_1HPrice: "3",
		ImageOutputPrice: "0", Enabled: true}
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i] {
		case "input_price":
			r.InputPrice = kv[i+1].(string)
		case "model_match":
			r.ModelMatch = kv[i+1].(string)
		case "provider_id":
			id := kv[i+1].(int64)
			r.ProviderId = &id
		case "tiers":
			r.PricingTiersJson = kv[i+1].([]*configv1.TierEntry)
		}
	}
	return r
}

func strp(s string) *string { return &s }

func TestGRPCAdminService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client, conn := b.grpcClient(t)
	ctx := withToken(bootstrapToken)

	// Auth: only AdminService is guarded by the admin interceptor.
	if _, err := client.ListPriceRules(context.Background(), &adminv1.ListPriceRulesRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no token: %v, want Unauthenticated", err)
	}
	if _, err := client.ListPriceRules(withToken("wrong-token-wrong-token"), &adminv1.ListPriceRulesRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("wrong token: %v, want Unauthenticated", err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without token: %v (the admin interceptor must not guard other services)", err)
	}
	viewer, err := client.CreateAdminToken(ctx, &adminv1.CreateAdminTokenRequest{Name: "v", Role: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	vctx := withToken(viewer.Token)
	if _, err := client.ListPriceRules(vctx, &adminv1.ListPriceRulesRequest{}); err != nil {
		t.Errorf("viewer list: %v", err)
	}
	if _, err := client.CreateOrg(vctx, &adminv1.CreateOrgRequest{Org: &configv1.Org{Name: "x"}}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("viewer write: %v, want PermissionDenied", err)
	}

	// Price rule CRUD with tiers through the proto shape; REST sees the same rule.
	prov, err := client.CreateProvider(ctx, &adminv1.CreateProviderRequest{Provider: &configv1.Provider{Name: "alpha-1",
		ChannelType: "alpha", BaseUrl: "https://up.example", Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	pid := prov.Provider.Id
	created, err := client.CreatePriceRule(ctx, &adminv1.CreatePriceRuleRequest{Rule: protoRule("provider_id", pid, "tiers", []*configv1.TierEntry{
		{MinPromptTokens: 1000, Multiplier: strp("2.0")}, {ServiceTier: strp("priority"), OutputPrice: strp("20.50")}})})
	if err != nil {
		t.Fatal(err)
	}
	if created.Rule.InputPrice != "1.50" || len(created.Rule.PricingTiersJson) != 2 || created.Rule.PricingTiersJson[1].GetOutputPrice() != "20.50" ||
		created.Rule.PricingTiersJson[0].GetMultiplier() != "2.0" || created.Rule.UpdatedAt == nil {
		t.Errorf("created = %v", created.Rule)
	}
	var rest store.PriceRule
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/price-rules/%d", created.Rule.Id), nil, &rest)
	var tiers []map[string]json.RawMessage
	if err := json.Unmarshal(rest.PricingTiersJSON, &tiers); err != nil || len(tiers) != 2 || string(tiers[0]["min_prompt_tokens"]) != "1000" ||
		string(tiers[1]["service_tier"]) != `"priority"` {
		t.Errorf("REST view of gRPC-created tiers = %s", rest.PricingTiersJSON)
	}
	list, err := client.ListPriceRules(ctx, &adminv1.ListPriceRulesRequest{Limit: 10})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list = %v, %v", list, err)
	}
	q, err := client.QuotePrice(ctx, &adminv1.QuotePriceRequest{ProviderId: &pid, Model: "model-a", ServiceTier: "fast",
		Usage: &settlementv1.TokenCounts{Input: 1000, Output: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	// input 1.50×2 = 3 per million; output overridden to 20.50: 0.003 + 0.0205
	if q.PriceRuleId != created.Rule.Id || q.Cost != "0.0235" || q.CostMicros != 23500 || q.PromptTier != 0 || q.ServiceTier != 1 {
		t.Errorf("quote = %v", q)
	}

	// Error mapping at the boundary.
	_, err = client.CreatePriceRule(ctx, &adminv1.CreatePriceRuleRequest{Rule: protoRule("input_price", "1e3", "tiers",
		[]*configv1.TierEntry{{MinPromptTokens: 1, Multiplier: strp("two")}})})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(strings.Join(fieldViolations(err), ","), "input_price") ||
		!strings.Contains(strings.Join(fieldViolations(err), ","), "pricing_tiers_json[0].multiplier") {
		t.Errorf("malformed decimals: %v, violations %v", err, fieldViolations(err))
	}
	if _, err := client.GetPriceRule(ctx, &adminv1.GetPriceRuleRequest{Id: 98765}); status.Code(err) != codes.NotFound {
		t.Errorf("missing rule: %v, want NotFound", err)
	}
	if _, err := client.GetPriceRule(ctx, &adminv1.GetPriceRuleRequest{Id: -1}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("negative id: %v, want InvalidArgument", err)
	}
	_, err = client.UpsertRoutingRules(ctx, &adminv1.UpsertRoutingRulesRequest{ProviderId: pid, Rules: []*configv1.RoutingRule{
		{Operation: "generate_content", Kind: "alpha_responses", Implementation: "local", Enabled: true}}})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate cell: %v, want AlreadyExists", err)
	}
	route, err := client.CreateRoute(ctx, &adminv1.CreateRouteRequest{Route: &configv1.Route{Name: "smart", Enabled: true,
		Members: []*configv1.RouteMember{{ProviderId: pid, UpstreamModelId: "m", Weight: 1, Enabled: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.DeleteProvider(ctx, &adminv1.DeleteProviderRequest{Id: pid})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("delete referenced provider: %v, want FailedPrecondition", err)
	}
	var subjects []string
	for _, d := range status.Convert(err).Details() {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			for _, v := range pf.Violations {
				subjects = append(subjects, v.Subject)
			}
		}
	}
	if want := fmt.Sprintf("route/%d", route.Route.Id); !strings.Contains(strings.Join(subjects, ","), want) {
		t.Errorf("precondition subjects = %v, want %s", subjects, want)
	}

	// Export/import over gRPC round-trips.
	exp, err := client.Export(ctx, &adminv1.ExportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	imp, err := client.Import(ctx, &adminv1.ImportRequest{PriceRules: exp.PriceRules, RoutingRules: exp.RoutingRules})
	if err != nil || imp.PriceRules != 1 || int(imp.RoutingRules) != len(admin.DefaultCells("alpha")) {
		t.Errorf("import = %v, %v", imp, err)
	}
	exp2, err := client.Export(ctx, &adminv1.ExportRequest{})
	if err != nil || exp2.PriceRules[0].InputPrice != "1.50" || len(exp2.RoutingRules) != len(exp.RoutingRules) {
		t.Errorf("export after import = %v, %v", exp2, err)
	}
	_, err = client.Import(ctx, &adminv1.ImportRequest{PriceRules: []*configv1.PriceRule{protoRule(), protoRule("input_price", "x")}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(strings.Join(fieldViolations(err), ","), "price_rules[1].input_price") {
		t.Errorf("bad import: %v, violations %v", err, fieldViolations(err))
	}

	// Delete over gRPC.
	if _, err := client.DeletePriceRule(ctx, &adminv1.DeletePriceRuleRequest{Id: created.Rule.Id}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DeletePriceRule(ctx, &adminv1.DeletePriceRuleRequest{Id: created.Rule.Id}); status.Code(err) != codes.NotFound {
		t.Errorf("second delete: %v, want NotFound", err)
	}
}
