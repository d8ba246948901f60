package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// QuotaAlerts are a scope's alert thresholds, in percent of its limit.
type QuotaAlerts struct {
	Scope      string  `json:"scope"`
	ScopeID    int64   `json:"scope_id"`
	Thresholds []int32 `json:"thresholds"`
}

// GetQuotaAlerts reads a scope's thresholds (empty when it has none).
func GetQuotaAlerts(ctx context.Context, db DBTX, scope string, id int64) (QuotaAlerts, error) {
	a := QuotaAlerts{Scope: scope, ScopeID: id, Thresholds: []int32{}}
	err := db.QueryRow(ctx, `SELECT thresholds FROM quota_alerts WHERE scope = $1 AND scope_id = $2`, scope, id).Scan(&a.Thresholds)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return QuotaAlerts{}, fmt.Errorf("get alerts of %s/%d: %w", scope, id, interpretError(err))
	}
	return a, nil
}

// SetQuotaAlerts replaces a scope's thresholds; an empty list deletes them.
func SetQuotaAlerts(ctx context.Context, db DBTX, a QuotaAlerts) error {
	var err error
	if len(a.Thresholds) == 0 {
		_, err = db.Exec(ctx, `DELETE FROM quota_alerts WHERE scope = $1 AND scope_id = $2`, a.Scope, a.ScopeID)
	} else {
		_, err = db.Exec(ctx, `INSERT INTO quota_alerts (scope, scope_id, thresholds) VALUES ($1, $2, $3)
			ON CONFLICT (scope, scope_id) DO UPDATE SET thresholds = EXCLUDED.thresholds, updated_at = now()`,
			a.Scope, a.ScopeID, a.Thresholds)
	}
	if err != nil {
		return fmt.Errorf("set alerts of %s/%d: %w", a.Scope, a.ScopeID, interpretError(err))
	}
	return nil
}

// WebhookEndpoint receives alert events (never its secret).
type WebhookEndpoint struct {
	ID          int64     `json:"id"`
	URL         string    `json:"url"`
	Description string    `json:"description"`
	Enabled     bool      `json:"enabled"`
	CreatedAt   time.Time `json:"created_at"`
}

// InsertWebhookEndpoint stores an endpoint with its sealed signing secret.
func InsertWebhookEndpoint(ctx context.Context, db DBTX, e WebhookEndpoint, sealed []byte) (WebhookEndpoint, error) {
	e.Enabled = true
	if err := db.QueryRow(ctx, `INSERT INTO webhook_endpoints (url, description, secret_ciphertext) VALUES ($1, $2, $3)
		RETURNING id, created_at`, e.URL, e.Description, sealed).Scan(&e.ID, &e.CreatedAt); err != nil {
		return WebhookEndpoint{}, fmt.Errorf("insert webhook endpoint: %w", interpretError(err))
	}
	return e, nil
}

// ListWebhookEndpoints lists endpoints in id order.
func ListWebhookEndpoints(ctx context.Context, db DBTX) ([]WebhookEndpoint, error) {
	return collect(ctx, db, "webhook endpoints", func(r pgx.Rows) (WebhookEndpoint, error) {
		var e WebhookEndpoint
		return e, r.Scan(&e.ID, &e.URL, &e.Description, &e.Enabled, &e.CreatedAt)
	}, `SELECT id, url, description, enabled, created_at FROM webhook_endpoints ORDER BY id`)
}

// DeleteWebhookEndpoint deletes an endpoint and its pending deliveries; ErrNotFound when absent.
func DeleteWebhookEndpoint(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete webhook endpoint %d: %w", id, ErrNotFound)
	}
	return nil
}

// AlertEvent is one crossed threshold of one quota period, with its deliveries.
type AlertEvent struct {
	ID          int64             `json:"id"`
	Type        string            `json:"type"`
	Scope       string            `json:"scope"`
	ScopeID     int64             `json:"scope_id"`
	PeriodStart time.Time         `json:"period_start"`
	Threshold   int32             `json:"threshold"`
	CostLimit   string            `json:"cost_limit"`
	CostUsed    string            `json:"cost_used"`
	CreatedAt   time.Time         `json:"created_at"`
	Deliveries  []WebhookDelivery `json:"deliveries"`
}

// WebhookDelivery is the state of one event's delivery to one endpoint.
type WebhookDelivery struct {
	EndpointID  int64      `json:"endpoint_id"`
	WebhookID   string     `json:"webhook_id"`
	State       string     `json:"state"`
	Attempts    int32      `json:"attempts"`
	LastStatus  int32      `json:"last_status"`
	LastError   string     `json:"last_error"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

// AlertEventFilter selects events: by scope (and scope id), newest first before BeforeID.
type AlertEventFilter struct {
	Scope    string
	ScopeID  *int64
	BeforeID int64
	Limit    int
}

// ListAlertEvents lists events newest first with their deliveries.
func ListAlertEvents(ctx context.Context, db DBTX, f AlertEventFilter) ([]AlertEvent, error) {
	evs, err := collect(ctx, db, "alert events", func(r pgx.Rows) (AlertEvent, error) {
		e := AlertEvent{Deliveries: []WebhookDelivery{}}
		return e, r.Scan(&e.ID, &e.Type, &e.Scope, &e.ScopeID, &e.PeriodStart, &e.Threshold, &e.CostLimit, &e.CostUsed, &e.CreatedAt)
	}, `SELECT id, type, scope, scope_id, period_start, threshold, cost_limit::text, cost_used::text, created_at
		  FROM alert_events
		 WHERE ($1 = 0 OR id < $1) AND ($2 = '' OR scope = $2) AND ($3::bigint IS NULL OR scope_id = $3)
		 ORDER BY id DESC LIMIT $4`, f.BeforeID, f.Scope, f.ScopeID, f.Limit)
	if err != nil || len(evs) == 0 {
		return evs, err
	}
	ids := make([]int64, len(evs))
	byID := make(map[int64]*AlertEvent, len(evs))
	for i := range evs {
		ids[i] = evs[i].ID
		byID[evs[i].ID] = &evs[i]
	}
	rows, err := db.Query(ctx, `SELECT event_id, endpoint_id, webhook_id,
		       CASE WHEN delivered_at IS NOT NULL THEN 'delivered' WHEN failed_at IS NOT NULL THEN 'failed' ELSE 'pending' END,
		       attempts, last_status, last_error, delivered_at
		  FROM webhook_deliveries WHERE event_id = ANY ($1) ORDER BY event_id, endpoint_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("alert deliveries: %w", interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var ev int64
		var d WebhookDelivery
		if err := rows.Scan(&ev, &d.EndpointID, &d.WebhookID, &d.State, &d.Attempts, &d.LastStatus, &d.LastError, &d.DeliveredAt); err != nil {
			return nil, fmt.Errorf("alert deliveries: scan: %w", interpretError(err))
		}
		byID[ev].Deliveries = append(byID[ev].Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("alert deliveries: %w", interpretError(err))
	}
	return evs, nil
}
