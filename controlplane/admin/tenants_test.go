package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func TestTenantsListUpdate(t *testing.T) {
	b := setup(t)
	org1, team1, user1 := b.tenants(t, "acme")
	org2, team2, user2 := b.tenants(t, "globex")
	var team1b struct {
		ID int64 `json:"id"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/teams", map[string]any{"org_id": org1, "name": "second"}, &team1b)

	ids := func(path string) string {
		t.Helper()
		var p struct {
			Items []struct {
				ID int64 `json:"id"`
			} `json:"items"`
		}
		b.must(t, http.StatusOK, "GET", path, nil, &p)
		var out []int64
		for _, i := range p.Items {
			out = append(out, i.ID)
		}
		return fmt.Sprint(out)
	}
	if got, want := ids("/admin/orgs"), fmt.Sprint([]int64{org1, org2}); got != want {
		t.Errorf("orgs = %s, want %s", got, want)
	}
	if got, want := ids(fmt.Sprintf("/admin/teams?org_id=%d", org1)), fmt.Sprint([]int64{team1, team1b.ID}); got != want {
		t.Errorf("teams of org1 = %s, want %s", got, want)
	}
	if got, want := ids(fmt.Sprintf("/admin/users?team_id=%d", team2)), fmt.Sprint([]int64{user2}); got != want {
		t.Errorf("users of team2 = %s, want %s", got, want)
	}
	if got, want := ids("/admin/orgs?limit=1"), fmt.Sprint([]int64{org1}); got != want {
		t.Errorf("orgs page 1 = %s, want %s", got, want)
	}

	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/orgs/%d", org1), map[string]any{"name": "acme-renamed"}, nil)
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/teams/%d", team1), map[string]any{"name": "core"}, nil)
	// Moving a user to another team of its org: its keys are charged to the new team from the next snapshot.
	k := b.newKey(t, user1, "k")
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/users/%d", user1),
		map[string]any{"name": "ada", "email": "ada@acme.test", "team_id": team1b.ID}, nil)
	if ck := b.compiled(t).LookupKey(k.Key); ck == nil || ck.TeamID != team1b.ID {
		t.Fatalf("key after the user's team change: %+v", ck)
	}
	b.refuses(t, []refusal{
		{"user to another org's team", "PUT", fmt.Sprintf("/admin/users/%d", user1), map[string]any{"name": "ada", "team_id": team2}, 422, "team_id"},
		{"user to another org", "PUT", fmt.Sprintf("/admin/users/%d", user1), map[string]any{"name": "ada", "org_id": org2}, 422, "org_id"},
		{"team to another org", "PUT", fmt.Sprintf("/admin/teams/%d", team1), map[string]any{"name": "x", "org_id": org2}, 422, "org_id"},
		{"org without name", "PUT", fmt.Sprintf("/admin/orgs/%d", org1), map[string]any{"name": ""}, 422, "name"},
		{"duplicate org name", "PUT", fmt.Sprintf("/admin/orgs/%d", org2), map[string]any{"name": "acme-renamed"}, 409, ""},
		{"missing user", "PUT", "/admin/users/999999", map[string]any{"name": "x"}, 404, ""},
		{"bad filter", "GET", "/admin/users?org_id=abc", nil, 400, ""},
	})
}

func TestTenantsDeleteEffects(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	org, team, user := b.tenants(t, "acme")
	var user2 struct {
		ID int64 `json:"id"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/users", map[string]any{"org_id": org, "team_id": team, "name": "bob"}, &user2)
	k1 := b.newKey(t, user, "k1")
	k2 := b.newKey(t, user2.ID, "k2")
	for _, s := range []struct {
		scope string
		id    int64
	}{{"org", org}, {"team", team}, {"user", user}} {
		b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/quotas/%s/%d", s.scope, s.id), map[string]any{"cost_limit": "10"}, nil)
	}
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO usages (request_id, api_key_id, user_id, team_id, org_id, operation, inbound_kind,
		cost, source, end_state, created_at) VALUES ('r1', $1, $2, $3, $4, 'generate_content', 'alpha_responses', 0.5, 'upstream', 'completed', now())`,
		k1.ID, user, team, org); err != nil {
		t.Fatal(err)
	}

	// An org with members cannot be deleted.
	r := b.call(t, "DELETE", fmt.Sprintf("/admin/orgs/%d", org), nil)
	if r.status != http.StatusConflict || r.apiError(t).Error.Code != "in_use" {
		t.Fatalf("delete org with members = %d %s, want 409 in_use", r.status, r.raw)
	}

	// Deleting a team detaches its users (keys keep working, no team) and drops the team's quota.
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/teams/%d", team), nil, nil)
	c := b.compiled(t)
	if ck := c.LookupKey(k2.Key); ck == nil || ck.TeamID != 0 {
		t.Fatalf("key of a deleted team's user: %+v", ck)
	}
	if _, ok := c.Quota("team", team); ok {
		t.Fatal("a deleted team's quota is still carried")
	}

	// Deleting a user revokes its keys and drops its quota; the other user's key stays.
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/users/%d", user), nil, nil)
	c = b.compiled(t)
	if c.LookupKey(k1.Key) != nil || c.LookupKey(k2.Key) == nil {
		t.Fatal("deleting a user must revoke exactly its keys")
	}
	if _, ok := c.Quota("user", user); ok {
		t.Fatal("a deleted user's quota is still carried")
	}
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/users/%d", user2.ID), nil, nil)

	// Now empty, the org goes with its quota. Usage history stays whole.
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/orgs/%d", org), nil, nil)
	if _, ok := b.compiled(t).Quota("org", org); ok {
		t.Fatal("a deleted org's quota is still carried")
	}
	var n int
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages WHERE api_key_id = $1 AND user_id = $2 AND team_id = $3 AND org_id = $4`,
		k1.ID, user, team, org).Scan(&n); err != nil || n != 1 {
		t.Fatalf("usage history after deletes: %d rows, %v", n, err)
	}
	b.must(t, http.StatusNotFound, "DELETE", fmt.Sprintf("/admin/orgs/%d", org), nil, nil)
}

func TestTenantsGRPC(t *testing.T) {
	b := setup(t)
	org, team, user := b.tenants(t, "acme")
	cl, _ := b.grpcClient(t)
	ctx := withToken(bootstrapToken)
	orgs, err := cl.ListOrgs(ctx, &adminv1.ListOrgsRequest{})
	if err != nil || len(orgs.GetItems()) != 1 || orgs.GetItems()[0].GetId() != org {
		t.Fatalf("ListOrgs = %v, %v", orgs, err)
	}
	teams, err := cl.ListTeams(ctx, &adminv1.ListTeamsRequest{OrgId: &org})
	if err != nil || len(teams.GetItems()) != 1 {
		t.Fatalf("ListTeams = %v, %v", teams, err)
	}
	users, err := cl.ListUsers(ctx, &adminv1.ListUsersRequest{TeamId: &team})
	if err != nil || len(users.GetItems()) != 1 || users.GetItems()[0].GetId() != user {
		t.Fatalf("ListUsers = %v, %v", users, err)
	}
	if _, err := cl.UpdateUser(ctx, &adminv1.UpdateUserRequest{User: &configv1.User{Id: user, Name: "ada"}}); err != nil {
		t.Fatal(err)
	}
	if out, err := cl.UpdateOrg(ctx, &adminv1.UpdateOrgRequest{Org: &configv1.Org{Id: org, Name: "n"}}); err != nil || out.GetOrg().GetName() != "n" {
		t.Fatalf("UpdateOrg = %v, %v", out, err)
	}
	if _, err := cl.DeleteOrg(ctx, &adminv1.DeleteOrgRequest{Id: org}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("DeleteOrg with members = %v, want FailedPrecondition", err)
	}
	for _, del := range []func() error{
		func() error { _, err := cl.DeleteUser(ctx, &adminv1.DeleteUserRequest{Id: user}); return err },
		func() error { _, err := cl.DeleteTeam(ctx, &adminv1.DeleteTeamRequest{Id: team}); return err },
		func() error { _, err := cl.DeleteOrg(ctx, &adminv1.DeleteOrgRequest{Id: org}); return err },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
}
