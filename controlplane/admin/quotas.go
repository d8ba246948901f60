package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/period"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// checkScope validates a quota scope and that the org, team, user or API key exists.
func (s *Service) checkScope(ctx context.Context, scope string, id int64) error {
	switch vocab.Scope(scope) {
	case vocab.ScopeOrg, vocab.ScopeTeam, vocab.ScopeUser, vocab.ScopeKey:
	default:
		return errorf(CodeInvalid, `scope must be "org", "team", "user" or "key", got %q`, scope)
	}
	if err := checkID(id, "scope id"); err != nil {
		return err
	}
	ok, err := store.ScopeExists(ctx, s.pool, scope, id)
	if err != nil {
		return storeError(err, "quota scope")
	}
	if !ok {
		return errorf(CodeNotFound, "%s %d not found", scope, id)
	}
	return nil
}

// GetQuota reads a scope's quota (for a periodic quota, the current period's spend). A scope without a
// quota row is answered as unlimited with nothing used (it is not quota-bearing).
func (s *Service) GetQuota(ctx context.Context, scope string, id int64) (store.Quota, error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return store.Quota{}, err
	}
	q, err := store.GetQuota(ctx, s.pool, scope, id, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return store.Quota{Scope: scope, ScopeID: id, CostUsed: "0", LifetimeCostUsed: "0", Period: string(period.None),
			TimeZone: period.DefaultZone}, nil
	}
	return q, storeError(err, fmt.Sprintf("quota %s/%d", scope, id))
}

// QuotaInput sets a quota: the limit (a decimal string of dollars, or null for unlimited) always; the
// period ("none", "daily", "weekly", "monthly"), its IANA time zone and the scope-wide per-minute rate
// limits (0: unlimited; not for scope "key", whose own key limits apply) when present.
type QuotaInput struct {
	CostLimit *string `json:"cost_limit"`
	Period    *string `json:"period,omitempty"`
	TimeZone  *string `json:"time_zone,omitempty"`
	RPMLimit  *int32  `json:"rpm_limit,omitempty"`
	TPMLimit  *int64  `json:"tpm_limit,omitempty"`
}

// SetQuota creates or changes a scope's quota; its spend is kept (docs/budgets.md, "Model").
func (s *Service) SetQuota(ctx context.Context, scope string, id int64, in QuotaInput) (store.Quota, error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return store.Quota{}, err
	}
	var details []Detail
	// The snapshot compiler's own check: a plain decimal, not negative, at most pricing.MaxExactMicros.
	if _, err := snapshot.CheckQuotaLimit(scope, id, in.CostLimit); err != nil {
		details = append(details, elementDetails(err)...)
	}
	if in.Period != nil {
		k, err := period.ParseKind(*in.Period)
		if err != nil {
			details = append(details, field("period", "%v", err))
		} else {
			norm := string(k)
			in.Period = &norm
		}
	}
	if in.TimeZone != nil {
		if _, err := period.LoadZone(*in.TimeZone); err != nil || *in.TimeZone == "" {
			details = append(details, field("time_zone", "want an IANA time zone name such as Europe/Paris"))
		}
	}
	if in.RPMLimit != nil && *in.RPMLimit < 0 {
		details = append(details, field("rpm_limit", "must be 0 (unlimited) or more"))
	}
	if in.TPMLimit != nil && *in.TPMLimit < 0 {
		details = append(details, field("tpm_limit", "must be 0 (unlimited) or more"))
	}
	if scope == string(vocab.ScopeKey) && (in.RPMLimit != nil && *in.RPMLimit != 0 || in.TPMLimit != nil && *in.TPMLimit != 0) {
		details = append(details, field("rpm_limit", "a key's rate limits are the key's own rpm_limit and tpm_limit"))
	}
	if details != nil {
		return store.Quota{}, invalidFields("invalid quota", details...)
	}
	var q store.Quota
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		q, err = store.SetQuota(ctx, tx, store.QuotaSettings{Scope: scope, ScopeID: id, CostLimit: in.CostLimit, Period: in.Period,
			TimeZone: in.TimeZone, RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit}, time.Now())
		return err
	})
	return q, storeError(err, fmt.Sprintf("quota %s/%d", scope, id))
}

// ListQuotaPeriods lists a periodic quota's periods, newest first (the current one, then closed ones),
// a page at a time. The cursor is the start (Unix seconds) of the last period of the previous page.
func (s *Service) ListQuotaPeriods(ctx context.Context, scope string, id int64, limit int, cursor string) (Page[store.QuotaPeriod], error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return Page[store.QuotaPeriod]{}, err
	}
	limit, err := pageLimit(limit)
	if err != nil {
		return Page[store.QuotaPeriod]{}, err
	}
	before, err := decodeCursor(cursor)
	if err != nil {
		return Page[store.QuotaPeriod]{}, err
	}
	var beforeT time.Time
	if before != 0 {
		beforeT = time.Unix(before, 0)
	}
	rows, err := store.ListQuotaPeriods(ctx, s.pool, scope, id, beforeT, limit, time.Now())
	if err != nil {
		return Page[store.QuotaPeriod]{}, storeError(err, "quota periods")
	}
	return page(rows, limit, func(p store.QuotaPeriod) int64 { return p.Start.Unix() }), nil
}
