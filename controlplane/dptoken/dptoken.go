// Package dptoken checks the credentials data planes present to the control plane's gRPC services. A
// data-plane token is created through the admin API (REST /admin/dataplane-tokens, gRPC
// CreateDataPlaneToken) with one or both scopes — snapshot:read for SnapshotService.Watch (whose snapshots
// carry every upstream secret) and settlement:write for SettlementService.Settle (which writes billing) —
// and is stored as its sha256 only. The check runs from the call's headers in the gRPC server's
// InTapHandle, before the message is read, and looks the token up on every call, so a revocation refuses
// the next call at once on every replica; Revocations closes the open Watch streams of a revoked token.
//
// TOLLGATE_DP_TOKEN on the control plane is an optional bootstrap token holding both scopes (compose,
// development); it cannot be revoked except by restarting the control planes without it.
package dptoken

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/store"
)

// Scopes a data-plane token may hold.
const (
	ScopeSnapshotRead    = "snapshot:read"
	ScopeSettlementWrite = "settlement:write"
)

// Scopes lists every scope, in their canonical order.
var Scopes = []string{ScopeSnapshotRead, ScopeSettlementWrite}

// TokenPrefix starts every generated data-plane token (so it is recognisable in a leaked file).
const TokenPrefix = "tgd-"

// BootstrapName is the Credential name of the bootstrap token (TOLLGATE_DP_TOKEN); its ID is 0.
const BootstrapName = "bootstrap"

// Credential is an authenticated data plane: the token's id (0 for the bootstrap token), name and scopes.
type Credential struct {
	ID     int64
	Name   string
	Scopes []string
}

// Has reports whether the credential holds scope.
func (c Credential) Has(scope string) bool { return slices.Contains(c.Scopes, scope) }

// Checker resolves data-plane tokens. Create it with New.
type Checker struct {
	pool          *pgxpool.Pool
	bootstrapHash [sha256.Size]byte
	hasBootstrap  bool
}

// New returns a Checker looking tokens up in pool, also accepting bootstrap (both scopes) unless it is
// empty.
func New(pool *pgxpool.Pool, bootstrap string) *Checker {
	c := &Checker{pool: pool}
	if bootstrap != "" {
		c.bootstrapHash, c.hasBootstrap = sha256.Sum256([]byte(bootstrap)), true
	}
	return c
}

// NewToken returns a fresh data-plane token (TokenPrefix and 40 url-safe random characters, 240 bits)
// and the sha256 hash to store.
func NewToken() (token string, hash []byte, err error) {
	var b [30]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, fmt.Errorf("generate data-plane token: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	return token, sum[:], nil
}

// CheckScopes validates a requested scope list and returns it deduplicated in canonical order.
func CheckScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, fmt.Errorf("at least one scope required, of %s", strings.Join(Scopes, ", "))
	}
	for _, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return nil, fmt.Errorf("unknown scope %q: want %s", s, strings.Join(Scopes, " or "))
		}
	}
	var out []string
	for _, s := range Scopes {
		if slices.Contains(scopes, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// Identify resolves the "authorization: Bearer <token>" metadata of an incoming call. A missing, unknown
// or revoked token is UNAUTHENTICATED; a database failure UNAVAILABLE (the data plane retries).
func (c *Checker) Identify(ctx context.Context) (Credential, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		scheme, tok, ok := strings.Cut(v, " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
			continue
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		// Constant time over the digests: neither the bootstrap token nor its length leaks.
		if c.hasBootstrap && subtle.ConstantTimeCompare(sum[:], c.bootstrapHash[:]) == 1 {
			return Credential{Name: BootstrapName, Scopes: Scopes}, nil
		}
		if c.pool == nil {
			break
		}
		t, err := store.ActiveDataPlaneTokenByHash(ctx, c.pool, sum[:])
		if errors.Is(err, store.ErrNotFound) {
			return Credential{}, status.Error(codes.Unauthenticated, "invalid or revoked data-plane token")
		}
		if err != nil {
			return Credential{}, status.Errorf(codes.Unavailable, "data-plane token check: %v", err)
		}
		return Credential{ID: t.ID, Name: t.Name, Scopes: t.Scopes}, nil
	}
	return Credential{}, status.Error(codes.Unauthenticated, "missing data-plane token: send authorization: Bearer <data-plane token>")
}

// Authorize returns the check of one gRPC service's calls: a valid data-plane token holding scope, else
// UNAUTHENTICATED (no valid token) or PERMISSION_DENIED (valid, without the scope). It has the shape of
// the control plane's per-service authorizer (app.Server.AuthorizeService).
func (c *Checker) Authorize(scope string) func(ctx context.Context, fullMethod string) error {
	return func(ctx context.Context, _ string) error {
		cred, err := c.Identify(ctx)
		if err != nil {
			return err
		}
		if !cred.Has(scope) {
			return status.Errorf(codes.PermissionDenied, "data-plane token %q lacks scope %s", cred.Name, scope)
		}
		return nil
	}
}
