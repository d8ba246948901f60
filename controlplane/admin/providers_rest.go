package admin

import (
	"net/http"
)

// providerOps are the provider and credential operations (providers_grpc.go).
var providerOps = []operation{
	{role: RoleViewer, rest: "GET /admin/providers", grpc: "ListProviders", serve: func(s *Service, r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		p, err := s.ListProviders(r.Context(), limit, cursor)
		return http.StatusOK, p, err
	}},
	{role: RoleAdmin, rest: "POST /admin/providers", grpc: "CreateProvider", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in ProviderInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateProvider(r.Context(), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/providers/{id}", grpc: "GetProvider", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetProvider(r.Context(), id)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/providers/{id}", grpc: "UpdateProvider", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in ProviderInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpdateProvider(r.Context(), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/providers/{id}", grpc: "DeleteProvider", serve: deleteBy("id", (*Service).DeleteProvider)},
	{role: RoleAdmin, rest: "POST /admin/providers/{id}/credentials", grpc: "CreateCredential", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in CredentialInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		if in.ProviderID != 0 && in.ProviderID != id {
			return 0, nil, invalidFields("invalid credential", field("provider_id", "body provider_id %d does not match path id %d", in.ProviderID, id))
		}
		in.ProviderID = id
		out, err := s.CreateCredential(r.Context(), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/credentials/{id}", grpc: "DeleteCredential", serve: deleteBy("id", (*Service).DeleteCredential)},
}
