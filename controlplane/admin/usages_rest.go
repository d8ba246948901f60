package admin

import (
	"net/http"
)

// usageOps list the usage ledger (usages_grpc.go).
var usageOps = []operation{
	{role: RoleViewer, rest: "GET /admin/usages", grpc: "ListUsages", serve: func(s *Service, r *http.Request) (int, any, error) {
		q, err := usageQuery(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListUsages(r.Context(), q)
		return http.StatusOK, out, err
	}},
}
