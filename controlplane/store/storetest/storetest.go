// Package storetest gives integration tests a fresh, migrated Postgres database each, on the real server
// named by TOLLGATE_TEST_DATABASE_URL (default postgres://127.0.0.1:5432/test). Without -short a missing
// server fails the test loudly; it never skips.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/controlplane/store"
)

// AdminURL is the URL of the database used to create and drop per-test databases.
func AdminURL() string {
	if u := os.Getenv("TOLLGATE_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://127.0.0.1:5432/test?sslmode=disable"
}

// DB is a fresh migrated database.
type DB struct {
	Pool *pgxpool.Pool
	URL  string
	Name string
}

// New creates a database named tg_<random> as a copy of the migrated template (template), and drops it
// when the test ends. Migrate still runs on it (a no-op on a current template) so a test sees exactly
// what a fresh database migrated by the control plane holds.
func New(t testing.TB) *DB {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres; skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("storetest: connect to %s (set TOLLGATE_TEST_DATABASE_URL): %v", AdminURL(), err)
	}
	defer admin.Close(ctx)
	tmpl, err := template(ctx, admin)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	name := randomName("tg_")
	if err := exec(ctx, admin, "CREATE DATABASE "+name+" TEMPLATE "+tmpl); err != nil {
		t.Fatalf("storetest: create database from %s: %v", tmpl, err)
	}
	dbURL := databaseURL(t, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Errorf("storetest: cleanup connect: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
	})
	pool, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return &DB{Pool: pool, URL: dbURL, Name: name}
}

// template returns the name of a database migrated with this checkout's migrations on this UTC day,
// creating it the first time on this server: CREATE DATABASE … TEMPLATE copies it in a fraction of the
// time that applying every migration to each test's database took. The name holds a hash of the
// migrations (two checkouts with different migrations never share one) and the day (a migration may
// create partitions around the current month). Test processes of several packages race to create it,
// so it is built under an advisory lock, under another name, and renamed only when whole; templates of
// earlier days are dropped when unused.
func template(ctx context.Context, admin *pgx.Conn) (string, error) {
	migs, err := store.Migrations()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range migs {
		fmt.Fprintf(h, "%d\x00%s\x00%s\x00", m.Version, m.Name, m.SQL)
	}
	day := time.Now().UTC().Format("20060102")
	name := "tg_tmpl_" + day + "_" + hex.EncodeToString(h.Sum(nil)[:6])

	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLockID); err != nil {
		return "", fmt.Errorf("template lock: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, templateLockID) }()
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template %s: %w", name, err)
	}
	if exists {
		return name, nil
	}
	dropStaleTemplates(ctx, admin, day)
	build := randomName("tg_tmplbuild_")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+build); err != nil {
		return "", fmt.Errorf("create template %s: %w", build, err)
	}
	if err := migrateTemplate(ctx, build); err != nil {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+build+" WITH (FORCE)")
		return "", err
	}
	if err := exec(ctx, admin, "ALTER DATABASE "+build+" RENAME TO "+name); err != nil {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+build+" WITH (FORCE)")
		return "", fmt.Errorf("publish template %s: %w", name, err)
	}
	return name, nil
}

// templateLockID is the advisory lock that serialises building a template (any 64-bit constant that no
// other code uses).
const templateLockID int64 = 0x746774706c

// migrateTemplate applies the migrations to the database name and closes every connection to it.
func migrateTemplate(ctx context.Context, name string) error {
	u, err := url.Parse(AdminURL())
	if err != nil {
		return fmt.Errorf("parse url: %w", err)
	}
	u.Path = "/" + name
	pool, err := store.Open(ctx, u.String())
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	return nil
}

// dropStaleTemplates drops the templates of days before yesterday (a test process that started
// yesterday may still copy yesterday's); one in use stays, to be dropped by a later run.
func dropStaleTemplates(ctx context.Context, admin *pgx.Conn, today string) {
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'tg\_tmpl\_%'`)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format("20060102")
	for _, n := range names {
		if d := strings.TrimPrefix(n, "tg_tmpl_"); len(d) >= 8 && d[:8] < yesterday && d[:8] != today {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+n)
		}
	}
}

// exec runs a statement that Postgres refuses while another session is still connected to the database it
// names (a template's last connection can take a moment to end after its pool closed): it retries that
// refusal (55006, object_in_use) for a few seconds.
func exec(ctx context.Context, admin *pgx.Conn, sql string) error {
	var err error
	for range 50 {
		if _, err = admin.Exec(ctx, sql); err == nil {
			return nil
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func databaseURL(t testing.TB, name string) string {
	t.Helper()
	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("storetest: parse url: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// String names the database for failure messages.
func (d *DB) String() string { return fmt.Sprintf("test database %s", d.Name) }
