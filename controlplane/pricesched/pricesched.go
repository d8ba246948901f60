// Package pricesched applies scheduled price rule versions when they come due (docs/pricing.md,
// "Scheduled price changes"). The data planes already price with a scheduled version from its instant
// on (snapshots carry it ahead); this writes it to the rule and to the price history, with the
// history's boundary exactly at the instant however late the write runs.
package pricesched

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
)

// DefaultPoll bounds how long a due version waits for its write when no pending instant is known.
const DefaultPoll = time.Second

// Applier writes due scheduled versions. Every control-plane replica may run one (rows are claimed).
type Applier struct {
	DB  store.TxBeginner
	Q   store.DBTX
	Log *slog.Logger
	// Poll is the longest wait between two looks (DefaultPoll when 0): a version scheduled or
	// cancelled in the meantime is seen within it.
	Poll time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Run applies due versions until ctx ends: at each pending instant, and at least every Poll.
func (a *Applier) Run(ctx context.Context) error {
	poll, now := a.Poll, a.Now
	if poll <= 0 {
		poll = DefaultPoll
	}
	if now == nil {
		now = time.Now
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		a.ApplyDue(ctx, now())
		wait := poll
		if next, ok, err := store.NextScheduledPriceRule(ctx, a.Q); err == nil && ok {
			wait = min(wait, max(next.Sub(now()), 0))
		} else if err != nil && ctx.Err() == nil {
			a.Log.Error("read the next scheduled price change", "err", err)
		}
		t.Reset(wait)
	}
}

// ApplyDue writes every version due at now and logs what it did.
func (a *Applier) ApplyDue(ctx context.Context, now time.Time) {
	applied, err := store.ApplyDueScheduledPriceRules(ctx, a.DB, now)
	for _, s := range applied {
		switch {
		case s.Err != nil:
			a.Log.Error("scheduled price change could not be written and was dropped", "scheduled_id", s.ID,
				"price_rule_id", s.PriceRuleID, "effective_at", s.EffectiveAt, "err", s.Err)
		case s.Recorded != s.Version:
			a.Log.Warn("scheduled price change recorded under another history version than the one reserved",
				"scheduled_id", s.ID, "price_rule_id", s.PriceRuleID, "reserved", s.Version, "recorded", s.Recorded)
		default:
			a.Log.Info("scheduled price change in force", "scheduled_id", s.ID, "price_rule_id", s.PriceRuleID,
				"version", s.Version, "effective_at", s.EffectiveAt, "late", now.Sub(s.EffectiveAt))
		}
	}
	if err != nil && ctx.Err() == nil {
		a.Log.Error("apply scheduled price changes", "err", err)
	}
}
