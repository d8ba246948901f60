package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// A plain answer the upstream cuts mid-body (a Content-Length it does not keep, or chunks without the
// terminating one) never reached the client: it is a failed attempt. The next credential answers whole,
// else the client gets a 502 in its dialect, and the one record says what the client saw. Passthrough and
// transform_to cells behave the same.
func TestPlainAnswerCutMidBodyFailsOver(t *testing.T) {
	dest, op := "alpha_chat_completions", "generate_content"
	transform := func(s *snapshotv1.Snapshot) {
		s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: 3, ProviderId: 1, Operation: op, Kind: "beta_messages",
			Implementation: "transform_to", DestOperation: &op, DestKind: &dest, Enabled: true})
	}
	for _, cell := range []struct {
		name, path, body, errShape string
	}{
		{"passthrough", "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`, `"code":"upstream_failed"`},
		{"transform_to", "/v1/messages", `{"model":"chat","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, `"type":"api_error"`},
	} {
		for _, cut := range []string{"length", "chunked"} {
			t.Run(cell.name+"/"+cut+"/failover", func(t *testing.T) {
				b, front, mock := setupMock(t, transform)
				resp := postTo(t, front, cell.path, cell.body, map[string]string{"x-mock-cut-body": cut,
					"x-mock-fail-first": "1", "x-mock-fail-key": t.Name()})
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"usage"`) {
					t.Fatalf("client got %d %q (read error %v), want the second attempt's whole 200", resp.StatusCode, body, err)
				}
				if n := mock.Count(); n != 2 {
					t.Fatalf("upstream called %d times, want 2 (the cut answer failed over)", n)
				}
				r := oneRecord(t, b)
				if r.GetHttpStatus() != 200 || r.GetEndState() != "completed" || r.GetCost() == "0" {
					t.Fatalf("record status %d end %s cost %s, want 200 completed, billed", r.GetHttpStatus(), r.GetEndState(), r.GetCost())
				}
			})
			t.Run(cell.name+"/"+cut+"/502", func(t *testing.T) {
				b, front, mock := setupMock(t, transform)
				resp := postTo(t, front, cell.path, cell.body, map[string]string{"x-mock-cut-body": cut})
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), cell.errShape) {
					t.Fatalf("client got %d %q (read error %v), want a whole 502 in its dialect", resp.StatusCode, body, err)
				}
				if n := mock.Count(); n != 2 {
					t.Fatalf("upstream called %d times, want 2 (both credentials)", n)
				}
				r := oneRecord(t, b)
				if r.GetHttpStatus() != 502 || r.GetEndState() != "upstream_error" || r.GetCost() != "0" {
					t.Fatalf("record status %d end %s cost %s, want 502 upstream_error 0", r.GetHttpStatus(), r.GetEndState(), r.GetCost())
				}
			})
		}
	}
}

// Beyond HoldAnswerBytes a plain answer is relayed as it comes: its headers are sent, so an upstream cut
// after that aborts the client connection (the client's read fails, it never sees a clean end) and the
// record says 200, upstream_interrupted — what the client saw.
func TestPlainAnswerBeyondHoldIsAborted(t *testing.T) {
	b, front, mock := setupMock(t)
	b.h.o.HoldAnswerBytes = 64
	b.h.pool = sync.Pool{New: b.h.pool.New} // calls pooled before the bound changed are dropped
	resp := postTo(t, front, "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-cut-body": "length", "x-mock-chunks": "40"})
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil {
		t.Fatalf("client got %d, %d bytes, read error %v; want 200 headers, then a broken read", resp.StatusCode, len(body), err)
	}
	if n := mock.Count(); n != 1 {
		t.Fatalf("upstream called %d times, want 1 (the client had the headers: no failover)", n)
	}
	r := oneRecord(t, b)
	if r.GetHttpStatus() != 200 || r.GetEndState() != "upstream_interrupted" {
		t.Fatalf("record status %d end %s, want 200 upstream_interrupted", r.GetHttpStatus(), r.GetEndState())
	}
}
