package admin

// operation is one thing an admin client can do: a REST route, an AdminService method, or both when they
// are the same call over the two transports. Its role is declared here and only here: RegisterHTTP serves
// the route with it and AuthorizeGRPC authorizes the method with it (roles_test.go checks that every
// route and every method of the service descriptor is declared exactly once).
type operation struct {
	role  Role
	rest  string      // the ServeMux pattern, "METHOD /admin/…"; "" for a method with no REST route
	grpc  string      // the AdminService method name; "" for a route with no gRPC method
	serve restHandler // the REST handler; nil without a REST route
}

// resources is every admin resource's operation table, each in its <resource>_rest.go (its gRPC methods are
// in <resource>_grpc.go). Adding a resource adds its table here.
var resources = [][]operation{
	priceRuleOps,
	scheduleOps,
	catalogOps,
	providerOps,
	routingRuleOps,
	routeOps,
	tenancyOps,
	quotaOps,
	alertOps,
	burnOps,
	usageOps,
	spendOps,
	snapshotOps,
	importExportOps,
	auditOps,
	adminTokenOps,
	dataPlaneTokenOps,
	reconcileOps,
	batchOps,
}

// grpcRoles is the role each AdminService method needs, read from the operation tables.
var grpcRoles = func() map[string]Role {
	out := map[string]Role{}
	for _, ops := range resources {
		for _, op := range ops {
			if op.grpc != "" && op.role != RoleNone {
				out[op.grpc] = op.role
			}
		}
	}
	return out
}()

// grpcRole is the role method (a bare AdminService method name) needs: its declared one, else admin
// (fail closed).
func grpcRole(method string) Role {
	if r, ok := grpcRoles[method]; ok {
		return r
	}
	return RoleAdmin
}
