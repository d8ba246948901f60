package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/pricing"
)

func priceRow(id int64, model string) store.PriceRule {
	return store.PriceRule{RuleInput: pricing.RuleInput{ID: id, MatchType: "exact", ModelMatch: model, InputPrice: "1.50", OutputPrice: "2.000",
		CacheReadPrice: "0", CacheCreation5mPrice: "0", CacheCreation30mPrice: "0", CacheCreation1hPrice: "0",
		ImageOutputPrice: "0.000001", Enabled: true}}
}

// TestImportKeepsIDsAndMovesSequences: imported ids are kept, re-import replaces in place, and the
// sequences move past them so plain inserts never collide.
func TestImportKeepsIDsAndMovesSequences(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	p, err := store.InsertProvider(ctx, db.Pool, store.Provider{Name: "p", ChannelType: "alpha", BaseURL: "https://x", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if err := store.ImportPriceRules(ctx, tx, []store.PriceRule{priceRow(900, "a"), priceRow(0, "b"), priceRow(901, "c")}); err != nil {
			return err
		}
		return store.ImportRoutingRules(ctx, tx, []store.RoutingRule{
			{ID: 500, ProviderID: p.ID, Operation: "rerank", Kind: "alpha", Implementation: "passthrough", Enabled: true},
			{ProviderID: p.ID, Operation: "list_models", Kind: "alpha", Implementation: "local", Enabled: true},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.GetPriceRule(ctx, db.Pool, 900)
	if err != nil || r.ModelMatch != "a" || r.InputPrice != "1.50" || r.OutputPrice != "2.000" || r.ImageOutputPrice != "0.000001" {
		t.Fatalf("GetPriceRule(900) = %+v, %v", r, err)
	}
	created, err := store.UpsertPriceRule(ctx, db.Pool, priceRow(0, "d"))
	if err != nil || created.ID <= 901 {
		t.Fatalf("insert after import: id %d, %v; want > 901", created.ID, err)
	}
	rr, err := store.InsertRoutingRule(ctx, db.Pool, store.RoutingRule{ProviderID: p.ID, Operation: "get_model", Kind: "alpha", Implementation: "local", Enabled: true})
	if err != nil || rr.ID <= 500 {
		t.Fatalf("routing insert after import: id %d, %v; want > 500", rr.ID, err)
	}
	// Re-import: the id'd rule is replaced in place; the routing row without id upserts by cell.
	row := priceRow(900, "a2")
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if err := store.ImportPriceRules(ctx, tx, []store.PriceRule{row}); err != nil {
			return err
		}
		return store.ImportRoutingRules(ctx, tx, []store.RoutingRule{
			{ProviderID: p.ID, Operation: "list_models", Kind: "alpha", Implementation: "unsupported", Enabled: false}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := store.GetPriceRule(ctx, db.Pool, 900); r.ModelMatch != "a2" {
		t.Errorf("re-import did not replace rule 900: %+v", r)
	}
	rows, err := store.ListRoutingRules(ctx, db.Pool, p.ID)
	if err != nil || len(rows) != 3 {
		t.Fatalf("routing rows = %+v, %v; want 3", rows, err)
	}
	for _, r := range rows {
		if r.Operation == "list_models" && (r.Implementation != "unsupported" || r.Enabled) {
			t.Errorf("cell upsert did not overwrite: %+v", r)
		}
	}
	clashes, err := store.RoutingRuleClashes(ctx, db.Pool, []store.RoutingRule{
		{ID: 777, ProviderID: p.ID, Operation: "rerank", Kind: "alpha"}, // held by 500
		{ID: 500, ProviderID: p.ID, Operation: "rerank", Kind: "alpha"}, // itself
		{ProviderID: p.ID, Operation: "get_model", Kind: "alpha"},       // no id: upsert by cell
	})
	if err != nil || len(clashes) != 1 || clashes[0].Index != 0 || clashes[0].HolderID != 500 {
		t.Errorf("RoutingRuleClashes = %+v, %v; want index 0 held by 500", clashes, err)
	}
}
