package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Org is a tenancy root.
type Org struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// Team belongs to an org.
type Team struct {
	ID    int64  `json:"id"`
	OrgID int64  `json:"org_id"`
	Name  string `json:"name"`
}

// User belongs to an org and optionally to a team of that org.
type User struct {
	ID     int64  `json:"id"`
	OrgID  int64  `json:"org_id"`
	TeamID *int64 `json:"team_id"`
	Name   string `json:"name"`
	Email  string `json:"email"`
}

// APIKey is a data-plane key as the admin API shows it (never the hash).
type APIKey struct {
	ID            int64      `json:"id"`
	UserID        int64      `json:"user_id"`
	OrgID         int64      `json:"org_id"`
	TeamID        *int64     `json:"team_id"`
	Name          string     `json:"name"`
	Prefix        string     `json:"prefix"`
	AllowedModels []string   `json:"allowed_models"`
	RPMLimit      int32      `json:"rpm_limit"`
	TPMLimit      int64      `json:"tpm_limit"`
	Enabled       bool       `json:"enabled"`
	ExpiresAt     *time.Time `json:"expires_at"`
	CreatedAt     time.Time  `json:"created_at"`
	// AllowDirectAddressing lets the key use provider/model addressing when the gateway turns it off.
	AllowDirectAddressing bool `json:"allow_direct_addressing"`
	// CostDisclosure is the key's own cost-disclosure switch; nil follows the gateway's (docs/cost.md).
	CostDisclosure *bool `json:"cost_disclosure"`
	// PreviousPrefix and PreviousExpiresAt name the replaced key during a rotation's grace period.
	PreviousPrefix    *string    `json:"previous_prefix"`
	PreviousExpiresAt *time.Time `json:"previous_expires_at"`
}

// InsertOrg creates an org.
func InsertOrg(ctx context.Context, db DBTX, name string) (Org, error) {
	o := Org{Name: name}
	if err := db.QueryRow(ctx, `INSERT INTO orgs (name) VALUES ($1) RETURNING id`, name).Scan(&o.ID); err != nil {
		return Org{}, fmt.Errorf("insert org %q: %w", name, interpretError(err))
	}
	return o, nil
}

// InsertTeam creates a team; a missing org is ErrReference.
func InsertTeam(ctx context.Context, db DBTX, t Team) (Team, error) {
	if err := db.QueryRow(ctx, `INSERT INTO teams (org_id, name) VALUES ($1, $2) RETURNING id`, t.OrgID, t.Name).Scan(&t.ID); err != nil {
		return Team{}, fmt.Errorf("insert team %q: %w", t.Name, interpretError(err))
	}
	return t, nil
}

// InsertUser creates a user; a missing org, or a team outside the org, is ErrReference.
func InsertUser(ctx context.Context, db DBTX, u User) (User, error) {
	if err := db.QueryRow(ctx, `INSERT INTO users (org_id, team_id, name, email) VALUES ($1, $2, $3, $4) RETURNING id`,
		u.OrgID, u.TeamID, u.Name, u.Email).Scan(&u.ID); err != nil {
		return User{}, fmt.Errorf("insert user %q: %w", u.Name, interpretError(err))
	}
	return u, nil
}

// InsertAPIKey stores a key by its sha256 hash and returns it with the user's org and team.
func InsertAPIKey(ctx context.Context, db DBTX, k APIKey, hash []byte) (APIKey, error) {
	if k.AllowedModels == nil {
		k.AllowedModels = []string{}
	}
	err := db.QueryRow(ctx, `INSERT INTO api_keys (user_id, name, key_hash, prefix, allowed_models, rpm_limit,
			tpm_limit, enabled, expires_at, allow_direct_addressing, cost_disclosure)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		RETURNING id, created_at, (SELECT org_id FROM users WHERE id = $1), (SELECT team_id FROM users WHERE id = $1)`,
		k.UserID, k.Name, hash, k.Prefix, k.AllowedModels, k.RPMLimit, k.TPMLimit, k.Enabled, k.ExpiresAt,
		k.AllowDirectAddressing, k.CostDisclosure).
		Scan(&k.ID, &k.CreatedAt, &k.OrgID, &k.TeamID)
	if err != nil {
		return APIKey{}, fmt.Errorf("insert api key for user %d: %w", k.UserID, interpretError(err))
	}
	return k, nil
}

// ScopeExists reports whether the org, team or user named by scope and id exists.
func ScopeExists(ctx context.Context, db DBTX, scope string, id int64) (bool, error) {
	var table string
	switch scope {
	case "org":
		table = "orgs"
	case "team":
		table = "teams"
	case "user":
		table = "users"
	case "key":
		table = "api_keys"
	default:
		return false, fmt.Errorf("scope %q: %w", scope, ErrConstraint)
	}
	var ok bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{table}.Sanitize()+` WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("check %s %d: %w", scope, id, interpretError(err))
	}
	return ok, nil
}

// TenantFilter selects teams or users for a listing: nil ids do not filter.
type TenantFilter struct {
	OrgID, TeamID *int64
	AfterID       int64
	Limit         int
}

// ListOrgs lists orgs in id order after afterID.
func ListOrgs(ctx context.Context, db DBTX, afterID int64, limit int) ([]Org, error) {
	return collect(ctx, db, "orgs", func(r pgx.Rows) (Org, error) {
		var o Org
		return o, r.Scan(&o.ID, &o.Name)
	}, `SELECT id, name FROM orgs WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
}

// ListTeams lists teams in id order after f.AfterID, optionally of one org.
func ListTeams(ctx context.Context, db DBTX, f TenantFilter) ([]Team, error) {
	return collect(ctx, db, "teams", func(r pgx.Rows) (Team, error) {
		var t Team
		return t, r.Scan(&t.ID, &t.OrgID, &t.Name)
	}, `SELECT id, org_id, name FROM teams WHERE id > $1 AND ($2::bigint IS NULL OR org_id = $2) ORDER BY id LIMIT $3`,
		f.AfterID, f.OrgID, f.Limit)
}

// ListUsers lists users in id order after f.AfterID, optionally of one org and one team.
func ListUsers(ctx context.Context, db DBTX, f TenantFilter) ([]User, error) {
	return collect(ctx, db, "users", func(r pgx.Rows) (User, error) {
		var u User
		return u, r.Scan(&u.ID, &u.OrgID, &u.TeamID, &u.Name, &u.Email)
	}, `SELECT id, org_id, team_id, name, email FROM users
		 WHERE id > $1 AND ($2::bigint IS NULL OR org_id = $2) AND ($3::bigint IS NULL OR team_id = $3)
		 ORDER BY id LIMIT $4`, f.AfterID, f.OrgID, f.TeamID, f.Limit)
}

func collect[T any](ctx context.Context, db DBTX, what string, scan func(pgx.Rows) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, interpretError(err))
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list %s: scan: %w", what, interpretError(err))
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, interpretError(err))
	}
	return out, nil
}

// GetTeam reads one team; ErrNotFound when absent.
func GetTeam(ctx context.Context, db DBTX, id int64) (Team, error) {
	t := Team{ID: id}
	if err := db.QueryRow(ctx, `SELECT org_id, name FROM teams WHERE id = $1`, id).Scan(&t.OrgID, &t.Name); err != nil {
		return Team{}, fmt.Errorf("get team %d: %w", id, interpretError(err))
	}
	return t, nil
}

// GetUser reads one user; ErrNotFound when absent.
func GetUser(ctx context.Context, db DBTX, id int64) (User, error) {
	u := User{ID: id}
	if err := db.QueryRow(ctx, `SELECT org_id, team_id, name, email FROM users WHERE id = $1`, id).
		Scan(&u.OrgID, &u.TeamID, &u.Name, &u.Email); err != nil {
		return User{}, fmt.Errorf("get user %d: %w", id, interpretError(err))
	}
	return u, nil
}

// UpdateOrg renames an org; ErrNotFound when absent.
func UpdateOrg(ctx context.Context, db DBTX, o Org) (Org, error) {
	if err := db.QueryRow(ctx, `UPDATE orgs SET name = $2 WHERE id = $1 RETURNING id`, o.ID, o.Name).Scan(&o.ID); err != nil {
		return Org{}, fmt.Errorf("update org %d: %w", o.ID, interpretError(err))
	}
	return o, nil
}

// UpdateTeam renames a team (its org never changes); ErrNotFound when absent.
func UpdateTeam(ctx context.Context, db DBTX, t Team) (Team, error) {
	if err := db.QueryRow(ctx, `UPDATE teams SET name = $2 WHERE id = $1 RETURNING org_id`, t.ID, t.Name).Scan(&t.OrgID); err != nil {
		return Team{}, fmt.Errorf("update team %d: %w", t.ID, interpretError(err))
	}
	return t, nil
}

// UpdateUser changes a user's name, email and team (its org never changes); a team outside the user's
// org is ErrReference, a missing user ErrNotFound.
func UpdateUser(ctx context.Context, db DBTX, u User) (User, error) {
	if err := db.QueryRow(ctx, `UPDATE users SET name = $2, email = $3, team_id = $4 WHERE id = $1 RETURNING org_id`,
		u.ID, u.Name, u.Email, u.TeamID).Scan(&u.OrgID); err != nil {
		return User{}, fmt.Errorf("update user %d: %w", u.ID, interpretError(err))
	}
	return u, nil
}

// dropScopeBudget deletes a scope's quota row and alert thresholds (its adjustments, alert events and
// usage rows are history and stay).
func dropScopeBudget(ctx context.Context, db DBTX, scope string, id int64) error {
	if _, err := db.Exec(ctx, `DELETE FROM quotas WHERE scope = $1 AND scope_id = $2`, scope, id); err != nil {
		return fmt.Errorf("delete quota %s/%d: %w", scope, id, interpretError(err))
	}
	if _, err := db.Exec(ctx, `DELETE FROM quota_alerts WHERE scope = $1 AND scope_id = $2`, scope, id); err != nil {
		return fmt.Errorf("delete alerts of %s/%d: %w", scope, id, interpretError(err))
	}
	return nil
}

// DeleteUser deletes a user with its API keys (revoked by the next snapshot; their own "key" budgets, when
// quotas have that scope, go too) and its quota; usage rows keep its id. Run it in a transaction.
// ErrNotFound when absent.
func DeleteUser(ctx context.Context, tx DBTX, id int64) error {
	for _, table := range []string{"quotas", "quota_alerts"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE scope = 'key'
			AND scope_id IN (SELECT k.id FROM api_keys k WHERE k.user_id = $1)`, id); err != nil {
			return fmt.Errorf("delete key budgets of user %d: %w", id, interpretError(err))
		}
	}
	tag, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete user %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete user %d: %w", id, ErrNotFound)
	}
	return dropScopeBudget(ctx, tx, "user", id)
}

// DeleteTeam deletes a team and its quota; its users stay in the org without a team (their keys keep
// working, charged to the user and org scopes). Run it in a transaction. ErrNotFound when absent.
func DeleteTeam(ctx context.Context, tx DBTX, id int64) error {
	if _, err := tx.Exec(ctx, `UPDATE users SET team_id = NULL WHERE team_id = $1`, id); err != nil {
		return fmt.Errorf("detach users of team %d: %w", id, interpretError(err))
	}
	tag, err := tx.Exec(ctx, `DELETE FROM teams WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete team %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete team %d: %w", id, ErrNotFound)
	}
	return dropScopeBudget(ctx, tx, "team", id)
}

// OrgMembers counts an org's teams and users.
func OrgMembers(ctx context.Context, db DBTX, id int64) (teams, users int64, err error) {
	err = db.QueryRow(ctx, `SELECT (SELECT count(*) FROM teams WHERE org_id = $1), (SELECT count(*) FROM users WHERE org_id = $1)`, id).
		Scan(&teams, &users)
	if err != nil {
		return 0, 0, fmt.Errorf("count members of org %d: %w", id, interpretError(err))
	}
	return teams, users, nil
}

// DeleteOrg deletes an org without teams or users (ErrReference otherwise) and its quota. Run it in a
// transaction. ErrNotFound when absent.
func DeleteOrg(ctx context.Context, tx DBTX, id int64) error {
	tag, err := tx.Exec(ctx, `DELETE FROM orgs WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete org %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete org %d: %w", id, ErrNotFound)
	}
	return dropScopeBudget(ctx, tx, "org", id)
}
