package admin

import (
	"net/http"
)

// routeOps are the route operations (routes_grpc.go).
var routeOps = []operation{
	{role: RoleViewer, rest: "GET /admin/routes", grpc: "ListRoutes", serve: func(s *Service, r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		p, err := s.ListRoutes(r.Context(), limit, cursor)
		return http.StatusOK, p, err
	}},
	{role: RoleAdmin, rest: "POST /admin/routes", grpc: "CreateRoute", serve: func(s *Service, r *http.Request) (int, any, error) {
		var in RouteInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateRoute(r.Context(), in)
		return http.StatusCreated, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/routes/{id}", grpc: "GetRoute", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetRoute(r.Context(), id)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/routes/{id}", grpc: "UpdateRoute", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in RouteInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpdateRoute(r.Context(), id, in)
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/routes/{id}", grpc: "DeleteRoute", serve: deleteBy("id", (*Service).DeleteRoute)},
}
