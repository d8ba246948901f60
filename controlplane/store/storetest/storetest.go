// Package storetest gives integration tests a fresh, migrated Postgres database each, on the real server
// named by TOLLGATE_TEST_DATABASE_URL (default postgres://127.0.0.1:5432/test). Without -short a missing
// server fails the test loudly; it never skips.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// New creates a database named tg_<random>, applies the migrations, and drops it when the test ends.
func New(t testing.TB) *DB {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres; skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("storetest: connect to %s (set TOLLGATE_TEST_DATABASE_URL): %v", AdminURL(), err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "tg_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("storetest: parse url: %v", err)
	}
	u.Path = "/" + name
	dbURL := u.String()
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

// String names the database for failure messages.
func (d *DB) String() string { return fmt.Sprintf("test database %s", d.Name) }
