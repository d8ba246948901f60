package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// adminTokenOps are the admin token operations (admintokens_grpc.go) and whoami, which names the caller's.
var adminTokenOps = []operation{
	{role: RoleViewer, rest: "GET /admin/admin-tokens", grpc: "ListAdminTokens", serve: func(s *Service, r *http.Request) (int, any, error) {
		out, err := s.ListAdminTokens(r.Context())
		return http.StatusOK, Page[store.AdminToken]{Items: nonNil(out)}, err
	}},
	{role: RoleAdmin, rest: "POST /admin/admin-tokens", grpc: "CreateAdminToken", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in struct {
			Name string `json:"name"`
			Role string `json:"role"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		t, tok, err := s.CreateAdminToken(r.Context(), in.Name, in.Role)
		return http.StatusCreated, struct {
			store.AdminToken
			Token string `json:"token"`
		}{t, tok}, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/admin-tokens/{id}", grpc: "DeleteAdminToken", serve: deleteBy("id", (*Service).DeleteAdminToken)},
	{role: RoleViewer, rest: "GET /admin/whoami", serve: func(s *Service, r *http.Request) (int, any, error) {
		p, err := s.Authenticate(r.Context(), r.Header.Get("Authorization"))
		return http.StatusOK, map[string]string{"role": p.Role.String(), "name": p.Name}, err
	}},
}
