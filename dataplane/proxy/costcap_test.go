package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ericlagergren/decimal"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/pricing"
)

// handWorstCase is costCells' rule's worst case worked out by hand (docs/cost.md, "The worst case"): the
// prompt estimate ceil(bytes/4) at the dearest prompt rate (cache creation 5m, 3.9 per million) plus the
// output limit at the dearest output rate (15.7 per million).
func handWorstCase(t *testing.T, body string, maxOut int64) *decimal.Big {
	t.Helper()
	prompt := (int64(len(body)) + 3) / 4
	p, _ := new(decimal.Big).SetString("3.9")
	o, _ := new(decimal.Big).SetString("15.7")
	ctx := decimal.Context{Precision: 60}
	sum := ctx.Add(new(decimal.Big), ctx.Mul(new(decimal.Big), p, decimal.New(prompt, 0)), ctx.Mul(new(decimal.Big), o, decimal.New(maxOut, 0)))
	return ctx.Mul(sum, sum, decimal.New(1, 6))
}

func capRequest(t *testing.T, front *httptest.Server, path, body string, limit string) (int, string) {
	t.Helper()
	hdr := map[string]string{hdrMaxCost: limit, "anthropic-version": "2023-06-01"}
	resp := postTo(t, front, path, body, hdr)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(got)
}

// The cap admits a worst case equal to it and refuses one a hair above it, in every dialect, with the
// dialect's 402 and the machine-readable object; the output limit counts each choice (n, candidateCount).
func TestCostCapBoundary(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		maxOut           int64
		shape            string
	}{
		{"alpha chat max_tokens×n", "/v1/chat/completions", `{"model":"chat","max_tokens":100,"n":3,"messages":[{"role":"user","content":"hi there"}]}`, 300, `"type":"insufficient_quota","param":null,"code":"cost_cap_exceeded"`},
		{"alpha chat max_completion_tokens", "/v1/chat/completions", `{"model":"chat","max_completion_tokens":70,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 70, `"code":"cost_cap_exceeded"`},
		{"alpha responses", "/v1/responses", `{"model":"chat","max_output_tokens":250,"input":"what does it cost?"}`, 250, `"type":"insufficient_quota"`},
		{"beta", "/v1/messages", `{"model":"chat","max_tokens":300,"messages":[{"role":"user","content":"what does it cost?"}]}`, 300, `"type":"billing_error"`},
		{"gamma candidateCount", "/v1beta/models/chat:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":40,"candidateCount":2}}`, 80, `"reason":"COST_CAP_EXCEEDED"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, front, mock := setupMock(t, costCells)
			wc := handWorstCase(t, tc.body, tc.maxOut)
			exact := pricing.FormatDecimal(wc)
			ctx := decimal.Context{Precision: 60}
			above := ctx.Sub(new(decimal.Big), wc, decimal.New(1, 24)) // a cap 10^-24 below: the cap's finest step
			code, got := capRequest(t, front, tc.path, tc.body, pricing.FormatDecimal(above))
			if code != http.StatusPaymentRequired || !strings.Contains(got, tc.shape) || !strings.Contains(got, exact) {
				t.Fatalf("cap below the worst case %s: %d %s, want 402 in the dialect naming the worst case", exact, code, got)
			}
			if n := mock.Count(); n != 0 {
				t.Fatalf("a refused request called the upstream %d times", n)
			}
			if r := oneRecord(t, b); r.GetEndState() != "rejected" || r.GetCost() != "0" {
				t.Fatalf("refusal record %s cost %s", r.GetEndState(), r.GetCost())
			}
			if code, got := capRequest(t, front, tc.path, tc.body, exact); code != 200 {
				t.Fatalf("cap equal to the worst case %s: %d %s, want admitted", exact, code, got)
			}
		})
	}
}

// A request without an output limit has no finite worst case: refused whatever the cap; bad syntax is a 400.
func TestCostCapUnboundedAndSyntax(t *testing.T) {
	_, front, mock := setupMock(t, costCells)
	code, got := capRequest(t, front, "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`, "1000000")
	if code != 402 || !strings.Contains(got, `"unbounded":true`) || !strings.Contains(got, "max_tokens") {
		t.Fatalf("unbounded: %d %s", code, got)
	}
	for _, bad := range []string{"-1", "1e3", "$5", "abc", "0x10"} {
		code, got := capRequest(t, front, "/v1/chat/completions", `{"model":"chat","max_tokens":5,"messages":[]}`, bad)
		if code != 400 || !strings.Contains(got, `"code":"invalid_cost_cap"`) {
			t.Fatalf("cap %q: %d %s, want 400 invalid_cost_cap", bad, code, got)
		}
	}
	if mock.Count() != 0 {
		t.Fatal("refused requests reached the upstream")
	}
	// The cap never reaches the upstream.
	if code, got := capRequest(t, front, "/v1/chat/completions", `{"model":"chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "10"); code != 200 {
		t.Fatalf("status %d %s", code, got)
	}
	if h := mock.Requests()[0].Header; h.Get(hdrMaxCost) != "" {
		t.Fatalf("the cap header reached the upstream: %v", h)
	}
}

// The quote answers the same worst case without calling an upstream, and whether admission would admit it.
func TestCostEstimate(t *testing.T) {
	b, front, mock := setupMock(t, costCells)
	_ = b
	inner := `{"model":"chat","max_tokens":100,"messages":[{"role":"user","content":"hi there"}]}`
	wc := pricing.FormatDecimal(handWorstCase(t, inner, 100))
	for _, tc := range []struct {
		limit  string
		within bool
	}{{wc, true}, {"0.0000001", false}} {
		resp := postTo(t, front, estimatePath, `{"endpoint":"/v1/chat/completions","request":`+inner+`}`, map[string]string{hdrMaxCost: tc.limit})
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Object, WorstCaseCost, MaxWorstCaseCost string
			RuleID                                  int64 `json:"price_rule_id"`
			MaxOut                                  int64 `json:"max_output_tokens"`
			Within                                  *bool `json:"within_cap"`
		}
		if err := json.Unmarshal(got, &e); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %s %v", resp.StatusCode, got, err)
		}
		var raw map[string]any
		_ = json.Unmarshal(got, &raw)
		if raw["worst_case_cost"] != wc || raw["max_worst_case_cost"] != wc || e.RuleID != 9 || e.MaxOut != 100 || e.Within == nil || *e.Within != tc.within {
			t.Fatalf("estimate %s, want worst case %s within=%v", got, wc, tc.within)
		}
	}
	if mock.Count() != 0 {
		t.Fatal("the estimate called the upstream")
	}
	resp := postTo(t, front, estimatePath, `{"endpoint":"/v1/chat/completions","request":{"model":"nope","max_tokens":1,"messages":[]}}`, nil)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(got), "model_not_found") {
		t.Fatalf("unknown model: %d %s, want the real request's error", resp.StatusCode, got)
	}
}

// A key whose costs are not disclosed is still protected by its cap, but the 402 names only the code and the
// cap, not the worst case or the rule; the quote is an unknown path for it.
func TestCostCapUndisclosed(t *testing.T) {
	off := func(s *snapshotv1.Snapshot) { s.GatewaySettings = &configv1.GatewaySettings{CostDisclosure: false} }
	_, front, mock := setupMock(t, costCells, off)
	code, got := capRequest(t, front, "/v1/messages", `{"model":"chat","max_tokens":300,"messages":[{"role":"user","content":"hi"}]}`, "0.0000001")
	if code != 402 || !strings.Contains(got, `"tollgate":{"code":"cost_cap_exceeded","max_cost":"0.0000001"}`) || strings.Contains(got, "worst_case") {
		t.Fatalf("undisclosed 402: %d %s", code, got)
	}
	resp := postTo(t, front, estimatePath, `{"endpoint":"/v1/chat/completions","request":{"model":"chat","max_tokens":1,"messages":[]}}`, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), "no such endpoint") {
		t.Fatalf("undisclosed estimate: %d %s", resp.StatusCode, body)
	}
	if mock.Count() != 0 {
		t.Fatal("the upstream was called")
	}
}
