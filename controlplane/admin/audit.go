package admin

import (
	"context"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
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

// registerAuditHTTP registers GET /admin/audit (admins only): filters resource, resource_id, actor,
// since and until (RFC 3339), limit and cursor.
func registerAuditHTTP(mux *http.ServeMux, s *Service) {
	mux.Handle("GET /admin/audit", s.restEndpoint(RoleAdmin, func(r *http.Request) (int, any, error) {
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
	}))
}

func (g *grpcServer) ListAuditEvents(ctx context.Context, req *adminv1.ListAuditEventsRequest) (*adminv1.ListAuditEventsResponse, error) {
	q := AuditQuery{Resource: req.GetResource(), ResourceID: req.GetResourceId(), ActorName: req.GetActorName(),
		Limit: int(req.GetLimit()), Cursor: req.GetCursor()}
	if req.GetSince() != nil {
		q.Since = req.GetSince().AsTime()
	}
	if req.GetUntil() != nil {
		q.Until = req.GetUntil().AsTime()
	}
	p, err := g.s.ListAudit(ctx, q)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListAuditEventsResponse{NextCursor: p.NextCursor}
	for _, e := range p.Items {
		out.Items = append(out.Items, &adminv1.AuditEvent{Id: e.ID, At: timestamppb.New(e.At), Actor: e.Actor,
			ActorRole: e.ActorRole, ActorName: e.ActorName, Action: e.Action, Resource: e.Resource, ResourceId: e.ResourceID,
			BeforeJson: string(e.Before), AfterJson: string(e.After)})
	}
	return out, nil
}

// ActorInterceptor names the caller of every AdminService call (authorized already, by AuthorizeGRPC
// or UnaryInterceptor) in its context, as the REST endpoint does, so the changes it makes — also its
// single statements outside a transaction — are recorded as the caller's in the audit log.
func (s *Service) ActorInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, MethodPrefix) || grpcReadMethods[strings.TrimPrefix(info.FullMethod, MethodPrefix)] {
		return handler(ctx, req) // reads change nothing: no second token lookup
	}
	p, ok, err := s.caller(ctx)
	if err != nil {
		return nil, s.grpcError(info.FullMethod, err)
	}
	if ok {
		ctx = WithPrincipal(ctx, p)
	}
	return handler(ctx, req)
}
