package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

func revision(t *testing.T, db store.DBTX) int64 {
	t.Helper()
	rev, err := store.Revision(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// stamps returns the changed_revision of api keys by id.
func stamps(t *testing.T, pool *pgxpool.Pool) map[int64]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, changed_revision FROM api_keys`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int64{}
	var id, rev int64
	_, err = pgx.ForEachRow(rows, []any{&id, &rev}, func() error { out[id] = rev; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChangeTracking: every row a transaction writes carries that transaction's one revision (also
// across statements and after a savepoint rolled back its bump); settlement's cost_used does not bump;
// a user's move stamps its keys; a deleted key leaves a deletion at its revision.
func TestChangeTracking(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	seedSnapshotState(t, db.Pool, snapTestBox(t))
	seeded := revision(t, db.Pool)
	for id, rev := range stamps(t, db.Pool) {
		if rev != seeded {
			t.Errorf("key %d stamped %d, want the seeding transaction's revision %d", id, rev, seeded)
		}
	}

	// Two statements, and a savepoint whose bump is rolled back: one revision for the transaction.
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		snapTestExec(t, tx, `SAVEPOINT s`)
		snapTestExec(t, tx, `UPDATE api_keys SET name = 'gone' WHERE id = 3`)
		snapTestExec(t, tx, `ROLLBACK TO SAVEPOINT s`)
		snapTestExec(t, tx, `UPDATE api_keys SET name = 'ann-2' WHERE id = 1`)
		snapTestExec(t, tx, `UPDATE price_rules SET output_price = 3 WHERE id = 1`)
		snapTestExec(t, tx, `UPDATE api_keys SET name = 'bob-2' WHERE id = 2`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rev := revision(t, db.Pool)
	if rev != seeded+1 {
		t.Fatalf("revision %d after one transaction, want %d", rev, seeded+1)
	}
	got := stamps(t, db.Pool)
	if got[1] != rev || got[2] != rev || got[3] != seeded {
		t.Errorf("stamps = %v, want keys 1 and 2 at %d, key 3 (rolled back) at %d", got, rev, seeded)
	}
	var prStamp int64
	if err := db.Pool.QueryRow(ctx, `SELECT changed_revision FROM price_rules WHERE id = 1`).Scan(&prStamp); err != nil || prStamp != rev {
		t.Errorf("price rule stamped %d (%v), want %d", prStamp, err, rev)
	}

	// Settlement moves cost_used: no revision, no stamp.
	snapTestExec(t, db.Pool, `UPDATE quotas SET cost_used = cost_used + 1`)
	if r := revision(t, db.Pool); r != rev {
		t.Errorf("cost_used update moved the revision %d → %d", rev, r)
	}

	// Moving bob (user 2) into team 1 stamps his keys (2, 3, 4), not ann's.
	snapTestExec(t, db.Pool, `UPDATE users SET team_id = 1 WHERE id = 2`)
	moved := revision(t, db.Pool)
	got = stamps(t, db.Pool)
	if got[1] != rev || got[2] != moved || got[3] != moved || got[4] != moved {
		t.Errorf("after the move stamps = %v, want keys 2-4 at %d, key 1 at %d", got, moved, rev)
	}

	snapTestExec(t, db.Pool, `DELETE FROM api_keys WHERE id = 4`)
	deleted := revision(t, db.Pool)
	var kind string
	var key, at int64
	if err := db.Pool.QueryRow(ctx, `SELECT kind, key, revision FROM config_deletions`).Scan(&kind, &key, &at); err != nil {
		t.Fatal(err)
	}
	if kind != "api_key" || key != 4 || at != deleted {
		t.Errorf("deletion = (%s, %d, %d), want (api_key, 4, %d)", kind, key, at, deleted)
	}
}

// TestReadSnapshotChanges: the changes since a base name exactly the keys written or deleted since (a
// revoked key and a deleted one as gone), the small kinds whole and equal to a whole read; a base below
// the horizon (pruned deletions, a truncate) cannot be read from.
func TestReadSnapshotChanges(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	box := snapTestBox(t)
	seedSnapshotState(t, db.Pool, box)
	base := revision(t, db.Pool)

	ch, err := store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Version != base || len(ch.Keys) != 0 || len(ch.GoneKeyIDs) != 0 {
		t.Fatalf("no change: version %d keys %v gone %v, want %d and nothing", ch.Version, ch.Keys, ch.GoneKeyIDs, base)
	}

	hash := sha256.Sum256([]byte("k5"))
	snapTestExec(t, db.Pool, `INSERT INTO api_keys (id, user_id, name, key_hash, prefix) VALUES (5, 1, 'ann-5', $1, 'tg-eee')`, hash[:])
	snapTestExec(t, db.Pool, `UPDATE api_keys SET enabled = false WHERE id = 1`) // revoked
	snapTestExec(t, db.Pool, `DELETE FROM api_keys WHERE id = 2`)
	snapTestExec(t, db.Pool, `UPDATE price_rules SET output_price = 7 WHERE id = 1`)
	v := revision(t, db.Pool)

	// Key 4 expired an hour ago: asked for again (as a held key whose deadline passed), it is gone.
	ch, err = store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: base, Recheck: []int64{4}})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Version != v {
		t.Errorf("version %d, want %d", ch.Version, v)
	}
	if len(ch.Keys) != 1 || ch.Keys[0].GetId() != 5 || ch.Keys[0].GetName() != "ann-5" || ch.Keys[0].GetOrgId() != 1 {
		t.Errorf("keys = %v, want key 5 as the snapshot carries it", ch.Keys)
	}
	if !slices.Equal(ch.GoneKeyIDs, []int64{1, 2, 4}) {
		t.Errorf("gone = %v, want [1 2 4] (revoked, deleted, expired)", ch.GoneKeyIDs)
	}
	// Only price rules (written) are read, as a whole read has them.
	if want := (store.SmallKinds{PriceRules: true}); ch.Read != want {
		t.Errorf("read %+v, want %+v", ch.Read, want)
	}
	whole, err := store.ReadSnapshot(ctx, db.Pool, box)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&snapshotv1.Snapshot{Version: v, PriceRules: whole.PriceRules}, ch.Rest) {
		t.Errorf("small kinds read differ from a whole read:\n got %v\nwant %v", ch.Rest, whole)
	}

	// A provider is part of every small kind's read but the model policy's (read anyway, for the
	// providers' default) and quotas'; quotas are read when asked.
	snapTestExec(t, db.Pool, `UPDATE providers SET base_url = 'http://alpha2.test' WHERE id = 1`)
	pv := revision(t, db.Pool)
	ch, err = store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: v, Quotas: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.SmallKinds{PriceRules: true, ScheduledPriceRules: true, RoutingRules: true, Providers: true,
		Routes: true, Quotas: true}); ch.Read != want {
		t.Errorf("after a provider write read %+v, want %+v", ch.Read, want)
	}
	if whole, err = store.ReadSnapshot(ctx, db.Pool, box); err != nil {
		t.Fatal(err)
	}
	whole.ApiKeys = nil
	if !proto.Equal(ch.Rest, whole) {
		t.Errorf("small kinds differ from a whole read:\n got %v\nwant %v", ch.Rest, whole)
	}
	// A key write reads no small kind; a quota limit write reads the quotas.
	snapTestExec(t, db.Pool, `UPDATE api_keys SET name = 'renamed' WHERE id = 5`)
	if ch, err = store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: pv}); err != nil || ch.Read != (store.SmallKinds{}) {
		t.Errorf("after a key write: %+v, %v; want nothing read", readOf(ch), err)
	}
	kv := revision(t, db.Pool)
	snapTestExec(t, db.Pool, `UPDATE quotas SET cost_limit = 7 WHERE scope = 'org'`)
	if ch, err = store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: kv}); err != nil || ch.Read != (store.SmallKinds{Quotas: true}) ||
		len(ch.Rest.GetQuotas()) != 2 {
		t.Errorf("after a quota write: %+v, %v; want the quotas read", readOf(ch), err)
	}
	v = revision(t, db.Pool)

	// The revision moved with no table written (a write around the triggers): no delta.
	snapTestExec(t, db.Pool, `UPDATE config_revision SET revision = revision + 1`)
	if _, err := store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: v}); !errors.Is(err, store.ErrDeltaUnavailable) {
		t.Errorf("revision raised by hand: err = %v, want ErrDeltaUnavailable", err)
	}
	v = revision(t, db.Pool)
	// From the latest version: nothing changed.
	if ch, err = store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: v}); err != nil || len(ch.Keys)+len(ch.GoneKeyIDs) != 0 {
		t.Errorf("since the current version: %v, %v; want no key changes", ch, err)
	}
	if _, err := store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: v + 1}); !errors.Is(err, store.ErrDeltaUnavailable) {
		t.Errorf("from a future version: err = %v, want ErrDeltaUnavailable", err)
	}

	// Pruning the deletion of key 2 (revision ≤ v) makes every base before it unreadable.
	if n, err := store.PruneConfigDeletions(ctx, db.Pool, 0); err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want 1", n, err)
	}
	if _, err := store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: base}); !errors.Is(err, store.ErrDeltaUnavailable) {
		t.Errorf("from before a pruned deletion: err = %v, want ErrDeltaUnavailable", err)
	}
	if _, err := store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: v}); err != nil {
		t.Errorf("from after the pruned deletion: %v", err)
	}

	snapTestExec(t, db.Pool, `TRUNCATE api_keys`)
	truncated := revision(t, db.Pool)
	if _, err := store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: v}); !errors.Is(err, store.ErrDeltaUnavailable) {
		t.Errorf("across a truncate: err = %v, want ErrDeltaUnavailable", err)
	}
	if _, err := store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: truncated}); err != nil {
		t.Errorf("from the truncate's revision: %v", err)
	}
}

// TestRevisionOrderIsCommitOrder: a configuration transaction holds the revision from its first row to its
// commit, so a second writer waits and takes the next revision: a reader that sees revision R has every
// row stamped up to R.
func TestRevisionOrderIsCommitOrder(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	seedSnapshotState(t, db.Pool, snapTestBox(t))
	base := revision(t, db.Pool)

	first, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	snapTestExec(t, first, `UPDATE api_keys SET name = 'first' WHERE id = 1`)
	second := make(chan error, 1)
	go func() {
		_, err := db.Pool.Exec(ctx, `UPDATE api_keys SET name = 'second' WHERE id = 2`)
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("second writer committed (%v) while the first held its revision", err)
	case <-time.After(200 * time.Millisecond):
	}
	if got := revision(t, db.Pool); got != base {
		t.Errorf("a reader sees revision %d before the first commit, want %d", got, base)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	got := stamps(t, db.Pool)
	if got[1] != base+1 || got[2] != base+2 {
		t.Errorf("stamps = %v, want key 1 at %d (first commit) and key 2 at %d", got, base+1, base+2)
	}
}

func readOf(ch *store.SnapshotChanges) any {
	if ch == nil {
		return nil
	}
	return ch.Read
}
