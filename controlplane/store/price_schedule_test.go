package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// schedule schedules r as actor (the transaction's tollgate.actor, as the admin service sets it).
func schedule(t *testing.T, db *pgxpool.Pool, r store.PriceRule, at time.Time, actor string) (store.ScheduledPriceRule, error) {
	t.Helper()
	var out store.ScheduledPriceRule
	err := pgx.BeginFunc(context.Background(), db, func(tx pgx.Tx) error {
		if err := store.SetActor(context.Background(), tx, actor); err != nil {
			return err
		}
		var err error
		out, err = store.SchedulePriceRule(context.Background(), tx, r, at)
		return err
	})
	return out, err
}

func schedRule(id int64, input string, enabled bool) store.PriceRule {
	return store.PriceRule{RuleInput: pricing.RuleInput{ID: id, MatchType: "exact", ModelMatch: "m-sched",
		InputPrice: input, OutputPrice: "2", CacheReadPrice: "0", CacheCreation5mPrice: "0", CacheCreation30mPrice: "0",
		CacheCreation1hPrice: "0", ImageOutputPrice: "0", Enabled: enabled}}
}

// TestScheduledPriceRuleLifecycle: a scheduled version reserves the next history version, is carried by
// the snapshot (and compiles into the timeline), blocks other changes of its rule until applied, and when
// applied — even late — the history's ranges meet exactly at effective_at, written by its scheduler.
func TestScheduledPriceRuleLifecycle(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	r, err := store.UpsertPriceRule(ctx, db.Pool, schedRule(0, "1.50", true))
	if err != nil {
		t.Fatal(err)
	}
	T := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()

	if _, err := schedule(t, db.Pool, schedRule(r.ID, "1.50", true), T, "admin:alice"); !errors.Is(err, store.ErrUnchangedSchedule) {
		t.Fatalf("scheduling the current content: %v, want ErrUnchangedSchedule", err)
	}
	if _, err := schedule(t, db.Pool, schedRule(999, "3", true), T, "admin:alice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("scheduling a missing rule: %v, want ErrNotFound", err)
	}
	first, err := schedule(t, db.Pool, schedRule(r.ID, "2.5", true), T.Add(time.Minute), "admin:alice")
	if err != nil {
		t.Fatal(err)
	}
	// Scheduling again replaces the pending version (same id, same reserved version).
	s, err := schedule(t, db.Pool, schedRule(r.ID, "3.25", true), T, "admin:bob")
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != first.ID || s.Version != 2 || !s.EffectiveAt.Equal(T) || s.Rule.InputPrice != "3.25" || s.CreatedBy != "admin:bob" {
		t.Fatalf("rescheduled = %+v, want id %d, version 2, at %v, input 3.25 by admin:bob", s, first.ID, T)
	}

	// The rule cannot change otherwise while the change is pending; the same content can be written.
	if _, err := store.UpdatePriceRule(ctx, db.Pool, schedRule(r.ID, "9", true)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("immediate change with a pending schedule: %v, want ErrConflict", err)
	}
	if _, err := store.UpdatePriceRule(ctx, db.Pool, schedRule(r.ID, "1.50", true)); err != nil {
		t.Fatalf("same-content write with a pending schedule: %v", err)
	}

	snap, err := store.ReadSnapshot(ctx, db.Pool, snapTestBox(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.GetScheduledPriceRules()); n != 1 {
		t.Fatalf("snapshot carries %d scheduled versions, want 1", n)
	}
	sp := snap.GetScheduledPriceRules()[0]
	if sp.GetRule().GetVersion() != 2 || sp.GetRule().GetInputPrice() != "3.25" || !sp.GetEffectiveAt().AsTime().Equal(T) {
		t.Errorf("snapshot's scheduled version = %v", sp)
	}
	c, err := snapshot.Compile(snap)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ResolvePriceAt(0, "m-sched", T.Add(-time.Microsecond)); got == nil || got.Version != 1 {
		t.Errorf("before T: %+v, want version 1", got)
	}
	if got := c.ResolvePriceAt(0, "m-sched", T); got == nil || got.Version != 2 {
		t.Errorf("at T: %+v, want version 2", got)
	}

	// Not due yet: nothing applied.
	if applied, err := store.ApplyDueScheduledPriceRules(ctx, db.Pool, T.Add(-time.Second)); err != nil || len(applied) != 0 {
		t.Fatalf("apply before T = %v, %v; want nothing", applied, err)
	}
	// Applied late (as after a control-plane outage): the boundary is still T.
	applied, err := store.ApplyDueScheduledPriceRules(ctx, db.Pool, T.Add(3*time.Hour))
	if err != nil || len(applied) != 1 || applied[0].Err != nil || applied[0].Recorded != 2 {
		t.Fatalf("apply = %+v, %v; want one applied as version 2", applied, err)
	}
	hist, err := store.PriceRuleHistory(ctx, db.Pool, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].ValidTo == nil || !hist[0].ValidTo.Equal(T) || !hist[1].ValidFrom.Equal(T) || hist[1].ValidTo != nil {
		t.Fatalf("history = %+v, want version 1 ending and version 2 starting exactly at %v", hist, T)
	}
	if hist[1].ChangedBy != "admin:bob (scheduled change "+itoa(s.ID)+")" {
		t.Errorf("changed_by = %q", hist[1].ChangedBy)
	}
	got, err := store.GetPriceRule(ctx, db.Pool, r.ID)
	if err != nil || got.InputPrice != "3.25" {
		t.Fatalf("rule after apply = %+v, %v; want input 3.25", got, err)
	}
	if left, err := store.ListScheduledPriceRules(ctx, db.Pool, 0); err != nil || len(left) != 0 {
		t.Fatalf("pending after apply = %v, %v", left, err)
	}
	// The rule is free again.
	if _, err := store.UpdatePriceRule(ctx, db.Pool, schedRule(r.ID, "4", true)); err != nil {
		t.Fatal(err)
	}
}

func TestScheduledPriceRuleCancelAndDelete(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	r, err := store.UpsertPriceRule(ctx, db.Pool, schedRule(0, "1", true))
	if err != nil {
		t.Fatal(err)
	}
	T := time.Now().Add(time.Hour)
	s, err := schedule(t, db.Pool, schedRule(r.ID, "2", false), T, "admin:alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CancelScheduledPriceRule(ctx, db.Pool, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := store.CancelScheduledPriceRule(ctx, db.Pool, s.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second cancel: %v, want ErrNotFound", err)
	}
	if _, err := store.UpdatePriceRule(ctx, db.Pool, schedRule(r.ID, "5", true)); err != nil {
		t.Fatalf("change after cancel: %v", err)
	}
	// The reserved version follows the history: the next schedule is version 3.
	s, err = schedule(t, db.Pool, schedRule(r.ID, "6", true), T, "admin:alice")
	if err != nil || s.Version != 3 {
		t.Fatalf("schedule after a change = %+v, %v; want version 3", s, err)
	}
	if err := store.DeletePriceRule(ctx, db.Pool, r.ID); err != nil {
		t.Fatal(err)
	}
	if left, err := store.ListScheduledPriceRules(ctx, db.Pool, r.ID); err != nil || len(left) != 0 {
		t.Fatalf("pending after the rule's deletion = %v, %v", left, err)
	}
}
