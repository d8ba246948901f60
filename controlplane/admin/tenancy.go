package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// RouteInput is a route as written, with aliases and members inline. strategy defaults to
// "priority", enabled (route and members) to true, member weight to 1.
type RouteInput struct {
	ID       int64              `json:"id"`
	Name     string             `json:"name"`
	Strategy string             `json:"strategy"`
	Enabled  *bool              `json:"enabled"`
	Aliases  []string           `json:"aliases"`
	Members  []RouteMemberInput `json:"members"`
}

// RouteMemberInput is one candidate of a route as written.
type RouteMemberInput struct {
	ProviderID      int64  `json:"provider_id"`
	UpstreamModelID string `json:"upstream_model_id"`
	Priority        int32  `json:"priority"`
	Weight          *int32 `json:"weight"`
	Enabled         *bool  `json:"enabled"`
}

func (in RouteInput) validate() (store.Route, error) {
	details := idDetails("id", in.ID)
	if in.Name == "" {
		details = append(details, field("name", "required"))
	}
	if in.Strategy == "" {
		in.Strategy = "priority"
	}
	if in.Strategy != "priority" && in.Strategy != "weighted" {
		details = append(details, field("strategy", `must be "priority" or "weighted", got %q`, in.Strategy))
	}
	r := store.Route{ID: in.ID, Name: in.Name, Strategy: in.Strategy, Enabled: in.Enabled == nil || *in.Enabled,
		Aliases: []string{}, Members: []store.RouteMember{}}
	seen := map[string]bool{}
	for i, a := range in.Aliases {
		switch {
		case a == "":
			details = append(details, field(fmt.Sprintf("aliases[%d]", i), "must not be empty"))
		case seen[a]:
			details = append(details, field(fmt.Sprintf("aliases[%d]", i), "duplicate alias %q", a))
		}
		seen[a] = true
		r.Aliases = append(r.Aliases, a)
	}
	for i, m := range in.Members {
		name := fmt.Sprintf("members[%d].", i)
		if m.ProviderID <= 0 {
			details = append(details, field(name+"provider_id", "must be a positive provider id, got %d", m.ProviderID))
		}
		if m.UpstreamModelID == "" {
			details = append(details, field(name+"upstream_model_id", "required"))
		}
		w := int32(1)
		if m.Weight != nil {
			w = *m.Weight
		}
		if w < 0 {
			details = append(details, field(name+"weight", "must not be negative, got %d", w))
		}
		r.Members = append(r.Members, store.RouteMember{ProviderID: m.ProviderID, UpstreamModelID: m.UpstreamModelID,
			Priority: m.Priority, Weight: w, Enabled: m.Enabled == nil || *m.Enabled})
	}
	if details == nil {
		// The snapshot compiler's own check of the route as it will be carried.
		m := &configv1.Route{Id: orServerID(r.ID), Name: r.Name, Strategy: r.Strategy, Enabled: r.Enabled, Aliases: r.Aliases}
		for _, mm := range r.Members {
			m.Members = append(m.Members, &configv1.RouteMember{ProviderId: mm.ProviderID, UpstreamModelId: mm.UpstreamModelID,
				Priority: mm.Priority, Weight: mm.Weight, Enabled: true})
		}
		details = elementDetails(snapshot.CheckRoute(m))
	}
	if details != nil {
		return store.Route{}, invalidFields("invalid route", details...)
	}
	return r, nil
}

// ListRoutes lists routes with aliases and members in id order.
func (s *Service) ListRoutes(ctx context.Context, limit int, cursor string) (Page[store.Route], error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return Page[store.Route]{}, err
	}
	after, err := decodeCursor(cursor)
	if err != nil {
		return Page[store.Route]{}, err
	}
	rs, err := store.ListRoutes(ctx, s.pool, after, limit)
	if err != nil {
		return Page[store.Route]{}, storeError(err, "routes")
	}
	return page(rs, limit, func(r store.Route) int64 { return r.ID }), nil
}

// GetRoute reads one route with its aliases and members, in the shape ListRoutes answers. The route
// and its children are read in one repeatable-read snapshot, so a concurrent update is seen whole
// or not at all.
func (s *Service) GetRoute(ctx context.Context, id int64) (store.Route, error) {
	if err := checkID(id, "id"); err != nil {
		return store.Route{}, err
	}
	var out store.Route
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		out, err = store.GetRoute(ctx, tx, id)
		return err
	})
	return out, storeError(err, fmt.Sprintf("route %d", id))
}

// CreateRoute creates a route with its aliases and members in one transaction.
func (s *Service) CreateRoute(ctx context.Context, in RouteInput) (store.Route, error) {
	if in.ID != 0 {
		return store.Route{}, invalidFields("invalid route", field("id", "is assigned by the server; use PUT /admin/routes/{id}"))
	}
	r, err := in.validate()
	if err != nil {
		return store.Route{}, err
	}
	var out store.Route
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = store.InsertRoute(ctx, tx, r)
		return err
	})
	return out, storeError(err, "route")
}

// UpdateRoute replaces route id, its aliases and members, in one transaction.
func (s *Service) UpdateRoute(ctx context.Context, id int64, in RouteInput) (store.Route, error) {
	if err := checkID(id, "id"); err != nil {
		return store.Route{}, err
	}
	if in.ID != 0 && in.ID != id {
		return store.Route{}, invalidFields("invalid route", field("id", "body id %d does not match path id %d", in.ID, id))
	}
	in.ID = id
	r, err := in.validate()
	if err != nil {
		return store.Route{}, err
	}
	var out store.Route
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = store.UpdateRoute(ctx, tx, r)
		return err
	})
	return out, storeError(err, fmt.Sprintf("route %d", id))
}

// DeleteRoute deletes a route with its aliases and members.
func (s *Service) DeleteRoute(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.DeleteRoute(ctx, tx, id) }),
		fmt.Sprintf("route %d", id))
}

// CreateOrg creates an org.
func (s *Service) CreateOrg(ctx context.Context, in store.Org) (store.Org, error) {
	if in.ID != 0 {
		return store.Org{}, invalidFields("invalid org", field("id", "is assigned by the server"))
	}
	if in.Name == "" {
		return store.Org{}, invalidFields("invalid org", field("name", "required"))
	}
	o, err := store.InsertOrg(ctx, s.pool, in.Name)
	return o, storeError(err, "org")
}

// CreateTeam creates a team in an existing org.
func (s *Service) CreateTeam(ctx context.Context, in store.Team) (store.Team, error) {
	var details []Detail
	if in.ID != 0 {
		details = append(details, field("id", "is assigned by the server"))
	}
	if in.OrgID <= 0 {
		details = append(details, field("org_id", "must be a positive org id, got %d", in.OrgID))
	}
	if in.Name == "" {
		details = append(details, field("name", "required"))
	}
	if details != nil {
		return store.Team{}, invalidFields("invalid team", details...)
	}
	t, err := store.InsertTeam(ctx, s.pool, in)
	if errors.Is(err, store.ErrReference) {
		return store.Team{}, invalidFields("invalid team", field("org_id", "org %d does not exist", in.OrgID))
	}
	return t, storeError(err, "team")
}

// CreateUser creates a user in an existing org (and optionally a team of that org).
func (s *Service) CreateUser(ctx context.Context, in store.User) (store.User, error) {
	var details []Detail
	if in.ID != 0 {
		details = append(details, field("id", "is assigned by the server"))
	}
	if in.OrgID <= 0 {
		details = append(details, field("org_id", "must be a positive org id, got %d", in.OrgID))
	}
	if in.TeamID != nil && *in.TeamID <= 0 {
		details = append(details, field("team_id", "must be a positive team id or null, got %d", *in.TeamID))
	}
	if in.Name == "" {
		details = append(details, field("name", "required"))
	}
	if details != nil {
		return store.User{}, invalidFields("invalid user", details...)
	}
	u, err := store.InsertUser(ctx, s.pool, in)
	var dbe *store.DBError
	if errors.As(err, &dbe) && errors.Is(err, store.ErrReference) {
		if in.TeamID != nil && dbe.Constraint != "users_org_id_fkey" {
			return store.User{}, invalidFields("invalid user", field("team_id", "team %d does not exist in org %d", *in.TeamID, in.OrgID))
		}
		return store.User{}, invalidFields("invalid user", field("org_id", "org %d does not exist", in.OrgID))
	}
	return u, storeError(err, "user")
}

// APIKeyInput creates a data-plane key. enabled defaults to true.
type APIKeyInput struct {
	UserID        int64      `json:"user_id"`
	Name          string     `json:"name"`
	AllowedModels []string   `json:"allowed_models"`
	RPMLimit      int32      `json:"rpm_limit"`
	TPMLimit      int64      `json:"tpm_limit"`
	Enabled       *bool      `json:"enabled"`
	ExpiresAt     *time.Time `json:"expires_at"`
}

// CreatedAPIKey is a new key with the full key shown this once.
type CreatedAPIKey struct {
	store.APIKey
	Key string `json:"key"`
}

// CreateAPIKey creates a key "tg-" + 40 url-safe random characters; only its sha256 and its first
// 10 characters (the prefix shown to humans) are stored. The full key is answered once.
func (s *Service) CreateAPIKey(ctx context.Context, in APIKeyInput) (CreatedAPIKey, error) {
	var details []Detail
	if in.UserID <= 0 {
		details = append(details, field("user_id", "must be a positive user id, got %d", in.UserID))
	}
	if in.RPMLimit < 0 {
		details = append(details, field("rpm_limit", "must not be negative (0 = unlimited), got %d", in.RPMLimit))
	}
	if in.TPMLimit < 0 {
		details = append(details, field("tpm_limit", "must not be negative (0 = unlimited), got %d", in.TPMLimit))
	}
	for i, m := range in.AllowedModels {
		if m == "" {
			details = append(details, field(fmt.Sprintf("allowed_models[%d]", i), "must not be empty"))
		}
	}
	if details == nil {
		// The snapshot compiler's own check (rate limits a browser and the data plane carry).
		details = elementDetails(snapshot.CheckAPIKey(&configv1.ApiKey{Id: serverID, KeyHash: make([]byte, sha256.Size),
			RpmLimit: in.RPMLimit, TpmLimit: in.TPMLimit}))
	}
	if details != nil {
		return CreatedAPIKey{}, invalidFields("invalid api key", details...)
	}
	key, err := newToken(APIKeyPrefix)
	if err != nil {
		return CreatedAPIKey{}, err
	}
	sum := sha256.Sum256([]byte(key))
	k, err := store.InsertAPIKey(ctx, s.pool, store.APIKey{UserID: in.UserID, Name: in.Name, Prefix: key[:apiKeyShown],
		AllowedModels: in.AllowedModels, RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit,
		Enabled: in.Enabled == nil || *in.Enabled, ExpiresAt: in.ExpiresAt}, sum[:])
	if errors.Is(err, store.ErrReference) {
		return CreatedAPIKey{}, invalidFields("invalid api key", field("user_id", "user %d does not exist", in.UserID))
	}
	if err != nil {
		return CreatedAPIKey{}, storeError(err, "api key")
	}
	return CreatedAPIKey{APIKey: k, Key: key}, nil
}

// checkScope validates a quota scope and that the org, team or user exists.
func (s *Service) checkScope(ctx context.Context, scope string, id int64) error {
	switch vocab.Scope(scope) {
	case vocab.ScopeOrg, vocab.ScopeTeam, vocab.ScopeUser:
	default:
		return errorf(CodeInvalid, `scope must be "org", "team" or "user", got %q`, scope)
	}
	if err := checkID(id, "scope id"); err != nil {
		return err
	}
	ok, err := store.ScopeExists(ctx, s.pool, scope, id)
	if err != nil {
		return storeError(err, "quota scope")
	}
	if !ok {
		return errorf(CodeNotFound, "%s %d not found", scope, id)
	}
	return nil
}

// GetQuota reads a scope's quota. A scope without a quota row is answered as unlimited with
// nothing used (it is not quota-bearing).
func (s *Service) GetQuota(ctx context.Context, scope string, id int64) (store.Quota, error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return store.Quota{}, err
	}
	q, err := store.GetQuota(ctx, s.pool, scope, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Quota{Scope: scope, ScopeID: id, CostUsed: "0"}, nil
	}
	return q, storeError(err, fmt.Sprintf("quota %s/%d", scope, id))
}

// QuotaInput sets a limit: a decimal string of dollars, or null for unlimited.
type QuotaInput struct {
	CostLimit *string `json:"cost_limit"`
}

// SetQuota creates or changes a scope's limit; cost_used is kept.
func (s *Service) SetQuota(ctx context.Context, scope string, id int64, in QuotaInput) (store.Quota, error) {
	if err := s.checkScope(ctx, scope, id); err != nil {
		return store.Quota{}, err
	}
	// The snapshot compiler's own check: a plain decimal, not negative, at most pricing.MaxExactMicros.
	if _, err := snapshot.CheckQuotaLimit(scope, id, in.CostLimit); err != nil {
		return store.Quota{}, invalidFields("invalid quota", elementDetails(err)...)
	}
	q, err := store.SetQuotaLimit(ctx, s.pool, scope, id, in.CostLimit)
	return q, storeError(err, fmt.Sprintf("quota %s/%d", scope, id))
}
