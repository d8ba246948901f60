package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func webhookEndpointToProto(e store.WebhookEndpoint) *adminv1.WebhookEndpoint {
	return &adminv1.WebhookEndpoint{Id: e.ID, Url: e.URL, Description: e.Description, Enabled: e.Enabled, CreatedAt: timestamppb.New(e.CreatedAt)}
}

func (g *grpcServer) GetQuotaAlerts(ctx context.Context, req *adminv1.GetQuotaAlertsRequest) (*adminv1.GetQuotaAlertsResponse, error) {
	a, err := g.s.GetQuotaAlerts(ctx, req.GetScope(), req.GetScopeId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetQuotaAlertsResponse{Thresholds: a.Thresholds}, nil
}

func (g *grpcServer) SetQuotaAlerts(ctx context.Context, req *adminv1.SetQuotaAlertsRequest) (*adminv1.SetQuotaAlertsResponse, error) {
	a, err := g.s.SetQuotaAlerts(ctx, req.GetScope(), req.GetScopeId(), QuotaAlertsInput{Thresholds: req.GetThresholds()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.SetQuotaAlertsResponse{Thresholds: a.Thresholds}, nil
}

func (g *grpcServer) CreateWebhookEndpoint(ctx context.Context, req *adminv1.CreateWebhookEndpointRequest) (*adminv1.CreateWebhookEndpointResponse, error) {
	e, err := g.s.CreateWebhookEndpoint(ctx, WebhookEndpointInput{URL: req.GetUrl(), Description: req.GetDescription()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreateWebhookEndpointResponse{Endpoint: webhookEndpointToProto(e.WebhookEndpoint), Secret: e.Secret}, nil
}

func (g *grpcServer) ListWebhookEndpoints(ctx context.Context, _ *adminv1.ListWebhookEndpointsRequest) (*adminv1.ListWebhookEndpointsResponse, error) {
	es, err := g.s.ListWebhookEndpoints(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListWebhookEndpointsResponse{}
	for _, e := range es {
		out.Items = append(out.Items, webhookEndpointToProto(e))
	}
	return out, nil
}

func (g *grpcServer) DeleteWebhookEndpoint(ctx context.Context, req *adminv1.DeleteWebhookEndpointRequest) (*adminv1.DeleteWebhookEndpointResponse, error) {
	if err := g.s.DeleteWebhookEndpoint(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeleteWebhookEndpointResponse{}, nil
}

func (g *grpcServer) ListAlertEvents(ctx context.Context, req *adminv1.ListAlertEventsRequest) (*adminv1.ListAlertEventsResponse, error) {
	p, err := g.s.ListAlertEvents(ctx, AlertEventQuery{Scope: req.GetScope(), ScopeID: req.ScopeId, Limit: int(req.GetLimit()), Cursor: req.GetCursor()})
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListAlertEventsResponse{NextCursor: p.NextCursor}
	for _, e := range p.Items {
		pe := &adminv1.AlertEvent{Id: e.ID, Type: e.Type, Scope: e.Scope, ScopeId: e.ScopeID, PeriodStart: timestamppb.New(e.PeriodStart),
			Threshold: e.Threshold, CostLimit: e.CostLimit, CostUsed: e.CostUsed, CreatedAt: timestamppb.New(e.CreatedAt)}
		for _, d := range e.Deliveries {
			pd := &adminv1.WebhookDelivery{EndpointId: d.EndpointID, WebhookId: d.WebhookID, State: d.State, Attempts: d.Attempts,
				LastStatus: d.LastStatus, LastError: d.LastError}
			if d.DeliveredAt != nil {
				pd.DeliveredAt = timestamppb.New(*d.DeliveredAt)
			}
			pe.Deliveries = append(pe.Deliveries, pd)
		}
		out.Items = append(out.Items, pe)
	}
	return out, nil
}
