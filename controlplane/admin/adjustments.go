package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/snapshotbuild"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/watch"
	"github.com/tollgate/tollgate/shared/pricing"
)

// MaxReasonBytes bounds an adjustment's reason.
const MaxReasonBytes = 1000

// AdjustmentInput is a correction of a scope's spend: amount in signed decimal dollars (positive debits,
// negative credits) and a reason, both required.
type AdjustmentInput struct {
	Amount string `json:"amount"`
	Reason string `json:"reason"`
	// PeriodAt, for a periodic quota, is a moment in the period to correct (zero: the current period).
	PeriodAt time.Time `json:"period_at,omitzero"`
}

// AdjustedQuota answers an adjustment: the audit row and the quota after it.
type AdjustedQuota struct {
	Adjustment store.QuotaAdjustment `json:"adjustment"`
	Quota      store.Quota           `json:"quota"`
}

// maxUsedDollars is pricing.MaxExactMicros in dollars: the largest cost_used admission can compare.
var maxUsedDollars = pricing.FormatMicros(pricing.MaxExactMicros)

// AdjustQuota credits or debits a scope's cost_used on behalf of who (the authenticated admin), recording
// amount, reason, who and when in the same transaction. The result must stay from 0 to
// pricing.MaxExactMicros micro-dollars.
func (s *Service) AdjustQuota(ctx context.Context, who Principal, scope string, id int64, in AdjustmentInput) (AdjustedQuota, error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return AdjustedQuota{}, err
	}
	var details []Detail
	// The one money parser; the amount must move at least one micro-dollar. Its size is bounded by the
	// result: cost_used must stay from 0 to maxUsedDollars (checked under the row lock), except that a
	// credit may always lower a cost_used that is beyond that range.
	d, err := pricing.ParseDecimal(in.Amount)
	if err != nil {
		details = append(details, field("amount", "want a signed plain decimal of dollars: %v", err))
	} else if m, err := pricing.ToMicros(d); err == nil && m == 0 {
		details = append(details, field("amount", "must be at least 0.000001 dollars either way, got %q", in.Amount))
	}
	reason := strings.TrimSpace(in.Reason)
	switch {
	case reason == "":
		details = append(details, field("reason", "required"))
	case len(reason) > MaxReasonBytes || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0):
		details = append(details, field("reason", "must be valid UTF-8 without NUL, at most %d bytes", MaxReasonBytes))
	}
	if details != nil {
		return AdjustedQuota{}, invalidFields("invalid adjustment", details...)
	}
	var out AdjustedQuota
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out.Adjustment, out.Quota, err = store.AdjustQuota(ctx, tx, store.QuotaAdjustment{Scope: scope, ScopeID: id,
			Amount: in.Amount, Reason: reason, ActorName: who.Name, ActorRole: who.Role.String()}, maxUsedDollars, in.PeriodAt)
		return err
	})
	if errors.Is(err, store.ErrAdjustmentOutOfRange) {
		return AdjustedQuota{}, invalidFields("invalid adjustment", field("amount", "cost_used would leave 0 to %s dollars: %v", maxUsedDollars, err))
	}
	return out, storeError(err, fmt.Sprintf("quota %s/%d", scope, id))
}

// ListQuotaAdjustments lists a scope's adjustments, newest first, a page at a time.
func (s *Service) ListQuotaAdjustments(ctx context.Context, scope string, id int64, limit int, cursor string) (Page[store.QuotaAdjustment], error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return Page[store.QuotaAdjustment]{}, err
	}
	limit, err := pageLimit(limit)
	if err != nil {
		return Page[store.QuotaAdjustment]{}, err
	}
	before, err := decodeCursor(cursor)
	if err != nil {
		return Page[store.QuotaAdjustment]{}, err
	}
	rows, err := store.ListQuotaAdjustments(ctx, s.pool, scope, id, before, limit)
	if err != nil {
		return Page[store.QuotaAdjustment]{}, storeError(err, "quota adjustments")
	}
	return page(rows, limit, func(a store.QuotaAdjustment) int64 { return a.ID }), nil
}

// SetSnapshotStatus gives the service the snapshot builder's status (app wiring); without it the status
// endpoint answers that no builder runs here.
func (s *Service) SetSnapshotStatus(fn func() snapshotbuild.Status) { s.snapshotStatus = fn }

// SetDataPlanes gives the service the data planes watching this replica (app wiring: watch.Server.DataPlanes).
func (s *Service) SetDataPlanes(fn func() []watch.DataPlane) { s.dataPlanes = fn }

// SnapshotStatus is the snapshot builder's status plus the data planes watching this replica, with the
// version each holds: data-plane freshness. Each replica answers for its own Watch streams.
type SnapshotStatus struct {
	snapshotbuild.Status
	DataPlanes []watch.DataPlane `json:"data_planes"`
}

// SnapshotStatus reports whether the current configuration compiles (naming the offending rows when it
// does not) and which version each data plane watching this replica holds.
func (s *Service) SnapshotStatus(context.Context) (SnapshotStatus, error) {
	if s.snapshotStatus == nil {
		return SnapshotStatus{}, errorf(CodeInternal, "no snapshot builder runs in this process")
	}
	out := SnapshotStatus{Status: s.snapshotStatus(), DataPlanes: []watch.DataPlane{}}
	if s.dataPlanes != nil {
		out.DataPlanes = s.dataPlanes()
	}
	return out, nil
}
