package admin

import (
	"net/http"
)

// snapshotOps report the published snapshot and the data planes watching it (snapshot_grpc.go).
var snapshotOps = []operation{
	{role: RoleViewer, rest: "GET /admin/snapshot-status", grpc: "GetSnapshotStatus", serve: func(s *Service, r *http.Request) (int, any, error) {
		out, err := s.SnapshotStatus(r.Context())
		return http.StatusOK, out, err
	}},
}
