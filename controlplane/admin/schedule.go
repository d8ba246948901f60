package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
)

// Scheduled price changes (docs/pricing.md, "Scheduled price changes").
const (
	// MinScheduleLead is how far ahead a scheduled version must be: the snapshot carrying it must reach
	// every data plane before the instant for all of them to switch exactly then.
	MinScheduleLead = 5 * time.Second
	// MaxScheduleAhead bounds effective_at (a typo of the year is refused, not kept for a decade).
	MaxScheduleAhead = 10 * 366 * 24 * time.Hour
)

// checkEffectiveAt refuses an effective time that is not at least MinScheduleLead ahead of now (a past
// instant would rewrite history; omitting effective_at changes the rule now) or beyond MaxScheduleAhead.
func checkEffectiveAt(at time.Time, now time.Time) []Detail {
	switch {
	case at.Before(now.Add(MinScheduleLead)):
		return []Detail{field("effective_at", "must be at least %s in the future (got %s, now is %s); omit it to change the rule now",
			MinScheduleLead, at.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339))}
	case at.After(now.Add(MaxScheduleAhead)):
		return []Detail{field("effective_at", "must be within 10 years (got %s)", at.UTC().Format(time.RFC3339))}
	}
	return nil
}

// SchedulePriceRule stores in as the version of the existing rule id in force from in.EffectiveAt
// (required, at least MinScheduleLead ahead). It replaces the rule's pending scheduled version if there
// is one. The rule itself is unchanged until then; the snapshot carries the version to every data plane
// ahead of the instant, and the control plane writes it to the rule and its history at the instant.
func (s *Service) SchedulePriceRule(ctx context.Context, id int64, in PriceRuleInput) (store.ScheduledPriceRule, error) {
	if err := checkID(id, "id"); err != nil {
		return store.ScheduledPriceRule{}, err
	}
	if in.ID != 0 && in.ID != id {
		return store.ScheduledPriceRule{}, invalidFields("invalid price rule", field("id", "body id %d does not match path id %d", in.ID, id))
	}
	in.ID = id
	var details []Detail
	if in.EffectiveAt == nil {
		details = append(details, field("effective_at", "required for a scheduled version (RFC 3339)"))
	} else {
		details = append(details, checkEffectiveAt(*in.EffectiveAt, time.Now())...)
	}
	row, ds := in.validate()
	if details = append(details, ds...); len(details) > 0 {
		return store.ScheduledPriceRule{}, invalidFields("invalid scheduled price rule", details...)
	}
	var out store.ScheduledPriceRule
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = store.SchedulePriceRule(ctx, tx, row, *in.EffectiveAt)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return out, &Error{Code: CodeNotFound, Message: fmt.Sprintf("price rule %d not found: a scheduled version changes an existing rule "+
			"(create a new rule disabled now and schedule enabling it)", id), Cause: err}
	case errors.Is(err, store.ErrUnchangedSchedule):
		return out, invalidFields("invalid scheduled price rule", field("effective_at", "the scheduled version is identical to the rule's current content"))
	}
	return out, priceRuleWriteError(err, fmt.Sprintf("price rule %d", id))
}

// ListScheduledPriceRules lists the pending scheduled versions, earliest first (of one rule when ruleID
// is not 0).
func (s *Service) ListScheduledPriceRules(ctx context.Context, ruleID int64) ([]store.ScheduledPriceRule, error) {
	if ruleID < 0 {
		return nil, invalidFields("invalid request", field("price_rule_id", "must be a positive id, got %d", ruleID))
	}
	out, err := store.ListScheduledPriceRules(ctx, s.pool, ruleID)
	if out == nil {
		out = []store.ScheduledPriceRule{}
	}
	return out, storeError(err, "scheduled price rules")
}

// CancelScheduledPriceRule cancels a pending scheduled version (not found: unknown, or already in force).
func (s *Service) CancelScheduledPriceRule(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.CancelScheduledPriceRule(ctx, tx, id) }),
		fmt.Sprintf("scheduled price rule %d", id))
}

// priceRuleWriteError is storeError, with the refusal of a change to a rule that has a scheduled
// version pending said plainly.
func priceRuleWriteError(err error, what string) error {
	var dbe *store.DBError
	if errors.As(err, &dbe) && dbe.Constraint == "price_rule_schedule_pending" {
		return &Error{Code: CodeConflict, Message: what + " has a scheduled change pending: cancel it " +
			"(DELETE /admin/price-rules/scheduled/{id}) or write this change with effective_at to replace it",
			Details: []Detail{field("effective_at", "%s", dbe.Detail)}, Cause: err}
	}
	return storeError(err, what)
}
