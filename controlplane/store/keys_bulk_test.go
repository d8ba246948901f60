package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// bulkKeys inserts keys first..last in one statement for user 1; every tenth also carries a previous
// hash in its grace period, so both lookups of the hash-disjoint check run.
const bulkKeys = `INSERT INTO api_keys (user_id, name, key_hash, prefix, previous_key_hash, previous_prefix, previous_expires_at)
	SELECT 1, 'bulk-' || i, sha256(('bulk-' || i)::bytea), 'tg-bulk',
	       CASE WHEN i % 10 = 0 THEN sha256(('bulk-prev-' || i)::bytea) END,
	       CASE WHEN i % 10 = 0 THEN 'tg-prev' END,
	       CASE WHEN i % 10 = 0 THEN now() + interval '1 hour' END
	  FROM generate_series($1::int, $2::int) i`

// seedOneUser creates the org, team and user every bulk key belongs to.
func seedOneUser(t testing.TB, db *storetest.DB) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO orgs (name) VALUES ('bulk')`,
		`INSERT INTO teams (org_id, name) VALUES (1, 'bulk')`,
		`INSERT INTO users (org_id, team_id, name) VALUES (1, 1, 'bulk')`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestBulkKeyInsertChecksHashesThroughIndexes: the api_keys_hash_disjoint check finds its rows through
// the hash indexes whatever the table's statistics say, so a statement inserting n keys reads O(n log n)
// index entries, never O(n²) rows. The old lookup (one OR over both hash columns) was planned as a
// sequential scan while the statistics said the table was small, and that plan was kept for the whole
// statement: every inserted row read every row inserted before it. Counted, not timed: the number of
// sequential scans of api_keys the statement started (pg_stat_xact_user_tables) must be 0.
func TestBulkKeyInsertChecksHashesThroughIndexes(t *testing.T) {
	t.Parallel()
	const n = 2000
	for _, tc := range []struct {
		name  string
		setup []string
	}{
		{"never analyzed", nil},
		{"analyzed empty", []string{`ANALYZE api_keys`}},
		{"analyzed small", []string{
			`INSERT INTO api_keys (user_id, key_hash, prefix) VALUES (1, sha256('small-1'), 'tg-s'), (1, sha256('small-2'), 'tg-s')`,
			`ANALYZE api_keys`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := storetest.New(t)
			seedOneUser(t, db)
			ctx := context.Background()
			for _, q := range tc.setup {
				if _, err := db.Pool.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				// The backend's counts not yet flushed to the shared statistics (the migrations' index
				// builds, within the last second) show here too: compare before and after.
				scans := func() (seq, idx int64, err error) {
					err = tx.QueryRow(ctx, `SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables
						WHERE relid = 'api_keys'::regclass`).Scan(&seq, &idx)
					return seq, idx, err
				}
				seq0, idx0, err := scans()
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, bulkKeys, 1, n); err != nil {
					return err
				}
				seq1, idx1, err := scans()
				if err != nil {
					return err
				}
				seqScans, idxScans := seq1-seq0, idx1-idx0
				if seqScans != 0 {
					t.Errorf("inserting %d keys in one statement scanned api_keys sequentially %d times, want 0", n, seqScans)
				}
				// One lookup per key by its hash, one more per key with a previous hash.
				if want := int64(n + n/10); idxScans < want {
					t.Errorf("inserting %d keys made %d index scans of api_keys, want at least %d", n, idxScans, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBulkKeyInsertKeepsHashesDisjoint: the rewritten check refuses the same rows as before within one
// bulk statement, against rows already stored and against rows earlier in the same statement.
func TestBulkKeyInsertKeepsHashesDisjoint(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	seedOneUser(t, db)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, bulkKeys, 1, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE api_keys`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sql  string
	}{
		{"previous hash is a stored key's hash", `INSERT INTO api_keys (user_id, key_hash, prefix, previous_key_hash, previous_expires_at)
			SELECT 1, sha256(('new-' || i)::bytea), 'tg-n', CASE WHEN i = 500 THEN sha256('bulk-7') END,
			       CASE WHEN i = 500 THEN now() + interval '1 hour' END
			  FROM generate_series(1, 1000) i`},
		{"hash is a stored key's previous hash", `INSERT INTO api_keys (user_id, key_hash, prefix)
			SELECT 1, CASE WHEN i = 500 THEN sha256('bulk-prev-30') ELSE sha256(('new-' || i)::bytea) END, 'tg-n'
			  FROM generate_series(1, 1000) i`},
		{"previous hash is an earlier row's hash", `INSERT INTO api_keys (user_id, key_hash, prefix, previous_key_hash, previous_expires_at)
			SELECT 1, sha256(('new-' || i)::bytea), 'tg-n', CASE WHEN i = 900 THEN sha256('new-3') END,
			       CASE WHEN i = 900 THEN now() + interval '1 hour' END
			  FROM generate_series(1, 1000) i`},
		{"hash is an earlier row's previous hash", `INSERT INTO api_keys (user_id, key_hash, prefix, previous_key_hash, previous_expires_at)
			SELECT 1, CASE WHEN i = 900 THEN sha256('new-prev-3') ELSE sha256(('new-' || i)::bytea) END, 'tg-n',
			       CASE WHEN i = 3 THEN sha256('new-prev-3') END, CASE WHEN i = 3 THEN now() + interval '1 hour' END
			  FROM generate_series(1, 1000) i`},
		{"update takes another key's previous hash", `UPDATE api_keys SET key_hash = sha256('bulk-prev-20') WHERE name = 'bulk-21'`},
		{"update's previous hash is another key's hash", `UPDATE api_keys SET previous_key_hash = sha256('bulk-1'),
			previous_expires_at = now() + interval '1 hour' WHERE name = 'bulk-2'`},
	} {
		_, err := db.Pool.Exec(ctx, tc.sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "api_keys_key_hash_key" {
			t.Errorf("%s: err = %v, want unique_violation on api_keys_key_hash_key", tc.name, err)
		}
	}
	// A key may keep its own current hash as its previous one (only another key's is refused), and a
	// rotation moving the current hash to previous passes.
	for _, q := range []string{
		`UPDATE api_keys SET previous_key_hash = key_hash, previous_expires_at = now() + interval '1 hour' WHERE name = 'bulk-5'`,
		`UPDATE api_keys SET previous_key_hash = key_hash, key_hash = sha256('bulk-6-rotated'),
			previous_expires_at = now() + interval '1 hour' WHERE name = 'bulk-6'`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	var count int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM api_keys`).Scan(&count); err != nil || count != 100 {
		t.Fatalf("api_keys has %d rows (%v), want the 100 seeded", count, err)
	}
}

// BenchmarkBulkKeyInsert inserts 20,000 keys per op, each op one statement, into one table that was
// analyzed while empty (what a fresh install's autovacuum leaves), and logs each batch's seconds. With a
// linear check every batch takes about as long as the first; with the old quadratic one batch k took
// about 2k-1 times the first.
//
//	go test -run '^$' -bench BenchmarkBulkKeyInsert -benchtime 10x ./controlplane/store/
func BenchmarkBulkKeyInsert(b *testing.B) {
	const batch = 20000
	db := storetest.New(b)
	seedOneUser(b, db)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ANALYZE api_keys`); err != nil {
		b.Fatal(err)
	}
	var first, last time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := db.Pool.Exec(ctx, bulkKeys, i*batch+1, (i+1)*batch); err != nil {
			b.Fatal(err)
		}
		last = time.Since(start)
		if i == 0 {
			first = last
		}
		b.Logf("keys %7d – %7d: %.2f s", i*batch+1, (i+1)*batch, last.Seconds())
	}
	b.ReportMetric(first.Seconds(), "first-batch-s")
	b.ReportMetric(last.Seconds(), "last-batch-s")
}
