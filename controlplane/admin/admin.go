// Package admin is the control plane's operator API (docs/admin-api.md): one service layer (Service) that
// validates input and runs the store queries, served over REST (RegisterHTTP, JSON on the admin
// HTTP listener) and over gRPC (NewGRPC, tollgate.admin.v1.AdminService). It also owns admin
// authentication (bootstrap token plus stored admin/viewer tokens) and the channel types' default
// routing cells (DefaultCells).
//
// Service methods return *Error for anything a client caused; each transport maps its Code to a
// status only at its edge (HTTP status in rest.go, gRPC code in grpc.go).
package admin

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/controlplane/reconcile"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/snapshotbuild"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/watch"
	"github.com/tollgate/tollgate/shared/pricing"
)

// Code classifies a client-visible failure.
type Code string

// Error codes; the HTTP status and gRPC code of each are fixed in rest.go and grpc.go.
const (
	CodeInvalid          Code = "invalid_request"   // 400, InvalidArgument: malformed JSON, wrong types, bad path/query
	CodeUnauthenticated  Code = "unauthenticated"   // 401, Unauthenticated
	CodePermissionDenied Code = "permission_denied" // 403, PermissionDenied
	CodeNotFound         Code = "not_found"         // 404, NotFound
	CodeConflict         Code = "conflict"          // 409, AlreadyExists: a unique constraint
	CodeInUse            Code = "in_use"            // 409, FailedPrecondition: still referenced
	CodeTooLarge         Code = "body_too_large"    // 413, ResourceExhausted
	CodeValidation       Code = "validation_failed" // 422, InvalidArgument: well-formed but invalid values
	CodeInternal         Code = "internal"          // 500, Internal
)

// Detail is one item of an error's details: a field problem (with the element index on import and
// the tier index for pricing_tiers_json entries) or a referencing resource.
type Detail struct {
	Section   string `json:"section,omitempty"`
	Index     *int   `json:"index,omitempty"`
	Field     string `json:"field,omitempty"`
	TierIndex *int   `json:"tier_index,omitempty"`
	Message   string `json:"message"`
	Resource  string `json:"resource,omitempty"`
	ID        int64  `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
}

// Error is a failure a client may see. Message and Details are safe to show; Cause is only logged.
type Error struct {
	Code    Code
	Message string
	Details []Detail
	Cause   error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Code, e.Message)
	for _, d := range e.Details {
		b.WriteString("; ")
		if d.Section != "" {
			b.WriteString(d.Section)
		}
		if d.Index != nil {
			fmt.Fprintf(&b, "[%d]", *d.Index)
		}
		if d.TierIndex != nil {
			fmt.Fprintf(&b, ".pricing_tiers_json[%d]", *d.TierIndex)
		}
		if d.Field != "" {
			if d.Section != "" || d.Index != nil || d.TierIndex != nil {
				b.WriteByte('.')
			}
			b.WriteString(d.Field)
			b.WriteString(": ")
		}
		b.WriteString(d.Message)
	}
	if e.Cause != nil {
		fmt.Fprintf(&b, " (%v)", e.Cause)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidFields(msg string, details ...Detail) *Error {
	return &Error{Code: CodeValidation, Message: msg, Details: details}
}

func field(name, format string, args ...any) Detail {
	return Detail{Field: name, Message: fmt.Sprintf(format, args...)}
}

func intp(i int) *int { return &i }

// storeError turns a store error into a client error where the client caused it; what names
// the resource for messages ("price rule 7"). Anything else is wrapped as internal.
func storeError(err error, what string) error {
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) {
		return err
	}
	var dbe *store.DBError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: what + " not found", Cause: err}
	case errors.As(err, &dbe) && errors.Is(err, store.ErrConflict):
		return &Error{Code: CodeConflict, Message: what + " conflicts with an existing row",
			Details: []Detail{{Field: constraintField(dbe.Constraint), Message: dbe.Detail}}, Cause: err}
	case errors.As(err, &dbe) && errors.Is(err, store.ErrReference):
		return &Error{Code: CodeValidation, Message: what + " references a row that does not exist",
			Details: []Detail{{Field: constraintField(dbe.Constraint), Message: dbe.Detail}}, Cause: err}
	case errors.As(err, &dbe) && errors.Is(err, store.ErrConstraint):
		return &Error{Code: CodeValidation, Message: what + " violates a constraint",
			Details: []Detail{{Field: constraintField(dbe.Constraint), Message: dbe.Detail}}, Cause: err}
	}
	return &Error{Code: CodeInternal, Message: "internal error", Cause: fmt.Errorf("%s: %w", what, err)}
}

// constraintField guesses the field a constraint is about from Postgres' default names
// ("price_rules_provider_id_fkey" → "provider_id").
func constraintField(c string) string {
	switch c {
	case "route_aliases_pkey":
		return "aliases"
	case "routing_rules_provider_id_operation_kind_key":
		return "kind"
	case "route_names_disjoint":
		return "aliases"
	}
	for _, t := range []string{"routing_rules_", "price_rules_", "route_members_", "route_aliases_", "credentials_",
		"providers_", "routes_", "api_keys_", "admin_tokens_", "users_", "teams_", "orgs_", "quotas_"} {
		if strings.HasPrefix(c, t) {
			c = strings.TrimPrefix(c, t)
			break
		}
	}
	for _, s := range []string{"_fkey", "_key", "_check", "_pkey"} {
		c = strings.TrimSuffix(c, s)
	}
	return c
}

// Service is the admin service layer shared by REST and gRPC.
type Service struct {
	pool          *pgxpool.Pool
	usages        *store.Usages // lists pool's usage rows, remembering its partitions between listings
	box           *secret.Box
	log           *slog.Logger
	bootstrapHash [sha256.Size]byte

	snapshotStatus func() snapshotbuild.Status
	dataPlanes     func() []watch.DataPlane

	quoteMu    sync.Mutex
	quoteRev   int64
	quoteIndex *pricing.Index

	reconcileOnce sync.Once
	reconciler    *reconcile.Runner
}

// NewService builds the service. bootstrapToken is TOLLGATE_ADMIN_TOKEN (an admin credential that
// is never stored); box seals credential secrets.
func NewService(pool *pgxpool.Pool, box *secret.Box, bootstrapToken string, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{pool: pool, usages: store.NewUsages(pool), box: box, log: log}
	if bootstrapToken != "" {
		s.bootstrapHash = sha256.Sum256([]byte(bootstrapToken))
	}
	return s
}
