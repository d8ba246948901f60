package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// A function_call output item whose arguments are an object is an item the translator knows but cannot
// read: the answer cannot reach the client translated. The provider charged for it all the same, so the
// usage it reported is billed (1,000 input + 10 output tokens at 1 per million), never thrown away.
const unreadableItem = `{"id":"fc_1","type":"function_call","status":"completed","call_id":"c1","name":"f","arguments":{"a":1}}`

const unreadableUsage = `{"input_tokens":1000,"input_tokens_details":{"cached_tokens":0},"output_tokens":10,"total_tokens":1010}`

// setupToResponses serves alpha chat clients on loopback through a transform_to cell to an alpha responses
// upstream answering with upstream.
func setupToResponses(t *testing.T, upstream func(w http.ResponseWriter, r *http.Request)) (*testBundle, *httptest.Server) {
	t.Helper()
	dest := "alpha_responses"
	b := setup(t, upstream, func(s *snapshotv1.Snapshot) {
		for _, r := range s.RoutingRules {
			op := r.Operation
			r.Implementation, r.DestOperation, r.DestKind = "transform_to", &op, &dest
		}
	})
	b.h.o.Transformer = &Translator{}
	front := httptest.NewServer(b.h)
	t.Cleanup(front.Close)
	return b, front
}

func TestUntranslatableAnswerStillBilled(t *testing.T) {
	b, front := setupToResponses(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m-1","output":[`+
			unreadableItem+`],"usage":`+unreadableUsage+`}`)
	})
	resp := chatRequest(t, front, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("client got %d %s, want 502 (the answer cannot be translated)", resp.StatusCode, body)
	}
	r := oneRecord(t, b)
	if r.GetSource() != "upstream" || r.GetTokens().GetInput() != 1000 || r.GetTokens().GetOutput() != 10 || r.GetCost() != "0.00101" {
		t.Fatalf("record source %s tokens %v cost %s end %s, want the upstream's usage billed (0.00101)",
			r.GetSource(), r.GetTokens(), r.GetCost(), r.GetEndState())
	}
}

func TestUntranslatableStreamEventStillBilled(t *testing.T) {
	b, front := setupToResponses(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"m-1\",\"status\":\"in_progress\"}}\n\n"+
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":"+unreadableItem+"}\n\n"+
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":\"m-1\",\"status\":\"completed\",\"usage\":"+unreadableUsage+"}}\n\n")
	})
	resp := chatRequest(t, front, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "[DONE]") || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("client got %d %s, want a 200 stream ended by an in-stream error", resp.StatusCode, body)
	}
	r := oneRecord(t, b)
	if r.GetSource() != "upstream" || r.GetTokens().GetInput() != 1000 || r.GetTokens().GetOutput() != 10 || r.GetCost() != "0.00101" {
		t.Fatalf("record source %s tokens %v cost %s end %s, want the upstream's usage billed (0.00101)",
			r.GetSource(), r.GetTokens(), r.GetCost(), r.GetEndState())
	}
}
