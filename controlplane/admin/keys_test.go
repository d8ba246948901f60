package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// tenants creates org → team → user and answers their ids.
func (b *testBundle) tenants(t *testing.T, name string) (org, team, user int64) {
	t.Helper()
	var o, tm, u struct {
		ID int64 `json:"id"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/orgs", map[string]any{"name": name}, &o)
	b.must(t, http.StatusCreated, "POST", "/admin/teams", map[string]any{"org_id": o.ID, "name": name + "-team"}, &tm)
	b.must(t, http.StatusCreated, "POST", "/admin/users", map[string]any{"org_id": o.ID, "team_id": tm.ID, "name": name + "-user"}, &u)
	return o.ID, tm.ID, u.ID
}

type keyJSON struct {
	ID                    int64      `json:"id"`
	UserID                int64      `json:"user_id"`
	TeamID                *int64     `json:"team_id"`
	Name                  string     `json:"name"`
	Prefix                string     `json:"prefix"`
	Key                   string     `json:"key"`
	Enabled               bool       `json:"enabled"`
	AllowedModels         []string   `json:"allowed_models"`
	RPMLimit              int32      `json:"rpm_limit"`
	ExpiresAt             *time.Time `json:"expires_at"`
	AllowDirectAddressing bool       `json:"allow_direct_addressing"`
	PreviousPrefix        *string    `json:"previous_prefix"`
	PreviousExpiresAt     *time.Time `json:"previous_expires_at"`
}

func (b *testBundle) newKey(t *testing.T, user int64, name string) keyJSON {
	t.Helper()
	var k keyJSON
	b.must(t, http.StatusCreated, "POST", "/admin/api-keys", map[string]any{"user_id": user, "name": name}, &k)
	return k
}

// compiled reads and compiles the snapshot the control plane would publish now.
func (b *testBundle) compiled(t *testing.T) *snapshot.Compiled {
	t.Helper()
	msg, err := store.ReadSnapshot(context.Background(), b.db.Pool, b.box)
	if err != nil {
		t.Fatal(err)
	}
	c, err := snapshot.Compile(msg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAPIKeyListFiltersPrefixAndPages(t *testing.T) {
	b := setup(t)
	org1, team1, user1 := b.tenants(t, "acme")
	_, _, user2 := b.tenants(t, "globex")
	var keys []keyJSON
	for i := range 5 {
		u := user1
		if i%2 == 1 {
			u = user2
		}
		keys = append(keys, b.newKey(t, u, fmt.Sprintf("k%d", i)))
	}
	list := func(q string) []int64 {
		t.Helper()
		var p struct {
			Items      []keyJSON `json:"items"`
			NextCursor string    `json:"next_cursor"`
		}
		b.must(t, http.StatusOK, "GET", "/admin/api-keys"+q, nil, &p)
		var ids []int64
		for _, k := range p.Items {
			if k.Key != "" {
				t.Fatalf("a listing shows the full key: %+v", k)
			}
			ids = append(ids, k.ID)
		}
		return ids
	}
	want := fmt.Sprint([]int64{keys[0].ID, keys[2].ID, keys[4].ID})
	for _, q := range []string{fmt.Sprintf("?user_id=%d", user1), fmt.Sprintf("?team_id=%d", team1), fmt.Sprintf("?org_id=%d", org1)} {
		if got := fmt.Sprint(list(q)); got != want {
			t.Errorf("%s = %v, want %v", q, got, want)
		}
	}
	if got := list("?prefix=" + keys[3].Prefix); fmt.Sprint(got) != fmt.Sprint([]int64{keys[3].ID}) {
		t.Errorf("prefix search = %v, want [%d]", got, keys[3].ID)
	}
	if got := list("?prefix=tg-"); len(got) != 5 {
		t.Errorf("prefix tg- = %v, want all 5", got)
	}
	if got := list("?prefix=%25"); len(got) != 0 { // a LIKE wildcard is a literal here
		t.Errorf("prefix %% = %v, want none", got)
	}
	// Pages of 2 walk every key once, in id order.
	var seen []int64
	cursor := ""
	for {
		var p struct {
			Items      []keyJSON `json:"items"`
			NextCursor string    `json:"next_cursor"`
		}
		b.must(t, http.StatusOK, "GET", "/admin/api-keys?limit=2&cursor="+cursor, nil, &p)
		for _, k := range p.Items {
			seen = append(seen, k.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(seen) != 5 || seen[0] != keys[0].ID || seen[4] != keys[4].ID {
		t.Errorf("paged = %v", seen)
	}
	for _, q := range []string{"?user_id=x", "?bogus=1", "?org_id=-1", "?limit=0"} {
		if r := b.call(t, "GET", "/admin/api-keys"+q, nil); r.status != http.StatusBadRequest {
			t.Errorf("%s = %d %s, want 400", q, r.status, r.raw)
		}
	}
}

func TestAPIKeyUpdateDeleteAndSnapshot(t *testing.T) {
	b := setup(t)
	_, _, user := b.tenants(t, "acme")
	k := b.newKey(t, user, "ci")
	other := b.newKey(t, user, "other")
	if c := b.compiled(t); c.LookupKey(k.Key) == nil {
		t.Fatal("a new key is not in the snapshot")
	}

	var got keyJSON
	b.must(t, http.StatusOK, "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID),
		map[string]any{"name": "renamed", "allowed_models": []string{"gpt-4o*", "claude-3-5-sonnet"}, "rpm_limit": 60}, &got)
	if got.Name != "renamed" || got.RPMLimit != 60 || fmt.Sprint(got.AllowedModels) != "[gpt-4o* claude-3-5-sonnet]" || !got.Enabled {
		t.Fatalf("patched = %+v", got)
	}
	ck := b.compiled(t).LookupKey(k.Key)
	if ck == nil || !ck.Allows("gpt-4o-mini") || !ck.Allows("claude-3-5-sonnet") || ck.Allows("gpt-4") || ck.RPMLimit != 60 {
		t.Fatalf("compiled key after patch: %+v", ck)
	}

	// Expiry set, then cleared with null; a field left out is unchanged.
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	b.must(t, http.StatusOK, "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID), map[string]any{"expires_at": exp}, &got)
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.Name != "renamed" {
		t.Fatalf("expiry patch = %+v", got)
	}
	b.must(t, http.StatusOK, "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID), `{"expires_at": null}`, &got)
	if got.ExpiresAt != nil {
		t.Fatalf("expires_at null did not clear: %+v", got)
	}

	// Disabled: the snapshot drops it; enabled again: back.
	b.must(t, http.StatusOK, "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID), map[string]any{"enabled": false}, &got)
	if b.compiled(t).LookupKey(k.Key) != nil {
		t.Fatal("a disabled key is still in the snapshot")
	}
	b.must(t, http.StatusOK, "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID), map[string]any{"enabled": true}, &got)

	b.refuses(t, []refusal{
		{"bad pattern", "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID), map[string]any{"allowed_models": []string{"a*b*c*d*e*f"}}, 422, "allowed_models[0]"},
		{"empty model", "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID), map[string]any{"allowed_models": []string{""}}, 422, "allowed_models[0]"},
		{"negative rpm", "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID), map[string]any{"rpm_limit": -1}, 422, "rpm_limit"},
		{"unknown field", "PATCH", fmt.Sprintf("/admin/api-keys/%d", k.ID), map[string]any{"key_hash": "x"}, 400, "key_hash"},
		{"missing key", "PATCH", "/admin/api-keys/999999", map[string]any{"name": "x"}, 404, ""},
		{"bad grace", "POST", fmt.Sprintf("/admin/api-keys/%d/rotate", k.ID), map[string]any{"grace_seconds": -1}, 422, "grace_seconds"},
		{"too long grace", "POST", fmt.Sprintf("/admin/api-keys/%d/rotate", k.ID), map[string]any{"grace_seconds": 31 * 86400}, 422, "grace_seconds"},
	})

	// Delete revokes: the next snapshot no longer carries it; usage rows keep the key id.
	if _, err := b.db.Pool.Exec(context.Background(), `INSERT INTO usages (request_id, api_key_id, user_id, operation, inbound_kind,
		cost, source, end_state, created_at) VALUES ('r1', $1, $2, 'generate_content', 'alpha_responses', 0.5, 'upstream', 'completed', now())`,
		k.ID, user); err != nil {
		t.Fatal(err)
	}
	rev := b.revision(t)
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/api-keys/%d", k.ID), nil, nil)
	if b.revision(t) <= rev {
		t.Fatal("deleting a key did not bump the configuration revision (no snapshot would be published)")
	}
	c := b.compiled(t)
	if c.LookupKey(k.Key) != nil {
		t.Fatal("a deleted key is still in the snapshot")
	}
	if c.LookupKey(other.Key) == nil {
		t.Fatal("deleting one key dropped another")
	}
	b.must(t, http.StatusNotFound, "GET", fmt.Sprintf("/admin/api-keys/%d", k.ID), nil, nil)
	b.must(t, http.StatusNotFound, "DELETE", fmt.Sprintf("/admin/api-keys/%d", k.ID), nil, nil)
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM usages WHERE api_key_id = $1`, k.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("usage rows of the deleted key = %d, %v; want 1", n, err)
	}
}

func TestAPIKeyRotateGrace(t *testing.T) {
	b := setup(t)
	_, _, user := b.tenants(t, "acme")
	old := b.newKey(t, user, "ci")

	var rot keyJSON
	b.must(t, http.StatusOK, "POST", fmt.Sprintf("/admin/api-keys/%d/rotate", old.ID), map[string]any{"grace_seconds": 600}, &rot)
	if rot.ID != old.ID || rot.Key == "" || rot.Key == old.Key || rot.Prefix == old.Prefix {
		t.Fatalf("rotated = %+v (old %+v)", rot, old)
	}
	if rot.PreviousPrefix == nil || *rot.PreviousPrefix != old.Prefix || rot.PreviousExpiresAt == nil {
		t.Fatalf("rotation does not show the previous key: %+v", rot)
	}
	c := b.compiled(t)
	nk, ok := c.LookupKey(rot.Key), c.LookupKey(old.Key)
	if nk == nil || ok == nil {
		t.Fatalf("during the grace period both keys must be in the snapshot: new %v old %v", nk, ok)
	}
	if nk.ID != old.ID || ok.ID != old.ID || !ok.Previous || nk.Previous {
		t.Fatalf("both hashes must name key %d: new %+v old %+v", old.ID, nk, ok)
	}
	// The old key's end is enforced by the data plane's clock, not by a later snapshot.
	end := *rot.PreviousExpiresAt
	if !ok.Usable(end.Add(-time.Second)) || ok.Usable(end) || !nk.Usable(end.Add(time.Hour)) {
		t.Fatalf("grace end %v: old usable before %v, at %v; new after %v", end,
			ok.Usable(end.Add(-time.Second)), ok.Usable(end), nk.Usable(end.Add(time.Hour)))
	}
	// The key's own expiry ends the grace period too when sooner.
	soon := time.Now().Add(5 * time.Minute).UTC().Truncate(time.Second)
	b.must(t, http.StatusOK, "PATCH", fmt.Sprintf("/admin/api-keys/%d", old.ID), map[string]any{"expires_at": soon}, nil)
	if ok := b.compiled(t).LookupKey(old.Key); ok == nil || ok.Usable(soon) {
		t.Fatalf("the previous key outlives the key's own expiry: %+v", ok)
	}
	// Listing finds the key by its previous prefix during the grace period.
	var p struct {
		Items []keyJSON `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", "/admin/api-keys?prefix="+old.Prefix, nil, &p)
	if len(p.Items) != 1 || p.Items[0].ID != old.ID {
		t.Fatalf("prefix search by previous prefix = %+v", p.Items)
	}

	// A rotation without grace revokes the replaced key with the next snapshot.
	var rot2 keyJSON
	b.must(t, http.StatusOK, "POST", fmt.Sprintf("/admin/api-keys/%d/rotate", old.ID), map[string]any{}, &rot2)
	c = b.compiled(t)
	if c.LookupKey(rot.Key) != nil || c.LookupKey(old.Key) != nil || c.LookupKey(rot2.Key) == nil {
		t.Fatal("a rotation without grace must leave only the new key")
	}
	if rot2.PreviousPrefix != nil {
		t.Fatalf("no grace, yet a previous key: %+v", rot2)
	}
	// A grace period already over is not carried.
	b.must(t, http.StatusOK, "POST", fmt.Sprintf("/admin/api-keys/%d/rotate", old.ID), map[string]any{"grace_seconds": 60}, nil)
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE api_keys SET previous_expires_at = now() - interval '1 second' WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	if b.compiled(t).LookupKey(rot2.Key) != nil {
		t.Fatal("an expired previous hash is still in the snapshot")
	}
}

func TestAPIKeyLifecycleGRPC(t *testing.T) {
	b := setup(t)
	org, _, user := b.tenants(t, "acme")
	cl, _ := b.grpcClient(t)
	ctx := withToken(bootstrapToken)
	created, err := cl.CreateApiKey(ctx, &adminv1.CreateApiKeyRequest{UserId: user, Name: "g", Enabled: true,
		AllowedModels: []string{"openai/*"}, AllowDirectAddressing: true})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetApiKey().GetId()
	list, err := cl.ListApiKeys(ctx, &adminv1.ListApiKeysRequest{OrgId: &org, Prefix: created.GetApiKey().GetPrefix()})
	if err != nil || len(list.GetItems()) != 1 || list.GetItems()[0].GetId() != id || !list.GetItems()[0].GetAllowDirectAddressing() {
		t.Fatalf("ListApiKeys = %v, %v", list, err)
	}
	name, disabled := "renamed", false
	exp := timestamppb.New(time.Now().Add(time.Hour))
	up, err := cl.UpdateApiKey(ctx, &adminv1.UpdateApiKeyRequest{Id: id, Name: &name, Enabled: &disabled,
		SetAllowedModels: true, SetExpiresAt: true, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	if k := up.GetApiKey(); k.GetName() != "renamed" || k.GetEnabled() || len(k.GetAllowedModels()) != 0 || k.GetExpiresAt() == nil {
		t.Fatalf("UpdateApiKey = %v", k)
	}
	rot, err := cl.RotateApiKey(ctx, &adminv1.RotateApiKeyRequest{Id: id, GraceSeconds: 60})
	if err != nil || rot.GetKey() == created.GetKey() || rot.GetApiKey().GetPreviousPrefix() != created.GetApiKey().GetPrefix() {
		t.Fatalf("RotateApiKey = %v, %v", rot, err)
	}
	if _, err := cl.DeleteApiKey(ctx, &adminv1.DeleteApiKeyRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetApiKey(ctx, &adminv1.GetApiKeyRequest{Id: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetApiKey after delete = %v, want NotFound", err)
	}
	other, err := cl.CreateApiKey(ctx, &adminv1.CreateApiKeyRequest{UserId: user, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.UpdateApiKey(ctx, &adminv1.UpdateApiKeyRequest{Id: other.GetApiKey().GetId(), SetAllowedModels: true, AllowedModels: []string{"*****"}})
	if status.Code(err) != codes.InvalidArgument || fmt.Sprint(fieldViolations(err)) != "[allowed_models[0]]" {
		t.Fatalf("bad pattern = %v (%v)", err, fieldViolations(err))
	}
	// A viewer may list keys but not change them.
	viewer := b.viewerToken(t)
	if _, err := cl.ListApiKeys(withToken(viewer), &adminv1.ListApiKeysRequest{}); err != nil {
		t.Fatalf("viewer ListApiKeys: %v", err)
	}
	if _, err := cl.DeleteApiKey(withToken(viewer), &adminv1.DeleteApiKeyRequest{Id: other.GetApiKey().GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("viewer DeleteApiKey = %v, want PermissionDenied", err)
	}
}

// viewerToken creates a viewer admin token.
func (b *testBundle) viewerToken(t *testing.T) string {
	t.Helper()
	var tok struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "viewer", "role": "viewer"}, &tok)
	return tok.Token
}

// TestAPIKeyHashesStayDisjoint: a hash is never one key's current and another's previous hash (a snapshot
// carrying both would not compile).
func TestAPIKeyHashesStayDisjoint(t *testing.T) {
	b := setup(t)
	_, _, user := b.tenants(t, "acme")
	k1, k2 := b.newKey(t, user, "a"), b.newKey(t, user, "b")
	b.must(t, http.StatusOK, "POST", fmt.Sprintf("/admin/api-keys/%d/rotate", k1.ID), map[string]any{"grace_seconds": 600}, nil)
	ctx := context.Background()
	if _, err := b.db.Pool.Exec(ctx, `UPDATE api_keys SET key_hash = (SELECT previous_key_hash FROM api_keys WHERE id = $1) WHERE id = $2`,
		k1.ID, k2.ID); err == nil {
		t.Fatal("a key took another key's previous hash")
	}
	if _, err := b.db.Pool.Exec(ctx, `UPDATE api_keys SET previous_key_hash = (SELECT key_hash FROM api_keys WHERE id = $1),
		previous_expires_at = now() + interval '1 hour' WHERE id = $2`, k2.ID, k1.ID); err == nil {
		t.Fatal("a key's previous hash took another key's current hash")
	}
	b.compiled(t) // still compiles
}
