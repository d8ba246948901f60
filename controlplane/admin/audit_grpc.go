package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

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
