package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
)

// costAnswer is one answer with what it said about its cost: the five fields (headers, else trailers) and
// the amount in the stream's final usage event.
type costAnswer struct {
	status  int
	reqID   string
	fields  http.Header
	inline  string // the "cost" member of the stream's final usage event ("" when none)
	tg      string // its tollgate object's "cost"
	body    string
	trailer bool
}

var (
	costMember   = regexp.MustCompile(`"cost":([0-9.]+),"tollgate":\{"cost":"([0-9.]+)"`)
	costHeaders5 = []string{"X-Tollgate-Cost", "X-Tollgate-Price-Rule", "X-Tollgate-Price-Rule-Version", "X-Tollgate-Service-Tier", "X-Tollgate-Usage-Source"}
)

// costSend sends a request and keeps its cost fields: the headers of a plain answer, the trailers of a stream.
func (s *stack) costSend(t *testing.T, path, body string, hdr ...string) costAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "POST", "http://"+s.dp.srv.Addr()+path, strings.NewReader(body))
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
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	a := costAnswer{status: resp.StatusCode, reqID: resp.Header.Get("X-Request-Id"), fields: resp.Header, body: string(b)}
	if resp.Header.Get("X-Tollgate-Cost") == "" && len(resp.Trailer) > 0 {
		a.fields, a.trailer = resp.Trailer, true
	}
	if m := costMember.FindStringSubmatch(a.body); m != nil {
		a.inline, a.tg = m[1], m[2]
	}
	return a
}

// lookupCost asks GET /v1/requests/{id}/cost with a key's header pair.
func (s *stack) lookupCost(t *testing.T, id string, auth ...string) response {
	t.Helper()
	return s.send(context.Background(), "GET", "/v1/requests/"+id+"/cost", "", auth...)
}

// TestCostThroughTheGateway: for each dialect, plain and streamed, passthrough and transform_to, the cost the
// answer tells (headers, trailers, the stream's final usage event) is the usage row's cost exactly, and the
// lookup answers the same row to its key only.
func TestCostThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stSeed(t, s)
	ten := s.tenant(t, "cost-a", "1000")
	other := s.tenant(t, "cost-b", "1000")
	s.sync(t)

	ask := "X-Tollgate-Include-Cost"
	plain := func(b string) string { return strings.Replace(b, `"stream":true,`, "", 1) }
	cases := []struct {
		name, path, body string
		auth             []string
		impl             string
	}{
		{"alpha_chat/plain", "/v1/chat/completions", stChat, stAlpha(ten), "passthrough"},
		{"alpha_chat/stream", "/v1/chat/completions", stChatStream, stAlpha(ten, ask, "true"), "passthrough"},
		{"alpha_responses/plain", "/v1/responses", plain(stRespBody), stAlpha(ten), "passthrough"},
		{"alpha_responses/stream", "/v1/responses", stRespBody, stAlpha(ten, ask, "true"), "passthrough"},
		{"beta/plain", "/v1/messages", plain(stBetaStream), stBeta(ten), "passthrough"},
		{"beta/stream", "/v1/messages", stBetaStream, stBeta(ten, ask, "1"), "passthrough"},
		{"gamma/plain", "/v1beta/models/g-1-flash:generateContent", stGammaBody, stGamma(ten), "passthrough"},
		{"gamma/stream_sse", "/v1beta/models/g-1-flash:streamGenerateContent?alt=sse", stGammaBody, stGamma(ten, ask, "true"), "passthrough"},
		{"gamma/stream_array", "/v1beta/models/g-1-flash:streamGenerateContent", stGammaBody, stGamma(ten, ask, "true"), "passthrough"},
		// a beta client on the alpha provider (st-xb): transform_to
		{"beta_to_alpha/plain", "/v1/messages", plain(strings.Replace(stBetaStream, `"b-1"`, `"st-xb"`, 1)), stBeta(ten), "transform_to"},
		{"beta_to_alpha/stream", "/v1/messages", strings.Replace(stBetaStream, `"b-1"`, `"st-xb"`, 1), stBeta(ten, ask, "true"), "transform_to"},
		// an alpha chat client on the beta provider
		{"alpha_chat_to_beta/plain", "/v1/chat/completions", `{"model":"b-1","max_tokens":256,"messages":[{"role":"user","content":"hello there"}]}`, stAlpha(ten), "transform_to"},
		{"alpha_chat_to_beta/stream", "/v1/chat/completions", `{"model":"b-1","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`, stAlpha(ten, ask, "true"), "transform_to"},
		// a gamma client on the alpha provider
		{"gamma_to_alpha/plain", "/v1beta/models/m-1:generateContent", stGammaBody, stGamma(ten), "transform_to"},
		{"gamma_to_alpha/stream_sse", "/v1beta/models/m-1:streamGenerateContent?alt=sse", stGammaBody, stGamma(ten, ask, "true"), "transform_to"},
		{"gamma_to_alpha/stream_array", "/v1beta/models/m-1:streamGenerateContent", stGammaBody, stGamma(ten, ask, "true"), "transform_to"},
	}
	answers := make([]costAnswer, len(cases))
	for i, c := range cases {
		answers[i] = s.costSend(t, c.path, c.body, c.auth...)
		if answers[i].status != 200 {
			t.Fatalf("%s: status %d %.300s", c.name, answers[i].status, answers[i].body)
		}
	}
	rows := s.waitUsages(t, ten.keyID, len(cases))
	for i, c := range cases {
		a := answers[i]
		row := stRow(t, rows, a.reqID)
		if row.Implementation != c.impl {
			t.Errorf("%s: implementation %s, want %s", c.name, row.Implementation, c.impl)
		}
		if stRat(t, row.Cost).Sign() <= 0 {
			t.Errorf("%s: row cost %s: the test needs a priced row", c.name, row.Cost)
		}
		stream := strings.Contains(c.name, "stream")
		if a.trailer != stream {
			t.Errorf("%s: cost in trailers=%v, want %v", c.name, a.trailer, stream)
		}
		for _, h := range costHeaders5[:3] {
			if a.fields.Get(h) == "" {
				t.Errorf("%s: %s missing", c.name, h)
			}
		}
		got := a.fields.Get("X-Tollgate-Cost")
		if stRat(t, got).Cmp(stRat(t, row.Cost)) != 0 {
			t.Errorf("%s: X-Tollgate-Cost %s, usage row %s", c.name, got, row.Cost)
		}
		if row.PriceRuleID == nil || a.fields.Get("X-Tollgate-Price-Rule") != itoa(*row.PriceRuleID) || a.fields.Get("X-Tollgate-Usage-Source") != row.Source {
			t.Errorf("%s: rule %s source %s, row %v %s", c.name, a.fields.Get("X-Tollgate-Price-Rule"), a.fields.Get("X-Tollgate-Usage-Source"), row.PriceRuleID, row.Source)
		}
		if stream && (a.inline != got || a.tg != got) {
			t.Errorf("%s: final usage event cost %q / %q, header %s:\n%.2000s", c.name, a.inline, a.tg, got, a.body)
		}
		// The lookup answers the row, exactly the header's string; another key gets the unknown id's 404.
		lk := s.lookupCost(t, a.reqID, c.auth[:2]...)
		var settled struct{ Status, Cost string }
		if lk.status != 200 || json.Unmarshal([]byte(lk.body), &settled) != nil || settled.Status != "settled" || settled.Cost != got {
			t.Errorf("%s: lookup %d %s, want settled at %s", c.name, lk.status, lk.body, got)
		}
		theirs := s.lookupCost(t, a.reqID, stAlpha(other)...)
		unknown := s.lookupCost(t, "req_00000000000000000000000000000000", stAlpha(other)...)
		if theirs.status != 404 || theirs.body != unknown.body || unknown.status != 404 {
			t.Errorf("%s: another key's lookup %d %s, unknown id %d %s: want the same 404", c.name, theirs.status, theirs.body, unknown.status, unknown.body)
		}
	}
}

func itoa(n int64) string { return decimal.New(n, 0).String() }

// A stream in flight is pending to its key (Retry-After: 1), settled once its row is stored.
func TestCostLookupPendingThenSettled(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stSeed(t, s)
	ten := s.tenant(t, "cost-p", "1000")
	s.sync(t)
	req, _ := http.NewRequest("POST", "http://"+s.dp.srv.Addr()+"/v1/chat/completions", strings.NewReader(stChatStream))
	for _, kv := range [][2]string{{"Authorization", "Bearer " + ten.key}, {"x-mock-chunks", "30"}, {"x-mock-chunk-delay-ms", "100"}} {
		req.Header.Set(kv[0], kv[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Request-Id")
	lk := s.lookupCost(t, id, stAlpha(ten)...)
	if lk.status != 200 || !strings.Contains(lk.body, `"status":"pending"`) || lk.header.Get("Retry-After") != "1" {
		t.Fatalf("in flight: %d %v %s, want pending with Retry-After 1", lk.status, lk.header, lk.body)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lk = s.lookupCost(t, id, stAlpha(ten)...)
		if strings.Contains(lk.body, `"status":"settled"`) {
			break
		}
		if time.Now().After(deadline) || lk.status != 200 {
			t.Fatalf("after the stream: %d %s, want settled", lk.status, lk.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	row := stRow(t, s.waitUsages(t, ten.keyID, 1), id)
	if !strings.Contains(lk.body, `"cost":"`+pricing.FormatDecimal(mustDec(t, row.Cost))+`"`) {
		t.Fatalf("settled %s, row cost %s", lk.body, row.Cost)
	}
}

func mustDec(t *testing.T, s string) *decimal.Big {
	t.Helper()
	d, err := pricing.ParseDecimal(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The cap admits a request whose worst case (as the quote answers it) equals the cap, and refuses it with a
// 402 when the cap is 10^-24 below; the quote calls no upstream.
func TestCostCapThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stSeed(t, s)
	ten := s.tenant(t, "cost-c", "1000")
	s.sync(t)
	body := `{"model":"b-1","max_tokens":300,"messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	before := s.mock.Count()
	q := s.do(t, 200, "POST", "/v1/cost/estimate", `{"endpoint":"/v1/messages","request":`+body+`}`, stBeta(ten)...)
	var est struct {
		WorstCase string `json:"worst_case_cost"`
		Unbounded bool   `json:"unbounded"`
	}
	if err := json.Unmarshal([]byte(q.body), &est); err != nil || est.WorstCase == "" || est.Unbounded {
		t.Fatalf("estimate %s", q.body)
	}
	if s.mock.Count() != before {
		t.Fatal("the estimate called the upstream")
	}
	ctx := decimal.Context{Precision: 60}
	below := ctx.Sub(new(decimal.Big), mustDec(t, est.WorstCase), decimal.New(1, 24))
	r := s.send(context.Background(), "POST", "/v1/messages", body, stBeta(ten, "X-Tollgate-Max-Cost", pricing.FormatDecimal(below))...)
	if r.status != 402 || !strings.Contains(r.body, `"type":"billing_error"`) || !strings.Contains(r.body, `"worst_case_cost":"`+est.WorstCase+`"`) {
		t.Fatalf("cap below the worst case: %d %s", r.status, r.body)
	}
	if s.mock.Count() != before {
		t.Fatal("a refused request reached the upstream")
	}
	s.do(t, 200, "POST", "/v1/messages", body, stBeta(ten, "X-Tollgate-Max-Cost", est.WorstCase)...)
	rows := s.waitUsages(t, ten.keyID, 2)
	if row := stRow(t, rows, r.reqID); row.EndState != "rejected" || stRat(t, row.Cost).Sign() != 0 || row.HTTPStatus != 402 {
		t.Fatalf("refusal row %+v", row)
	}
}

// TestSDKStreamsWithCost: the official Go SDKs parse every stream whose client asked for its cost (the
// cost and tollgate members in the final usage event), passthrough and transform_to, as they parse it
// without: same text, finish and usage.
func TestSDKStreamsWithCost(t *testing.T) {
	t.Parallel()
	s := sdkStart(t)
	for _, client := range sdkClients {
		for _, ch := range sdkChannels {
			t.Run(fmt.Sprintf("%s/%s", client, ch), func(t *testing.T) {
				r := sdkReq{client: client, route: "sdk-" + ch, caseID: t.Name(), stream: true, hdr: map[string]string{"X-Tollgate-Include-Cost": "true"}}
				got, err := s.run(sdkCtx(t), r)
				raw := s.rec.raw(r.caseID)
				if err != nil {
					t.Fatalf("SDK rejected the stream with its cost: %v\nraw:\n%s", err, raw)
				}
				if !costMember.MatchString(raw) {
					t.Fatalf("the stream carries no cost members:\n%s", raw)
				}
				s.check(t, r.caseID, got, sdkWant{noID: client == sdkGenai, finish: client.finish(false), out: sdkTextTokens})
			})
		}
	}
}
