package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

const apiKeyColumns = `k.id, k.user_id, u.org_id, u.team_id, k.name, k.prefix, k.allowed_models, k.rpm_limit, k.tpm_limit,
	k.enabled, k.expires_at, k.created_at, k.allow_direct_addressing, k.previous_prefix, k.previous_expires_at, k.cost_disclosure`

func scanAPIKey(row pgx.Row) (APIKey, error) {
	var k APIKey
	err := row.Scan(&k.ID, &k.UserID, &k.OrgID, &k.TeamID, &k.Name, &k.Prefix, &k.AllowedModels, &k.RPMLimit, &k.TPMLimit,
		&k.Enabled, &k.ExpiresAt, &k.CreatedAt, &k.AllowDirectAddressing, &k.PreviousPrefix, &k.PreviousExpiresAt, &k.CostDisclosure)
	if k.AllowedModels == nil {
		k.AllowedModels = []string{}
	}
	return k, err
}

// APIKeyFilter selects keys for ListAPIKeys. Nil ids do not filter; Prefix matches the start of the
// current or (during a rotation's grace period) previous prefix.
type APIKeyFilter struct {
	UserID, TeamID, OrgID *int64
	Prefix                string
	AfterID               int64
	Limit                 int
}

// ListAPIKeys lists keys in id order after f.AfterID.
func ListAPIKeys(ctx context.Context, db DBTX, f APIKeyFilter) ([]APIKey, error) {
	like := likePrefix(f.Prefix)
	rows, err := db.Query(ctx, `SELECT `+apiKeyColumns+`
		  FROM api_keys k JOIN users u ON u.id = k.user_id
		 WHERE k.id > $1
		   AND ($2::bigint IS NULL OR k.user_id = $2)
		   AND ($3::bigint IS NULL OR u.team_id = $3)
		   AND ($4::bigint IS NULL OR u.org_id = $4)
		   AND ($5 = '' OR k.prefix LIKE $5 OR k.previous_prefix LIKE $5)
		 ORDER BY k.id LIMIT $6`, f.AfterID, f.UserID, f.TeamID, f.OrgID, like, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", interpretError(err))
	}
	defer rows.Close()
	out := []APIKey{}
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list api keys: scan: %w", interpretError(err))
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", interpretError(err))
	}
	return out, nil
}

// likePrefix is a LIKE pattern matching strings that start with p ("" for none).
func likePrefix(p string) string {
	if p == "" {
		return ""
	}
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// GetAPIKey reads one key; ErrNotFound when absent.
func GetAPIKey(ctx context.Context, db DBTX, id int64) (APIKey, error) {
	k, err := scanAPIKey(db.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.id = $1`, id))
	if err != nil {
		return APIKey{}, fmt.Errorf("get api key %d: %w", id, interpretError(err))
	}
	return k, nil
}

// UpdateAPIKey writes the changeable fields of k (name, enabled, allowed models, limits, expiry, direct
// addressing, cost disclosure); ErrNotFound when absent.
func UpdateAPIKey(ctx context.Context, db DBTX, k APIKey) (APIKey, error) {
	if k.AllowedModels == nil {
		k.AllowedModels = []string{}
	}
	out, err := scanAPIKey(db.QueryRow(ctx, `WITH k AS (
		UPDATE api_keys SET name = $2, enabled = $3, allowed_models = $4, rpm_limit = $5, tpm_limit = $6,
		       expires_at = $7, allow_direct_addressing = $8, cost_disclosure = $9, updated_at = now()
		 WHERE id = $1 RETURNING *)
		SELECT `+apiKeyColumns+` FROM k JOIN users u ON u.id = k.user_id`,
		k.ID, k.Name, k.Enabled, k.AllowedModels, k.RPMLimit, k.TPMLimit, k.ExpiresAt, k.AllowDirectAddressing, k.CostDisclosure))
	if err != nil {
		return APIKey{}, fmt.Errorf("update api key %d: %w", k.ID, interpretError(err))
	}
	return out, nil
}

// RotateAPIKey gives key id a new hash and prefix. With grace > 0 the current hash becomes the previous
// one, valid until now + grace (database time); otherwise the previous hash is cleared and the old key
// stops working with the next snapshot. A previous hash still in its grace period is replaced.
func RotateAPIKey(ctx context.Context, db DBTX, id int64, hash []byte, prefix string, grace time.Duration) (APIKey, error) {
	out, err := scanAPIKey(db.QueryRow(ctx, `WITH k AS (
		UPDATE api_keys SET
		       previous_key_hash   = CASE WHEN $4::bigint > 0 THEN key_hash END,
		       previous_prefix     = CASE WHEN $4::bigint > 0 THEN prefix END,
		       previous_expires_at = CASE WHEN $4::bigint > 0 THEN now() + $4::bigint * interval '1 microsecond' END,
		       key_hash = $2, prefix = $3, updated_at = now()
		 WHERE id = $1 RETURNING *)
		SELECT `+apiKeyColumns+` FROM k JOIN users u ON u.id = k.user_id`,
		id, hash, prefix, grace.Microseconds()))
	if err != nil {
		return APIKey{}, fmt.Errorf("rotate api key %d: %w", id, interpretError(err))
	}
	return out, nil
}

// DeleteAPIKey deletes a key and the budget of its own scope ("key", when quotas have one); ErrNotFound
// when absent. Usage rows keep its id (they have no foreign key). Run it in a transaction.
func DeleteAPIKey(ctx context.Context, tx DBTX, id int64) error {
	tag, err := tx.Exec(ctx, `DELETE FROM api_keys WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete api key %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete api key %d: %w", id, ErrNotFound)
	}
	return dropScopeBudget(ctx, tx, "key", id)
}
