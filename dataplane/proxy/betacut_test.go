package proxy

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/dataplane/tokencount"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// A beta messages stream cut after some text deltas, before message_delta, is billed for the output the
// provider generated: message_start's input and cache categories as reported, and the relayed output text
// counted locally (source local), never message_start's placeholder output_tokens (1).
func TestBetaStreamCutBeforeMessageDeltaBillsRelayedOutput(t *testing.T) {
	b, front, _ := setupMock(t, func(s *snapshotv1.Snapshot) {
		s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: 7, ProviderId: 1, Operation: "stream_generate_content",
			Kind: "beta_messages", Implementation: "passthrough", Enabled: true})
	})
	resp := postTo(t, front, "/v1/messages", `{"model":"chat","max_tokens":2000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-chunks": "300", "x-mock-disconnect-after": "200", "anthropic-version": "2023-06-01"})
	got, _ := io.ReadAll(resp.Body) // cut: the read ends in an error
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(got), "message_delta") {
		t.Fatalf("client got %d %.300s: want a stream cut before message_delta", resp.StatusCode, got)
	}
	var start struct {
		Message struct {
			Usage struct {
				InputTokens          int64 `json:"input_tokens"`
				CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
			} `json:"usage"`
		} `json:"message"`
	}
	d := sse.NewDecoder(strings.NewReader(string(got)))
	deltas := 0
	for {
		ev, err := d.Next()
		if err != nil {
			break
		}
		switch ev.Name {
		case "message_start":
			if err := json.Unmarshal(ev.Data, &start); err != nil {
				t.Fatal(err)
			}
		case "content_block_delta":
			deltas++
		}
	}
	if deltas < 150 || start.Message.Usage.InputTokens == 0 {
		t.Fatalf("relayed %d deltas, message_start input %d: the mock did not stream as planned", deltas, start.Message.Usage.InputTokens)
	}
	r := oneRecord(t, b)
	if r.GetEndState() != "upstream_interrupted" {
		t.Fatalf("record end %s, want upstream_interrupted", r.GetEndState())
	}
	checkBetaCut(t, r, 150)
	if tok := r.GetTokens(); tok.GetInput() != start.Message.Usage.InputTokens || tok.GetCacheRead() != start.Message.Usage.CacheReadInputTokens {
		t.Fatalf("record tokens %v: want message_start's input %d and cache read %d as reported", tok,
			start.Message.Usage.InputTokens, start.Message.Usage.CacheReadInputTokens)
	}
}

// The same through a transform_to cell (an alpha chat client, a beta upstream): the upstream's message_start
// gives the input side, the relayed output is counted locally.
func TestTransformedBetaStreamCutBeforeMessageDeltaBillsRelayedOutput(t *testing.T) {
	dest, op := "beta_messages", "stream_generate_content"
	b, front, _ := setupMock(t, func(s *snapshotv1.Snapshot) {
		for _, r := range s.RoutingRules {
			if r.Kind == "alpha_chat_completions" && r.Operation == op {
				r.Implementation, r.DestOperation, r.DestKind = "transform_to", &op, &dest
			}
		}
	})
	resp := chatRequest(t, front, `{"model":"chat","max_tokens":2000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-mock-chunks": "300", "x-mock-disconnect-after": "200"})
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Count(string(got), `"content":`) < 150 {
		t.Fatalf("client got %d %.300s: want a translated stream of at least 150 deltas", resp.StatusCode, got)
	}
	r := oneRecord(t, b)
	if r.GetEndState() != "upstream_interrupted" {
		t.Fatalf("record end %s, want upstream_interrupted", r.GetEndState())
	}
	checkBetaCut(t, r, 150)
}

// checkBetaCut checks the record of a beta stream cut before message_delta: with the tokenizer, the relayed
// output counted locally (checkCounted); without it, message_start's usage as reported (docs/settlement.md).
func checkBetaCut(t *testing.T, r *settlementv1.SettlementRecord, minOutput int64) {
	t.Helper()
	if tokencount.Supported() {
		checkCounted(t, r, minOutput)
		return
	}
	if r.GetSource() != "upstream" || r.GetTokens().GetInput() == 0 || r.GetTokens().GetOutput() != 1 {
		t.Fatalf("record source %s tokens %v end %s, want message_start's usage as reported (no tokenizer)",
			r.GetSource(), r.GetTokens(), r.GetEndState())
	}
}
