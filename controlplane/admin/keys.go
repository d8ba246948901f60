package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// MaxRotationGrace bounds how long a rotated key's predecessor keeps working.
const MaxRotationGrace = 30 * 24 * time.Hour

// APIKeyInput creates a data-plane key. enabled defaults to true.
type APIKeyInput struct {
	UserID                int64      `json:"user_id"`
	Name                  string     `json:"name"`
	AllowedModels         []string   `json:"allowed_models"`
	RPMLimit              int32      `json:"rpm_limit"`
	TPMLimit              int64      `json:"tpm_limit"`
	Enabled               *bool      `json:"enabled"`
	ExpiresAt             *time.Time `json:"expires_at"`
	AllowDirectAddressing bool       `json:"allow_direct_addressing"`
	// CostDisclosure is the key's own cost-disclosure switch; absent or null follows the gateway's.
	CostDisclosure *bool `json:"cost_disclosure"`
}

// CreatedAPIKey is a new (or rotated) key with the full key shown this once.
type CreatedAPIKey struct {
	store.APIKey
	Key string `json:"key"`
}

// checkKeyFields runs the snapshot compiler's own check of the key's limits and allowed_models patterns,
// the values the data plane carries.
func checkKeyFields(rpm int32, tpm int64, allowed []string) []Detail {
	var details []Detail
	if rpm < 0 {
		details = append(details, field("rpm_limit", "must not be negative (0 = unlimited), got %d", rpm))
	}
	if tpm < 0 {
		details = append(details, field("tpm_limit", "must not be negative (0 = unlimited), got %d", tpm))
	}
	if details != nil {
		return details
	}
	return elementDetails(snapshot.CheckAPIKey(&configv1.ApiKey{Id: serverID, KeyHash: make([]byte, sha256.Size),
		RpmLimit: rpm, TpmLimit: tpm, AllowedModels: allowed}))
}

// newAPIKey returns a new key "tg-" + 40 url-safe random characters, its sha256 and its shown prefix.
func newAPIKey() (key string, hash []byte, prefix string, err error) {
	key, err = newToken(APIKeyPrefix)
	if err != nil {
		return "", nil, "", err
	}
	sum := sha256.Sum256([]byte(key))
	return key, sum[:], key[:apiKeyShown], nil
}

// CreateAPIKey creates a key "tg-" + 40 url-safe random characters; only its sha256 and its first
// 10 characters (the prefix shown to humans) are stored. The full key is answered once.
func (s *Service) CreateAPIKey(ctx context.Context, in APIKeyInput) (CreatedAPIKey, error) {
	var details []Detail
	if in.UserID <= 0 {
		details = append(details, field("user_id", "must be a positive user id, got %d", in.UserID))
	}
	details = append(details, checkKeyFields(in.RPMLimit, in.TPMLimit, in.AllowedModels)...)
	if details != nil {
		return CreatedAPIKey{}, invalidFields("invalid api key", details...)
	}
	key, hash, prefix, err := newAPIKey()
	if err != nil {
		return CreatedAPIKey{}, err
	}
	k, err := store.InsertAPIKey(ctx, s.pool, store.APIKey{UserID: in.UserID, Name: in.Name, Prefix: prefix,
		AllowedModels: in.AllowedModels, RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit,
		Enabled: in.Enabled == nil || *in.Enabled, ExpiresAt: in.ExpiresAt, AllowDirectAddressing: in.AllowDirectAddressing,
		CostDisclosure: in.CostDisclosure}, hash)
	if errors.Is(err, store.ErrReference) {
		return CreatedAPIKey{}, invalidFields("invalid api key", field("user_id", "user %d does not exist", in.UserID))
	}
	if err != nil {
		return CreatedAPIKey{}, storeError(err, "api key")
	}
	return CreatedAPIKey{APIKey: k, Key: key}, nil
}

// APIKeyQuery filters ListAPIKeys: by owner (user, team, org) and by the start of the key's prefix.
type APIKeyQuery struct {
	UserID, TeamID, OrgID *int64
	Prefix                string
	Limit                 int
	Cursor                string
}

// ListAPIKeys lists keys in id order, a page at a time.
func (s *Service) ListAPIKeys(ctx context.Context, q APIKeyQuery) (Page[store.APIKey], error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return Page[store.APIKey]{}, err
	}
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return Page[store.APIKey]{}, err
	}
	ks, err := store.ListAPIKeys(ctx, s.pool, store.APIKeyFilter{UserID: q.UserID, TeamID: q.TeamID, OrgID: q.OrgID,
		Prefix: q.Prefix, AfterID: after, Limit: limit})
	if err != nil {
		return Page[store.APIKey]{}, storeError(err, "api keys")
	}
	return page(ks, limit, func(k store.APIKey) int64 { return k.ID }), nil
}

// GetAPIKey reads one key (never its hash).
func (s *Service) GetAPIKey(ctx context.Context, id int64) (store.APIKey, error) {
	if err := checkID(id, "id"); err != nil {
		return store.APIKey{}, err
	}
	k, err := store.GetAPIKey(ctx, s.pool, id)
	return k, storeError(err, fmt.Sprintf("api key %d", id))
}

// OptionalTime is a JSON field that distinguishes absent (Set false), null (Set, Value nil) and a time.
type OptionalTime struct {
	Set   bool
	Value *time.Time
}

// UnmarshalJSON records that the field was present.
func (o *OptionalTime) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Value = nil
		return nil
	}
	var t time.Time
	if err := json.Unmarshal(b, &t); err != nil {
		return err
	}
	o.Value = &t
	return nil
}

// OptionalBool is a JSON field that distinguishes absent (Set false), null (Set, Value nil) and a boolean.
type OptionalBool struct {
	Set   bool
	Value *bool
}

// UnmarshalJSON records that the field was present.
func (o *OptionalBool) UnmarshalJSON(b []byte) error {
	o.Set = true
	return json.Unmarshal(b, &o.Value)
}

// APIKeyPatch changes the fields present: name, enabled, allowed_models ([] allows every model),
// rpm_limit, tpm_limit, expires_at (null: never), allow_direct_addressing, cost_disclosure (null: follow
// the gateway's).
type APIKeyPatch struct {
	Name                  *string      `json:"name"`
	Enabled               *bool        `json:"enabled"`
	AllowedModels         *[]string    `json:"allowed_models"`
	RPMLimit              *int32       `json:"rpm_limit"`
	TPMLimit              *int64       `json:"tpm_limit"`
	ExpiresAt             OptionalTime `json:"expires_at"`
	AllowDirectAddressing *bool        `json:"allow_direct_addressing"`
	CostDisclosure        OptionalBool `json:"cost_disclosure"`
}

// apply returns k with the patch's fields, and the problems of the result (the snapshot compiler's key
// check), nil when it is valid.
func (p APIKeyPatch) apply(k store.APIKey) (store.APIKey, []Detail) {
	if p.Name != nil {
		k.Name = *p.Name
	}
	if p.Enabled != nil {
		k.Enabled = *p.Enabled
	}
	if p.AllowedModels != nil {
		k.AllowedModels = *p.AllowedModels
	}
	if p.RPMLimit != nil {
		k.RPMLimit = *p.RPMLimit
	}
	if p.TPMLimit != nil {
		k.TPMLimit = *p.TPMLimit
	}
	if p.ExpiresAt.Set {
		k.ExpiresAt = p.ExpiresAt.Value
	}
	if p.AllowDirectAddressing != nil {
		k.AllowDirectAddressing = *p.AllowDirectAddressing
	}
	if p.CostDisclosure.Set {
		k.CostDisclosure = p.CostDisclosure.Value
	}
	return k, checkKeyFields(k.RPMLimit, k.TPMLimit, k.AllowedModels)
}

// UpdateAPIKey applies a patch to key id in one transaction (the row is locked while it is read and
// written, so two concurrent patches of different fields both land).
func (s *Service) UpdateAPIKey(ctx context.Context, id int64, p APIKeyPatch) (store.APIKey, error) {
	if err := checkID(id, "id"); err != nil {
		return store.APIKey{}, err
	}
	var out store.APIKey
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE`, id); err != nil {
			return fmt.Errorf("lock api key %d: %w", id, err)
		}
		k, err := store.GetAPIKey(ctx, tx, id)
		if err != nil {
			return err
		}
		k, details := p.apply(k)
		if details != nil {
			return invalidFields("invalid api key", details...)
		}
		out, err = store.UpdateAPIKey(ctx, tx, k)
		return err
	})
	return out, storeError(err, fmt.Sprintf("api key %d", id))
}

// DeleteAPIKey deletes a key: the next snapshot (published on the write's notification) no longer carries
// it, so every data plane refuses it as soon as it holds that snapshot. Usage rows keep the key's id.
func (s *Service) DeleteAPIKey(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.DeleteAPIKey(ctx, tx, id) }),
		fmt.Sprintf("api key %d", id))
}

// RotateInput is a rotation: how long, in seconds, the replaced key keeps working (0: not at all).
type RotateInput struct {
	GraceSeconds int64 `json:"grace_seconds"`
}

// RotateAPIKey gives key id a new secret, answered once. The key keeps its id, owner, limits and usage
// history. During the grace period the replaced secret works too: snapshots carry both hashes, and the
// data plane stops accepting the old one at the grace period's end by its own clock.
func (s *Service) RotateAPIKey(ctx context.Context, id int64, in RotateInput) (CreatedAPIKey, error) {
	if err := checkID(id, "id"); err != nil {
		return CreatedAPIKey{}, err
	}
	if in.GraceSeconds < 0 || in.GraceSeconds > int64(MaxRotationGrace/time.Second) {
		return CreatedAPIKey{}, invalidFields("invalid rotation", field("grace_seconds",
			"must be from 0 to %d (30 days), got %d", int64(MaxRotationGrace/time.Second), in.GraceSeconds))
	}
	key, hash, prefix, err := newAPIKey()
	if err != nil {
		return CreatedAPIKey{}, err
	}
	var out store.APIKey
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = store.RotateAPIKey(ctx, tx, id, hash, prefix, time.Duration(in.GraceSeconds)*time.Second)
		return err
	})
	if err != nil {
		return CreatedAPIKey{}, storeError(err, fmt.Sprintf("api key %d", id))
	}
	return CreatedAPIKey{APIKey: out, Key: key}, nil
}
