package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
)

// Settlement at full stack (usage rows, image and token accounting, the served tier; docs/settlement.md):
// a real control plane on Postgres, a real data plane on Redis, the mock upstream,
// configuration seeded through the admin REST API, and assertions on GET /admin/usages, GET /admin/quotas
// and the Postgres/Redis state. Costs are hand-computed from the seeded prices with exact rationals.

// Per-million prices: input, output, cache read, cache creation 5m/30m/1h, image output.
var (
	stM1  = stPrices{"2", "8", "0.5", "2.5", "3", "4", "30"}
	stB1  = stPrices{"3", "15", "0.3", "3.75", "4.5", "6", "0"}
	stG1  = stPrices{"0.3", "2.5", "0.075", "0.5", "0.6", "0.7", "0"}
	stImg = stPrices{"5", "10", "1.25", "0", "0", "0", "40"}
	stEmb = stPrices{"0.02", "0", "0", "0", "0", "0", "0"}
	stRR  = stPrices{"0.05", "0", "0", "0", "0", "0", "0"}
	// stB1Priority is stB1 under its priority entry: multiplier 2 with an explicit output price of 30.
	stB1Priority = stPrices{"6", "30", "0.6", "7.5", "9", "12", "0"}
)

// stWorld is the shared configuration: one provider per channel type, all pointing at the mock; route
// names equal the upstream model ids (so passthrough bodies reach the mock unchanged) except st-xb (beta
// client → alpha provider) and st-fo (two failover candidates).
type stWorld struct {
	pa, pb, pg, pc, fo1, fo2                         int64
	rM1, rB1, rG1, rImg, rEmb, rRR, rXB, rFO, rCC    int64
	ruleM1, ruleB1, ruleG1, ruleImg, ruleEmb, ruleRR int64
}

func stSeed(t *testing.T, s *stack) stWorld {
	t.Helper()
	var w stWorld
	w.pa = s.provider(t, "st-alpha", "alpha")
	w.pb = s.provider(t, "st-beta", "beta")
	w.pg = s.provider(t, "st-gamma", "gamma")
	w.pc = s.provider(t, "st-custom", "custom")
	w.fo1 = s.provider(t, "st-fo1", "alpha")
	w.fo2 = s.provider(t, "st-fo2", "alpha")
	w.rM1 = s.route(t, "m-1", stMember{w.pa, "m-1", 0})
	w.rB1 = s.route(t, "b-1", stMember{w.pb, "b-1", 0})
	w.rG1 = s.route(t, "g-1-flash", stMember{w.pg, "g-1-flash", 0})
	w.rImg = s.route(t, "img-1", stMember{w.pa, "img-1", 0})
	w.rEmb = s.route(t, "emb-1", stMember{w.pc, "emb-1", 0})
	w.rRR = s.route(t, "rr-1", stMember{w.pc, "rr-1", 0})
	w.rXB = s.route(t, "st-xb", stMember{w.pa, "m-1", 0})
	w.rFO = s.route(t, "st-fo", stMember{w.fo1, "m-1", 0}, stMember{w.fo2, "m-1", 1})
	w.rCC = s.route(t, "st-cc", stMember{w.pc, "m-1", 0})
	w.ruleM1 = s.priceRule(t, "m-1", stM1, []any{
		map[string]any{"service_tier": "flex", "multiplier": "0.5"},
		map[string]any{"service_tier": "priority", "multiplier": "2"},
	})
	w.ruleB1 = s.priceRule(t, "b-1", stB1, []any{map[string]any{"service_tier": "priority", "multiplier": "2", "output_price": "30"}})
	w.ruleG1 = s.priceRule(t, "g-1-flash", stG1, nil)
	w.ruleImg = s.priceRule(t, "img-1", stImg, nil)
	w.ruleEmb = s.priceRule(t, "emb-1", stEmb, nil)
	w.ruleRR = s.priceRule(t, "rr-1", stRR, nil)
	return w
}

func stAlpha(ten stTenant, extra ...string) []string {
	return append([]string{"Authorization", "Bearer " + ten.key}, extra...)
}

func stBeta(ten stTenant, extra ...string) []string {
	return append([]string{"x-api-key", ten.key, "anthropic-version", "2023-06-01"}, extra...)
}

func stGamma(ten stTenant, extra ...string) []string {
	return append([]string{"x-goog-api-key", ten.key}, extra...)
}

const (
	stChat       = `{"model":"m-1","messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	stChatStream = `{"model":"m-1","stream":true,"messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	stChatUsage  = `{"model":"m-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	stRespBody   = `{"model":"m-1","stream":true,"input":"hello there, how are you today?"}`
	stBetaStream = `{"model":"b-1","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	stGammaBody  = `{"contents":[{"role":"user","parts":[{"text":"hello there, how are you today?"}]}]}`
)

// TestSettlement runs the settlement cases against one shared stack; every case has a tenant (org, team,
// user, key, quotas) of its own, so its usages and quotas are its own.
func TestSettlement(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := stSeed(t, s)
	s.sync(t)

	// newCase makes a parallel case with its own tenant, synced to the data plane.
	newCase := func(t *testing.T, limit string) stTenant {
		t.Parallel()
		ten := s.tenant(t, strings.ReplaceAll(t.Name(), "/", "-"), limit)
		s.sync(t)
		return ten
	}
	m1 := func(ten stTenant, tok stTokens) stWant {
		return stWant{op: "generate_content", kind: "alpha_chat_completions", impl: "passthrough", end: "completed", source: "upstream",
			status: 200, provider: w.pa, route: w.rM1, rule: w.ruleM1, repTier: "default", tokens: tok}
	}

	t.Run("cases", func(t *testing.T) {
		t.Run("alpha_chat_completed", func(t *testing.T) {
			ten := newCase(t, "1000")
			r := s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
			row := stRow(t, s.waitUsages(t, ten.keyID, 1), r.reqID)
			want := m1(ten, stTokens{stTok(stChat), 8})
			want.cost = stCost(t, stM1, want.tokens)
			stCheckRow(t, row, ten, want)
			s.checkQuotas(t, ten)
		})

		t.Run("streams_completed", func(t *testing.T) {
			ten := newCase(t, "1000")
			chat := s.do(t, 200, "POST", "/v1/chat/completions", stChatUsage, stAlpha(ten)...)
			resp := s.do(t, 200, "POST", "/v1/responses", stRespBody, stAlpha(ten)...)
			beta := s.do(t, 200, "POST", "/v1/messages", stBetaStream, stBeta(ten)...)
			gsse := s.do(t, 200, "POST", "/v1beta/models/g-1-flash:streamGenerateContent?alt=sse", stGammaBody, stGamma(ten)...)
			garr := s.do(t, 200, "POST", "/v1beta/models/g-1-flash:streamGenerateContent", stGammaBody, stGamma(ten)...)
			// custom channel: alpha chat passthrough; the model is renamed to m-1, so the mock counts stChatUsage.
			cc := s.do(t, 200, "POST", "/v1/chat/completions", strings.Replace(stChatUsage, `"m-1"`, `"st-cc"`, 1), stAlpha(ten)...)
			for _, r := range []response{chat, resp, beta, gsse, cc} {
				if !strings.Contains(r.body, "data:") {
					t.Errorf("%s: not an SSE stream: %.200s", r.reqID, r.body)
				}
			}
			rows := s.waitUsages(t, ten.keyID, 6)

			want := m1(ten, stTokens{stTok(stChatUsage), 8})
			want.op, want.cost = "stream_generate_content", stCost(t, stM1, want.tokens)
			stCheckRow(t, stRow(t, rows, chat.reqID), ten, want)
			want.provider, want.route = w.pc, w.rCC
			stCheckRow(t, stRow(t, rows, cc.reqID), ten, want)

			want = m1(ten, stTokens{stTok(stRespBody), 8})
			want.op, want.kind, want.cost = "stream_generate_content", "alpha_responses", stCost(t, stM1, want.tokens)
			stCheckRow(t, stRow(t, rows, resp.reqID), ten, want)

			bw := stWant{op: "stream_generate_content", kind: "beta_messages", impl: "passthrough", end: "completed", source: "upstream",
				status: 200, provider: w.pb, route: w.rB1, rule: w.ruleB1, repTier: "standard", tokens: stTokens{stTok(stBetaStream), 8}}
			bw.cost = stCost(t, stB1, bw.tokens)
			stCheckRow(t, stRow(t, rows, beta.reqID), ten, bw)

			gw := stWant{op: "stream_generate_content", kind: "gamma_generate_content", impl: "passthrough", end: "completed", source: "upstream",
				status: 200, provider: w.pg, route: w.rG1, rule: w.ruleG1, repTier: "standard", tokens: stTokens{stTok(stGammaBody), 8}}
			gw.cost = stCost(t, stG1, gw.tokens)
			stCheckRow(t, stRow(t, rows, gsse.reqID), ten, gw)
			stCheckRow(t, stRow(t, rows, garr.reqID), ten, gw)
			s.checkQuotas(t, ten)
		})

		t.Run("alpha_chat_stream_counted_locally", func(t *testing.T) {
			// An upstream that reports no usage although the gateway asks for it: local counting.
			ten := newCase(t, "1000")
			r := s.do(t, 200, "POST", "/v1/chat/completions", stChatStream, stAlpha(ten, "x-mock-usage", "none")...)
			row := stRow(t, s.waitUsages(t, ten.keyID, 1), r.reqID)
			tok := stRowTokens(row)
			if tok[0] <= 0 || tok[1] <= 0 {
				t.Errorf("locally counted tokens %v: want input and output > 0", tok)
			}
			want := m1(ten, tok)
			want.op, want.source, want.cost = "stream_generate_content", "local", stCost(t, stM1, tok)
			want.repTier = stLocalRepTier(t, row)
			stCheckRow(t, row, ten, want)
			s.checkQuotas(t, ten)
		})

		t.Run("upstream_interrupted", func(t *testing.T) {
			ten := newCase(t, "1000")
			chat := s.doCut(t, "POST", "/v1/chat/completions", stChatStream, stAlpha(ten, "x-mock-disconnect-after", "3")...)
			beta := s.doCut(t, "POST", "/v1/messages", stBetaStream, stBeta(ten, "x-mock-disconnect-after", "2")...)
			resp := s.doCut(t, "POST", "/v1/responses", stRespBody, stAlpha(ten, "x-mock-disconnect-after", "3")...)
			rows := s.waitUsages(t, ten.keyID, 3)

			// alpha chat: no usage from the upstream; prompt and the relayed text are counted locally.
			row := stRow(t, rows, chat.reqID)
			tok := stRowTokens(row)
			if tok[0] <= 0 || tok[1] <= 0 {
				t.Errorf("alpha chat interrupted: tokens %v, want locally counted input and output > 0", tok)
			}
			want := m1(ten, tok)
			want.op, want.end, want.source, want.cost = "stream_generate_content", "upstream_interrupted", "local", stCost(t, stM1, tok)
			want.repTier = stLocalRepTier(t, row)
			stCheckRow(t, row, ten, want)

			// beta: the upstream's latest report is message_start's (input, provisional output 1).
			bw := stWant{op: "stream_generate_content", kind: "beta_messages", impl: "passthrough", end: "upstream_interrupted", source: "upstream",
				status: 200, provider: w.pb, route: w.rB1, rule: w.ruleB1, repTier: "standard", tokens: stTokens{stTok(stBetaStream), 1}}
			bw.cost = stCost(t, stB1, bw.tokens)
			stCheckRow(t, stRow(t, rows, beta.reqID), ten, bw)

			// alpha responses: usage only comes with the terminal event; local count or the estimate.
			row = stRow(t, rows, resp.reqID)
			tok = stRowTokens(row)
			want = m1(ten, tok)
			// response.created already reported the served tier; it is kept even when counting locally.
			want.op, want.kind, want.end, want.repTier = "stream_generate_content", "alpha_responses", "upstream_interrupted", "default"
			want.source, want.cost = row.Source, stCost(t, stM1, tok)
			switch row.Source {
			case "estimated":
				want.tokens = stTokens{stTok(stRespBody)}
			case "local":
				if tok[0] <= 0 {
					t.Errorf("alpha responses interrupted: local tokens %v, want input > 0", tok)
				}
			default:
				t.Errorf("alpha responses interrupted: source %q, want local or estimated", row.Source)
			}
			t.Logf("alpha responses interrupted before its usage event: source %s, tokens %v", row.Source, tok)
			stCheckRow(t, row, ten, want)
			s.checkQuotas(t, ten)
		})

		t.Run("client_dropped", func(t *testing.T) {
			ten := newCase(t, "1000")
			id := randomHex(8)
			reqID := s.dropAfterFirstEvent(t, "/v1/chat/completions", stChatStream,
				stAlpha(ten, "x-mock-chunks", "60", "x-mock-chunk-delay-ms", "100", "x-st-id", id)...)
			rec := s.mockRequest(t, id)
			if !rec.Cancelled || rec.Completed {
				t.Errorf("upstream request: cancelled=%v completed=%v, want cancelled", rec.Cancelled, rec.Completed)
			}
			rows := s.waitUsages(t, ten.keyID, 1)
			row := stRow(t, rows, reqID)
			tok := stRowTokens(row)
			want := m1(ten, tok)
			want.op, want.end, want.cost = "stream_generate_content", "client_dropped", stCost(t, stM1, tok)
			want.source, want.repTier = "local", stLocalRepTier(t, row)
			if tok[0] <= 0 {
				t.Errorf("client dropped: tokens %v, want the prompt counted", tok)
			}
			stCheckRow(t, row, ten, want)
			// Still one row a moment later.
			time.Sleep(300 * time.Millisecond)
			if n := len(s.usages(t, ten.keyID)); n != 1 {
				t.Errorf("%d usage rows after the drop, want 1", n)
			}
			s.checkQuotas(t, ten)
		})

		t.Run("upstream_error_every_candidate", func(t *testing.T) {
			ten := newCase(t, "1000")
			id := randomHex(8)
			body := strings.Replace(stChat, `"m-1"`, `"st-fo"`, 1)
			r := s.do(t, 502, "POST", "/v1/chat/completions", body, stAlpha(ten, "x-mock-status", "500", "x-st-id", id)...)
			var e struct {
				Error struct {
					Type string `json:"type"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(r.body), &e) != nil || e.Error.Type == "" {
				t.Errorf("502 body is not an alpha error: %s", r.body)
			}
			n := 0
			for _, m := range s.mock.Requests() {
				if m.Header.Get("X-St-Id") == id {
					n++
				}
			}
			if n != 2 {
				t.Errorf("upstream saw %d attempts, want 2 (one per candidate)", n)
			}
			row := stRow(t, s.waitUsages(t, ten.keyID, 1), r.reqID)
			stCheckRow(t, row, ten, stWant{op: "generate_content", kind: "alpha_chat_completions", impl: "passthrough", end: "upstream_error",
				source: "none", status: 502, provider: w.fo2, route: w.rFO, rule: w.ruleM1, cost: stCost(t, stM1, stTokens{})})
			s.checkQuotas(t, ten)
		})

		t.Run("failover", func(t *testing.T) {
			ten := newCase(t, "1000")
			id := randomHex(8)
			body := strings.Replace(stChat, `"m-1"`, `"st-fo"`, 1)
			r := s.do(t, 200, "POST", "/v1/chat/completions", body, stAlpha(ten, "x-mock-fail-first", "1", "x-mock-fail-key", id, "x-st-id", id)...)
			var statuses []int
			for _, m := range s.mock.Requests() {
				if m.Header.Get("X-St-Id") == id {
					statuses = append(statuses, m.Status)
				}
			}
			if fmt.Sprint(statuses) != "[500 200]" {
				t.Errorf("upstream attempts answered %v, want [500 200]", statuses)
			}
			row := stRow(t, s.waitUsages(t, ten.keyID, 1), r.reqID)
			// The model is renamed to m-1 for the upstream, so the mock counted stChat's bytes.
			want := m1(ten, stTokens{stTok(stChat), 8})
			want.provider, want.route, want.cost = w.fo2, w.rFO, stCost(t, stM1, want.tokens)
			stCheckRow(t, row, ten, want)
			s.checkQuotas(t, ten)
		})

		// A plain answer the upstream cuts mid-body (a Content-Length it does not keep, or chunks without
		// the terminating one) reached no client: the next candidate answers, else a 502; the row says so.
		for _, cut := range []string{"length", "chunked"} {
			t.Run("plain_cut_mid_body_fails_over_"+cut, func(t *testing.T) {
				ten := newCase(t, "1000")
				id := randomHex(8)
				body := strings.Replace(stChat, `"m-1"`, `"st-fo"`, 1)
				r := s.do(t, 200, "POST", "/v1/chat/completions", body,
					stAlpha(ten, "x-mock-cut-body", cut, "x-mock-fail-first", "1", "x-mock-fail-key", id, "x-st-id", id)...)
				if r.err != nil || !strings.Contains(r.body, `"usage"`) {
					t.Fatalf("client read %q, error %v; want the second candidate's whole answer", r.body, r.err)
				}
				if n := s.attempts(id); n != 2 {
					t.Errorf("upstream saw %d attempts, want 2 (the cut answer failed over)", n)
				}
				row := stRow(t, s.waitUsages(t, ten.keyID, 1), r.reqID)
				want := m1(ten, stTokens{stTok(stChat), 8})
				want.provider, want.route, want.cost = w.fo2, w.rFO, stCost(t, stM1, want.tokens)
				stCheckRow(t, row, ten, want)
				s.checkQuotas(t, ten)
			})
			t.Run("plain_cut_mid_body_502_"+cut, func(t *testing.T) {
				ten := newCase(t, "1000")
				id := randomHex(8)
				body := strings.Replace(stChat, `"m-1"`, `"st-fo"`, 1)
				r := s.do(t, 502, "POST", "/v1/chat/completions", body, stAlpha(ten, "x-mock-cut-body", cut, "x-st-id", id)...)
				if r.err != nil || !strings.Contains(r.body, `"code":"upstream_failed"`) {
					t.Fatalf("client read %q, error %v; want a whole alpha 502", r.body, r.err)
				}
				if n := s.attempts(id); n != 2 {
					t.Errorf("upstream saw %d attempts, want 2 (one per candidate)", n)
				}
				row := stRow(t, s.waitUsages(t, ten.keyID, 1), r.reqID)
				stCheckRow(t, row, ten, stWant{op: "generate_content", kind: "alpha_chat_completions", impl: "passthrough", end: "upstream_error",
					source: "none", status: 502, provider: w.fo2, route: w.rFO, rule: w.ruleM1, cost: stCost(t, stM1, stTokens{})})
				s.checkQuotas(t, ten)
			})
		}

		t.Run("quota_exceeded", func(t *testing.T) {
			ten := newCase(t, "0.000001")
			id := randomHex(8)
			a := s.do(t, 402, "POST", "/v1/chat/completions", stChat, stAlpha(ten, "x-st-id", id)...)
			b := s.do(t, 402, "POST", "/v1/messages", stBetaStream, stBeta(ten, "x-st-id", id)...)
			g := s.do(t, 402, "POST", "/v1beta/models/g-1-flash:generateContent", stGammaBody, stGamma(ten, "x-st-id", id)...)
			var ae struct {
				Error struct{ Type, Code string } `json:"error"`
			}
			if json.Unmarshal([]byte(a.body), &ae) != nil || ae.Error.Code != "insufficient_quota" || ae.Error.Type != "insufficient_quota" {
				t.Errorf("alpha 402 body %s, want type and code insufficient_quota", a.body)
			}
			var be struct {
				Type  string                `json:"type"`
				Error struct{ Type string } `json:"error"`
			}
			if json.Unmarshal([]byte(b.body), &be) != nil || be.Type != "error" || be.Error.Type != "billing_error" {
				t.Errorf("beta 402 body %s, want {type: error, error.type: billing_error}", b.body)
			}
			var ge struct {
				Error struct {
					Code   int    `json:"code"`
					Status string `json:"status"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(g.body), &ge) != nil || ge.Error.Code != 402 || ge.Error.Status != "RESOURCE_EXHAUSTED" {
				t.Errorf("gamma 402 body %s, want code 402, status RESOURCE_EXHAUSTED", g.body)
			}
			for _, m := range s.mock.Requests() {
				if m.Header.Get("X-St-Id") == id {
					t.Errorf("a refused request reached the upstream: %s %s", m.Method, m.Path)
				}
			}
			// Nothing reserved: no pending counter on any of the tenant's scopes.
			for _, sc := range ten.scopes() {
				if v := s.pending(t, s.prefix+"qp:"+sc[0]+":"+sc[1]); v != 0 {
					t.Errorf("qp:%s:%s = %d after refusals, want nothing reserved", sc[0], sc[1], v)
				}
			}
			t.Run("one_rejected_row_per_refused_request", func(t *testing.T) {
				// Every request that reached dispatch ends in exactly one record, a refused one too:
				// admission runs after dispatch picked a candidate, and the recorder is called with a zero
				// Hold for a refusal (docs/settlement.md).
				deadline := time.Now().Add(5 * time.Second)
				var rows []store.StoredUsage
				for time.Now().Before(deadline) {
					if rows = s.usages(t, ten.keyID); len(rows) >= 3 {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if len(rows) != 3 {
					t.Fatalf("%d usage rows for 3 requests refused with 402, want 3 (end_state rejected, http_status 402, cost 0)", len(rows))
				}
				zero := stCost(t, stM1, stTokens{})
				stCheckRow(t, stRow(t, rows, a.reqID), ten, stWant{op: "generate_content", kind: "alpha_chat_completions", impl: "passthrough",
					end: "rejected", source: "none", status: 402, provider: w.pa, route: w.rM1, rule: w.ruleM1, cost: zero})
				stCheckRow(t, stRow(t, rows, b.reqID), ten, stWant{op: "stream_generate_content", kind: "beta_messages", impl: "passthrough",
					end: "rejected", source: "none", status: 402, provider: w.pb, route: w.rB1, rule: w.ruleB1, cost: zero})
				stCheckRow(t, stRow(t, rows, g.reqID), ten, stWant{op: "generate_content", kind: "gamma_generate_content", impl: "passthrough",
					end: "rejected", source: "none", status: 402, provider: w.pg, route: w.rG1, rule: w.ruleG1, cost: zero})
			})
			s.checkQuotas(t, ten)
		})

		t.Run("rate_limited", func(t *testing.T) {
			ten := newCase(t, "1000")
			var key struct {
				ID  int64  `json:"id"`
				Key string `json:"key"`
			}
			s.admin(t, "POST", "/admin/api-keys", map[string]any{"user_id": ten.user, "name": "rpm1", "allowed_models": []string{},
				"rpm_limit": 1, "enabled": true}, &key)
			s.sync(t)
			ten.keyID, ten.key = key.ID, key.Key
			ok := s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
			lim := s.send(context.Background(), "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
			if lim.err != nil || lim.status != 429 || lim.header.Get("Retry-After") == "" {
				t.Fatalf("second request in the minute: %d (Retry-After %q) %v %s, want 429 with Retry-After", lim.status, lim.header.Get("Retry-After"), lim.err, lim.body)
			}
			rows := s.waitUsages(t, ten.keyID, 2)
			want := m1(ten, stTokens{stTok(stChat), 8})
			want.cost = stCost(t, stM1, want.tokens)
			stCheckRow(t, stRow(t, rows, ok.reqID), ten, want)
			stCheckRow(t, stRow(t, rows, lim.reqID), ten, stWant{op: "generate_content", kind: "alpha_chat_completions", impl: "passthrough",
				end: "rejected", source: "none", status: 429, provider: w.pa, route: w.rM1, rule: w.ruleM1, cost: stCost(t, stM1, stTokens{})})
			s.checkQuotas(t, ten)
		})

		t.Run("service_tier_flex_at_admission_and_settlement", func(t *testing.T) {
			ten := newCase(t, "1000")
			body := strings.Replace(stChat, `{"model"`, `{"service_tier":"flex","model"`, 1)
			// Flex input rate: 2 × 0.5 = 1 $/M, so the estimate is exactly ceil(bytes/4) micro-dollars.
			s.checkInFlightHold(t, ten, stTok(body), body, stAlpha(ten, "x-mock-latency-ms", "1500")...)
			rows := s.waitUsages(t, ten.keyID, 1)
			want := m1(ten, stTokens{stTok(body), 8})
			want.reqTier, want.repTier, want.cost = "flex", "flex", stCost(t, stScale(t, stM1, "0.5"), want.tokens)
			stCheckRow(t, rows[0], ten, want)
			s.checkQuotas(t, ten)
		})

		t.Run("service_tier_reported_preferred", func(t *testing.T) {
			ten := newCase(t, "1000")
			// Requested priority (estimate at 2 × 2 = 4 $/M), served and reported standard: billed at base.
			body := strings.Replace(stChat, `{"model"`, `{"service_tier":"priority","model"`, 1)
			s.checkInFlightHold(t, ten, 4*stTok(body), body, stAlpha(ten, "x-mock-latency-ms", "1500", "x-mock-downgrade", "1")...)
			// beta stream: nothing requested, the upstream reports priority → billed at priority.
			beta := s.do(t, 200, "POST", "/v1/messages", stBetaStream, stBeta(ten, "x-mock-served-tier", "priority")...)
			// gamma: requested flex, header x-gamma-service-tier reports standard → base (no gamma tiers).
			gbody := `{"serviceTier":"flex",` + stGammaBody[1:]
			gam := s.do(t, 200, "POST", "/v1beta/models/g-1-flash:streamGenerateContent?alt=sse", gbody, stGamma(ten, "x-mock-served-tier", "standard")...)
			rows := s.waitUsages(t, ten.keyID, 3)
			var first store.StoredUsage
			for _, r := range rows {
				if r.RequestID != beta.reqID && r.RequestID != gam.reqID {
					first = r
				}
			}
			want := m1(ten, stTokens{stTok(body), 8})
			want.reqTier, want.repTier, want.cost = "priority", "default", stCost(t, stM1, want.tokens)
			stCheckRow(t, first, ten, want)
			bw := stWant{op: "stream_generate_content", kind: "beta_messages", impl: "passthrough", end: "completed", source: "upstream",
				status: 200, provider: w.pb, route: w.rB1, rule: w.ruleB1, repTier: "priority", tokens: stTokens{stTok(stBetaStream), 8}}
			bw.cost = stCost(t, stB1Priority, bw.tokens)
			stCheckRow(t, stRow(t, rows, beta.reqID), ten, bw)
			gw := stWant{op: "stream_generate_content", kind: "gamma_generate_content", impl: "passthrough", end: "completed", source: "upstream",
				status: 200, provider: w.pg, route: w.rG1, rule: w.ruleG1, reqTier: "flex", repTier: "standard", tokens: stTokens{stTok(gbody), 8}}
			gw.cost = stCost(t, stG1, gw.tokens)
			stCheckRow(t, stRow(t, rows, gam.reqID), ten, gw)
			s.checkQuotas(t, ten)
		})

		t.Run("service_tier_reported_with_local_count", func(t *testing.T) {
			// An alpha chat stream without include_usage still reports service_tier on every chunk; the
			// reported tier must win even though the tokens are counted locally (spec: "Recognized in
			// buffered and streaming responses").
			ten := newCase(t, "1000")
			body := strings.Replace(stChatStream, `{"model"`, `{"service_tier":"priority","model"`, 1)
			r := s.do(t, 200, "POST", "/v1/chat/completions", body, stAlpha(ten, "x-mock-downgrade", "1", "x-mock-usage", "none")...)
			if !strings.Contains(r.body, `"service_tier":"default"`) {
				t.Fatalf("the mock did not report the downgrade in the stream: %.300s", r.body)
			}
			// The same on a buffered answer without usage (x-mock-usage: none): top-level service_tier only.
			plain := strings.Replace(stChat, `{"model"`, `{"service_tier":"priority","model"`, 1)
			b := s.do(t, 200, "POST", "/v1/chat/completions", plain, stAlpha(ten, "x-mock-downgrade", "1", "x-mock-usage", "none")...)
			if !strings.Contains(b.body, `"service_tier":"default"`) {
				t.Fatalf("the mock did not report the downgrade: %.300s", b.body)
			}
			rows := s.waitUsages(t, ten.keyID, 2)
			for _, c := range []struct {
				reqID, op string
			}{{r.reqID, "stream_generate_content"}, {b.reqID, "generate_content"}} {
				row := stRow(t, rows, c.reqID)
				tok := stRowTokens(row)
				want := m1(ten, tok)
				want.op, want.source, want.reqTier, want.repTier = c.op, "local", "priority", "default"
				want.cost = stCost(t, stM1, tok) // base rates: served standard
				stCheckRow(t, row, ten, want)
			}
			s.checkQuotas(t, ten)
		})

		t.Run("cache_tokens", func(t *testing.T) {
			ten := newCase(t, "1000")
			a := s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten, "x-mock-usage", "cached")...)
			b := s.do(t, 200, "POST", "/v1/messages", stBetaStream, stBeta(ten, "x-mock-usage", "cached")...)
			rows := s.waitUsages(t, ten.keyID, 2)
			// alpha reports cached and cache-write tokens inside prompt_tokens: they leave input; alpha's cache
			// writes are 30-minute writes.
			p := stTok(stChat)
			cr, cw := p/2, p/4
			want := m1(ten, stTokens{p - cr - cw, 8, cr, 0, cw})
			want.cost = stCost(t, stM1, want.tokens)
			stCheckRow(t, stRow(t, rows, a.reqID), ten, want)
			// beta's input_tokens already exclude the cache.
			p = stTok(stBetaStream)
			cr, cw = p/2, p/4
			bw := stWant{op: "stream_generate_content", kind: "beta_messages", impl: "passthrough", end: "completed", source: "upstream",
				status: 200, provider: w.pb, route: w.rB1, rule: w.ruleB1, repTier: "standard", tokens: stTokens{p - cr - cw, 8, cr, cw}}
			bw.cost = stCost(t, stB1, bw.tokens)
			stCheckRow(t, stRow(t, rows, b.reqID), ten, bw)
			s.checkQuotas(t, ten)
		})

		t.Run("images_embeddings_rerank", func(t *testing.T) {
			ten := newCase(t, "1000")
			img := s.do(t, 200, "POST", "/v1/images/generations", `{"model":"img-1","prompt":"a red fox","stream":true}`, stAlpha(ten)...)
			if !strings.Contains(img.body, "image_generation.completed") {
				t.Errorf("image stream not relayed: %.200s", img.body)
			}
			imgLow := s.do(t, 200, "POST", "/v1/images/generations", `{"model":"img-1","prompt":"a red fox","quality":"low"}`, stAlpha(ten)...)
			emb := s.do(t, 200, "POST", "/v1/embeddings", `{"model":"emb-1","input":["hello world","foo"]}`, stAlpha(ten)...)
			rr := s.do(t, 200, "POST", "/v1/rerank", `{"model":"rr-1","query":"red fox","documents":["the red fox","a blue whale"]}`, stAlpha(ten)...)
			rows := s.waitUsages(t, ten.keyID, 4)
			// "a red fox": ceil(9/4) = 3 text input tokens; high quality = 4160 image tokens, low = 272.
			iw := stWant{op: "create_image", kind: "alpha", impl: "passthrough", end: "completed", source: "upstream", status: 200,
				provider: w.pa, route: w.rImg, rule: w.ruleImg, tokens: stTokens{3, 0, 0, 0, 0, 0, 4160}}
			iw.cost = stCost(t, stImg, iw.tokens) // 3 × 5 + 4160 × 40 per million = 0.166415
			if iw.cost.Cmp(stRat(t, "0.166415")) != 0 {
				t.Fatalf("hand computation: %s", iw.cost.FloatString(9))
			}
			stCheckRow(t, stRow(t, rows, img.reqID), ten, iw)
			iw.tokens = stTokens{3, 0, 0, 0, 0, 0, 272}
			iw.cost = stCost(t, stImg, iw.tokens)
			stCheckRow(t, stRow(t, rows, imgLow.reqID), ten, iw)
			// ceil(11/4) + ceil(3/4) = 4 input tokens.
			ew := stWant{op: "create_embedding", kind: "alpha", impl: "passthrough", end: "completed", source: "upstream", status: 200,
				provider: w.pc, route: w.rEmb, rule: w.ruleEmb, tokens: stTokens{4}}
			ew.cost = stCost(t, stEmb, ew.tokens)
			stCheckRow(t, stRow(t, rows, emb.reqID), ten, ew)
			// total_tokens = (ceil(7/4) + ceil(11/4)) + (ceil(7/4) + ceil(12/4)) = 10, all input.
			rw := stWant{op: "rerank", kind: "alpha", impl: "passthrough", end: "completed", source: "upstream", status: 200,
				provider: w.pc, route: w.rRR, rule: w.ruleRR, tokens: stTokens{10}}
			rw.cost = stCost(t, stRR, rw.tokens)
			stCheckRow(t, stRow(t, rows, rr.reqID), ten, rw)
			s.checkQuotas(t, ten)
		})

		t.Run("count_tokens_and_model_get_at_cost_0", func(t *testing.T) {
			ten := newCase(t, "1000")
			ac := s.do(t, 200, "POST", "/v1/responses/input_tokens", `{"model":"m-1","input":"hello there"}`, stAlpha(ten)...)
			bc := s.do(t, 200, "POST", "/v1/messages/count_tokens", `{"model":"b-1","messages":[{"role":"user","content":"hello"}]}`, stBeta(ten)...)
			gm := s.do(t, 200, "GET", "/v1/models/m-1", "", stAlpha(ten)...)
			rows := s.waitUsages(t, ten.keyID, 3)
			zero := stCost(t, stM1, stTokens{})
			stCheckRow(t, stRow(t, rows, ac.reqID), ten, stWant{op: "count_tokens", kind: "alpha", impl: "passthrough", end: "completed",
				source: "none", status: 200, provider: w.pa, route: w.rM1, cost: zero})
			stCheckRow(t, stRow(t, rows, bc.reqID), ten, stWant{op: "count_tokens", kind: "beta", impl: "passthrough", end: "completed",
				source: "none", status: 200, provider: w.pb, route: w.rB1, cost: zero})
			stCheckRow(t, stRow(t, rows, gm.reqID), ten, stWant{op: "get_model", kind: "alpha", impl: "local", end: "completed",
				source: "none", status: 200, provider: w.pa, route: w.rM1, cost: zero})
			s.checkQuotas(t, ten)
		})

		t.Run("list_models_recorded_at_cost_0", func(t *testing.T) {
			// Issue 7 item 2: "model list / count_tokens / compact / conversation recorded at cost 0".
			ten := newCase(t, "1000")
			r := s.do(t, 200, "GET", "/v1/models", "", stAlpha(ten)...)
			deadline := time.Now().Add(5 * time.Second)
			var rows []store.StoredUsage
			for time.Now().Before(deadline) {
				if rows = s.usages(t, ten.keyID); len(rows) > 0 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(rows) != 1 {
				t.Fatalf("GET /v1/models left %d usage rows, want 1 (operation list_models, cost 0)", len(rows))
			}
			row := stRow(t, rows, r.reqID)
			if row.Operation != "list_models" || row.EndState != "completed" || stRat(t, row.Cost).Sign() != 0 {
				t.Errorf("row %+v, want list_models completed at cost 0", row)
			}
		})

		t.Run("in_stream_error", func(t *testing.T) {
			// The upstream ends the stream with its dialect's in-stream error event after 3 events, both on
			// a passthrough cell and through a transform_to cell: the stream did not complete.
			ten := newCase(t, "1000")
			pt := s.do(t, 200, "POST", "/v1/responses", stRespBody, stAlpha(ten, "x-mock-stream-error-after", "3")...)
			xb := s.do(t, 200, "POST", "/v1/messages", strings.Replace(stBetaStream, `"b-1"`, `"st-xb"`, 1), stBeta(ten, "x-mock-stream-error-after", "3")...)
			if !strings.Contains(pt.body, "event: error") {
				t.Fatalf("the mock sent no in-stream error: %.300s", pt.body)
			}
			rows := s.waitUsages(t, ten.keyID, 2)
			for _, c := range []struct {
				name string
				r    response
			}{{"passthrough alpha_responses", pt}, {"transform beta_messages → alpha_responses", xb}} {
				row := stRow(t, rows, c.r.reqID)
				if row.EndState == "completed" {
					t.Errorf("%s: end_state %q after an in-stream upstream error, want not completed (the transform_to cell records upstream_error)", c.name, row.EndState)
				}
				if got, want := stRat(t, row.Cost), stCost(t, stM1, stRowTokens(row)); got.Cmp(want) != 0 {
					t.Errorf("%s: cost %s, want %s for tokens %v", c.name, row.Cost, want.FloatString(12), stRowTokens(row))
				}
				t.Logf("%s: end_state %s, source %s, tokens %v", c.name, row.EndState, row.Source, stRowTokens(row))
			}
			s.checkQuotas(t, ten)
		})

		t.Run("transform_beta_client_to_alpha_provider", func(t *testing.T) {
			ten := newCase(t, "1000")
			id1, id2 := randomHex(8), randomHex(8)
			plain := strings.Replace(strings.Replace(stBetaStream, `"stream":true,`, "", 1), `"b-1"`, `"st-xb"`, 1)
			stream := strings.Replace(stBetaStream, `"b-1"`, `"st-xb"`, 1)
			a := s.do(t, 200, "POST", "/v1/messages", plain, stBeta(ten, "x-st-id", id1)...)
			b := s.do(t, 200, "POST", "/v1/messages", stream, stBeta(ten, "x-st-id", id2)...)
			if !strings.Contains(a.body, `"type":"message"`) {
				t.Errorf("transformed answer is not a beta message: %.200s", a.body)
			}
			up1, up2 := s.mockRequest(t, id1), s.mockRequest(t, id2)
			if up1.Path != "/v1/responses" || up2.Path != "/v1/responses" {
				t.Fatalf("upstream paths %s, %s, want /v1/responses", up1.Path, up2.Path)
			}
			rows := s.waitUsages(t, ten.keyID, 2)
			for _, c := range []struct {
				r  response
				up string
				op string
			}{{a, up1.Body, "generate_content"}, {b, up2.Body, "stream_generate_content"}} {
				// The upstream (alpha responses) counted ceil(len(translated body)/4) input tokens.
				want := stWant{op: c.op, kind: "beta_messages", impl: "transform_to", destKind: "alpha_responses", end: "completed",
					source: "upstream", status: 200, provider: w.pa, route: w.rXB, rule: w.ruleM1, repTier: "default",
					tokens: stTokens{stTok(c.up), 8}}
				want.cost = stCost(t, stM1, want.tokens)
				stCheckRow(t, stRow(t, rows, c.r.reqID), ten, want)
			}
			s.checkQuotas(t, ten)
		})
	})
	s.waitAllPendingZero(t)
}

// stLocalRepTier is the reported tier expected on a locally counted alpha chat stream: the mock reports
// "default" on every chunk. Whether it survives local counting is asserted by
// service_tier_reported_with_local_count alone; the other cases accept "" so that one bug fails
// one test.
func stLocalRepTier(t *testing.T, row store.StoredUsage) string {
	t.Helper()
	if row.ReportedTier != "" && row.ReportedTier != "default" {
		t.Errorf("reported_tier = %q, want default", row.ReportedTier)
	}
	return row.ReportedTier
}

// checkInFlightHold sends an alpha chat request that the mock holds for a while and checks, while it is in
// flight, that each of the tenant's scopes holds exactly want micro-dollars pending.
func (s *stack) checkInFlightHold(t *testing.T, ten stTenant, want int64, body string, hdr ...string) {
	t.Helper()
	done := make(chan response, 1)
	go func() { done <- s.send(context.Background(), "POST", "/v1/chat/completions", body, hdr...) }()
	key := s.prefix + "qp:org:" + fmt.Sprint(ten.org)
	deadline := time.Now().Add(1200 * time.Millisecond)
	for s.pending(t, key) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for _, sc := range ten.scopes() {
		if got := s.pending(t, s.prefix+"qp:"+sc[0]+":"+sc[1]); got != want {
			t.Errorf("in flight: qp:%s:%s = %d micro-dollars, want %d", sc[0], sc[1], got, want)
		}
	}
	r := <-done
	if r.err != nil || r.status != 200 {
		t.Fatalf("request: %d %v %s", r.status, r.err, r.body)
	}
}

// TestSettlementFlushOnGracefulShutdown stops the data plane while requests are in flight: they finish,
// record, and the shutdown flush delivers every record before Run returns.
func TestSettlementFlushOnGracefulShutdown(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := stSeed(t, s)
	ten := s.tenant(t, "flush", "1000")
	s.sync(t)
	const n = 12
	var wg sync.WaitGroup
	resps := make([]response, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i] = s.send(context.Background(), "POST", "/v1/chat/completions", stChat, stAlpha(ten, "x-mock-latency-ms", "600")...)
		}()
	}
	// Stop once every request reached the upstream (and so holds its reservation).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for s.mock.Count() < n {
		if ctx.Err() != nil {
			t.Fatalf("the upstream saw %d of %d requests", s.mock.Count(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.dp.stop(); err != nil {
		t.Errorf("data plane shutdown: %v", err)
	}
	wg.Wait()
	// No polling: the data plane is gone, so what is stored now is what its shutdown flushed.
	rows := s.usages(t, ten.keyID)
	if len(rows) != n {
		t.Fatalf("%d usage rows right after shutdown, want %d (outbox holds %d)", len(rows), n, s.outboxLen(t))
	}
	for _, r := range resps {
		if r.err != nil || r.status != 200 {
			t.Fatalf("in-flight request: %d %v %s", r.status, r.err, r.body)
		}
		want := stWant{op: "generate_content", kind: "alpha_chat_completions", impl: "passthrough", end: "completed", source: "upstream",
			status: 200, provider: w.pa, route: w.rM1, rule: w.ruleM1, repTier: "default", tokens: stTokens{stTok(stChat), 8}}
		want.cost = stCost(t, stM1, want.tokens)
		stCheckRow(t, stRow(t, rows, r.reqID), ten, want)
	}
	if l := s.outboxLen(t); l != 0 {
		t.Errorf("outbox holds %d records after the shutdown flush, want 0", l)
	}
	for k, v := range s.qpKeys(t) {
		if v != "0" {
			t.Errorf("%s = %s after the shutdown flush, want 0", k, v)
		}
	}
	s.checkQuotas(t, ten)
}

// TestSettlementRedisOutage serves requests while the data plane's Redis is unreachable: they are admitted
// without a reservation, their records go to the data plane's spill and straight to the control plane,
// one usage row each with the right cost; after Redis returns, the outbox path is used again.
func TestSettlementRedisOutage(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	proxy := admissiontest.NewProxy(t)
	s.dpRedisURL = proxy.URL()
	_ = s.dp.stop()
	s.dp = s.startDP("dp-redis-outage")
	w := stSeed(t, s)
	ten := s.tenant(t, "redis-outage", "1000")
	s.sync(t)

	proxy.Down()
	const n = 3
	var ids []string
	for range n {
		ids = append(ids, s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...).reqID)
	}
	rows := s.waitUsages(t, ten.keyID, n) // delivered during the outage
	for _, id := range ids {
		want := stWant{op: "generate_content", kind: "alpha_chat_completions", impl: "passthrough", end: "completed", source: "upstream",
			status: 200, provider: w.pa, route: w.rM1, rule: w.ruleM1, repTier: "default", tokens: stTokens{stTok(stChat), 8}}
		want.cost = stCost(t, stM1, want.tokens)
		stCheckRow(t, stRow(t, rows, id), ten, want)
	}
	s.checkQuotas(t, ten)

	proxy.Up()
	time.Sleep(1100 * time.Millisecond) // the recorder's one-second spill pause after the last failed append
	after := s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	rows = s.waitUsages(t, ten.keyID, n+1)
	stRow(t, rows, after.reqID)
	s.checkQuotas(t, ten)
	s.waitAllPendingZero(t)
}

// TestSettlementControlPlaneOutage serves requests while the control plane is down: they are held in the
// outbox with their reservations pending, and settle once it is back.
func TestSettlementControlPlaneOutage(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := stSeed(t, s)
	ten := s.tenant(t, "outage", "1000")
	s.sync(t)
	old := s.controlPlane()
	grpcAddr := old.srv.GRPCAddr()
	old.stop()

	const n = 5
	var ids []string
	for range n {
		ids = append(ids, s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...).reqID)
	}
	beta := s.do(t, 200, "POST", "/v1/messages", stBetaStream, stBeta(ten)...)
	time.Sleep(500 * time.Millisecond)
	var stored int
	if err := s.c.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM usages").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("%d usage rows while the control plane is down, want 0", stored)
	}
	if l := s.outboxLen(t); l != n+1 {
		t.Errorf("outbox holds %d records during the outage, want %d", l, n+1)
	}
	if v := s.pending(t, s.prefix+"qp:org:"+fmt.Sprint(ten.org)); v <= 0 {
		t.Errorf("qp:org = %d during the outage, want the reservations still pending", v)
	}

	s.restartCP(grpcAddr)
	rows := s.waitUsages(t, ten.keyID, n+1)
	for _, id := range ids {
		want := stWant{op: "generate_content", kind: "alpha_chat_completions", impl: "passthrough", end: "completed", source: "upstream",
			status: 200, provider: w.pa, route: w.rM1, rule: w.ruleM1, repTier: "default", tokens: stTokens{stTok(stChat), 8}}
		want.cost = stCost(t, stM1, want.tokens)
		stCheckRow(t, stRow(t, rows, id), ten, want)
	}
	bw := stWant{op: "stream_generate_content", kind: "beta_messages", impl: "passthrough", end: "completed", source: "upstream",
		status: 200, provider: w.pb, route: w.rB1, rule: w.ruleB1, repTier: "standard", tokens: stTokens{stTok(stBetaStream), 8}}
	bw.cost = stCost(t, stB1, bw.tokens)
	stCheckRow(t, stRow(t, rows, beta.reqID), ten, bw)
	s.checkQuotas(t, ten)
	s.waitAllPendingZero(t)
	if l := s.outboxLen(t); l != 0 {
		t.Errorf("outbox holds %d records after recovery, want 0", l)
	}
}
