package store

import (
	"context"
	"fmt"
	"time"
)

// RequestCost is the settled usage row of one request as its caller may see it (docs/cost.md, "Cost by
// request id").
type RequestCost struct {
	RequestID                                                            string
	InputTokens, OutputTokens, CacheReadTokens                           int64
	CacheCreation5mTokens, CacheCreation30mTokens, CacheCreation1hTokens int64
	ImageOutputTokens                                                    int64
	// Cost is the row's exact decimal cost as Postgres prints it.
	Cost string
	// PriceRuleID and PriceRuleVersion are 0 when no rule matched or the version is unknown.
	PriceRuleID, PriceRuleVersion int64
	RequestedTier, ReportedTier   string
	Source, EndState, BillingFlag string
	HTTPStatus                    int32
	LogicalModel, Operation       string
	InboundKind                   string
	CreatedAt, SettledAt          time.Time
}

// ServedTier is the tier the request was priced at: the reported tier, else the requested one.
func (c RequestCost) ServedTier() string {
	if c.ReportedTier != "" {
		return c.ReportedTier
	}
	return c.RequestedTier
}

// GetRequestCost reads the settled row of requestID made with key apiKeyID; ErrNotFound when there is none,
// including when the request id belongs to another key's request (the caller cannot tell the two apart).
// Adjustment rows are never answered.
//
// The lookup is one probe of usages_request_id_key (request_id, created_at) per monthly partition: the
// request id does not say its month, and the index leads with it in every partition, so the cost does not
// grow with the partitions' sizes (docs/cost.md, "Lookup cost").
func GetRequestCost(ctx context.Context, db DBTX, apiKeyID int64, requestID string) (RequestCost, error) {
	var c RequestCost
	var rule, version *int64
	err := db.QueryRow(ctx, `
		SELECT request_id, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens,
		       cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens, cost::text, price_rule_id,
		       price_rule_version, requested_tier, reported_tier, source, end_state, billing_flag, http_status,
		       logical_model, operation, inbound_kind, created_at, settled_at
		  FROM usages
		 WHERE request_id = $1 AND api_key_id = $2 AND kind = 'request'
		 ORDER BY created_at
		 LIMIT 1`, requestID, apiKeyID).
		Scan(&c.RequestID, &c.InputTokens, &c.OutputTokens, &c.CacheReadTokens, &c.CacheCreation5mTokens,
			&c.CacheCreation30mTokens, &c.CacheCreation1hTokens, &c.ImageOutputTokens, &c.Cost, &rule, &version,
			&c.RequestedTier, &c.ReportedTier, &c.Source, &c.EndState, &c.BillingFlag, &c.HTTPStatus,
			&c.LogicalModel, &c.Operation, &c.InboundKind, &c.CreatedAt, &c.SettledAt)
	if err != nil {
		return RequestCost{}, fmt.Errorf("cost of request %q: %w", requestID, interpretError(err))
	}
	if rule != nil {
		c.PriceRuleID = *rule
	}
	if version != nil {
		c.PriceRuleVersion = *version
	}
	return c, nil
}
