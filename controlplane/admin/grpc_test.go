package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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
	"google.golang.org/protobuf/proto"

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

// TestGRPCTierThresholdOutOfRange: over gRPC a min_prompt_tokens above the bound (up to int64's
// maximum, which the proto field can carry) is InvalidArgument with a BadRequest violation on
// pricing_tiers_json[i].min_prompt_tokens whose description names the field and the allowed range.
func TestGRPCTierThresholdOutOfRange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client, _ := b.grpcClient(t)
	ctx := withToken(bootstrapToken)
	created, err := client.CreatePriceRule(ctx, &adminv1.CreatePriceRuleRequest{Rule: protoRule("tiers", []*configv1.TierEntry{
		{MinPromptTokens: 999999999999999, Multiplier: strp("2")}})})
	if err != nil {
		t.Fatalf("threshold at the bound: %v", err)
	}
	if got := created.Rule.PricingTiersJson[0].MinPromptTokens; got != 999999999999999 {
		t.Errorf("stored threshold = %d, want 999999999999999", got)
	}
	for _, n := range []int64{1000000000000000, math.MaxInt64} {
		before := b.state(t)
		tiers := []*configv1.TierEntry{{MinPromptTokens: 10}, {MinPromptTokens: n, Multiplier: strp("2")}}
		_, createErr := client.CreatePriceRule(ctx, &adminv1.CreatePriceRuleRequest{Rule: protoRule("tiers", tiers)})
		upd := protoRule("tiers", tiers)
		upd.Id = created.Rule.Id
		_, updateErr := client.UpdatePriceRule(ctx, &adminv1.UpdatePriceRuleRequest{Rule: upd})
		for name, err := range map[string]error{"create": createErr, "update": updateErr} {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("%s with min_prompt_tokens %d: %v, want InvalidArgument", name, n, err)
			}
			want := fmt.Sprintf("min_prompt_tokens is too large: must be an integer between 0 and 999999999999999, got %d", n)
			var found bool
			for _, d := range status.Convert(err).Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.FieldViolations {
						found = found || (v.Field == "pricing_tiers_json[1].min_prompt_tokens" && v.Description == want)
					}
				}
			}
			if !found {
				t.Errorf("%s with min_prompt_tokens %d: violations %v (%v), want pricing_tiers_json[1].min_prompt_tokens: %q",
					name, n, fieldViolations(err), err, want)
			}
			if !strings.Contains(status.Convert(err).Message(), "pricing_tiers_json[1].min_prompt_tokens: "+want) {
				t.Errorf("%s status message = %q, want it to carry the path and %q", name, status.Convert(err).Message(), want)
			}
		}
		if b.state(t) != before {
			t.Errorf("refused min_prompt_tokens %d changed state", n)
		}
	}
}

// TestGRPCGetRoute: GetRoute answers the route exactly as CreateRoute, UpdateRoute and ListRoutes
// do; NotFound for an unknown id, InvalidArgument for a non-positive one; a viewer may call it.
func TestGRPCGetRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client, _ := b.grpcClient(t)
	ctx := withToken(bootstrapToken)
	p1 := b.provider(t, "alpha-1", "alpha")
	p2 := b.provider(t, "beta-1", "beta")
	created, err := client.CreateRoute(ctx, &adminv1.CreateRouteRequest{Route: &configv1.Route{Name: "smart", Strategy: "weighted",
		Enabled: true, Aliases: []string{"smart-latest", "a-smart"}, Members: []*configv1.RouteMember{
			{ProviderId: p1, UpstreamModelId: "m1", Priority: 1, Weight: 3, Enabled: true},
			{ProviderId: p2, UpstreamModelId: "m2", Weight: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := client.CreateRoute(ctx, &adminv1.CreateRouteRequest{Route: &configv1.Route{Name: "bare"}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := client.ListRoutes(ctx, &adminv1.ListRoutesRequest{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list = %v, %v", list, err)
	}
	for i, want := range []*configv1.Route{created.Route, bare.Route} {
		got, err := client.GetRoute(ctx, &adminv1.GetRouteRequest{Id: want.Id})
		if err != nil {
			t.Fatalf("GetRoute(%d): %v", want.Id, err)
		}
		if !proto.Equal(got.Route, want) || !proto.Equal(got.Route, list.Items[i]) {
			t.Errorf("GetRoute(%d) = %v, want the create answer %v and the list item %v", want.Id, got.Route, want, list.Items[i])
		}
	}
	got, err := client.GetRoute(ctx, &adminv1.GetRouteRequest{Id: created.Route.Id})
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Route; r.Name != "smart" || r.Strategy != "weighted" || !r.Enabled || len(r.Aliases) != 2 || r.Aliases[0] != "a-smart" ||
		len(r.Members) != 2 || r.Members[0].Weight != 3 || r.Members[0].ProviderId != p1 || r.Members[1].Enabled {
		t.Errorf("GetRoute = %v", r)
	}
	// The REST view of the same route carries the same values.
	var rest store.Route
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/routes/%d", created.Route.Id), nil, &rest)
	if rest.Name != got.Route.Name || rest.Strategy != got.Route.Strategy || len(rest.Members) != len(got.Route.Members) ||
		strings.Join(rest.Aliases, ",") != strings.Join(got.Route.Aliases, ",") || rest.Members[0].UpstreamModelID != got.Route.Members[0].UpstreamModelId {
		t.Errorf("REST %+v and gRPC %v differ", rest, got.Route)
	}
	updated, err := client.UpdateRoute(ctx, &adminv1.UpdateRouteRequest{Route: &configv1.Route{Id: created.Route.Id, Name: "smart-2",
		Strategy: "priority", Enabled: true, Aliases: []string{"s2"},
		Members: []*configv1.RouteMember{{ProviderId: p2, UpstreamModelId: "m3", Weight: 1, Enabled: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := client.GetRoute(ctx, &adminv1.GetRouteRequest{Id: created.Route.Id}); err != nil || !proto.Equal(got.Route, updated.Route) {
		t.Errorf("GetRoute after update = %v, %v; want %v", got, err, updated.Route)
	}

	viewer, err := client.CreateAdminToken(ctx, &adminv1.CreateAdminTokenRequest{Name: "v", Role: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := client.GetRoute(withToken(viewer.Token), &adminv1.GetRouteRequest{Id: bare.Route.Id}); err != nil || !proto.Equal(got.Route, bare.Route) {
		t.Errorf("viewer GetRoute = %v, %v", got, err)
	}
	before := b.state(t)
	for _, tt := range []struct {
		name string
		ctx  context.Context
		id   int64
		code codes.Code
		msg  string
	}{
		{"unknown id", ctx, 987654, codes.NotFound, "route 987654 not found"},
		{"zero id", ctx, 0, codes.InvalidArgument, "id must be a positive integer, got 0"},
		{"negative id", ctx, -1, codes.InvalidArgument, "id must be a positive integer, got -1"},
		{"no token", context.Background(), bare.Route.Id, codes.Unauthenticated, ""},
	} {
		_, err := client.GetRoute(tt.ctx, &adminv1.GetRouteRequest{Id: tt.id})
		if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.msg) {
			t.Errorf("%s: GetRoute(%d) = %v, want %s containing %q", tt.name, tt.id, err, tt.code, tt.msg)
		}
	}
	if b.state(t) != before {
		t.Error("GetRoute changed state")
	}
}

// TestGRPCDeleteRoutingRule: DeleteRoutingRule removes the one cell and bumps the revision;
// a missing cell or provider is NotFound, an unknown operation or kind InvalidArgument with a
// BadRequest violation naming it, a viewer PermissionDenied; refusals change nothing.
func TestGRPCDeleteRoutingRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client, _ := b.grpcClient(t)
	ctx := withToken(bootstrapToken)
	pid := b.provider(t, "gamma-1", "gamma")
	rows, err := client.ListRoutingRules(ctx, &adminv1.ListRoutingRulesRequest{ProviderId: pid})
	if err != nil {
		t.Fatal(err)
	}
	has := func(rs []*configv1.RoutingRule, op, kind string) bool {
		for _, r := range rs {
			if r.Operation == op && r.Kind == kind {
				return true
			}
		}
		return false
	}
	if !has(rows.Items, "create_embedding", "alpha") {
		t.Fatal("gamma provider has no seeded create_embedding/alpha cell")
	}
	rev := b.revision(t)
	if _, err := client.DeleteRoutingRule(ctx, &adminv1.DeleteRoutingRuleRequest{ProviderId: pid, Operation: "create_embedding", Kind: "alpha"}); err != nil {
		t.Fatal(err)
	}
	if got := b.revision(t); got != rev+1 {
		t.Errorf("config_revision after delete = %d, want %d", got, rev+1)
	}
	after, err := client.ListRoutingRules(ctx, &adminv1.ListRoutingRulesRequest{ProviderId: pid})
	if err != nil {
		t.Fatal(err)
	}
	if has(after.Items, "create_embedding", "alpha") || len(after.Items) != len(rows.Items)-1 || !has(after.Items, "create_embedding", "gamma") {
		t.Errorf("rows after delete = %v", after.Items)
	}

	viewer, err := client.CreateAdminToken(ctx, &adminv1.CreateAdminTokenRequest{Name: "v", Role: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		ctx        context.Context
		req        *adminv1.DeleteRoutingRuleRequest
		code       codes.Code
		violations []string
		msg        string
	}{
		{"already deleted", ctx, &adminv1.DeleteRoutingRuleRequest{ProviderId: pid, Operation: "create_embedding", Kind: "alpha"},
			codes.NotFound, nil, fmt.Sprintf("provider %d has no routing rule for (create_embedding, alpha)", pid)},
		{"unknown provider", ctx, &adminv1.DeleteRoutingRuleRequest{ProviderId: 987654, Operation: "create_embedding", Kind: "gamma"},
			codes.NotFound, nil, "provider 987654 not found"},
		{"unknown operation", ctx, &adminv1.DeleteRoutingRuleRequest{ProviderId: pid, Operation: "dance", Kind: "gamma"},
			codes.InvalidArgument, []string{"operation"}, `operation: unknown operation "dance"`},
		{"unknown kind", ctx, &adminv1.DeleteRoutingRuleRequest{ProviderId: pid, Operation: "create_embedding", Kind: "delta"},
			codes.InvalidArgument, []string{"kind"}, `kind: unknown kind "delta"`},
		{"empty names", ctx, &adminv1.DeleteRoutingRuleRequest{ProviderId: pid},
			codes.InvalidArgument, []string{"operation", "kind"}, `unknown operation ""`},
		{"kind does not fit", ctx, &adminv1.DeleteRoutingRuleRequest{ProviderId: pid, Operation: "generate_content", Kind: "gamma"},
			codes.InvalidArgument, []string{"kind"}, "needs a content-generation kind"},
		{"zero provider", ctx, &adminv1.DeleteRoutingRuleRequest{Operation: "create_embedding", Kind: "gamma"},
			codes.InvalidArgument, nil, "provider_id must be a positive integer"},
		{"viewer", withToken(viewer.Token), &adminv1.DeleteRoutingRuleRequest{ProviderId: pid, Operation: "create_embedding", Kind: "gamma"},
			codes.PermissionDenied, nil, ""},
	} {
		before := b.state(t)
		_, err := client.DeleteRoutingRule(tt.ctx, tt.req)
		if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.msg) {
			t.Errorf("%s: %v, want %s containing %q", tt.name, err, tt.code, tt.msg)
		}
		if got := strings.Join(fieldViolations(err), ","); got != strings.Join(tt.violations, ",") {
			t.Errorf("%s: violations %q, want %q", tt.name, got, strings.Join(tt.violations, ","))
		}
		if b.state(t) != before {
			t.Errorf("%s changed state", tt.name)
		}
	}
	if rows, err := client.ListRoutingRules(ctx, &adminv1.ListRoutingRulesRequest{ProviderId: pid}); err != nil || !has(rows.Items, "create_embedding", "gamma") {
		t.Errorf("refused deletes removed a cell: %v, %v", rows, err)
	}
}
