package admin

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/controlplane/dptoken"
	"github.com/tollgate/tollgate/controlplane/store"
)

// CreateDataPlaneToken stores a new data-plane token with scopes (dptoken.Scopes) and returns it with the
// token shown this once.
func (s *Service) CreateDataPlaneToken(ctx context.Context, name string, scopes []string) (store.DataPlaneToken, string, error) {
	var details []Detail
	if name == "" || len(name) > 200 {
		details = append(details, field("name", "required, at most 200 bytes"))
	}
	scopes, err := dptoken.CheckScopes(scopes)
	if err != nil {
		details = append(details, field("scopes", "%v", err))
	}
	if len(details) > 0 {
		return store.DataPlaneToken{}, "", invalidFields("invalid data-plane token", details...)
	}
	tok, hash, err := dptoken.NewToken()
	if err != nil {
		return store.DataPlaneToken{}, "", err
	}
	t, err := store.InsertDataPlaneToken(ctx, s.pool, name, scopes, hash)
	if err != nil {
		return store.DataPlaneToken{}, "", storeError(err, "data-plane token")
	}
	return t, tok, nil
}

// ListDataPlaneTokens lists data-plane tokens (metadata only), revoked ones included.
func (s *Service) ListDataPlaneTokens(ctx context.Context) ([]store.DataPlaneToken, error) {
	ts, err := store.ListDataPlaneTokens(ctx, s.pool)
	return ts, storeError(err, "data-plane tokens")
}

// RevokeDataPlaneToken revokes a data-plane token: its next call is refused on every control plane and
// its open Watch streams close (dptoken.Checker.Revocations). Revoking twice keeps the first time.
func (s *Service) RevokeDataPlaneToken(ctx context.Context, id int64) (store.DataPlaneToken, error) {
	if err := checkID(id, "id"); err != nil {
		return store.DataPlaneToken{}, err
	}
	t, err := store.RevokeDataPlaneToken(ctx, s.pool, id)
	return t, storeError(err, fmt.Sprintf("data-plane token %d", id))
}
