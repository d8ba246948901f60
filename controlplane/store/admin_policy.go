package store

import (
	"context"
	"fmt"
	"time"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

// GetModelPolicy reads the gateway-wide model policy.
func GetModelPolicy(ctx context.Context, db DBTX) (*configv1.ModelPolicy, error) {
	mp := &configv1.ModelPolicy{}
	if err := db.QueryRow(ctx, `SELECT unpriced_policy, direct_addressing FROM gateway_settings`).
		Scan(&mp.UnpricedPolicy, &mp.DirectAddressing); err != nil {
		return nil, fmt.Errorf("model policy: %w", interpretError(err))
	}
	return mp, nil
}

// SetModelPolicy writes the gateway-wide model policy.
func SetModelPolicy(ctx context.Context, db DBTX, mp *configv1.ModelPolicy) error {
	if _, err := db.Exec(ctx, `UPDATE gateway_settings SET unpriced_policy = $1, direct_addressing = $2, updated_at = now()`,
		mp.GetUnpricedPolicy(), mp.GetDirectAddressing()); err != nil {
		return fmt.Errorf("set model policy: %w", interpretError(err))
	}
	return nil
}

// GetGatewaySettings reads the gateway-wide settings.
func GetGatewaySettings(ctx context.Context, db DBTX) (*configv1.GatewaySettings, error) {
	gs := &configv1.GatewaySettings{}
	if err := db.QueryRow(ctx, `SELECT cost_disclosure FROM gateway_settings`).Scan(&gs.CostDisclosure); err != nil {
		return nil, fmt.Errorf("gateway settings: %w", interpretError(err))
	}
	return gs, nil
}

// SetGatewaySettings changes the gateway-wide settings given (nil: unchanged) and answers them all.
func SetGatewaySettings(ctx context.Context, db DBTX, costDisclosure *bool) (*configv1.GatewaySettings, error) {
	gs := &configv1.GatewaySettings{}
	if err := db.QueryRow(ctx, `UPDATE gateway_settings SET cost_disclosure = coalesce($1, cost_disclosure), updated_at = now()
		RETURNING cost_disclosure`, costDisclosure).Scan(&gs.CostDisclosure); err != nil {
		return nil, fmt.Errorf("set gateway settings: %w", interpretError(err))
	}
	return gs, nil
}

// ProviderPolicy is a provider's own unpriced policy.
type ProviderPolicy struct {
	ProviderID     int64  `json:"provider_id"`
	Name           string `json:"name"`
	UnpricedPolicy string `json:"unpriced_policy"`
}

// ListProviderPolicies lists the providers that have their own unpriced policy, in id order.
func ListProviderPolicies(ctx context.Context, db DBTX) ([]ProviderPolicy, error) {
	rows, err := db.Query(ctx, `SELECT id, name, unpriced_policy FROM providers WHERE unpriced_policy IS NOT NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("provider policies: %w", interpretError(err))
	}
	defer rows.Close()
	out := []ProviderPolicy{}
	for rows.Next() {
		var p ProviderPolicy
		if err := rows.Scan(&p.ProviderID, &p.Name, &p.UnpricedPolicy); err != nil {
			return nil, fmt.Errorf("provider policies: scan: %w", interpretError(err))
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("provider policies: %w", interpretError(err))
	}
	return out, nil
}

// SetProviderUnpricedPolicy sets (nil: clears) a provider's own unpriced policy; ErrNotFound when absent.
func SetProviderUnpricedPolicy(ctx context.Context, db DBTX, providerID int64, policy *string) error {
	tag, err := db.Exec(ctx, `UPDATE providers SET unpriced_policy = $2, updated_at = now() WHERE id = $1`, providerID, policy)
	if err != nil {
		return fmt.Errorf("set unpriced policy of provider %d: %w", providerID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set unpriced policy of provider %d: %w", providerID, ErrNotFound)
	}
	return nil
}

// UnpricedModel is one (provider, upstream model) that billable requests were served on without a price
// rule (cost 0), with how often and when.
type UnpricedModel struct {
	ProviderID    int64     `json:"provider_id"`
	UpstreamModel string    `json:"upstream_model"`
	Requests      int64     `json:"requests"`
	FirstSeen     time.Time `json:"first_seen"`
	LastSeen      time.Time `json:"last_seen"`
}

// UnpricedOperations are the billable operations: a row of one of them with no price rule was served
// unpriced. Other operations (model listing, token counting) are free by definition.
var UnpricedOperations = []string{"generate_content", "stream_generate_content", "create_embedding", "create_image",
	"edit_image", "rerank"}

// ListUnpricedModels lists the unpriced models served since since, most requests first: usage rows of a
// billable operation, settled against a provider, not rejected, with no price rule.
func ListUnpricedModels(ctx context.Context, db DBTX, since time.Time) ([]UnpricedModel, error) {
	rows, err := db.Query(ctx, `
		SELECT provider_id, upstream_model, count(*), min(created_at), max(created_at)
		  FROM usages
		 WHERE price_rule_id IS NULL AND provider_id IS NOT NULL AND end_state <> 'rejected'
		   AND operation = ANY ($1) AND created_at >= $2
		 GROUP BY provider_id, upstream_model
		 ORDER BY count(*) DESC, provider_id, upstream_model`, UnpricedOperations, since)
	if err != nil {
		return nil, fmt.Errorf("unpriced models: %w", interpretError(err))
	}
	defer rows.Close()
	out := []UnpricedModel{}
	for rows.Next() {
		var m UnpricedModel
		if err := rows.Scan(&m.ProviderID, &m.UpstreamModel, &m.Requests, &m.FirstSeen, &m.LastSeen); err != nil {
			return nil, fmt.Errorf("unpriced models: scan: %w", interpretError(err))
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("unpriced models: %w", interpretError(err))
	}
	return out, nil
}
