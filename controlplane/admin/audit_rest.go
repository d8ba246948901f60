package admin

import (
	"net/http"
	"time"
)

// auditOps read the audit log (admins only; audit_grpc.go): filters resource, resource_id, actor, since and
// until (RFC 3339), limit and cursor.
var auditOps = []operation{
	{role: RoleAdmin, rest: "GET /admin/audit", grpc: "ListAuditEvents", serve: func(s *Service, r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		v := r.URL.Query()
		q := AuditQuery{Resource: v.Get("resource"), ResourceID: v.Get("resource_id"), ActorName: v.Get("actor"),
			Limit: limit, Cursor: cursor}
		for name, dst := range map[string]*time.Time{"since": &q.Since, "until": &q.Until} {
			if t := v.Get(name); t != "" {
				if *dst, err = time.Parse(time.RFC3339Nano, t); err != nil {
					return 0, nil, errorf(CodeInvalid, "%s must be an RFC 3339 time, got %q", name, t)
				}
			}
		}
		p, err := s.ListAudit(r.Context(), q)
		return http.StatusOK, p, err
	}},
}
