package admin

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

// viewerGRPCMethods is the fixed expectation of which AdminService methods a viewer may call: the
// methods the hand-kept read list allowed before roles moved into the operation tables. Every other
// method needs the admin role. Changing a method's role means changing this list on purpose.
var viewerGRPCMethods = []string{
	"ListPriceRules", "GetPriceRule", "QuotePrice", "ListProviders", "GetProvider",
	"ListRoutingRules", "ListRoutes", "GetRoute", "GetQuota", "ListUsages", "Export",
	"ListAdminTokens", "ListQuotaAdjustments", "GetSnapshotStatus", "ListQuotaPeriods",
	"GetPriceRuleProvenance", "GetPriceRuleHistory", "RepricePriceRules",
	"ListScheduledPriceRules",
	"ListApiKeys", "GetApiKey", "ListOrgs", "ListTeams", "ListUsers", "GetModelPolicy",
	"ListUnpricedModels", "GetQuotaAlerts", "ListWebhookEndpoints", "ListAlertEvents", "GetGatewaySettings",
	"GetSpend",
	"ListDataPlaneTokens",
	"ListReconciliationProviders", "ListReconciliationRuns", "GetReconciliationRun", "GetReconciliationDrift",
	"ListBatches",
}

// restRoleExceptions are the REST routes whose role is not the rule's (GET reads for a viewer, every
// other method writes for an admin): the quote and the re-price compute without changing anything, and
// the audit log is for admins only.
var restRoleExceptions = map[string]Role{
	"POST /admin/price-rules/quote":   RoleViewer,
	"POST /admin/price-rules/reprice": RoleViewer,
	"GET /admin/audit":                RoleAdmin,
}

// wantRESTRole is the role a REST pattern needs, as it did before roles moved into the operation tables.
func wantRESTRole(pattern string) Role {
	if r, ok := restRoleExceptions[pattern]; ok {
		return r
	}
	if strings.HasPrefix(pattern, "GET ") {
		return RoleViewer
	}
	return RoleAdmin
}

// wantGRPCRole is the role an AdminService method needs.
func wantGRPCRole(method string) Role {
	if slices.Contains(viewerGRPCMethods, method) {
		return RoleViewer
	}
	return RoleAdmin
}

// patternRecorder records the patterns registerHTTP registers.
type patternRecorder []string

func (p *patternRecorder) Handle(pattern string, _ http.Handler) { *p = append(*p, pattern) }

// registeredPatterns is every REST pattern RegisterHTTP registers.
func registeredPatterns(t *testing.T) []string {
	t.Helper()
	var rec patternRecorder
	registerHTTP(&rec, nil)
	if len(rec) == 0 {
		t.Fatal("RegisterHTTP registered no routes")
	}
	return rec
}

// serviceMethods is every AdminService method, read from the protobuf service descriptor.
func serviceMethods(t *testing.T) []string {
	t.Helper()
	sd := adminv1.File_tollgate_admin_v1_admin_proto.Services().ByName("AdminService")
	if sd == nil || string(sd.FullName()) != ServiceName {
		t.Fatalf("AdminService descriptor = %v, want %s", sd, ServiceName)
	}
	var out []string
	for i := range sd.Methods().Len() {
		out = append(out, string(sd.Methods().Get(i).Name()))
	}
	return out
}

// TestEveryRouteAndMethodDeclaresOneRole: every REST pattern RegisterHTTP registers and every AdminService
// method of the service descriptor is named by exactly one operation, with a real role, and that role is the
// one it had before (wantRESTRole, wantGRPCRole). No operation names a method the service lacks or a route
// that is not registered.
func TestEveryRouteAndMethodDeclaresOneRole(t *testing.T) {
	restOps, grpcOps := map[string][]operation{}, map[string][]operation{}
	for _, ops := range resources {
		for _, op := range ops {
			if op.rest == "" && op.grpc == "" {
				t.Errorf("operation %+v names neither a REST route nor a gRPC method", op)
			}
			if (op.rest == "") != (op.serve == nil) {
				t.Errorf("operation %q/%q: a REST route needs a handler and a handler a REST route", op.rest, op.grpc)
			}
			if op.rest != "" {
				restOps[op.rest] = append(restOps[op.rest], op)
			}
			if op.grpc != "" {
				grpcOps[op.grpc] = append(grpcOps[op.grpc], op)
			}
		}
	}

	patterns := registeredPatterns(t)
	for _, p := range patterns {
		ops := restOps[p]
		if len(ops) != 1 {
			t.Errorf("REST %s: declared by %d operations, want exactly 1", p, len(ops))
			continue
		}
		if got, want := ops[0].role, wantRESTRole(p); got != want {
			t.Errorf("REST %s: role %s, want %s", p, got, want)
		}
	}
	for p := range restOps {
		if !slices.Contains(patterns, p) {
			t.Errorf("REST %s: declared but not registered", p)
		}
	}

	methods := serviceMethods(t)
	for _, m := range methods {
		ops := grpcOps[m]
		if len(ops) != 1 {
			t.Errorf("gRPC %s: declared by %d operations, want exactly 1", m, len(ops))
			continue
		}
		if got, want := ops[0].role, wantGRPCRole(m); got != want {
			t.Errorf("gRPC %s: role %s, want %s", m, got, want)
		}
	}
	for m := range grpcOps {
		if !slices.Contains(methods, m) {
			t.Errorf("gRPC %s: declared but AdminService has no such method", m)
		}
	}
	for _, m := range viewerGRPCMethods {
		if !slices.Contains(methods, m) {
			t.Errorf("viewer method %s: AdminService has no such method", m)
		}
	}
}

// pathParam is a ServeMux wildcard in a pattern.
var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)

// TestRolesAreEnforcedAsDeclared calls every registered REST route and every AdminService method's
// authorizer with a viewer token against a real database: a viewer is refused (403, PermissionDenied)
// exactly where the role is admin, and the admin-only routes refuse before doing anything.
func TestRolesAreEnforcedAsDeclared(t *testing.T) {
	db := storetest.New(t)
	box, err := secret.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(db.Pool, box, "bootstrap-admin-token-0123456789", nil)
	ctx := context.Background()
	_, viewer, err := svc.CreateAdminToken(ctx, "viewer", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	RegisterHTTP(mux, svc)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, p := range registeredPatterns(t) {
		method, path, _ := strings.Cut(p, " ")
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+pathParam.ReplaceAllString(path, "1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+viewer)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		_ = resp.Body.Close()
		refused := resp.StatusCode == http.StatusForbidden
		if want := wantRESTRole(p) == RoleAdmin; refused != want {
			t.Errorf("viewer %s: status %d, refused %v, want refused %v", p, resp.StatusCode, refused, want)
		}
	}

	vctx := metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+viewer))
	for _, m := range serviceMethods(t) {
		err := svc.AuthorizeGRPC(vctx, MethodPrefix+m)
		refused := status.Code(err) == codes.PermissionDenied
		if want := wantGRPCRole(m) == RoleAdmin; refused != want || (!want && err != nil) {
			t.Errorf("viewer %s: %v, want refused %v", m, err, want)
		}
	}
	// A method AdminService does not declare needs the admin role.
	if err := svc.AuthorizeGRPC(vctx, MethodPrefix+"NoSuchMethod"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("viewer NoSuchMethod: %v, want PermissionDenied", err)
	}
}
