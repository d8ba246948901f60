package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// dataPlaneTokenOps are the data-plane token operations (docs/security.md; dataplanetokens_grpc.go): revoking
// keeps the row, so DELETE answers the revoked token.
var dataPlaneTokenOps = []operation{
	{role: RoleViewer, rest: "GET /admin/dataplane-tokens", grpc: "ListDataPlaneTokens", serve: func(s *Service, r *http.Request) (int, any, error) {
		out, err := s.ListDataPlaneTokens(r.Context())
		return http.StatusOK, Page[store.DataPlaneToken]{Items: nonNil(out)}, err
	}},
	{role: RoleAdmin, rest: "POST /admin/dataplane-tokens", grpc: "CreateDataPlaneToken", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in struct {
			Name   string   `json:"name"`
			Scopes []string `json:"scopes"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		t, tok, err := s.CreateDataPlaneToken(r.Context(), in.Name, in.Scopes)
		return http.StatusCreated, struct {
			store.DataPlaneToken
			Token string `json:"token"`
		}{t, tok}, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/dataplane-tokens/{id}", grpc: "RevokeDataPlaneToken", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		if err := emptyBody(r); err != nil {
			return 0, nil, err
		}
		t, err := s.RevokeDataPlaneToken(r.Context(), id)
		return http.StatusOK, t, err
	}},
}
