package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
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

// TenantQuery filters ListTeams and ListUsers.
type TenantQuery struct {
	OrgID, TeamID *int64
	Limit         int
	Cursor        string
}

func tenantPage(q TenantQuery) (store.TenantFilter, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return store.TenantFilter{}, err
	}
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return store.TenantFilter{}, err
	}
	return store.TenantFilter{OrgID: q.OrgID, TeamID: q.TeamID, AfterID: after, Limit: limit}, nil
}

// ListOrgs lists orgs in id order.
func (s *Service) ListOrgs(ctx context.Context, limit int, cursor string) (Page[store.Org], error) {
	f, err := tenantPage(TenantQuery{Limit: limit, Cursor: cursor})
	if err != nil {
		return Page[store.Org]{}, err
	}
	os, err := store.ListOrgs(ctx, s.pool, f.AfterID, f.Limit)
	if err != nil {
		return Page[store.Org]{}, storeError(err, "orgs")
	}
	return page(os, f.Limit, func(o store.Org) int64 { return o.ID }), nil
}

// ListTeams lists teams in id order, optionally of one org.
func (s *Service) ListTeams(ctx context.Context, q TenantQuery) (Page[store.Team], error) {
	f, err := tenantPage(q)
	if err != nil {
		return Page[store.Team]{}, err
	}
	ts, err := store.ListTeams(ctx, s.pool, f)
	if err != nil {
		return Page[store.Team]{}, storeError(err, "teams")
	}
	return page(ts, f.Limit, func(t store.Team) int64 { return t.ID }), nil
}

// ListUsers lists users in id order, optionally of one org and one team.
func (s *Service) ListUsers(ctx context.Context, q TenantQuery) (Page[store.User], error) {
	f, err := tenantPage(q)
	if err != nil {
		return Page[store.User]{}, err
	}
	us, err := store.ListUsers(ctx, s.pool, f)
	if err != nil {
		return Page[store.User]{}, storeError(err, "users")
	}
	return page(us, f.Limit, func(u store.User) int64 { return u.ID }), nil
}

// tenantUpdateChecks are the checks every tenant update shares: the body's id (if any) is the path's,
// the org (if given) is the current one — tenants never move between orgs, their spend history stays —
// and the name is set. curOrg 0 skips the org check (an org itself).
func tenantUpdateChecks(what string, id, bodyID, bodyOrg, curOrg int64, name string) []Detail {
	var details []Detail
	if bodyID != 0 && bodyID != id {
		details = append(details, field("id", "body id %d does not match path id %d", bodyID, id))
	}
	if curOrg != 0 && bodyOrg != 0 && bodyOrg != curOrg {
		details = append(details, field("org_id", "a %s cannot move to another org (%s %d is in org %d)", what, what, id, curOrg))
	}
	if name == "" {
		details = append(details, field("name", "required"))
	}
	return details
}

// UpdateOrg renames org id.
func (s *Service) UpdateOrg(ctx context.Context, id int64, in store.Org) (store.Org, error) {
	if err := checkID(id, "id"); err != nil {
		return store.Org{}, err
	}
	if details := tenantUpdateChecks("org", id, in.ID, 0, 0, in.Name); details != nil {
		return store.Org{}, invalidFields("invalid org", details...)
	}
	in.ID = id
	o, err := store.UpdateOrg(ctx, s.pool, in)
	return o, storeError(err, fmt.Sprintf("org %d", id))
}

// UpdateTeam renames team id; its org cannot change (a team's spend history stays with its org).
func (s *Service) UpdateTeam(ctx context.Context, id int64, in store.Team) (store.Team, error) {
	if err := checkID(id, "id"); err != nil {
		return store.Team{}, err
	}
	var out store.Team
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := store.GetTeam(ctx, tx, id)
		if err != nil {
			return err
		}
		if details := tenantUpdateChecks("team", id, in.ID, in.OrgID, cur.OrgID, in.Name); details != nil {
			return invalidFields("invalid team", details...)
		}
		in.ID = id
		out, err = store.UpdateTeam(ctx, tx, in)
		return err
	})
	return out, storeError(err, fmt.Sprintf("team %d", id))
}

// UpdateUser changes user id's name, email and team (null: none); its org cannot change. A new team
// applies to spend from the next snapshot on: usage already settled stays charged where it was.
func (s *Service) UpdateUser(ctx context.Context, id int64, in store.User) (store.User, error) {
	if err := checkID(id, "id"); err != nil {
		return store.User{}, err
	}
	var out store.User
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := store.GetUser(ctx, tx, id)
		if err != nil {
			return err
		}
		details := tenantUpdateChecks("user", id, in.ID, in.OrgID, cur.OrgID, in.Name)
		if in.TeamID != nil && *in.TeamID <= 0 {
			details = append(details, field("team_id", "must be a positive team id or null, got %d", *in.TeamID))
		}
		if details != nil {
			return invalidFields("invalid user", details...)
		}
		in.ID = id
		out, err = store.UpdateUser(ctx, tx, in)
		if errors.Is(err, store.ErrReference) {
			return invalidFields("invalid user", field("team_id", "team %d does not exist in org %d", *in.TeamID, cur.OrgID))
		}
		return err
	})
	return out, storeError(err, fmt.Sprintf("user %d", id))
}

// DeleteUser deletes a user, its API keys (revoked by the next snapshot) and its quota; its usage rows,
// adjustments and alert events stay.
func (s *Service) DeleteUser(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.DeleteUser(ctx, tx, id) }), fmt.Sprintf("user %d", id))
}

// DeleteTeam deletes a team and its quota; its users stay in the org without a team, their keys keep
// working (charged to user and org only). Usage rows keep the team's id.
func (s *Service) DeleteTeam(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.DeleteTeam(ctx, tx, id) }), fmt.Sprintf("team %d", id))
}

// DeleteOrg deletes an org that has no teams and no users left (409 in_use otherwise: delete or move them
// first), and its quota. Usage rows keep the org's id.
func (s *Service) DeleteOrg(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM orgs WHERE id = $1 FOR UPDATE`, id); err != nil {
			return fmt.Errorf("lock org %d: %w", id, err)
		}
		teams, users, err := store.OrgMembers(ctx, tx, id)
		if err != nil {
			return err
		}
		if teams+users > 0 {
			return &Error{Code: CodeInUse, Message: fmt.Sprintf("org %d still has %d teams and %d users; delete them first", id, teams, users),
				Details: []Detail{{Resource: "org", ID: id, Message: fmt.Sprintf("%d teams, %d users", teams, users)}}}
		}
		return store.DeleteOrg(ctx, tx, id)
	})
	return storeError(err, fmt.Sprintf("org %d", id))
}
