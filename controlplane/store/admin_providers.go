package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Provider is an upstream provider. Credentials are filled by the read functions, without secrets.
type Provider struct {
	ID          int64            `json:"id"`
	Name        string           `json:"name"`
	ChannelType string           `json:"channel_type"`
	BaseURL     string           `json:"base_url"`
	Enabled     bool             `json:"enabled"`
	Settings    json.RawMessage  `json:"settings"`
	Credentials []CredentialInfo `json:"credentials"`
}

// CredentialInfo is a credential as the admin API shows it: never the secret.
type CredentialInfo struct {
	ID         int64     `json:"id"`
	ProviderID int64     `json:"provider_id"`
	Weight     int32     `json:"weight"`
	Enabled    bool      `json:"enabled"`
	CreatedAt  time.Time `json:"created_at"`
}

// RouteRef names a route, e.g. one that still references a provider.
type RouteRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

const adminProviderColumns = `id, name, channel_type, base_url, enabled, settings::text`

func adminScanProvider(row pgx.Row) (Provider, error) {
	var p Provider
	var settings string
	err := row.Scan(&p.ID, &p.Name, &p.ChannelType, &p.BaseURL, &p.Enabled, &settings)
	p.Settings = json.RawMessage(settings)
	p.Credentials = []CredentialInfo{}
	return p, err
}

func adminSettingsOrEmpty(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	return string(raw)
}

// InsertProvider creates a provider (r.ID ignored) and returns it.
func InsertProvider(ctx context.Context, db DBTX, p Provider) (Provider, error) {
	out, err := adminScanProvider(db.QueryRow(ctx, `INSERT INTO providers (name, channel_type, base_url, enabled, settings)
		VALUES ($1, $2, $3, $4, $5::text::jsonb) RETURNING `+adminProviderColumns,
		p.Name, p.ChannelType, p.BaseURL, p.Enabled, adminSettingsOrEmpty(p.Settings)))
	if err != nil {
		return Provider{}, fmt.Errorf("insert provider %q: %w", p.Name, interpretError(err))
	}
	return out, nil
}

// UpdateProvider replaces the provider with id p.ID; ErrNotFound when absent.
func UpdateProvider(ctx context.Context, db DBTX, p Provider) (Provider, error) {
	out, err := adminScanProvider(db.QueryRow(ctx, `UPDATE providers SET name = $1, channel_type = $2, base_url = $3,
		enabled = $4, settings = $5::text::jsonb, updated_at = now() WHERE id = $6 RETURNING `+adminProviderColumns,
		p.Name, p.ChannelType, p.BaseURL, p.Enabled, adminSettingsOrEmpty(p.Settings), p.ID))
	if err != nil {
		return Provider{}, fmt.Errorf("update provider %d: %w", p.ID, interpretError(err))
	}
	if err := adminFillCredentials(ctx, db, []*Provider{&out}); err != nil {
		return Provider{}, err
	}
	return out, nil
}

// GetProvider reads one provider with its credentials; ErrNotFound when absent.
func GetProvider(ctx context.Context, db DBTX, id int64) (Provider, error) {
	p, err := adminScanProvider(db.QueryRow(ctx, `SELECT `+adminProviderColumns+` FROM providers WHERE id = $1`, id))
	if err != nil {
		return Provider{}, fmt.Errorf("get provider %d: %w", id, interpretError(err))
	}
	if err := adminFillCredentials(ctx, db, []*Provider{&p}); err != nil {
		return Provider{}, err
	}
	return p, nil
}

// LockProvider reads a provider's channel type, locking the row until the transaction ends.
func LockProvider(ctx context.Context, db DBTX, id int64) (channelType string, err error) {
	if err := db.QueryRow(ctx, `SELECT channel_type FROM providers WHERE id = $1 FOR UPDATE`, id).Scan(&channelType); err != nil {
		return "", fmt.Errorf("lock provider %d: %w", id, interpretError(err))
	}
	return channelType, nil
}

// ListProviders returns up to limit providers with id > afterID, with credentials, in id order.
func ListProviders(ctx context.Context, db DBTX, afterID int64, limit int) ([]Provider, error) {
	rows, err := db.Query(ctx, `SELECT `+adminProviderColumns+` FROM providers WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list providers: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Provider, error) { return adminScanProvider(row) })
	if err != nil {
		return nil, fmt.Errorf("list providers: %w", interpretError(err))
	}
	ptrs := make([]*Provider, len(out))
	for i := range out {
		ptrs[i] = &out[i]
	}
	if err := adminFillCredentials(ctx, db, ptrs); err != nil {
		return nil, err
	}
	return out, nil
}

func adminFillCredentials(ctx context.Context, db DBTX, ps []*Provider) error {
	if len(ps) == 0 {
		return nil
	}
	byID := make(map[int64]*Provider, len(ps))
	ids := make([]int64, len(ps))
	for i, p := range ps {
		byID[p.ID] = p
		ids[i] = p.ID
	}
	rows, err := db.Query(ctx, `SELECT id, provider_id, weight, enabled, created_at FROM credentials
		WHERE provider_id = ANY($1) ORDER BY id`, ids)
	if err != nil {
		return fmt.Errorf("read credentials: %w", interpretError(err))
	}
	creds, err := pgx.CollectRows(rows, pgx.RowToStructByPos[CredentialInfo])
	if err != nil {
		return fmt.Errorf("read credentials: %w", interpretError(err))
	}
	for _, c := range creds {
		p := byID[c.ProviderID]
		p.Credentials = append(p.Credentials, c)
	}
	return nil
}

// RoutesUsingProvider lists the routes with a member on the provider.
func RoutesUsingProvider(ctx context.Context, db DBTX, providerID int64) ([]RouteRef, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT r.id, r.name FROM routes r JOIN route_members m ON m.route_id = r.id
		WHERE m.provider_id = $1 ORDER BY r.id`, providerID)
	if err != nil {
		return nil, fmt.Errorf("routes using provider %d: %w", providerID, interpretError(err))
	}
	refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RouteRef])
	if err != nil {
		return nil, fmt.Errorf("routes using provider %d: %w", providerID, interpretError(err))
	}
	return refs, nil
}

// PriceRulesUsingProvider lists the ids of the price rules scoped to the provider.
func PriceRulesUsingProvider(ctx context.Context, db DBTX, providerID int64) ([]int64, error) {
	rows, err := db.Query(ctx, `SELECT id FROM price_rules WHERE provider_id = $1 ORDER BY id`, providerID)
	if err != nil {
		return nil, fmt.Errorf("price rules using provider %d: %w", providerID, interpretError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("price rules using provider %d: %w", providerID, interpretError(err))
	}
	return ids, nil
}

// DeleteProvider deletes a provider (its credentials and routing rules cascade); ErrNotFound when
// absent, ErrReference when routes or price rules still reference it.
func DeleteProvider(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM providers WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete provider %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete provider %d: %w", id, ErrNotFound)
	}
	return nil
}

// ExistingProviderIDs returns which of ids name existing providers.
func ExistingProviderIDs(ctx context.Context, db DBTX, ids []int64) (map[int64]bool, error) {
	rows, err := db.Query(ctx, `SELECT id FROM providers WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("check providers: %w", interpretError(err))
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("check providers: %w", interpretError(err))
	}
	out := make(map[int64]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

// InsertCredential stores a sealed credential secret and returns the credential without it.
func InsertCredential(ctx context.Context, db DBTX, providerID int64, ciphertext []byte, weight int32, enabled bool) (CredentialInfo, error) {
	var c CredentialInfo
	err := db.QueryRow(ctx, `INSERT INTO credentials (provider_id, secret_ciphertext, weight, enabled)
		VALUES ($1, $2, $3, $4) RETURNING id, provider_id, weight, enabled, created_at`,
		providerID, ciphertext, weight, enabled).Scan(&c.ID, &c.ProviderID, &c.Weight, &c.Enabled, &c.CreatedAt)
	if err != nil {
		return CredentialInfo{}, fmt.Errorf("insert credential for provider %d: %w", providerID, interpretError(err))
	}
	return c, nil
}

// CredentialCiphertext reads a credential's sealed secret (for tests and snapshot building).
func CredentialCiphertext(ctx context.Context, db DBTX, id int64) ([]byte, error) {
	var b []byte
	if err := db.QueryRow(ctx, `SELECT secret_ciphertext FROM credentials WHERE id = $1`, id).Scan(&b); err != nil {
		return nil, fmt.Errorf("read credential %d: %w", id, interpretError(err))
	}
	return b, nil
}

// DeleteCredential deletes a credential; ErrNotFound when absent.
func DeleteCredential(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM credentials WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete credential %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete credential %d: %w", id, ErrNotFound)
	}
	return nil
}

// ProviderChannelTypes returns the channel type of every provider, by id.
func ProviderChannelTypes(ctx context.Context, db DBTX) (map[int64]string, error) {
	rows, err := db.Query(ctx, `SELECT id, channel_type FROM providers`)
	if err != nil {
		return nil, fmt.Errorf("read provider channel types: %w", interpretError(err))
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var ct string
		if err := rows.Scan(&id, &ct); err != nil {
			return nil, fmt.Errorf("read provider channel types: %w", interpretError(err))
		}
		out[id] = ct
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read provider channel types: %w", interpretError(err))
	}
	return out, nil
}
