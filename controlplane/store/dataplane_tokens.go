package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DataPlaneTokenChannel is the LISTEN/NOTIFY channel on which a revocation announces the token's id
// (migration 0010's trigger).
const DataPlaneTokenChannel = "tollgate_dataplane_tokens"

// DataPlaneToken is a data plane's credential metadata (never the token or its hash). RevokedAt is nil
// while the token is valid.
type DataPlaneToken struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

const dataPlaneTokenCols = `id, name, scopes, created_at, revoked_at`

// InsertDataPlaneToken stores a data-plane token by its sha256 hash.
func InsertDataPlaneToken(ctx context.Context, db DBTX, name string, scopes []string, hash []byte) (DataPlaneToken, error) {
	rows, err := db.Query(ctx, `INSERT INTO dataplane_tokens (name, scopes, token_hash) VALUES ($1, $2, $3)
		RETURNING `+dataPlaneTokenCols, name, scopes, hash)
	if err != nil {
		return DataPlaneToken{}, fmt.Errorf("insert data-plane token %q: %w", name, interpretError(err))
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[DataPlaneToken])
	if err != nil {
		return DataPlaneToken{}, fmt.Errorf("insert data-plane token %q: %w", name, interpretError(err))
	}
	return t, nil
}

// ListDataPlaneTokens lists every data-plane token's metadata, revoked ones included, in id order.
func ListDataPlaneTokens(ctx context.Context, db DBTX) ([]DataPlaneToken, error) {
	rows, err := db.Query(ctx, `SELECT `+dataPlaneTokenCols+` FROM dataplane_tokens ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list data-plane tokens: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DataPlaneToken])
	if err != nil {
		return nil, fmt.Errorf("list data-plane tokens: %w", interpretError(err))
	}
	return out, nil
}

// ActiveDataPlaneTokenByHash returns the unrevoked data-plane token with this sha256 hash; ErrNotFound
// when there is none (unknown or revoked).
func ActiveDataPlaneTokenByHash(ctx context.Context, db DBTX, hash []byte) (DataPlaneToken, error) {
	rows, err := db.Query(ctx, `SELECT `+dataPlaneTokenCols+` FROM dataplane_tokens
		WHERE token_hash = $1 AND revoked_at IS NULL`, hash)
	if err != nil {
		return DataPlaneToken{}, fmt.Errorf("look up data-plane token: %w", interpretError(err))
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[DataPlaneToken])
	if err != nil {
		return DataPlaneToken{}, fmt.Errorf("look up data-plane token: %w", interpretError(err))
	}
	return t, nil
}

// RevokedDataPlaneTokens returns which of ids are revoked or no longer exist.
func RevokedDataPlaneTokens(ctx context.Context, db DBTX, ids []int64) ([]int64, error) {
	rows, err := db.Query(ctx, `SELECT u.id FROM unnest($1::bigint[]) AS u(id)
		WHERE NOT EXISTS (SELECT 1 FROM dataplane_tokens t WHERE t.id = u.id AND t.revoked_at IS NULL)`, ids)
	if err != nil {
		return nil, fmt.Errorf("check data-plane tokens: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("check data-plane tokens: %w", interpretError(err))
	}
	return out, nil
}

// RevokeDataPlaneToken marks a data-plane token revoked (idempotent: a revoked token keeps its first
// revocation time) and returns it; ErrNotFound when absent.
func RevokeDataPlaneToken(ctx context.Context, db DBTX, id int64) (DataPlaneToken, error) {
	rows, err := db.Query(ctx, `UPDATE dataplane_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
		RETURNING `+dataPlaneTokenCols, id)
	if err != nil {
		return DataPlaneToken{}, fmt.Errorf("revoke data-plane token %d: %w", id, interpretError(err))
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[DataPlaneToken])
	if err != nil {
		return DataPlaneToken{}, fmt.Errorf("revoke data-plane token %d: %w", id, interpretError(err))
	}
	return t, nil
}
