package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// databaseWithRows makes a database that keeps extra months before this one as partitions of usages, with
// six rows over them, and returns it with the ids of the single query's first page of four.
func databaseWithRows(t *testing.T, extra int) (*storetest.DB, []int64) {
	t.Helper()
	ctx := context.Background()
	this := store.MonthStart(time.Now())
	db := storetest.New(t)
	for m := 1; m <= extra; m++ {
		if _, err := db.Pool.Exec(ctx, `SELECT usages_ensure_partition($1)`, this.AddDate(0, -m, 0)); err != nil {
			t.Fatal(err)
		}
	}
	var rows []store.UsageRow
	for n := range 6 {
		rows = append(rows, partRow(fmt.Sprintf("%s-%d", db.Name, n), 1, 1, "1", this.AddDate(0, -n%(extra+1), 1)))
	}
	if _, err := store.SettleUsages(ctx, db.Pool, rows); err != nil {
		t.Fatal(err)
	}
	plain := func(ctx context.Context, f store.UsageFilter) ([]store.StoredUsage, error) {
		return store.ListUsagesPlainForTest(ctx, db.Pool, f)
	}
	want := listIDs(t, plain, store.UsageFilter{Limit: 4})
	if len(want) != 4 {
		t.Fatalf("%s: the single query answers %v, want 4 rows", db, want)
	}
	return db, want
}

// twoDatabases makes two databases whose partitions of usages differ (the second keeps three more months).
func twoDatabases(t *testing.T) ([2]*storetest.DB, [2][]int64) {
	t.Helper()
	var dbs [2]*storetest.DB
	var want [2][]int64
	dbs[0], want[0] = databaseWithRows(t, 0)
	dbs[1], want[1] = databaseWithRows(t, 3)
	if a, b := partitionNames(t, dbs[0].Pool), partitionNames(t, dbs[1].Pool); slices.Equal(a, b) {
		t.Fatalf("both databases have the partitions %v; the test needs them to differ", a)
	}
	return dbs, want
}

// Listings of two databases whose partitions differ (one Usages each, as the admin service keeps one per
// pool), under -race. Before the guess was kept per Usages and never scanned into, a list remembered for
// the whole process made every listing of one database find the other's list, take the second statement
// and scan into the list other listings were reading (a data race); the other database's guess then failed
// the statement (a partition that does not exist here) and, twice in a row, the listing.
func TestListingsOfTwoDatabases(t *testing.T) {
	t.Parallel()
	dbs, want := twoDatabases(t)
	ctx := context.Background()

	// Four listings at a time on each database: each answers its own database's rows, the single query's
	// page, and none reads what another is writing.
	t.Run("concurrently", func(t *testing.T) {
		var wg sync.WaitGroup
		var failed atomic.Int64
		var first sync.Once
		for i, db := range dbs {
			usages := store.NewUsages(db.Pool)
			for range 4 {
				wg.Go(func() {
					for range 50 {
						got, err := usages.List(ctx, store.UsageFilter{Limit: 4})
						if err == nil && !slices.Equal(idsOf(got), want[i]) {
							err = fmt.Errorf("listed %v, want %v", idsOf(got), want[i])
						}
						if err != nil { // counted, and the listings go on
							failed.Add(1)
							first.Do(func() { t.Errorf("%s: %v", db, err) })
						}
					}
				})
			}
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Errorf("%d of 400 listings failed", n)
		}
	})

	// Listings of the two databases taken in turn each read the id ranges in one statement once the first
	// listing of their database has learnt its list (a list shared by both: two statements every time).
	t.Run("each remembers its own database's partitions", func(t *testing.T) {
		var usages [2]*store.Usages
		var statements [2]*rangeStatements
		for i, db := range dbs {
			cfg, err := pgxpool.ParseConfig(db.URL)
			if err != nil {
				t.Fatal(err)
			}
			statements[i] = &rangeStatements{}
			cfg.ConnConfig.Tracer = statements[i]
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			usages[i] = store.NewUsages(pool)
		}
		for round := range 4 {
			for i := range dbs {
				before := statements[i].n.Load()
				got, err := usages[i].List(ctx, store.UsageFilter{Limit: 4})
				if err != nil {
					t.Fatalf("%s, round %d: %v", dbs[i], round, err)
				}
				if ids := idsOf(got); !slices.Equal(ids, want[i]) {
					t.Fatalf("%s, round %d: listed %v, want %v", dbs[i], round, ids, want[i])
				}
				wantStatements := int64(1)
				if round == 0 {
					wantStatements = 2 // nothing remembered yet: the list answered differs from the empty guess
				}
				if n := statements[i].n.Load() - before; n != wantStatements {
					t.Errorf("%s, round %d: %d statements read the partitions, want %d", dbs[i], round, n, wantStatements)
				}
			}
		}
	})

	// Listings of one database while month partitions are being created (a listing that finds another list
	// than it guessed reads the ranges again): each answers the single query's page or, when the list changed
	// between its statements twice in a row, says so; none reads a list another listing is scanning into.
	// The window is one round trip, so one run catches a listing that scans into the list it published only
	// now and then; -count=20 almost always.
	t.Run("while partitions are created", func(t *testing.T) {
		db, usages := dbs[0], store.NewUsages(dbs[0].Pool)
		var done atomic.Bool
		var answered atomic.Int64
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for !done.Load() {
					got, err := usages.List(ctx, store.UsageFilter{Limit: 4})
					if errors.Is(err, store.ErrRetryListingForTest) {
						continue
					}
					if err != nil {
						t.Errorf("%s: %v", db, err)
						return
					}
					if ids := idsOf(got); !slices.Equal(ids, want[0]) {
						t.Errorf("%s: listed %v, want %v", db, ids, want[0])
						return
					}
					answered.Add(1)
				}
			})
		}
		this := store.MonthStart(time.Now())
		for m := 3; m <= 22; m++ { // empty future months: the page stays the same
			if _, err := db.Pool.Exec(ctx, `SELECT usages_ensure_partition($1)`, this.AddDate(0, m, 0)); err != nil {
				t.Error(err)
			}
		}
		done.Store(true)
		wg.Wait()
		if answered.Load() == 0 {
			t.Fatal("no listing answered while the partitions changed")
		}
		if got := listIDs(t, usages.List, store.UsageFilter{Limit: 4}); !slices.Equal(got, want[0]) {
			t.Fatalf("%s: after the changes listed %v, want %v", db, got, want[0])
		}
	})
}

func idsOf(rows []store.StoredUsage) []int64 {
	out := make([]int64, len(rows))
	for i, u := range rows {
		out[i] = u.ID
	}
	return out
}

// rangeStatements counts the statements that read the partitions of usages (idRangesSQL, sent in a batch).
type rangeStatements struct{ n atomic.Int64 }

func (r *rangeStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (r *rangeStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *rangeStatements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (r *rangeStatements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.Contains(d.SQL, "pg_inherits") {
		r.n.Add(1)
	}
}
func (r *rangeStatements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
