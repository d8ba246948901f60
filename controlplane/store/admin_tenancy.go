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
			tpm_limit, enabled, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		RETURNING id, created_at, (SELECT org_id FROM users WHERE id = $1), (SELECT team_id FROM users WHERE id = $1)`,
		k.UserID, k.Name, hash, k.Prefix, k.AllowedModels, k.RPMLimit, k.TPMLimit, k.Enabled, k.ExpiresAt).
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
