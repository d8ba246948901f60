// Package store owns the control plane's Postgres access: the embedded, numbered migrations, the pool, and
// the queries behind the admin API, snapshot building and settlement. It is the only package that talks
// to Postgres, and it maps driver errors to the sentinels below in one place (interpretError).
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Sentinel errors callers branch on.
var (
	ErrNotFound   = errors.New("not found")
	ErrConflict   = errors.New("conflict")
	ErrReference  = errors.New("referenced row missing or still referenced")
	ErrConstraint = errors.New("constraint violated")
)

// NotifyChannel is the LISTEN/NOTIFY channel on which every configuration commit announces its revision.
const NotifyChannel = "tollgate_config"

// DBTX is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx, so queries run on a pool or inside a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Open connects a pool and checks the connection.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	cfg.PrepareConn = prepareActor // the admin audit log's actor (audit.go)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// Migration is one embedded, numbered migration file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations lists the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %q: name must be NNNN_description.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %q: version: %w", name, err)
		}
		body, err := fs.ReadFile(migrationFS, "migrations/"+name)
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %q and %q share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// migrateLockID is the advisory lock key serialising concurrent migrators (several replicas starting).
const migrateLockID = 0x746f6c6c67617465 // "tollgate"

// Migrate applies every migration not yet applied, each in its own transaction, and returns the names
// applied. Running it again is a no-op. Concurrent callers serialise on an advisory lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	migs, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLockID)); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	defer func() {
		// Unlock on a fresh context: the caller's may be cancelled by now.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrateLockID))
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied: %w", err)
	}
	for _, v := range versions {
		applied[int(v)] = true
	}
	var done []string
	for _, m := range migs {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return done, fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
		done = append(done, m.Name)
	}
	return done, nil
}

// Revision reads the current config revision.
func Revision(ctx context.Context, db DBTX) (int64, error) {
	var rev int64
	if err := db.QueryRow(ctx, `SELECT revision FROM config_revision`).Scan(&rev); err != nil {
		return 0, fmt.Errorf("read config revision: %w", interpretError(err))
	}
	return rev, nil
}

// interpretError maps driver errors to the package sentinels, keeping the original for logs.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505", "55000": // unique_violation; object_not_in_prerequisite_state (a rule with a scheduled change)
			return &DBError{Kind: ErrConflict, Constraint: pgErr.ConstraintName, Detail: pgErr.Detail, cause: err}
		case "23503": // foreign_key_violation
			return &DBError{Kind: ErrReference, Constraint: pgErr.ConstraintName, Detail: pgErr.Detail, cause: err}
		case "23514", "23502", "22P02", "22003", // check, not null, invalid text representation, out of range
			"22021", "22001", "54000": // a NUL or invalid byte in text, value too long, index row too large
			return &DBError{Kind: ErrConstraint, Constraint: pgErr.ConstraintName, Detail: pgErr.Message, cause: err}
		}
	}
	return err
}

// DBError is a constraint failure reported by Postgres, classified by Kind (one of the sentinels).
type DBError struct {
	Kind       error
	Constraint string
	Detail     string
	cause      error
}

func (e *DBError) Error() string {
	return fmt.Sprintf("%v: constraint %s: %s", e.Kind, e.Constraint, e.Detail)
}

// Is lets errors.Is(err, store.ErrConflict) match.
func (e *DBError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the driver error.
func (e *DBError) Unwrap() error { return e.cause }
