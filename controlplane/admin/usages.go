package admin

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/vocab"
)

// UsageQuery filters usage rows; see store.UsageFilter. The text filters (end state, models, operation,
// request id) match exactly when not empty.
type UsageQuery struct {
	Since, Until                                         time.Time
	APIKeyID, UserID, TeamID, OrgID, RouteID, ProviderID *int64
	// BatchID keeps the rows of one provider batch's lines (docs/batches.md).
	BatchID                                          *int64
	EndState, LogicalModel, UpstreamModel, Operation string
	RequestID                                        string
	// Kind is "request" or "adjustment" (docs/budgets.md, "Corrections"); "" lists both.
	Kind   string
	Limit  int
	Cursor string
}

// ListUsages lists usage rows, newest first, a page at a time.
func (s *Service) ListUsages(ctx context.Context, q UsageQuery) (Page[store.StoredUsage], error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return Page[store.StoredUsage]{}, err
	}
	before, err := decodeCursor(q.Cursor)
	if err != nil {
		return Page[store.StoredUsage]{}, err
	}
	switch vocab.EndState(q.EndState) {
	case "", vocab.EndCompleted, vocab.EndUpstreamError, vocab.EndUpstreamInterrupted, vocab.EndClientDropped, vocab.EndRejected:
	default:
		return Page[store.StoredUsage]{}, errorf(CodeInvalid, "end_state %q is not a known end state", q.EndState)
	}
	switch q.Kind {
	case "", "request", "adjustment":
	default:
		return Page[store.StoredUsage]{}, errorf(CodeInvalid, `kind must be "request" or "adjustment", got %q`, q.Kind)
	}
	rows, err := s.usages.List(ctx, store.UsageFilter{Since: q.Since, Until: q.Until, APIKeyID: q.APIKeyID,
		UserID: q.UserID, TeamID: q.TeamID, OrgID: q.OrgID, RouteID: q.RouteID, ProviderID: q.ProviderID, BatchID: q.BatchID,
		EndState: q.EndState, LogicalModel: q.LogicalModel, UpstreamModel: q.UpstreamModel, Operation: q.Operation,
		RequestID: q.RequestID, Kind: q.Kind, BeforeID: before, Limit: limit})
	if err != nil {
		return Page[store.StoredUsage]{}, storeError(err, "usages")
	}
	return page(rows, limit, func(u store.StoredUsage) int64 { return u.ID }), nil
}

var usageParams = map[string]bool{"limit": true, "cursor": true, "since": true, "until": true, "api_key_id": true,
	"user_id": true, "team_id": true, "org_id": true, "route_id": true, "provider_id": true, "end_state": true,
	"logical_model": true, "upstream_model": true, "operation": true, "request_id": true, "kind": true, "batch_id": true}

// usageQuery reads GET /admin/usages' query parameters.
func usageQuery(r *http.Request) (UsageQuery, error) {
	q := r.URL.Query()
	for k := range q {
		if !usageParams[k] {
			return UsageQuery{}, errorf(CodeInvalid, "unknown query parameter %q", k)
		}
	}
	var out UsageQuery
	var err error
	if out.Limit, out.Cursor, err = pageParams(r); err != nil {
		return UsageQuery{}, err
	}
	for name, dst := range map[string]*time.Time{"since": &out.Since, "until": &out.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return UsageQuery{}, errorf(CodeInvalid, "%s must be an RFC 3339 timestamp, got %q", name, v)
			}
			*dst = t
		}
	}
	for name, dst := range map[string]**int64{"api_key_id": &out.APIKeyID, "user_id": &out.UserID, "team_id": &out.TeamID,
		"org_id": &out.OrgID, "route_id": &out.RouteID, "provider_id": &out.ProviderID, "batch_id": &out.BatchID} {
		if v := q.Get(name); v != "" {
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id <= 0 {
				return UsageQuery{}, errorf(CodeInvalid, "%s must be a positive integer, got %q", name, v)
			}
			*dst = &id
		}
	}
	out.EndState, out.LogicalModel, out.UpstreamModel = q.Get("end_state"), q.Get("logical_model"), q.Get("upstream_model")
	out.Operation, out.RequestID, out.Kind = q.Get("operation"), q.Get("request_id"), q.Get("kind")
	return out, nil
}
