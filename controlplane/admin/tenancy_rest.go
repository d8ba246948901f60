package admin

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
)

// tenancyOps are the tenants' operations (tenancy_grpc.go): orgs, teams, users, their API keys' lifecycle, and
// the model policy.
var tenancyOps = []operation{
	// Orgs, teams, users.
	{role: RoleAdmin, rest: "POST /admin/orgs", grpc: "CreateOrg", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in store.Org
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateOrg(r.Context(), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/orgs", grpc: "ListOrgs", serve: func(s *Service, r *http.Request) (int, any, error) {
		if err := onlyParams(r.URL.Query(), "limit", "cursor"); err != nil {
			return 0, nil, err
		}
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListOrgs(r.Context(), limit, cursor)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/orgs/{id}", grpc: "UpdateOrg", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in store.Org
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpdateOrg(r.Context(), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/orgs/{id}", grpc: "DeleteOrg", serve: deleteBy("id", (*Service).DeleteOrg)},
	{role: RoleAdmin, rest: "POST /admin/teams", grpc: "CreateTeam", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in store.Team
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateTeam(r.Context(), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/teams", grpc: "ListTeams", serve: func(s *Service, r *http.Request) (int, any, error) {
		q, err := tenantQuery(r, "org_id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListTeams(r.Context(), q)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/teams/{id}", grpc: "UpdateTeam", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in store.Team
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpdateTeam(r.Context(), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/teams/{id}", grpc: "DeleteTeam", serve: deleteBy("id", (*Service).DeleteTeam)},
	{role: RoleAdmin, rest: "POST /admin/users", grpc: "CreateUser", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in store.User
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateUser(r.Context(), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/users", grpc: "ListUsers", serve: func(s *Service, r *http.Request) (int, any, error) {
		q, err := tenantQuery(r, "org_id", "team_id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListUsers(r.Context(), q)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/users/{id}", grpc: "UpdateUser", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in store.User
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpdateUser(r.Context(), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/users/{id}", grpc: "DeleteUser", serve: deleteBy("id", (*Service).DeleteUser)},
	// API keys.
	{role: RoleAdmin, rest: "POST /admin/api-keys", grpc: "CreateApiKey", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in APIKeyInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateAPIKey(r.Context(), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/api-keys", grpc: "ListApiKeys", serve: func(s *Service, r *http.Request) (int, any, error) {
		q := r.URL.Query()
		if err := onlyParams(q, "limit", "cursor", "user_id", "team_id", "org_id", "prefix"); err != nil {
			return 0, nil, err
		}
		var in APIKeyQuery
		var err error
		if in.Limit, in.Cursor, err = pageParams(r); err != nil {
			return 0, nil, err
		}
		if err := idParamsErr(q, "user_id", "team_id", "org_id"); err != nil {
			return 0, nil, err
		}
		in.UserID, in.TeamID, in.OrgID = idParam(q, "user_id"), idParam(q, "team_id"), idParam(q, "org_id")
		in.Prefix = q.Get("prefix")
		out, err := s.ListAPIKeys(r.Context(), in)
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/api-keys/{id}", grpc: "GetApiKey", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetAPIKey(r.Context(), id)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PATCH /admin/api-keys/{id}", grpc: "UpdateApiKey", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in APIKeyPatch
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpdateAPIKey(r.Context(), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/api-keys/{id}", grpc: "DeleteApiKey", serve: deleteBy("id", (*Service).DeleteAPIKey)},
	{role: RoleAdmin, rest: "POST /admin/api-keys/{id}/rotate", grpc: "RotateApiKey", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in RotateInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.RotateAPIKey(r.Context(), id, in)
		return http.StatusOK, out, err
	}},
	// Model policy.
	{role: RoleViewer, rest: "GET /admin/model-policy", grpc: "GetModelPolicy", serve: func(s *Service, r *http.Request) (int, any, error) {
		out, err := s.GetModelPolicy(r.Context())
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/model-policy", grpc: "SetModelPolicy", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in ModelPolicyInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.SetModelPolicy(r.Context(), in)
		return http.StatusOK, out, err
	}},
	// Gateway settings.
	{role: RoleViewer, rest: "GET /admin/settings", grpc: "GetGatewaySettings", serve: func(s *Service, r *http.Request) (int, any, error) {
		out, err := s.GetGatewaySettings(r.Context())
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/settings", grpc: "SetGatewaySettings", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in GatewaySettingsInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.SetGatewaySettings(r.Context(), in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/providers/{id}/unpriced-policy", grpc: "SetProviderUnpricedPolicy", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in struct {
			UnpricedPolicy *string `json:"unpriced_policy"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, s.SetProviderUnpricedPolicy(r.Context(), id, in.UnpricedPolicy)
	}},
	{role: RoleViewer, rest: "GET /admin/unpriced-models", grpc: "ListUnpricedModels", serve: func(s *Service, r *http.Request) (int, any, error) {
		q := r.URL.Query()
		if err := onlyParams(q, "since"); err != nil {
			return 0, nil, err
		}
		var since time.Time
		if v := q.Get("since"); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return 0, nil, errorf(CodeInvalid, "since must be an RFC 3339 timestamp, got %q", v)
			}
			since = t
		}
		out, err := s.ListUnpricedModels(r.Context(), since)
		return http.StatusOK, Page[store.UnpricedModel]{Items: nonNil(out)}, err
	}},
}

// onlyParams refuses a query parameter not in allowed.
func onlyParams(q url.Values, allowed ...string) error {
	for k := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return errorf(CodeInvalid, "unknown query parameter %q", k)
		}
	}
	return nil
}

// idParam is a positive integer query parameter, or nil when absent or invalid (idParamsErr reports).
func idParam(q url.Values, name string) *int64 {
	id, err := strconv.ParseInt(q.Get(name), 10, 64)
	if err != nil || id <= 0 {
		return nil
	}
	return &id
}

// idParamsErr reports the first of names that is present but not a positive integer.
func idParamsErr(q url.Values, names ...string) error {
	for _, n := range names {
		if v := q.Get(n); v != "" && idParam(q, n) == nil {
			return errorf(CodeInvalid, "%s must be a positive integer, got %q", n, v)
		}
	}
	return nil
}

func tenantQuery(r *http.Request, filters ...string) (TenantQuery, error) {
	q := r.URL.Query()
	if err := onlyParams(q, append([]string{"limit", "cursor"}, filters...)...); err != nil {
		return TenantQuery{}, err
	}
	var out TenantQuery
	var err error
	if out.Limit, out.Cursor, err = pageParams(r); err != nil {
		return TenantQuery{}, err
	}
	if err := idParamsErr(q, filters...); err != nil {
		return TenantQuery{}, err
	}
	out.OrgID, out.TeamID = idParam(q, "org_id"), idParam(q, "team_id")
	return out, nil
}
