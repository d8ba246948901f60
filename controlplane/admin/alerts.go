package admin

import (
	"context"
	"fmt"
	"net/url"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/alert"
	"github.com/tollgate/tollgate/controlplane/store"
)

// Alert threshold bounds (percent of a quota's limit).
const (
	MaxThresholds   = 16
	MaxThresholdPct = 1000
)

// QuotaAlertsInput sets a scope's thresholds: percents of its limit, each from 1 to 1000; [] removes them.
type QuotaAlertsInput struct {
	Thresholds []int32 `json:"thresholds"`
}

// GetQuotaAlerts reads a scope's thresholds.
func (s *Service) GetQuotaAlerts(ctx context.Context, scope string, id int64) (store.QuotaAlerts, error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return store.QuotaAlerts{}, err
	}
	a, err := store.GetQuotaAlerts(ctx, s.pool, scope, id)
	return a, storeError(err, fmt.Sprintf("alerts of %s/%d", scope, id))
}

// SetQuotaAlerts replaces a scope's thresholds (sorted, duplicates refused). Thresholds already crossed
// in the current period fire at the next evaluation.
func (s *Service) SetQuotaAlerts(ctx context.Context, scope string, id int64, in QuotaAlertsInput) (store.QuotaAlerts, error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return store.QuotaAlerts{}, err
	}
	var details []Detail
	if len(in.Thresholds) > MaxThresholds {
		details = append(details, field("thresholds", "at most %d thresholds, got %d", MaxThresholds, len(in.Thresholds)))
	}
	seen := map[int32]bool{}
	for i, t := range in.Thresholds {
		name := fmt.Sprintf("thresholds[%d]", i)
		switch {
		case t < 1 || t > MaxThresholdPct:
			details = append(details, field(name, "must be a percent from 1 to %d, got %d", MaxThresholdPct, t))
		case seen[t]:
			details = append(details, field(name, "duplicate threshold %d", t))
		}
		seen[t] = true
	}
	if details != nil {
		return store.QuotaAlerts{}, invalidFields("invalid alert thresholds", details...)
	}
	a := store.QuotaAlerts{Scope: scope, ScopeID: id, Thresholds: slices.Sorted(slices.Values(in.Thresholds))}
	if a.Thresholds == nil {
		a.Thresholds = []int32{}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error { return store.SetQuotaAlerts(ctx, tx, a) })
	return a, storeError(err, fmt.Sprintf("alerts of %s/%d", scope, id))
}

// WebhookEndpointInput creates an endpoint: an absolute http(s) URL and a free description.
type WebhookEndpointInput struct {
	URL         string `json:"url"`
	Description string `json:"description"`
}

// CreatedWebhookEndpoint is a new endpoint with its signing secret, shown this once.
type CreatedWebhookEndpoint struct {
	store.WebhookEndpoint
	Secret string `json:"secret"`
}

// CreateWebhookEndpoint creates an endpoint that receives every alert event from now on, with a new
// signing secret ("whsec_" + base64 of 32 random bytes), sealed at rest with TOLLGATE_SECRET_KEY.
func (s *Service) CreateWebhookEndpoint(ctx context.Context, in WebhookEndpointInput) (CreatedWebhookEndpoint, error) {
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return CreatedWebhookEndpoint{}, invalidFields("invalid webhook endpoint", field("url", "%q: want an absolute http(s) URL", in.URL))
	}
	secret, err := alert.NewSecret()
	if err != nil {
		return CreatedWebhookEndpoint{}, err
	}
	sealed, err := s.box.Seal([]byte(secret))
	if err != nil {
		return CreatedWebhookEndpoint{}, fmt.Errorf("seal signing secret: %w", err)
	}
	var e store.WebhookEndpoint
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		e, err = store.InsertWebhookEndpoint(ctx, tx, store.WebhookEndpoint{URL: in.URL, Description: in.Description}, sealed)
		return err
	})
	if err != nil {
		return CreatedWebhookEndpoint{}, storeError(err, "webhook endpoint")
	}
	return CreatedWebhookEndpoint{WebhookEndpoint: e, Secret: secret}, nil
}

// ListWebhookEndpoints lists the endpoints (never their secrets).
func (s *Service) ListWebhookEndpoints(ctx context.Context) ([]store.WebhookEndpoint, error) {
	es, err := store.ListWebhookEndpoints(ctx, s.pool)
	return es, storeError(err, "webhook endpoints")
}

// DeleteWebhookEndpoint deletes an endpoint; its pending deliveries are dropped, events stay.
func (s *Service) DeleteWebhookEndpoint(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.DeleteWebhookEndpoint(ctx, tx, id) }),
		fmt.Sprintf("webhook endpoint %d", id))
}

// AlertEventQuery filters ListAlertEvents.
type AlertEventQuery struct {
	Scope   string
	ScopeID *int64
	Limit   int
	Cursor  string
}

// ListAlertEvents lists alert events, newest first, with each delivery's state.
func (s *Service) ListAlertEvents(ctx context.Context, q AlertEventQuery) (Page[store.AlertEvent], error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return Page[store.AlertEvent]{}, err
	}
	before, err := decodeCursor(q.Cursor)
	if err != nil {
		return Page[store.AlertEvent]{}, err
	}
	evs, err := store.ListAlertEvents(ctx, s.pool, store.AlertEventFilter{Scope: q.Scope, ScopeID: q.ScopeID, BeforeID: before, Limit: limit})
	if err != nil {
		return Page[store.AlertEvent]{}, storeError(err, "alert events")
	}
	return page(evs, limit, func(e store.AlertEvent) int64 { return e.ID }), nil
}
