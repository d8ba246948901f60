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

// TestCrossingKeyHashesRefusedConcurrently: a hash may never be one key's current hash and another key's
// previous hash, even when the two rows are written by concurrent transactions, neither of which can
// see the other's uncommitted row. Transaction A creates a key with hash H and stays open; transaction B
// rotates another key so that its previous hash is H. B must wait for A and then be refused (or, had A
// rolled back, succeed): without that, both commit and a secret opens two keys.
func TestCrossingKeyHashesRefusedConcurrently(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	seedOneUser(t, db)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO api_keys (user_id, name, key_hash, prefix) VALUES (1, 'old', sha256('old'), 'tg-o')`); err != nil {
		t.Fatal(err)
	}
	txA, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback(ctx)
	if _, err := txA.Exec(ctx, `INSERT INTO api_keys (user_id, name, key_hash, prefix) VALUES (1, 'new', sha256('crossing'), 'tg-n')`); err != nil {
		t.Fatal(err)
	}

	bDone := make(chan error, 1)
	go func() {
		bDone <- pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE api_keys SET previous_key_hash = sha256('crossing'), previous_prefix = 'tg-n',
				previous_expires_at = now() + interval '1 hour', key_hash = sha256('rotated') WHERE name = 'old'`)
			return err
		})
	}()
	select {
	case err := <-bDone:
		t.Fatalf("the crossing rotation finished while the key holding its hash was uncommitted (err %v): it must wait", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-bDone
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("crossing rotation after the key committed: err %v, want unique_violation", err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM api_keys a JOIN api_keys b ON a.key_hash = b.previous_key_hash`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d keys hold another key's current hash as their previous one", n)
	}
}
