package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/controlplane/store"
)

// Role is what an admin credential may do.
type Role int

// Roles, weakest first.
const (
	RoleNone   Role = iota
	RoleViewer      // reads only (lists, gets, export, quote)
	RoleAdmin       // everything
)

func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// Token formats: 40 url-safe random characters (240 bits) after a prefix naming the kind.
const (
	AdminTokenPrefix = "tga-"
	APIKeyPrefix     = "tg-"
	randomChars      = 40
	// apiKeyShown is how many leading characters of an API key are stored and shown as its prefix.
	apiKeyShown = 10
)

// newToken returns prefix + 40 url-safe random characters.
func newToken(prefix string) (string, error) {
	var b [randomChars * 3 / 4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// bearer extracts the token of an "Authorization: Bearer <token>" value.
func bearer(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// Principal is an authenticated admin credential.
type Principal struct {
	Role Role
	// Name is the admin token's name; "bootstrap" for TOLLGATE_ADMIN_TOKEN.
	Name string
}

// Authenticate resolves an Authorization header value to a principal. The bootstrap token is
// compared in constant time (over sha256 digests, so lengths leak nothing); stored tokens are
// looked up by their sha256 hash, so the token itself is never compared or stored. A missing or
// unknown token is a CodeUnauthenticated error.
func (s *Service) Authenticate(ctx context.Context, authorization string) (Principal, error) {
	tok, ok := bearer(authorization)
	if !ok {
		return Principal{}, errorf(CodeUnauthenticated, "missing bearer token: send Authorization: Bearer <admin token>")
	}
	sum := sha256.Sum256([]byte(tok))
	var zero [sha256.Size]byte
	if s.bootstrapHash != zero && subtle.ConstantTimeCompare(sum[:], s.bootstrapHash[:]) == 1 {
		return Principal{Role: RoleAdmin, Name: "bootstrap"}, nil
	}
	t, err := store.AdminTokenByHash(ctx, s.pool, sum[:])
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, errorf(CodeUnauthenticated, "invalid admin token")
	}
	if err != nil {
		return Principal{}, &Error{Code: CodeInternal, Message: "internal error", Cause: err}
	}
	switch t.Role {
	case "admin":
		return Principal{Role: RoleAdmin, Name: t.Name}, nil
	case "viewer":
		return Principal{Role: RoleViewer, Name: t.Name}, nil
	}
	return Principal{}, errorf(CodeUnauthenticated, "invalid admin token")
}

// authorize checks that authorization grants at least need and returns the caller.
func (s *Service) authorize(ctx context.Context, authorization string, need Role) (Principal, error) {
	p, err := s.Authenticate(ctx, authorization)
	if err != nil {
		return Principal{}, err
	}
	if p.Role < need {
		return Principal{}, errorf(CodePermissionDenied, "role %s may not do this; it needs role %s", p.Role, need)
	}
	return p, nil
}

// Actor is how the price history names a principal as the writer of a version: "<role>:<name>".
func (p Principal) Actor() string { return p.Role.String() + ":" + p.Name }

type principalKey struct{}

// WithPrincipal returns ctx carrying the authenticated caller; writes made under it are recorded
// as that caller's, in the price history and the audit log (the REST endpoint does this after
// authorizing, ActorInterceptor for gRPC).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(store.WithActor(ctx, p.Actor()), principalKey{}, p)
}

// caller returns the authenticated caller of ctx: the principal the REST endpoint put there, else the
// one named by the "authorization" metadata of an incoming gRPC call (already authorized by
// AuthorizeGRPC; resolved again here because a gRPC authorizer cannot hand on a context). ok is false
// when ctx carries no caller at all (an in-process use of the Service).
func (s *Service) caller(ctx context.Context) (p Principal, ok bool, err error) {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p, true, nil
	}
	md, found := metadata.FromIncomingContext(ctx)
	if !found || len(md.Get("authorization")) == 0 {
		return Principal{}, false, nil
	}
	p, err = s.Authenticate(ctx, md.Get("authorization")[0])
	if err != nil {
		return Principal{}, false, err
	}
	return p, true, nil
}

// CreateAdminToken stores a new admin token and returns it with the token shown this once.
func (s *Service) CreateAdminToken(ctx context.Context, name, role string) (store.AdminToken, string, error) {
	if role != "admin" && role != "viewer" {
		return store.AdminToken{}, "", invalidFields("invalid admin token", field("role", `must be "admin" or "viewer", got %q`, role))
	}
	tok, err := newToken(AdminTokenPrefix)
	if err != nil {
		return store.AdminToken{}, "", err
	}
	sum := sha256.Sum256([]byte(tok))
	t, err := store.InsertAdminToken(ctx, s.pool, name, role, sum[:])
	if err != nil {
		return store.AdminToken{}, "", storeError(err, "admin token")
	}
	return t, tok, nil
}

// ListAdminTokens lists admin tokens (metadata only).
func (s *Service) ListAdminTokens(ctx context.Context) ([]store.AdminToken, error) {
	ts, err := store.ListAdminTokens(ctx, s.pool)
	return ts, storeError(err, "admin tokens")
}

// DeleteAdminToken revokes an admin token.
func (s *Service) DeleteAdminToken(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(store.DeleteAdminToken(ctx, s.pool, id), fmt.Sprintf("admin token %d", id))
}

// checkID rejects a non-positive id.
func checkID(id int64, name string) error {
	if id <= 0 {
		return errorf(CodeInvalid, "%s must be a positive integer, got %d", name, id)
	}
	return nil
}
