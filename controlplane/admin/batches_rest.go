package admin

import (
	"net/http"
	"strconv"
)

// batchOps list provider batches (viewers; batches_grpc.go): GET /admin/batches?open=&org_id=&api_key_id=&limit=&cursor=.
var batchOps = []operation{
	{role: RoleViewer, rest: "GET /admin/batches", grpc: "ListBatches", serve: func(s *Service, r *http.Request) (int, any, error) {
		q := r.URL.Query()
		if err := onlyParams(q, "open", "org_id", "api_key_id", "limit", "cursor"); err != nil {
			return 0, nil, err
		}
		var bq BatchQuery
		var err error
		if bq.Limit, bq.Cursor, err = pageParams(r); err != nil {
			return 0, nil, err
		}
		if v := q.Get("open"); v != "" {
			if bq.OpenOnly, err = strconv.ParseBool(v); err != nil {
				return 0, nil, errorf(CodeInvalid, "open must be true or false, got %q", v)
			}
		}
		for name, dst := range map[string]**int64{"org_id": &bq.OrgID, "api_key_id": &bq.APIKeyID} {
			if v := q.Get(name); v != "" {
				id, err := strconv.ParseInt(v, 10, 64)
				if err != nil || id <= 0 {
					return 0, nil, errorf(CodeInvalid, "%s must be a positive integer, got %q", name, v)
				}
				*dst = &id
			}
		}
		p, err := s.ListBatches(r.Context(), bq)
		return http.StatusOK, p, err
	}},
}
