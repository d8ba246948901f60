package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The admin audit log (migration 0009) is written by row triggers on every configuration table, naming
// the transaction's tollgate.actor as the writer. The admin API sets it explicitly in its transactions
// (SetActor); for its single statements (run straight on the pool) WithActor puts the caller in the
// context and the pool's PrepareConn hook (prepareActor, installed by Open) sets the session's
// tollgate.actor before the connection is handed out — and clears it before a caller without one gets
// the connection, so a settlement or a snapshot build never runs under an admin's name.

type actorKey struct{}

// WithActor returns ctx naming actor ("<role>:<token name>") as the writer of the changes made through
// the pool under it.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

const actorData = "tollgate.actor" // pgconn CustomData key: the session's tollgate.actor

// prepareActor is the pool's PrepareConn hook: it makes the session's tollgate.actor the context's
// actor (one round trip, only when it differs from what the connection holds).
func prepareActor(ctx context.Context, conn *pgx.Conn) (bool, error) {
	want, _ := ctx.Value(actorKey{}).(string)
	data := conn.PgConn().CustomData()
	if have, _ := data[actorData].(string); have == want {
		return true, nil
	}
	if _, err := conn.Exec(ctx, `SELECT set_config('tollgate.actor', $1, false)`, want); err != nil {
		// The connection's setting is unknown now: destroy it rather than hand it out.
		return false, fmt.Errorf("set session actor: %w", err)
	}
	data[actorData] = want
	return true, nil
}

// AuditEvent is one audit_log row.
type AuditEvent struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	Actor      string          `json:"actor"`
	ActorRole  string          `json:"actor_role"`
	ActorName  string          `json:"actor_name"`
	Action     string          `json:"action"`
	Resource   string          `json:"resource"`
	ResourceID string          `json:"resource_id"`
	Before     json.RawMessage `json:"before"`
	After      json.RawMessage `json:"after"`
}

// AuditFilter selects audit events; zero fields select everything.
type AuditFilter struct {
	Resource   string
	ResourceID string
	ActorName  string
	Since      time.Time
	Until      time.Time
	// Before is the keyset cursor: only events with a smaller id (the list is newest first).
	Before int64
}

// ListAudit returns up to limit events matching f, newest first.
func ListAudit(ctx context.Context, db DBTX, f AuditFilter, limit int) ([]AuditEvent, error) {
	var since, until *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	if !f.Until.IsZero() {
		until = &f.Until
	}
	rows, err := db.Query(ctx, `SELECT id, at, actor, actor_role, actor_name, action, resource, resource_id,
			coalesce(before::text, 'null'), coalesce(after::text, 'null')
		FROM audit_log
		WHERE ($1 = '' OR resource = $1) AND ($2 = '' OR resource_id = $2) AND ($3 = '' OR actor_name = $3)
		  AND ($4::timestamptz IS NULL OR at >= $4) AND ($5::timestamptz IS NULL OR at < $5)
		  AND ($6 = 0 OR id < $6)
		ORDER BY id DESC LIMIT $7`,
		f.Resource, f.ResourceID, f.ActorName, since, until, f.Before, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEvent, error) {
		var e AuditEvent
		var before, after string
		err := r.Scan(&e.ID, &e.At, &e.Actor, &e.ActorRole, &e.ActorName, &e.Action, &e.Resource, &e.ResourceID, &before, &after)
		e.Before, e.After = json.RawMessage(before), json.RawMessage(after)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", interpretError(err))
	}
	return out, nil
}
