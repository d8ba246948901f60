package pricesched_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/pricesched"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/pricing"
)

func rule(id int64, model, input string) store.PriceRule {
	return store.PriceRule{RuleInput: pricing.RuleInput{ID: id, MatchType: "exact", ModelMatch: model, InputPrice: input,
		OutputPrice: "1", CacheReadPrice: "0", CacheCreation5mPrice: "0", CacheCreation30mPrice: "0",
		CacheCreation1hPrice: "0", ImageOutputPrice: "0", Enabled: true}}
}

// TestApplierWritesDueVersions: Run applies a version once its instant has passed (here: an injected
// clock an hour ahead, as after an outage) with the history boundary at effective_at, and leaves a
// version that is not due.
func TestApplierWritesDueVersions(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	a, err := store.UpsertPriceRule(ctx, db.Pool, rule(0, "m", "1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.UpsertPriceRule(ctx, db.Pool, rule(0, "n", "1"))
	if err != nil {
		t.Fatal(err)
	}
	T := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Microsecond)
	if _, err := store.SchedulePriceRule(ctx, db.Pool, rule(a.ID, "m", "2"), T); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SchedulePriceRule(ctx, db.Pool, rule(b.ID, "n", "3"), T.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	ap := &pricesched.Applier{DB: db.Pool, Q: db.Pool, Log: slog.New(slog.DiscardHandler), Poll: 20 * time.Millisecond,
		Now: func() time.Time { return T.Add(time.Hour) }}
	go func() { done <- ap.Run(runCtx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		left, err := store.ListScheduledPriceRules(ctx, db.Pool, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 1 {
			if left[0].PriceRuleID != b.ID {
				t.Errorf("left pending: rule %d, want %d (not due)", left[0].PriceRuleID, b.ID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d versions still pending after 20s, want 1", len(left))
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h, err := store.PriceRuleHistory(ctx, db.Pool, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].ValidTo == nil || !h[0].ValidTo.Equal(T) || !h[1].ValidFrom.Equal(T) {
		t.Fatalf("history %+v, want the boundary at %v", h, T)
	}
	if got, err := store.GetPriceRule(ctx, db.Pool, a.ID); err != nil || got.InputPrice != "2" || !got.UpdatedAt.Equal(T) {
		t.Errorf("rule after apply = %+v, %v; want input 2 updated at %v", got, err, T)
	}
}
