package admin_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var adminTok, viewerTok struct {
		store.AdminToken
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "ops", "role": "admin"}, &adminTok)
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "audit", "role": "viewer"}, &viewerTok)
	if !regexp.MustCompile(`^tga-[A-Za-z0-9_-]{40}$`).MatchString(adminTok.Token) {
		t.Errorf("admin token %q has the wrong format", adminTok.Token)
	}
	var stored []byte
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT token_hash FROM admin_tokens WHERE id = $1`, adminTok.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(adminTok.Token)); string(stored) != string(sum[:]) {
		t.Error("admin token not stored as its sha256")
	}
	tests := []struct {
		name   string
		header string
		method string
		path   string
		body   any
		status int
	}{
		{"no header", "", "GET", "/admin/price-rules", nil, 401},
		{"wrong token", "Bearer nope-nope-nope-nope", "GET", "/admin/price-rules", nil, 401},
		{"basic scheme", "Basic " + bootstrapToken, "GET", "/admin/price-rules", nil, 401},
		{"bearer without token", "Bearer ", "GET", "/admin/price-rules", nil, 401},
		{"bootstrap prefix only", "Bearer " + bootstrapToken[:10], "GET", "/admin/price-rules", nil, 401},
		{"bootstrap reads", "Bearer " + bootstrapToken, "GET", "/admin/price-rules", nil, 200},
		{"lower-case scheme", "bearer " + bootstrapToken, "GET", "/admin/providers", nil, 200},
		{"admin token writes", "Bearer " + adminTok.Token, "POST", "/admin/orgs", map[string]any{"name": "acme"}, 201},
		{"viewer reads", "Bearer " + viewerTok.Token, "GET", "/admin/export", nil, 200},
		{"viewer quotes", "Bearer " + viewerTok.Token, "POST", "/admin/price-rules/quote", map[string]any{"model": "m"}, 200},
		{"viewer may not write", "Bearer " + viewerTok.Token, "POST", "/admin/orgs", map[string]any{"name": "evil"}, 403},
		{"viewer may not delete", "Bearer " + viewerTok.Token, "DELETE", "/admin/price-rules/1", nil, 403},
		{"viewer may not mint tokens", "Bearer " + viewerTok.Token, "POST", "/admin/admin-tokens", map[string]any{"name": "x", "role": "admin"}, 403},
		{"unauthenticated write", "", "POST", "/admin/import", `{}`, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.state(t)
			req, _ := http.NewRequest(tt.method, b.srv.URL+tt.path, nil)
			if tt.body != nil {
				r := b.callWithHeader(t, tt.header, tt.method, tt.path, tt.body)
				if r.status != tt.status {
					t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, r.status, r.raw, tt.status)
				}
				if tt.status >= 400 && b.state(t) != before {
					t.Error("refused request changed state")
				}
				return
			}
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := b.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
			}
			if tt.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	var who map[string]string
	if r := b.callAs(t, viewerTok.Token, "GET", "/admin/whoami", nil); r.status != 200 {
		t.Errorf("whoami = %d", r.status)
	} else if r.json(t, &who); who["role"] != "viewer" || who["name"] != "audit" {
		t.Errorf("whoami = %v, want viewer audit", who)
	}
	// Revoked tokens stop working.
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/admin-tokens/%d", adminTok.ID), nil, nil)
	if r := b.callAs(t, adminTok.Token, "GET", "/admin/price-rules", nil); r.status != 401 {
		t.Errorf("revoked token = %d, want 401", r.status)
	}
	var list struct {
		Items []store.AdminToken `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", "/admin/admin-tokens", nil, &list)
	if len(list.Items) != 1 || list.Items[0].Role != "viewer" {
		t.Errorf("tokens after revoke = %+v", list.Items)
	}
	if r := b.call(t, "POST", "/admin/admin-tokens", map[string]any{"name": "x", "role": "root"}); r.status != 422 {
		t.Errorf("role root = %d, want 422", r.status)
	}
}

func (b *testBundle) callWithHeader(t *testing.T, header, method, path string, body any) response {
	t.Helper()
	if header == "" {
		return b.callAs(t, "", method, path, body)
	}
	const bearer = "Bearer "
	return b.callAs(t, header[len(bearer):], method, path, body)
}

func TestTenancyKeysAndQuotas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var org store.Org
	var team store.Team
	var user store.User
	b.must(t, http.StatusCreated, "POST", "/admin/orgs", map[string]any{"name": "acme"}, &org)
	b.must(t, http.StatusCreated, "POST", "/admin/teams", map[string]any{"org_id": org.ID, "name": "ml"}, &team)
	b.must(t, http.StatusCreated, "POST", "/admin/users", map[string]any{"org_id": org.ID, "team_id": team.ID, "name": "ada", "email": "ada@acme.test"}, &user)
	var key struct {
		store.APIKey
		Key string `json:"key"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/api-keys", map[string]any{"user_id": user.ID, "name": "ci",
		"allowed_models": []string{"smart"}, "rpm_limit": 60, "tpm_limit": 100000, "expires_at": "2030-01-02T03:04:05Z"}, &key)
	if !regexp.MustCompile(`^tg-[A-Za-z0-9_-]{40}$`).MatchString(key.Key) {
		t.Errorf("key %q does not look like tg- + 40 url-safe characters", key.Key)
	}
	if key.Prefix != key.Key[:10] || key.OrgID != org.ID || key.TeamID == nil || *key.TeamID != team.ID || !key.Enabled ||
		key.ExpiresAt == nil || !key.ExpiresAt.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("api key = %+v", key.APIKey)
	}
	var hash []byte
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT key_hash FROM api_keys WHERE id = $1`, key.ID).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(key.Key)); string(hash) != string(sum[:]) {
		t.Error("key not stored as its sha256")
	}

	b.refuses(t, []refusal{
		{"team in unknown org", "POST", "/admin/teams", map[string]any{"org_id": 9999, "name": "x"}, 422, "org_id"},
		{"team negative org", "POST", "/admin/teams", map[string]any{"org_id": -1, "name": "x"}, 422, "org_id"},
		{"duplicate org", "POST", "/admin/orgs", map[string]any{"name": "acme"}, 409, ""},
		{"org unknown field", "POST", "/admin/orgs", map[string]any{"name": "x", "plan": "gold"}, 400, "plan"},
		{"user in unknown org", "POST", "/admin/users", map[string]any{"org_id": 9999, "name": "x"}, 422, "org_id"},
		{"user in unknown team", "POST", "/admin/users", map[string]any{"org_id": org.ID, "team_id": 9999, "name": "x"}, 422, "team_id"},
		{"key for unknown user", "POST", "/admin/api-keys", map[string]any{"user_id": 9999}, 422, "user_id"},
		{"key negative rpm", "POST", "/admin/api-keys", map[string]any{"user_id": user.ID, "rpm_limit": -1}, 422, "rpm_limit"},
		{"key bad expires_at", "POST", "/admin/api-keys", map[string]any{"user_id": user.ID, "expires_at": "tomorrow"}, 400, ""},
		{"quota bad decimal", "PUT", fmt.Sprintf("/admin/quotas/user/%d", user.ID), map[string]any{"cost_limit": "12,5"}, 422, "cost_limit"},
		{"quota negative", "PUT", fmt.Sprintf("/admin/quotas/user/%d", user.ID), map[string]any{"cost_limit": "-1"}, 422, "cost_limit"},
		{"quota number", "PUT", fmt.Sprintf("/admin/quotas/user/%d", user.ID), `{"cost_limit": 12.5}`, 400, "cost_limit"},
		{"quota bad scope", "PUT", fmt.Sprintf("/admin/quotas/galaxy/%d", user.ID), map[string]any{"cost_limit": "1"}, 400, ""},
		{"quota unknown user", "PUT", "/admin/quotas/user/9999", map[string]any{"cost_limit": "1"}, 404, ""},
		{"quota negative id", "GET", "/admin/quotas/org/-4", nil, 400, ""},
		{"route member unknown provider", "POST", "/admin/routes", map[string]any{"name": "r", "members": []any{map[string]any{"provider_id": 9999, "upstream_model_id": "m"}}}, 422, "provider_id"},
		{"route bad strategy", "POST", "/admin/routes", map[string]any{"name": "r", "strategy": "random"}, 422, "strategy"},
		{"route duplicate alias", "POST", "/admin/routes", map[string]any{"name": "r", "aliases": []string{"a", "a"}}, 422, "aliases[1]"},
	})

	// Quotas: unlimited until set; the limit keeps its scale; null makes it unlimited again.
	var q store.Quota
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/quotas/team/%d", team.ID), nil, &q)
	if q.CostLimit != nil || q.CostUsed != "0" || q.Scope != "team" || q.ScopeID != team.ID {
		t.Errorf("unset quota = %+v", q)
	}
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/quotas/team/%d", team.ID), map[string]any{"cost_limit": "12.50"}, &q)
	if q.CostLimit == nil || *q.CostLimit != "12.50" || q.CostUsed != "0" {
		t.Errorf("set quota = %+v", q)
	}
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE quotas SET cost_used = 3.25 WHERE scope = 'team'`); err != nil {
		t.Fatal(err)
	}
	r := b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/quotas/team/%d", team.ID), `{"cost_limit": null}`, &q)
	if q.CostLimit != nil || q.CostUsed != "3.25" {
		t.Errorf("unlimited quota = %s", r.raw)
	}

	// Routes: create, update (aliases and members replaced), list, conflicting alias.
	pid := b.provider(t, "alpha-1", "alpha")
	var route store.Route
	b.must(t, http.StatusCreated, "POST", "/admin/routes", map[string]any{"name": "smart", "strategy": "weighted",
		"aliases": []string{"smart-latest"}, "members": []any{
			map[string]any{"provider_id": pid, "upstream_model_id": "m1", "priority": 1, "weight": 3},
			map[string]any{"provider_id": pid, "upstream_model_id": "m2", "enabled": false}}}, &route)
	if route.Strategy != "weighted" || len(route.Members) != 2 || route.Members[0].Weight != 3 || route.Members[1].Weight != 1 ||
		route.Members[1].Enabled || len(route.Aliases) != 1 {
		t.Errorf("route = %+v", route)
	}
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/routes/%d", route.ID), map[string]any{"name": "smart",
		"aliases": []string{"s2", "s3"}, "members": []any{map[string]any{"provider_id": pid, "upstream_model_id": "m3"}}}, &route)
	if route.Strategy != "priority" || len(route.Members) != 1 || route.Members[0].UpstreamModelID != "m3" || len(route.Aliases) != 2 {
		t.Errorf("updated route = %+v", route)
	}
	before := b.state(t)
	if r := b.call(t, "POST", "/admin/routes", map[string]any{"name": "other", "aliases": []string{"s2"}}); r.status != 409 {
		t.Errorf("taken alias = %d %s, want 409", r.status, r.raw)
	}
	if r := b.call(t, "PUT", "/admin/routes/9999", map[string]any{"name": "x"}); r.status != 404 {
		t.Errorf("update unknown route = %d, want 404", r.status)
	}
	if b.state(t) != before {
		t.Error("refused route writes changed state")
	}
	var routes struct {
		Items []store.Route `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", "/admin/routes", nil, &routes)
	if len(routes.Items) != 1 || routes.Items[0].Aliases[0] != "s2" {
		t.Errorf("routes = %+v", routes.Items)
	}
}

func TestUsagesListFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 7 {
		state := "completed"
		if i%3 == 0 {
			state = "upstream_error"
		}
		if _, err := b.db.Pool.Exec(ctx, `INSERT INTO usages (request_id, user_id, org_id, provider_id, operation, inbound_kind,
			input_tokens, cost, source, end_state, created_at) VALUES ($1, $2, 1, 5, 'generate_content', 'alpha_responses',
			$3, '0.000123', 'upstream', $4, $5)`, fmt.Sprintf("req-%d", i), int64(i%2+1), int64(i*10), state, base.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		Items      []store.StoredUsage `json:"items"`
		NextCursor string              `json:"next_cursor"`
	}
	collect := func(query string) []string {
		var ids []string
		cursor := ""
		for range 10 {
			var p page
			b.must(t, http.StatusOK, "GET", "/admin/usages?limit=2&"+query+"&cursor="+cursor, nil, &p)
			for _, u := range p.Items {
				ids = append(ids, u.RequestID)
				if u.Cost != "0.000123" {
					t.Errorf("cost = %q, want 0.000123", u.Cost)
				}
			}
			if p.NextCursor == "" {
				return ids
			}
			cursor = p.NextCursor
		}
		t.Fatal("pagination does not end")
		return nil
	}
	tests := []struct {
		query string
		want  string
	}{
		{"", "[req-6 req-5 req-4 req-3 req-2 req-1 req-0]"},
		{"user_id=1", "[req-6 req-4 req-2 req-0]"},
		{"end_state=upstream_error", "[req-6 req-3 req-0]"},
		{"since=2026-11-01T02:00:00Z&until=2026-11-01T05:00:00Z", "[req-4 req-3 req-2]"},
		{"provider_id=5&org_id=1&user_id=2", "[req-5 req-3 req-1]"},
		{"provider_id=6", "[]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(collect(tt.query)); got != tt.want {
			t.Errorf("usages?%s = %s, want %s", tt.query, got, tt.want)
		}
	}
	for _, q := range []string{"end_state=exploded", "user_id=-1", "since=yesterday", "limit=0", "colour=red", "cursor=zzz"} {
		if r := b.call(t, "GET", "/admin/usages?"+q, nil); r.status != 400 {
			t.Errorf("usages?%s = %d, want 400", q, r.status)
		}
	}
}

// TestGetRoute: GET /admin/routes/{id} answers exactly the JSON a route has in the list and in the
// create/update answers; unknown ids are 404 not_found, bad ids 400; a viewer may read.
func TestGetRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.provider(t, "alpha-1", "alpha")
	other := b.provider(t, "beta-1", "beta")
	created := b.must(t, http.StatusCreated, "POST", "/admin/routes", map[string]any{"name": "smart", "strategy": "weighted",
		"aliases": []string{"smart-latest", "a-smart"}, "members": []any{
			map[string]any{"provider_id": pid, "upstream_model_id": "m1", "priority": 1, "weight": 3},
			map[string]any{"provider_id": other, "upstream_model_id": "m2", "enabled": false}}}, nil)
	var route store.Route
	created.json(t, &route)
	bare := b.must(t, http.StatusCreated, "POST", "/admin/routes", map[string]any{"name": "bare", "enabled": false}, nil)
	var bareRoute store.Route
	bare.json(t, &bareRoute)

	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", "/admin/routes", nil, &list)
	if len(list.Items) != 2 {
		t.Fatalf("list = %d routes, want 2", len(list.Items))
	}
	rev := b.revision(t)
	for i, want := range []response{created, bare} {
		id := []int64{route.ID, bareRoute.ID}[i]
		got := b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/routes/%d", id), nil, nil)
		if string(got.raw) != string(want.raw) {
			t.Errorf("GET route %d = %s, want the create answer %s", id, got.raw, want.raw)
		}
		if strings.TrimSpace(string(got.raw)) != string(list.Items[i]) {
			t.Errorf("GET route %d = %s, want the list item %s", id, got.raw, list.Items[i])
		}
	}
	if after := b.revision(t); after != rev {
		t.Errorf("reading routes moved the config revision from %d to %d", rev, after)
	}
	if got := string(b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/routes/%d", bareRoute.ID), nil, nil).raw); !strings.Contains(got, `"aliases":[]`) ||
		!strings.Contains(got, `"members":[]`) || !strings.Contains(got, `"enabled":false`) {
		t.Errorf("route without children = %s, want empty arrays and enabled false", got)
	}
	var got store.Route
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/routes/%d", route.ID), nil, &got)
	if got.Name != "smart" || got.Strategy != "weighted" || !got.Enabled || len(got.Aliases) != 2 || got.Aliases[0] != "a-smart" ||
		len(got.Members) != 2 || got.Members[0] != (store.RouteMember{ProviderID: pid, UpstreamModelID: "m1", Priority: 1, Weight: 3, Enabled: true}) ||
		got.Members[1] != (store.RouteMember{ProviderID: other, UpstreamModelID: "m2", Weight: 1}) {
		t.Errorf("GET route = %+v", got)
	}

	// After an update GET answers what PUT answered.
	updated := b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/routes/%d", route.ID), map[string]any{"name": "smart-2",
		"aliases": []string{"s2"}, "members": []any{map[string]any{"provider_id": other, "upstream_model_id": "m3", "priority": 2}}}, nil)
	if r := b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/routes/%d", route.ID), nil, nil); string(r.raw) != string(updated.raw) {
		t.Errorf("GET after PUT = %s, want %s", r.raw, updated.raw)
	}
	rev = b.revision(t)

	// A viewer may read; reads change nothing.
	var viewer struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "audit", "role": "viewer"}, &viewer)
	if r := b.callAs(t, viewer.Token, "GET", fmt.Sprintf("/admin/routes/%d", route.ID), nil); r.status != http.StatusOK || string(r.raw) != string(updated.raw) {
		t.Errorf("viewer GET = %d %s, want 200 %s", r.status, r.raw, updated.raw)
	}
	if b.revision(t) != rev {
		t.Error("GET bumped the revision")
	}

	before := b.state(t)
	for _, tt := range []struct {
		name, token, path string
		status            int
		code, message     string
	}{
		{"unknown id", bootstrapToken, "/admin/routes/987654", 404, "not_found", "route 987654 not found"},
		{"id not a number", bootstrapToken, "/admin/routes/abc", 400, "invalid_request", `id must be a positive integer, got "abc"`},
		{"id zero", bootstrapToken, "/admin/routes/0", 400, "invalid_request", `id must be a positive integer, got "0"`},
		{"id negative", bootstrapToken, "/admin/routes/-3", 400, "invalid_request", `id must be a positive integer, got "-3"`},
		{"id beyond int64", bootstrapToken, "/admin/routes/9223372036854775808", 400, "invalid_request", "id must be a positive integer"},
		{"no token", "", fmt.Sprintf("/admin/routes/%d", route.ID), 401, "unauthenticated", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := b.callAs(t, tt.token, "GET", tt.path, nil)
			if r.status != tt.status {
				t.Fatalf("GET %s = %d %s, want %d", tt.path, r.status, r.raw, tt.status)
			}
			e := r.apiError(t)
			if e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.message) || e.Error.Details == nil {
				t.Errorf("GET %s = %s, want code %s, message containing %q and a details array", tt.path, r.raw, tt.code, tt.message)
			}
		})
	}
	if b.state(t) != before {
		t.Error("refused GETs changed state")
	}
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/routes/%d", bareRoute.ID), nil, nil)
	if r := b.call(t, "GET", fmt.Sprintf("/admin/routes/%d", bareRoute.ID), nil); r.status != http.StatusNotFound || r.apiError(t).Error.Code != "not_found" {
		t.Errorf("GET deleted route = %d %s, want 404 not_found", r.status, r.raw)
	}
}
