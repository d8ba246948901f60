package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	applied, err := store.Migrate(ctx, db.Pool)
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, want nothing", applied)
	}
	migs, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(migs) {
		t.Fatalf("schema_migrations has %d rows, want %d", n, len(migs))
	}
}

func TestSchemaEnforcesSpec(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) error {
		_, err := db.Pool.Exec(ctx, sql, args...)
		if err != nil {
			return store.InterpretErrorForTest(err)
		}
		return nil
	}
	if err := exec(`INSERT INTO providers (id, name, channel_type, base_url) VALUES (1, 'p', 'alpha', 'http://x')`); err != nil {
		t.Fatal(err)
	}
	const price = `'1','1','1','1','1','1','1'`
	tests := []struct {
		name string
		sql  string
		want error
	}{
		{"unknown channel type", `INSERT INTO providers (name, channel_type, base_url) VALUES ('q', 'delta', 'http://x')`, store.ErrConstraint},
		{"unknown match type", `INSERT INTO price_rules (match_type, model_match, input_price, output_price, cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price) VALUES ('prefix', 'm', ` + price + `)`, store.ErrConstraint},
		{"malformed decimal", `INSERT INTO price_rules (match_type, model_match, input_price, output_price, cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price) VALUES ('exact', 'm', '1.2.3','1','1','1','1','1','1')`, store.ErrConstraint},
		{"negative price", `INSERT INTO price_rules (match_type, model_match, input_price, output_price, cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price) VALUES ('exact', 'm', '-1','1','1','1','1','1','1')`, store.ErrConstraint},
		{"unknown implementation", `INSERT INTO routing_rules (provider_id, operation, kind, implementation) VALUES (1, 'rerank', 'alpha', 'proxy')`, store.ErrConstraint},
		{"generation op with family kind", `INSERT INTO routing_rules (provider_id, operation, kind, implementation) VALUES (1, 'generate_content', 'alpha', 'passthrough')`, store.ErrConstraint},
		{"family op with generation kind", `INSERT INTO routing_rules (provider_id, operation, kind, implementation) VALUES (1, 'rerank', 'beta_messages', 'passthrough')`, store.ErrConstraint},
		{"unknown scope", `INSERT INTO quotas (scope, scope_id) VALUES ('galaxy', 1)`, store.ErrConstraint},
		{"unknown end state", `INSERT INTO usages (request_id, operation, inbound_kind, cost, source, end_state, created_at) VALUES ('r', 'rerank', 'alpha', 0, 'none', 'exploded', now())`, store.ErrConstraint},
		{"price rule for missing provider", `INSERT INTO price_rules (provider_id, match_type, model_match, input_price, output_price, cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price) VALUES (99, 'exact', 'm', ` + price + `)`, store.ErrReference},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := exec(tt.sql); !errors.Is(err, tt.want) {
				t.Fatalf("exec = %v, want %v", err, tt.want)
			}
		})
	}

	t.Run("routing cell unique", func(t *testing.T) {
		if err := exec(`INSERT INTO routing_rules (provider_id, operation, kind, implementation) VALUES (1, 'rerank', 'alpha', 'passthrough')`); err != nil {
			t.Fatal(err)
		}
		err := exec(`INSERT INTO routing_rules (provider_id, operation, kind, implementation) VALUES (1, 'rerank', 'alpha', 'local')`)
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("duplicate cell = %v, want ErrConflict", err)
		}
	})
	t.Run("usage request id unique", func(t *testing.T) {
		// Unique with created_at, the partition key (migration 0013): a redelivered record carries its created_at.
		ins := `INSERT INTO usages (request_id, operation, inbound_kind, cost, source, end_state, created_at) VALUES ('req-1', 'rerank', 'alpha', 0.5, 'upstream', 'completed', '2026-01-02 03:04:05+00')`
		if err := exec(ins); err != nil {
			t.Fatal(err)
		}
		if err := exec(ins); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("duplicate request_id = %v, want ErrConflict", err)
		}
	})
	t.Run("decimal strings kept as given", func(t *testing.T) {
		var got string
		err := db.Pool.QueryRow(ctx, `INSERT INTO price_rules (match_type, model_match, input_price, output_price, cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price) VALUES ('exact', 'm', '0.000000123456789012345678', '1.50','1','1','1','1','1') RETURNING input_price::text || ' ' || output_price::text`).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if want := "0.000000123456789012345678 1.50"; got != want {
			t.Fatalf("stored prices = %q, want %q", got, want)
		}
	})
}

func TestRevisionBumpsOncePerTransactionAndNotifies(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	listener, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN "+store.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	before, err := store.Revision(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for _, n := range []string{"a", "b", "c"} {
			if _, err := tx.Exec(ctx, `INSERT INTO orgs (name) VALUES ($1)`, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := store.Revision(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if after != before+1 {
		t.Fatalf("revision after one transaction = %d, want %d", after, before+1)
	}
	n, err := listener.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != itoa(after) {
		t.Fatalf("notification payload = %q, want %q", n.Payload, itoa(after))
	}
	// Settlement's cost_used updates must not bump the revision.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 10)`); err != nil {
		t.Fatal(err)
	}
	withQuota, _ := store.Revision(ctx, db.Pool)
	if _, err := db.Pool.Exec(ctx, `UPDATE quotas SET cost_used = cost_used + 1`); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Revision(ctx, db.Pool); got != withQuota {
		t.Fatalf("cost_used update bumped revision %d -> %d", withQuota, got)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE quotas SET cost_limit = 20`); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Revision(ctx, db.Pool); got != withQuota+1 {
		t.Fatalf("cost_limit update: revision %d, want %d", got, withQuota+1)
	}
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}
