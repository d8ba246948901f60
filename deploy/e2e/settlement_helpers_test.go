package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/deploy/mockupstream"
	"github.com/tollgate/tollgate/shared/pricing"
)

type stID struct {
	ID int64 `json:"id"`
}

// provider creates a provider of the channel pointing at the mock, with one credential.
func (s *stack) provider(t *testing.T, name, channel string) int64 {
	t.Helper()
	var p stID
	s.admin(t, "POST", "/admin/providers", map[string]any{"name": name, "channel_type": channel, "base_url": s.mockURL, "enabled": true}, &p)
	s.admin(t, "POST", fmt.Sprintf("/admin/providers/%d/credentials", p.ID), map[string]any{"secret": "sk-" + name, "weight": 1, "enabled": true}, nil)
	return p.ID
}

type stMember struct {
	provider int64
	model    string
	priority int
}

func (s *stack) route(t *testing.T, name string, members ...stMember) int64 {
	t.Helper()
	var ms []map[string]any
	for _, m := range members {
		ms = append(ms, map[string]any{"provider_id": m.provider, "upstream_model_id": m.model, "priority": m.priority, "weight": 1, "enabled": true})
	}
	var r stID
	s.admin(t, "POST", "/admin/routes", map[string]any{"name": name, "strategy": "priority", "enabled": true, "members": ms}, &r)
	return r.ID
}

// stPrices are a price rule's seven per-million prices, in the spec's category order: input, output,
// cache read, cache creation 5m, 30m, 1h, image output.
type stPrices [7]string

// priceRule creates a global exact price rule.
func (s *stack) priceRule(t *testing.T, model string, p stPrices, tiers []any) int64 {
	t.Helper()
	if tiers == nil {
		tiers = []any{}
	}
	var r stID
	s.admin(t, "POST", "/admin/price-rules", map[string]any{"provider_id": nil, "match_type": "exact", "model_match": model,
		"input_price": p[0], "output_price": p[1], "cache_read_price": p[2], "cache_creation_5m_price": p[3],
		"cache_creation_30m_price": p[4], "cache_creation_1h_price": p[5], "image_output_price": p[6],
		"enabled": true, "pricing_tiers_json": tiers}, &r)
	return r.ID
}

// stTenant is an org, a team in it, a user in the team (each with a quota of its own) and the user's key.
type stTenant struct {
	org, team, user, keyID int64
	key                    string
}

func (s *stack) tenant(t *testing.T, name, limit string) stTenant {
	t.Helper()
	var org, team, user stID
	s.admin(t, "POST", "/admin/orgs", map[string]any{"name": name}, &org)
	s.admin(t, "POST", "/admin/teams", map[string]any{"org_id": org.ID, "name": name + "-team"}, &team)
	s.admin(t, "POST", "/admin/users", map[string]any{"org_id": org.ID, "team_id": team.ID, "name": name + "-user", "email": name + "@example.com"}, &user)
	for _, q := range []string{fmt.Sprintf("org/%d", org.ID), fmt.Sprintf("team/%d", team.ID), fmt.Sprintf("user/%d", user.ID)} {
		s.admin(t, "PUT", "/admin/quotas/"+q, map[string]any{"cost_limit": limit}, nil)
	}
	var key struct {
		ID  int64  `json:"id"`
		Key string `json:"key"`
	}
	s.admin(t, "POST", "/admin/api-keys", map[string]any{"user_id": user.ID, "name": name + "-key", "allowed_models": []string{}, "enabled": true}, &key)
	if key.Key == "" {
		t.Fatal("api key creation answered no key")
	}
	return stTenant{org: org.ID, team: team.ID, user: user.ID, keyID: key.ID, key: key.Key}
}

func (ten stTenant) scopes() [][2]string {
	return [][2]string{{"org", strconv.FormatInt(ten.org, 10)}, {"team", strconv.FormatInt(ten.team, 10)}, {"user", strconv.FormatInt(ten.user, 10)}}
}

// doCut sends a request whose upstream will cut the stream: the status line arrives, and the client
// must then see the truncation as an error (unexpected EOF), never as a cleanly ended body.
func (s *stack) doCut(t *testing.T, method, path, body string, hdr ...string) response {
	t.Helper()
	r := s.send(context.Background(), method, path, body, hdr...)
	if r.status != http.StatusOK || r.reqID == "" {
		t.Fatalf("%s %s: status %d, request id %q; want 200 with an id", method, path, r.status, r.reqID)
	}
	if !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Fatalf("%s %s: body read error %v, want unexpected EOF (the cut must reach the client)", method, path, r.err)
	}
	return r
}

// dropAfterFirstEvent starts a stream, reads its first data line and goes away.
func (s *stack) dropAfterFirstEvent(t *testing.T, path, body string, hdr ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+s.dp.srv.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream status %d: %s", resp.StatusCode, b)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data:") {
		t.Fatalf("first line %q: %v", line, err)
	}
	cancel()
	resp.Body.Close()
	return resp.Header.Get("X-Request-Id")
}

// attempts counts the upstream requests that carried x-st-id id.
func (s *stack) attempts(id string) int {
	n := 0
	for _, m := range s.mock.Requests() {
		if m.Header.Get("X-St-Id") == id {
			n++
		}
	}
	return n
}

// mockRequest returns the mock's record of the upstream request carrying header x-st-id: id (the data
// plane forwards client headers).
func (s *stack) mockRequest(t *testing.T, id string) mockupstream.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.mock.Wait(ctx, func(r mockupstream.Request) bool { return r.Header.Get("X-St-Id") == id && r.Done })
	if err != nil {
		t.Fatalf("mock saw no finished request with x-st-id %s: %v", id, err)
	}
	return r
}

// stRow returns the one row of request reqID.
func stRow(t *testing.T, rows []store.StoredUsage, reqID string) store.StoredUsage {
	t.Helper()
	var found []store.StoredUsage
	for _, r := range rows {
		if r.RequestID == reqID {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("request %s has %d usage rows, want 1 (rows: %+v)", reqID, len(found), rows)
	}
	return found[0]
}

// stTokens are the seven token categories, in the spec's order.
type stTokens [7]int64

func stRowTokens(r store.StoredUsage) stTokens {
	return stTokens{r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheCreation5mTokens,
		r.CacheCreation30mTokens, r.CacheCreation1hTokens, r.ImageOutputTokens}
}

// stRat parses an exact decimal string (never through float64).
func stRat(t *testing.T, s string) *big.Rat {
	t.Helper()
	if _, err := pricing.ParseDecimal(s); err != nil {
		t.Fatalf("%q is not a plain decimal: %v", s, err)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad decimal %q", s)
	}
	return r
}

// stCost is Σ tokens × per-million rate / 1,000,000, exact; rates are decimal strings.
func stCost(t *testing.T, rates stPrices, tok stTokens) *big.Rat {
	t.Helper()
	sum := new(big.Rat)
	for i, n := range tok {
		if n == 0 {
			continue
		}
		term := new(big.Rat).Mul(new(big.Rat).SetInt64(n), stRat(t, rates[i]))
		sum.Add(sum, term)
	}
	return sum.Quo(sum, big.NewRat(1_000_000, 1))
}

// stScale multiplies every rate by m (a decimal string), giving exact decimal strings.
func stScale(t *testing.T, p stPrices, m string) stPrices {
	t.Helper()
	var out stPrices
	for i, v := range p {
		r := new(big.Rat).Mul(stRat(t, v), stRat(t, m))
		out[i] = r.FloatString(12)
	}
	return out
}

// stWant is what one usage row must say.
type stWant struct {
	op, kind, impl, destKind string
	end, source              string
	status                   int32
	provider, route, rule    int64 // rule 0: no price rule id
	reqTier, repTier         string
	tokens                   stTokens
	cost                     *big.Rat
}

func stCheckRow(t *testing.T, r store.StoredUsage, ten stTenant, w stWant) {
	t.Helper()
	errs := []string{}
	add := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	eqID := func(name string, got *int64, want int64) {
		if want == 0 {
			if got != nil && *got != 0 {
				add("%s = %d, want none", name, *got)
			}
			return
		}
		if got == nil || *got != want {
			g := "null"
			if got != nil {
				g = strconv.FormatInt(*got, 10)
			}
			add("%s = %s, want %d", name, g, want)
		}
	}
	eqID("api_key_id", r.APIKeyID, ten.keyID)
	eqID("org_id", r.OrgID, ten.org)
	eqID("team_id", r.TeamID, ten.team)
	eqID("user_id", r.UserID, ten.user)
	eqID("provider_id", r.ProviderID, w.provider)
	if w.route != 0 {
		eqID("route_id", r.RouteID, w.route)
	}
	eqID("price_rule_id", r.PriceRuleID, w.rule)
	for _, f := range []struct{ name, got, want string }{
		{"operation", r.Operation, w.op}, {"inbound_kind", r.InboundKind, w.kind}, {"implementation", r.Implementation, w.impl},
		{"dest_kind", r.DestKind, w.destKind}, {"end_state", r.EndState, w.end}, {"source", r.Source, w.source},
		{"requested_tier", r.RequestedTier, w.reqTier}, {"reported_tier", r.ReportedTier, w.repTier},
	} {
		if f.got != f.want {
			add("%s = %q, want %q", f.name, f.got, f.want)
		}
	}
	if r.HTTPStatus != w.status {
		add("http_status = %d, want %d", r.HTTPStatus, w.status)
	}
	if got := stRowTokens(r); got != w.tokens {
		add("tokens [in out cr cc5m cc30m cc1h img] = %v, want %v", got, w.tokens)
	}
	if w.cost != nil {
		if got := stRat(t, r.Cost); got.Cmp(w.cost) != 0 {
			add("cost = %s, want %s", r.Cost, w.cost.FloatString(12))
		}
	}
	if r.SnapshotVersion <= 0 {
		add("snapshot_version = %d", r.SnapshotVersion)
	}
	if len(errs) > 0 {
		t.Errorf("usage row %s:\n  %s", r.RequestID, strings.Join(errs, "\n  "))
	}
}

// checkQuotas asserts, for each scope of the tenant, GET /admin/quotas cost_used == the sum of usages.cost
// in Postgres, and that its qp: counter is back to 0 (polled: the refund follows the insert).
func (s *stack) checkQuotas(t *testing.T, ten stTenant) {
	t.Helper()
	for _, sc := range ten.scopes() {
		col := map[string]string{"org": "org_id", "team": "team_id", "user": "user_id"}[sc[0]]
		var sum string
		if err := s.c.db.Pool.QueryRow(context.Background(),
			"SELECT coalesce(sum(cost), 0)::text FROM usages WHERE "+col+" = $1", sc[1]).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		var q struct {
			CostUsed string `json:"cost_used"`
		}
		s.admin(t, "GET", "/admin/quotas/"+sc[0]+"/"+sc[1], nil, &q)
		if stRat(t, q.CostUsed).Cmp(stRat(t, sum)) != 0 {
			t.Errorf("quota %s/%s cost_used = %s, want sum(usages.cost) = %s", sc[0], sc[1], q.CostUsed, sum)
		}
		s.waitPendingZero(t, s.prefix+"qp:"+sc[0]+":"+sc[1])
	}
}

// pending reads a qp: counter (0 when absent).
func (s *stack) pending(t *testing.T, key string) int64 {
	t.Helper()
	v, err := s.rdb.Get(context.Background(), key).Int64()
	if err == redis.Nil {
		return 0
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

func (s *stack) waitPendingZero(t *testing.T, key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := s.pending(t, key)
		if v == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s = %d after 20s, want 0", key, v)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// qpKeys lists every qp: key of the test's prefix with its value.
func (s *stack) qpKeys(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := s.rdb.Scan(ctx, 0, s.prefix+"qp:*", 200).Iterator()
	for iter.Next(ctx) {
		v, err := s.rdb.Get(ctx, iter.Val()).Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[iter.Val()] = v
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitAllPendingZero polls until every qp: key of the prefix is 0 or gone.
func (s *stack) waitAllPendingZero(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := []string{}
		for k, v := range s.qpKeys(t) {
			if v != "0" {
				left = append(left, k+"="+v)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(left)
			t.Errorf("qp: counters not back to 0 after 20s: %v", left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outboxLen is the number of records waiting in the settlement outbox.
func (s *stack) outboxLen(t *testing.T) int64 {
	t.Helper()
	n, err := s.rdb.XLen(context.Background(), settle.Streams{Prefix: s.prefix}.Outbox("")).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}

// stTok is the mock's token count of a body: ceil(len/4), at least 1.
func stTok(body string) int64 { return max((int64(len(body))+3)/4, 1) }
