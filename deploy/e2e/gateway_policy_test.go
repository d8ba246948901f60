package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/admin"
)

// Issue 15 through the real data plane: the key scope's budget, scope rate limits, the unpriced-model
// policy, key rotation with a grace period and the direct-addressing switch, each with a real control
// plane on Postgres, a real data plane on Redis and the mock upstream (docs/budgets.md, "Admission";
// docs/pricing.md, "Unpriced models"; docs/admin-api.md, "Key lifecycle", "Model policy and unpriced
// models").

// bgKey creates an API key of user with the extra fields (allowed_models, allow_direct_addressing, …)
// and returns it as a tenant of org, team and user (so the dialect header helpers take it).
func (s *stack) bgKey(t *testing.T, org, team, user int64, name string, extra map[string]any) stTenant {
	t.Helper()
	body := map[string]any{"user_id": user, "name": name, "allowed_models": []string{}, "enabled": true}
	for k, v := range extra {
		body[k] = v
	}
	var key struct {
		ID  int64  `json:"id"`
		Key string `json:"key"`
	}
	s.admin(t, "POST", "/admin/api-keys", body, &key)
	if key.Key == "" {
		t.Fatal("api key creation answered no key")
	}
	return stTenant{org: org, team: team, user: user, keyID: key.ID, key: key.Key}
}

// bgOrg creates an org without quotas and returns its id.
func (s *stack) bgOrg(t *testing.T, name string) int64 {
	t.Helper()
	var org stID
	s.admin(t, "POST", "/admin/orgs", map[string]any{"name": name}, &org)
	return org.ID
}

// bgTeam creates a team of org without a quota.
func (s *stack) bgTeam(t *testing.T, org int64, name string) int64 {
	t.Helper()
	var team stID
	s.admin(t, "POST", "/admin/teams", map[string]any{"org_id": org, "name": name}, &team)
	return team.ID
}

// bgUser creates a user of the org and team without a quota, and a first key of it without limits.
func (s *stack) bgUser(t *testing.T, org, team int64, name string) stTenant {
	t.Helper()
	var user stID
	s.admin(t, "POST", "/admin/users", map[string]any{"org_id": org, "team_id": team, "name": name, "email": name + "@example.com"}, &user)
	return s.bgKey(t, org, team, user.ID, name+"-key", nil)
}

// upstreamSaw lists the mock's requests carrying x-st-id: id.
func (s *stack) upstreamSaw(id string) []string {
	var out []string
	for _, m := range s.mock.Requests() {
		if m.Header.Get("X-St-Id") == id {
			out = append(out, m.Method+" "+m.Path)
		}
	}
	return out
}

// bgErr is an error body in any of the three dialects.
type bgErr struct {
	Type  string `json:"type"` // beta: "error"
	Error struct {
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"` // alpha: a string; gamma: the HTTP status
		Message string          `json:"message"`
		Status  string          `json:"status"`
		Details []struct {
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"error"`
}

func bgParse(t *testing.T, r response) bgErr {
	t.Helper()
	var e bgErr
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	return e
}

// TestKeyBudgetThroughTheGateway: a key's own budget (quota scope "key") is enforced by the data plane:
// once it is exhausted the key's next billable request is refused with 402 in the caller's dialect
// before any upstream call, recorded as a rejected row, while another key of the same user (same org,
// team and user budgets) is still served.
func TestKeyBudgetThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stSeed(t, s)
	ten := s.tenant(t, "keybudget", "1000") // org, team and user budgets far from their limits
	other := s.bgKey(t, ten.org, ten.team, ten.user, "keybudget-other", nil)
	keyQuota := fmt.Sprintf("/admin/quotas/key/%d", ten.keyID)
	s.admin(t, "PUT", keyQuota, map[string]any{"cost_limit": "10"}, nil)
	s.sync(t)

	first := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	firstRow := stRow(t, s.waitUsages(t, ten.keyID, 1), first.reqID)
	// Settlement charges the key's own quota, and its reservation is refunded.
	var q struct {
		CostUsed string `json:"cost_used"`
	}
	s.admin(t, "GET", keyQuota, nil, &q)
	if stRat(t, firstRow.Cost).Sign() <= 0 || stRat(t, q.CostUsed).Cmp(stRat(t, firstRow.Cost)) != 0 {
		t.Fatalf("key quota cost_used = %s after one request costing %s, want equal and positive", q.CostUsed, firstRow.Cost)
	}
	s.waitPendingZero(t, s.prefix+"qp:key:"+strconv.FormatInt(ten.keyID, 10))
	// Exhaust the key's budget only.
	s.admin(t, "POST", keyQuota+"/adjustments", map[string]any{"amount": "10", "reason": "key budget test"}, nil)
	s.sync(t)

	id := randomHex(8)
	a := s.do(t, http.StatusPaymentRequired, "POST", "/v1/chat/completions", stChat, stAlpha(ten, "x-st-id", id)...)
	b := s.do(t, http.StatusPaymentRequired, "POST", "/v1/messages", stBetaStream, stBeta(ten, "x-st-id", id)...)
	g := s.do(t, http.StatusPaymentRequired, "POST", "/v1beta/models/g-1-flash:generateContent", stGammaBody, stGamma(ten, "x-st-id", id)...)
	if e := bgParse(t, a); e.Error.Type != "insufficient_quota" || string(e.Error.Code) != `"insufficient_quota"` || !strings.Contains(e.Error.Message, "key") {
		t.Errorf("alpha 402 body %s, want type and code insufficient_quota naming the key scope", a.body)
	}
	if e := bgParse(t, b); e.Type != "error" || e.Error.Type != "billing_error" {
		t.Errorf("beta 402 body %s, want {type: error, error.type: billing_error}", b.body)
	}
	if e := bgParse(t, g); string(e.Error.Code) != "402" || e.Error.Status != "RESOURCE_EXHAUSTED" {
		t.Errorf("gamma 402 body %s, want code 402, status RESOURCE_EXHAUSTED", g.body)
	}
	if saw := s.upstreamSaw(id); len(saw) != 0 {
		t.Errorf("refused requests reached the upstream: %v", saw)
	}

	rows := s.waitUsages(t, ten.keyID, 5) // the served request, the adjustment (kind "adjustment"), 3 refusals
	for _, r := range []response{a, b, g} {
		row := stRow(t, rows, r.reqID)
		if row.EndState != "rejected" || stRat(t, row.Cost).Sign() != 0 || row.HTTPStatus != http.StatusPaymentRequired {
			t.Errorf("row of refused request %s: end_state %q, cost %s, http_status %d; want rejected, 0, 402",
				r.reqID, row.EndState, row.Cost, row.HTTPStatus)
		}
	}

	// Another key of the same user is not charged to this key's budget.
	o := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(other)...)
	stRow(t, s.waitUsages(t, other.keyID, 1), o.reqID)
	s.waitAllPendingZero(t)
}

// TestTeamRateLimitThroughTheGateway: a team's RPM limit is shared by the keys of all its users, and
// enforced even when no key has a limit of its own and no scope has a cost limit (nothing else would
// make the data plane call admission); a key of another team of the same org is unaffected.
func TestTeamRateLimitThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stSeed(t, s)
	org := s.bgOrg(t, "teamrpm")
	team1, team2 := s.bgTeam(t, org, "teamrpm-1"), s.bgTeam(t, org, "teamrpm-2")
	k1 := s.bgUser(t, org, team1, "teamrpm-a")
	k2 := s.bgUser(t, org, team1, "teamrpm-b")
	k3 := s.bgUser(t, org, team2, "teamrpm-c")
	s.admin(t, "PUT", fmt.Sprintf("/admin/quotas/team/%d", team1), map[string]any{"rpm_limit": 3}, nil)
	s.sync(t)

	// Fixed one-minute windows: start well inside a minute, so the 4 requests share one window.
	if sec := time.Now().Second(); sec > 45 {
		time.Sleep(time.Duration(61-sec) * time.Second)
	}
	for i, k := range []stTenant{k1, k2, k1} {
		r := s.send(context.Background(), "POST", "/v1/chat/completions", stChat, stAlpha(k)...)
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("request %d under the team's limit: status %d %v; body %s", i+1, r.status, r.err, r.body)
		}
	}
	var refused []response
	for _, k := range []stTenant{k2, k1} {
		r := s.do(t, http.StatusTooManyRequests, "POST", "/v1/chat/completions", stChat, stAlpha(k)...)
		refused = append(refused, r)
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
			t.Errorf("Retry-After %q, want 1..60 seconds", r.header.Get("Retry-After"))
		}
		if e := bgParse(t, r); string(e.Error.Code) != `"rate_limit_exceeded"` || !strings.Contains(e.Error.Message, "team") {
			t.Errorf("429 body %s, want code rate_limit_exceeded naming the team", r.body)
		}
	}
	// The other team's key is unaffected (the org has no limit).
	s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(k3)...)
	// Each refusal is a rejected row of its key.
	for i, k := range []stTenant{k2, k1} {
		row := stRow(t, s.waitUsages(t, k.keyID, i+2), refused[i].reqID)
		if row.EndState != "rejected" || row.HTTPStatus != http.StatusTooManyRequests || stRat(t, row.Cost).Sign() != 0 {
			t.Errorf("row of refused request %s: end_state %q, http_status %d, cost %s; want rejected, 429, 0",
				row.RequestID, row.EndState, row.HTTPStatus, row.Cost)
		}
	}
}

// TestUnpricedPolicyThroughTheGateway: a provider whose unpriced policy is deny never receives a model
// without a price rule — 403 model_unpriced in each dialect, before any upstream call — while its priced
// models and a route falling through to a priced member keep working; under allow the same model is
// served at cost 0 and listed for review.
func TestUnpricedPolicyThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := stSeed(t, s)
	ten := s.tenant(t, "unpriced", "1000")
	for _, r := range []struct {
		name string
		p    int64
	}{{"free-a", w.pa}, {"free-b", w.pb}, {"free-g", w.pg}} {
		s.route(t, r.name, stMember{r.p, r.name, 0})
	}
	mix := s.route(t, "st-mix", stMember{w.fo1, "free-x", 0}, stMember{w.fo2, "m-1", 1})
	for _, p := range []int64{w.pa, w.pb, w.pg, w.fo1} {
		s.admin(t, "PUT", fmt.Sprintf("/admin/providers/%d/unpriced-policy", p), map[string]any{"unpriced_policy": "deny"}, nil)
	}
	s.sync(t)

	id := randomHex(8)
	freeA := strings.Replace(stChat, `"m-1"`, `"free-a"`, 1)
	freeB := strings.Replace(stBetaStream, `"b-1"`, `"free-b"`, 1)
	a := s.do(t, http.StatusForbidden, "POST", "/v1/chat/completions", freeA, stAlpha(ten, "x-st-id", id)...)
	b := s.do(t, http.StatusForbidden, "POST", "/v1/messages", freeB, stBeta(ten, "x-st-id", id)...)
	g := s.do(t, http.StatusForbidden, "POST", "/v1beta/models/free-g:generateContent", stGammaBody, stGamma(ten, "x-st-id", id)...)
	if e := bgParse(t, a); string(e.Error.Code) != `"model_unpriced"` || e.Error.Type != "permission_error" || !strings.Contains(e.Error.Message, "st-alpha") {
		t.Errorf("alpha 403 body %s, want code model_unpriced naming the provider", a.body)
	}
	if e := bgParse(t, b); e.Type != "error" || e.Error.Type != "permission_error" || !strings.HasPrefix(e.Error.Message, "model_unpriced: ") || !strings.Contains(e.Error.Message, "has no price") {
		t.Errorf("beta 403 body %s, want a permission_error whose message leads with model_unpriced and says the model has no price", b.body)
	}
	if e := bgParse(t, g); string(e.Error.Code) != "403" || e.Error.Status != "PERMISSION_DENIED" ||
		len(e.Error.Details) != 1 || e.Error.Details[0].Reason != "model_unpriced" {
		t.Errorf("gamma 403 body %s, want code 403, PERMISSION_DENIED, reason model_unpriced", g.body)
	}
	if saw := s.upstreamSaw(id); len(saw) != 0 {
		t.Errorf("refused requests reached the upstream: %v", saw)
	}

	// On the same deny providers: a priced model is served, and a route falls through to its priced member.
	s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	m := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", strings.Replace(stChat, `"m-1"`, `"st-mix"`, 1), stAlpha(ten)...)
	row := stRow(t, s.waitUsages(t, ten.keyID, 2), m.reqID)
	if row.ProviderID == nil || *row.ProviderID != w.fo2 || row.RouteID == nil || *row.RouteID != mix {
		t.Errorf("st-mix served by provider %v route %v, want the priced member %d of route %d", row.ProviderID, row.RouteID, w.fo2, mix)
	}

	// Allow (the gateway default) on the alpha provider: served at cost 0, listed for review.
	s.admin(t, "PUT", fmt.Sprintf("/admin/providers/%d/unpriced-policy", w.pa), map[string]any{"unpriced_policy": nil}, nil)
	s.sync(t)
	f := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", freeA, stAlpha(ten)...)
	row = stRow(t, s.waitUsages(t, ten.keyID, 3), f.reqID)
	if row.PriceRuleID != nil || stRat(t, row.Cost).Sign() != 0 || row.EndState != "completed" || row.ProviderID == nil || *row.ProviderID != w.pa {
		t.Errorf("unpriced row: price_rule_id %v, cost %s, end_state %s, provider %v; want none, 0, completed, %d",
			row.PriceRuleID, row.Cost, row.EndState, row.ProviderID, w.pa)
	}
	var list struct {
		Items []struct {
			ProviderID    int64  `json:"provider_id"`
			UpstreamModel string `json:"upstream_model"`
			Requests      int64  `json:"requests"`
		} `json:"items"`
	}
	s.admin(t, "GET", "/admin/unpriced-models", nil, &list)
	if len(list.Items) != 1 || list.Items[0].ProviderID != w.pa || list.Items[0].UpstreamModel != "free-a" || list.Items[0].Requests != 1 {
		t.Errorf("unpriced models = %+v, want only (provider %d, free-a) with 1 request", list.Items, w.pa)
	}
	s.waitAllPendingZero(t)
}

// TestKeyRotationGraceThroughTheGateway: after a rotation with a 2 s grace period both secrets work; once
// the grace period ends the data plane refuses the old secret by its own clock, with no new snapshot,
// while the new one keeps working.
func TestKeyRotationGraceThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stSeed(t, s)
	org := s.bgOrg(t, "rotate")
	old := s.bgUser(t, org, s.bgTeam(t, org, "rotate-team"), "rotate-user")
	s.sync(t)
	s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(old)...)

	var rot struct {
		ID                int64      `json:"id"`
		Key               string     `json:"key"`
		PreviousExpiresAt *time.Time `json:"previous_expires_at"`
	}
	s.admin(t, "POST", fmt.Sprintf("/admin/api-keys/%d/rotate", old.keyID), map[string]any{"grace_seconds": 3}, &rot)
	if rot.ID != old.keyID || rot.Key == "" || rot.Key == old.key || rot.PreviousExpiresAt == nil {
		t.Fatalf("rotation answered %+v", rot)
	}
	end := *rot.PreviousExpiresAt
	s.sync(t)
	version := s.dp.srv.Syncer.Current().Version
	cur := old
	cur.key = rot.Key
	served := 1
	for _, k := range []stTenant{cur, old} {
		r := s.send(context.Background(), "POST", "/v1/chat/completions", stChat, stAlpha(k)...)
		switch {
		case r.err != nil:
			t.Fatal(r.err)
		case r.status == http.StatusOK:
			served++
		case k.key == old.key && !time.Now().Before(end):
			// The grace period ended before this answer: a refusal is right (a stalled machine).
		default:
			t.Fatalf("secret %s during the grace period: status %d; body %s", k.key[:10], r.status, r.body)
		}
	}

	time.Sleep(time.Until(end.Add(100 * time.Millisecond)))
	r := s.do(t, http.StatusUnauthorized, "POST", "/v1/chat/completions", stChat, stAlpha(old)...)
	if e := bgParse(t, r); e.Error.Type != "authentication_error" {
		t.Errorf("401 body %s, want an authentication_error", r.body)
	}
	s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(cur)...)
	if v := s.dp.srv.Syncer.Current().Version; v != version {
		t.Errorf("snapshot version moved from %d to %d: the grace period must end by the data plane's clock", version, v)
	}
	// Every served request, by either secret, is the same key's.
	s.waitUsages(t, old.keyID, served+1)
}

// TestModelAccessThroughTheGateway: with direct addressing switched off gateway-wide, provider/model is
// refused for a key without allow_direct_addressing (routes still work for it) and served for a key with
// it; an allowed_models pattern gpt-4o* admits gpt-4o-mini and refuses gpt-3.5.
func TestModelAccessThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := stSeed(t, s)
	s.route(t, "gpt-4o-mini", stMember{w.pa, "m-1", 0})
	s.route(t, "gpt-3.5", stMember{w.pa, "m-1", 0})
	org := s.bgOrg(t, "access")
	team := s.bgTeam(t, org, "access-team")
	plain := s.bgUser(t, org, team, "access-user")
	direct := s.bgKey(t, org, team, plain.user, "access-direct", map[string]any{"allow_direct_addressing": true})
	pattern := s.bgKey(t, org, team, plain.user, "access-pattern", map[string]any{"allowed_models": []string{"gpt-4o*"}})
	s.admin(t, "PUT", "/admin/model-policy", map[string]any{"direct_addressing": false}, nil)
	s.sync(t)

	directBody := strings.Replace(stChat, `"m-1"`, `"st-alpha/m-1"`, 1)
	id := randomHex(8)
	r := s.do(t, http.StatusForbidden, "POST", "/v1/chat/completions", directBody, stAlpha(plain, "x-st-id", id)...)
	if e := bgParse(t, r); string(e.Error.Code) != `"model_not_allowed"` {
		t.Errorf("direct addressing without the key's permission: body %s, want code model_not_allowed", r.body)
	}
	s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(plain)...) // routes are unaffected
	s.do(t, http.StatusOK, "POST", "/v1/chat/completions", directBody, stAlpha(direct)...)

	s.do(t, http.StatusOK, "POST", "/v1/chat/completions", strings.Replace(stChat, `"m-1"`, `"gpt-4o-mini"`, 1), stAlpha(pattern)...)
	r = s.do(t, http.StatusForbidden, "POST", "/v1/chat/completions", strings.Replace(stChat, `"m-1"`, `"gpt-3.5"`, 1), stAlpha(pattern, "x-st-id", id)...)
	if e := bgParse(t, r); string(e.Error.Code) != `"model_not_allowed"` {
		t.Errorf("gpt-3.5 under gpt-4o*: body %s, want code model_not_allowed", r.body)
	}
	if saw := s.upstreamSaw(id); len(saw) != 0 {
		t.Errorf("refused requests reached the upstream: %v", saw)
	}
}

// TestStraddlingRequestPricedAtItsStart: a request admitted just before a scheduled price change and
// settled after it is priced at the version in force at its start (docs/pricing.md, "Which instant is
// admission time"): the old price and version 1, not the price in force when it finished.
func TestStraddlingRequestPricedAtItsStart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pa := s.provider(t, "strad-alpha", "alpha")
	s.route(t, "m-strad", stMember{pa, "m-strad", 0})
	oldPrices := stPrices{"2", "8", "0", "0", "0", "0", "0"}
	newPrices := stPrices{"5.5", "20", "0", "0", "0", "0", "0"}
	ruleID := s.priceRule(t, "m-strad", oldPrices, nil)
	ten := s.tenant(t, "strad", "1000")

	at := time.Now().Add(admin.MinScheduleLead + 2*time.Second).UTC().Truncate(time.Microsecond)
	s.admin(t, "PUT", fmt.Sprintf("/admin/price-rules/%d", ruleID), map[string]any{"provider_id": nil, "match_type": "exact",
		"model_match": "m-strad", "input_price": newPrices[0], "output_price": newPrices[1], "cache_read_price": "0",
		"cache_creation_5m_price": "0", "cache_creation_30m_price": "0", "cache_creation_1h_price": "0",
		"image_output_price": "0", "enabled": true, "pricing_tiers_json": []any{}, "effective_at": at}, nil)
	s.sync(t)

	// Start 1 s before the instant; the upstream answers 2.5 s later, after it.
	time.Sleep(time.Until(at.Add(-time.Second)))
	if !time.Now().Before(at.Add(-500 * time.Millisecond)) {
		t.Fatalf("setup took until %v, too close to the instant %v to start a request before it", time.Now(), at)
	}
	body := `{"model":"m-strad","messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	r := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", body, stAlpha(ten, "x-mock-latency-ms", "2500")...)
	if time.Now().Before(at) {
		t.Fatalf("the request finished at %v, before the instant %v: it does not straddle it", time.Now(), at)
	}
	row := stRow(t, s.waitUsages(t, ten.keyID, 1), r.reqID)
	if !row.CreatedAt.Before(at) {
		t.Fatalf("created_at %v is not before the instant %v", row.CreatedAt, at)
	}
	if row.PriceRuleID == nil || *row.PriceRuleID != ruleID || row.PriceRuleVersion == nil || *row.PriceRuleVersion != 1 {
		t.Errorf("price rule %v version %v, want %d version 1 (in force at the request's start)", deref(row.PriceRuleID), deref(row.PriceRuleVersion), ruleID)
	}
	if want := stCost(t, oldPrices, stRowTokens(row)); stRat(t, row.Cost).Cmp(want) != 0 {
		t.Errorf("cost %s, want %s at the old prices", row.Cost, want.FloatString(12))
	}
}
