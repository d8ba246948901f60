package admin

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
)

// The admin audit log is written by the database (migration 0009): a row trigger on every
// configuration table records each change with the transaction's actor, whatever path made it. The
// admin API's part is to name the caller — WithPrincipal for REST (and the console, which calls it),
// UnaryInterceptor for gRPC, SetActor in its own transactions — and to list the log (docs/observability.md).

// AuditQuery filters ListAudit; zero fields select everything.
type AuditQuery struct {
	Resource   string
	ResourceID string
	ActorName  string
	Since      time.Time
	Until      time.Time
	Limit      int
	Cursor     string
}

// ListAudit lists audit events, newest first, a page at a time.
func (s *Service) ListAudit(ctx context.Context, q AuditQuery) (Page[store.AuditEvent], error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return Page[store.AuditEvent]{}, err
	}
	before, err := decodeCursor(q.Cursor)
	if err != nil {
		return Page[store.AuditEvent]{}, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return Page[store.AuditEvent]{}, errorf(CodeInvalid, "until must be after since")
	}
	es, err := store.ListAudit(ctx, s.pool, store.AuditFilter{Resource: q.Resource, ResourceID: q.ResourceID,
		ActorName: q.ActorName, Since: q.Since, Until: q.Until, Before: before}, limit)
	if err != nil {
		return Page[store.AuditEvent]{}, storeError(err, "audit log")
	}
	return page(es, limit, func(e store.AuditEvent) int64 { return e.ID }), nil
}
