package e2e

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/responses"
)

// The official SDKs (openai-go v1.12.0, anthropic-sdk-go v1.84.0, google.golang.org/genai v1.77.0) pointed at
// a real data plane — configured by a real control plane through the admin REST API, in front of the mock
// upstream — parse every passthrough and translated response and stream, tool calls included, every stream
// synthesised from a buffered upstream with keepalives, and upstream errors as their typed API errors
// (issue 8, item 5).

// TestSDKLive: every SDK, plain and streaming, text and tool call, against each channel — passthrough on
// its own channel, transform_to (streams converted event by event) on the two others.
func TestSDKLive(t *testing.T) {
	t.Parallel()
	s := sdkStart(t)
	for _, client := range sdkClients {
		for _, ch := range sdkChannels {
			for _, stream := range []bool{false, true} {
				for _, tool := range []bool{false, true} {
					mode := map[bool]string{false: "plain", true: "stream"}[stream]
					what := map[bool]string{false: "text", true: "tool"}[tool]
					impl := "transform"
					if ch == client.native() {
						impl = "passthrough"
					}
					t.Run(fmt.Sprintf("%s/%s_%s/%s/%s", client, ch, impl, mode, what), func(t *testing.T) {
						r := sdkReq{client: client, route: "sdk-" + ch, caseID: t.Name(), stream: stream, tool: tool}
						got, err := s.run(sdkCtx(t), r)
						if err != nil {
							t.Fatalf("SDK: %v\nraw response:\n%s", err, s.rec.raw(r.caseID))
						}
						rec := s.upstream(t, r.caseID)
						if want := sdkUpstreamPath(client, ch, stream); rec.Path != want || rec.Stream != stream {
							t.Errorf("upstream request %s (stream %v), want %s (stream %v)", rec.Path, rec.Stream, want, stream)
						}
						out := int64(sdkTextTokens)
						if tool {
							out = sdkToolTokens
						}
						s.check(t, r.caseID, got, sdkWant{tool: tool, noID: client == sdkGenai, finish: client.finish(tool), out: out})
						if t.Failed() {
							t.Logf("raw response:\n%s", s.rec.raw(r.caseID))
						}
					})
				}
			}
		}
	}
}

// TestSDKBufferedUpstream: streaming requests routed to stream_generate_content -> transform_to
// generate_content cells (set through PUT /admin/providers/{id}/routing-rules), every client on every
// channel (the same-kind cells included). The mock answers after sdkLatency ms, so several keepalives reach
// the SDK before the synthesised stream; every SDK must skip them and parse the stream. An upstream failure
// after keepalives becomes an in-stream error the SDK reports.
func TestSDKBufferedUpstream(t *testing.T) {
	t.Parallel()
	s := sdkStart(t)
	latency := map[string]string{"x-mock-latency-ms": fmt.Sprint(sdkLatency)}
	for _, client := range sdkClients {
		for _, ch := range sdkChannels {
			for _, tool := range []bool{false, true} {
				what := map[bool]string{false: "text", true: "tool"}[tool]
				t.Run(fmt.Sprintf("%s/%s_buf/%s", client, ch, what), func(t *testing.T) {
					t.Parallel()
					r := sdkReq{client: client, route: "sdk-" + ch + "-buf", caseID: t.Name(), stream: true, tool: tool, hdr: latency}
					start := time.Now()
					got, err := s.run(sdkCtx(t), r)
					raw := s.rec.raw(r.caseID)
					if err != nil {
						t.Fatalf("SDK rejected the synthesised stream: %v\nraw stream:\n%q", err, raw)
					}
					rec := s.upstream(t, r.caseID)
					if want := sdkUpstreamPath(client, ch, false); rec.Path != want || rec.Stream {
						t.Errorf("upstream request %s (stream %v), want the buffered %s", rec.Path, rec.Stream, want)
					}
					n, err := sdkKeepalives(client, raw)
					if err != nil || n < 3 {
						t.Errorf("%d keepalives before the stream (%v) after %v, want at least 3 (latency %d ms, interval %v)\nraw stream:\n%q",
							n, err, time.Since(start), sdkLatency, sdkKeepalive, raw)
					}
					t.Logf("%d keepalives before the synthesised stream", n)
					out := int64(sdkTextTokens)
					if tool {
						out = sdkToolTokens
					}
					s.check(t, r.caseID, got, sdkWant{tool: tool, noID: client == sdkGenai, finish: client.finish(tool), out: out})
					if t.Failed() {
						t.Logf("raw stream:\n%q", raw)
					}
				})
			}
		}
	}
	for _, client := range sdkClients {
		for _, ch := range sdkChannels {
			t.Run(fmt.Sprintf("%s/%s_buf/upstream_500_after_keepalives", client, ch), func(t *testing.T) {
				t.Parallel()
				r := sdkReq{client: client, route: "sdk-" + ch + "-buf", caseID: t.Name(), stream: true,
					hdr: map[string]string{"x-mock-latency-ms": fmt.Sprint(sdkLatency), "x-mock-status": "500"}}
				got, err := s.run(sdkCtx(t), r)
				raw := s.rec.raw(r.caseID)
				if err == nil {
					t.Fatalf("SDK accepted a stream whose upstream failed: %+v\nraw stream:\n%q", got, raw)
				}
				if form := sdkKeepaliveForm(client); !strings.HasPrefix(raw, form) {
					t.Errorf("the stream does not open with a keepalive %q before the in-stream error:\n%q", form, raw)
				}
				if !strings.Contains(err.Error(), "mock failure requested by x-mock-status") {
					t.Errorf("SDK error %v does not carry the upstream's message\nraw stream:\n%q", err, raw)
				}
			})
		}
	}
}

// TestSDKUpstreamErrors: an upstream 500 (the mock's x-mock-status) on the only candidate is failed over
// and ends as "every upstream candidate failed" — 502 (docs/dataplane.md); an upstream 429 on every candidate ends
// as 429 with the upstream's Retry-After (docs/dataplane.md step 10), so SDKs raise their rate-limit error.
// Each SDK must surface it as its typed API error with that status, plain and streaming, through
// passthrough and transform_to cells; a non-retryable upstream 400 keeps its status.
func TestSDKUpstreamErrors(t *testing.T) {
	t.Parallel()
	s := sdkStart(t)
	for _, client := range sdkClients {
		for _, ch := range sdkChannels {
			for _, stream := range []bool{false, true} {
				for _, st := range []struct{ upstream, want int }{{429, 429}, {500, 502}, {400, 400}} {
					mode := map[bool]string{false: "plain", true: "stream"}[stream]
					t.Run(fmt.Sprintf("%s/%s/%s/upstream_%d", client, ch, mode, st.upstream), func(t *testing.T) {
						r := sdkReq{client: client, route: "sdk-" + ch, caseID: t.Name(), stream: stream,
							hdr: map[string]string{"x-mock-status": fmt.Sprint(st.upstream)}}
						got, err := s.run(sdkCtx(t), r)
						if err == nil {
							t.Fatalf("SDK accepted an upstream %d: %+v", st.upstream, got)
						}
						code, typ, ok := sdkAPIStatus(err)
						if !ok {
							t.Fatalf("SDK error %T %v is not the SDK's API error\nraw response:\n%s", err, err, s.rec.raw(r.caseID))
						}
						if code != st.want || typ != client.errorType(st.want) {
							t.Errorf("SDK saw status %d type %q, want %d %q (%v)", code, typ, st.want, client.errorType(st.want), err)
						}
						if rec := s.upstream(t, r.caseID); rec.Status != st.upstream {
							t.Errorf("the mock answered %d, want %d", rec.Status, st.upstream)
						}
					})
				}
			}
		}
	}
}

// TestSDKToolRoundTrip: each SDK gets a tool call (plain) through each channel, then sends its own
// assistant turn back with the tool result, as an application does; the gateway must translate the
// history so that the upstream sees the call and its result paired, and the SDK parses the final answer.
func TestSDKToolRoundTrip(t *testing.T) {
	t.Parallel()
	s := sdkStart(t)
	for _, client := range sdkClients {
		for _, ch := range sdkChannels {
			t.Run(fmt.Sprintf("%s/%s", client, ch), func(t *testing.T) {
				ctx := sdkCtx(t)
				first, err := s.run(ctx, sdkReq{client: client, route: "sdk-" + ch, caseID: t.Name() + "#1", tool: true})
				if err != nil {
					t.Fatalf("first turn: %v\nraw response:\n%s", err, s.rec.raw(t.Name()+"#1"))
				}
				if len(first.Calls) == 1 && first.Calls[0].ID == "" && client != sdkGenai {
					t.Errorf("first turn: tool call without id; the client cannot answer it by id (continuing with \"\")")
				}
				hist, err := sdkHistory(client, first)
				if err != nil {
					t.Fatal(err)
				}
				r := sdkReq{client: client, route: "sdk-" + ch, caseID: t.Name(), tools: true, history: hist}
				got, err := s.run(ctx, r)
				if err != nil {
					t.Fatalf("second turn: %v\nraw response:\n%s", err, s.rec.raw(r.caseID))
				}
				rec := s.upstream(t, r.caseID)
				if err := sdkUpstreamToolPair(rec.Path, rec.Body); err != nil {
					t.Errorf("upstream %s: %v\nbody: %s", rec.Path, err, rec.Body)
				}
				s.check(t, r.caseID, got, sdkWant{finish: client.finish(false), out: sdkTextTokens})
			})
		}
	}
}

// TestSDKMidStreamFailures: a live stream (passthrough or converted event by event) whose upstream sends its
// dialect's in-stream error, or is cut, after a few events must not look like a complete answer: the SDK
// (or, for a cut, the missing terminal event) reports it. The in-stream error keeps the upstream's message.
func TestSDKMidStreamFailures(t *testing.T) {
	t.Parallel()
	s := sdkStart(t)
	upstreamMsg := map[string]string{"alpha": "mock mid-stream error", "beta": "Overloaded", "gamma": "mock mid-stream error"}
	for _, client := range sdkClients {
		for _, ch := range sdkChannels {
			for _, tc := range []struct{ name, header string }{{"error_event", "x-mock-stream-error-after"}, {"cut", "x-mock-disconnect-after"}} {
				t.Run(fmt.Sprintf("%s/%s/%s", client, ch, tc.name), func(t *testing.T) {
					r := sdkReq{client: client, route: "sdk-" + ch, caseID: t.Name(), stream: true, hdr: map[string]string{tc.header: "3"}}
					got, err := s.run(sdkCtx(t), r)
					raw := s.rec.raw(r.caseID)
					if err == nil {
						t.Fatalf("the SDK saw a complete answer %+v\nraw stream:\n%q", got, raw)
					}
					if errors.Is(err, errSDKIncomplete) {
						// The gateway ended the client's stream as if it were complete: only the missing terminal
						// event betrays the cut, and the SDK itself reports nothing.
						t.Errorf("upstream %s after 3 events: %v (the client gets a clean end of stream, not an error)\nraw stream:\n%q", tc.name, err, raw)
					}
					if tc.name == "error_event" && !strings.Contains(err.Error(), upstreamMsg[ch]) {
						t.Errorf("SDK error %v does not carry the upstream's message %q\nraw stream:\n%q", err, upstreamMsg[ch], raw)
					}
					t.Logf("SDK error: %v", err)
				})
			}
		}
	}
}

// TestSDKReasoning: reasoning/thinking enabled through each SDK's own parameter on each channel, plain and
// streaming: the answer still parses, and the usage the client sees counts the 4 reasoning tokens the mock
// adds (in the output, and in the dialect's reasoning detail: completion_tokens_details.reasoning_tokens,
// output_tokens_details.reasoning_tokens / thinking_tokens, gamma thoughtsTokenCount outside
// candidatesTokenCount).
func TestSDKReasoning(t *testing.T) {
	t.Parallel()
	s := sdkStart(t)
	const reasoningTokens = 4
	for _, client := range sdkClients {
		for _, ch := range sdkChannels {
			for _, stream := range []bool{false, true} {
				mode := map[bool]string{false: "plain", true: "stream"}[stream]
				t.Run(fmt.Sprintf("%s/%s/%s", client, ch, mode), func(t *testing.T) {
					r := sdkReq{client: client, route: "sdk-" + ch, caseID: t.Name(), stream: stream, reason: true}
					got, err := s.run(sdkCtx(t), r)
					if err != nil {
						t.Fatalf("SDK: %v\nraw response:\n%s", err, s.rec.raw(r.caseID))
					}
					s.check(t, r.caseID, got, sdkWant{finish: client.finish(false), out: sdkTextTokens + reasoningTokens})
					// Beta usage has no reasoning-token member (its output_tokens includes the reasoning), so usage
					// converted to beta loses the split: a beta client sees it only from a beta upstream.
					if wantR := int64(reasoningTokens); (client != sdkMessages || ch == "beta") && got.Reasoning != wantR {
						t.Errorf("reasoning tokens = %d, want %d", got.Reasoning, wantR)
					}
					// The mock's alpha upstream shows no reasoning text (empty summary), and alpha chat clients have no
					// field the SDK shows; beta thinking and gamma thoughts must reach the other SDKs.
					if client != sdkChat && ch != "alpha" && got.Thinking == "" {
						t.Errorf("no reasoning text reached the SDK")
					}
					if t.Failed() {
						t.Logf("upstream request: %s\nraw response:\n%s", s.upstream(t, r.caseID).Body, s.rec.raw(r.caseID))
					}
				})
			}
		}
	}
}

// TestSDKSignatureRoundTrip: a reasoning signature minted by one family reaches an SDK of another family
// through the gateway (beta thinking -> genai thoughtSignature and responses encrypted_content; gamma
// thoughtSignature -> anthropic thinking signature and responses encrypted_content); the SDK replays its
// assistant turn, as applications do between tool calls, and the upstream must get its own signature back,
// untagged (docs/translation.md §5).
func TestSDKSignatureRoundTrip(t *testing.T) {
	t.Parallel()
	s := sdkStart(t)
	for _, tc := range []struct {
		client sdkClient
		ch     string
	}{{sdkMessages, "gamma"}, {sdkGenai, "beta"}, {sdkResponses, "beta"}, {sdkResponses, "gamma"}} {
		t.Run(fmt.Sprintf("%s/%s", tc.client, tc.ch), func(t *testing.T) {
			ctx := sdkCtx(t)
			first, err := s.run(ctx, sdkReq{client: tc.client, route: "sdk-" + tc.ch, caseID: t.Name() + "#1", tool: true, reason: true})
			if err != nil {
				t.Fatalf("first turn: %v\nraw response:\n%s", err, s.rec.raw(t.Name()+"#1"))
			}
			var hist any
			if tc.client == sdkResponses {
				resp, ok := first.Raw.(*responses.Response)
				if !ok || len(first.Calls) != 1 {
					t.Fatalf("first turn: %T, calls %+v", first.Raw, first.Calls)
				}
				items := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(sdkPrompt, responses.EasyInputMessageRoleUser)}
				sawSig := false
				for _, it := range resp.Output {
					switch it.Type {
					case "reasoning":
						p := it.AsReasoning().ToParam()
						sawSig = sawSig || it.EncryptedContent != ""
						items = append(items, responses.ResponseInputItemUnionParam{OfReasoning: &p})
					case "function_call":
						p := it.AsFunctionCall().ToParam()
						items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
					}
				}
				if !sawSig {
					t.Fatalf("first turn: no reasoning item with encrypted_content\nraw response:\n%s", s.rec.raw(t.Name()+"#1"))
				}
				hist = append(items, responses.ResponseInputItemParamOfFunctionCallOutput(first.Calls[0].ID, sdkToolResult))
			} else {
				if hist, err = sdkHistory(tc.client, first); err != nil {
					t.Fatal(err)
				}
			}
			r := sdkReq{client: tc.client, route: "sdk-" + tc.ch, caseID: t.Name(), tools: true, reason: true, history: hist}
			got, err := s.run(ctx, r)
			if err != nil {
				t.Fatalf("second turn: %v\nraw response:\n%s", err, s.rec.raw(r.caseID))
			}
			rec := s.upstream(t, r.caseID)
			sig, err := sdkUpstreamSignature(rec.Path, rec.Body)
			raw, _ := base64.StdEncoding.DecodeString(sig)
			if err != nil || !sdkMockSignature.Match(raw) {
				t.Errorf("upstream %s replays signature %q (%v), want the upstream's own base64 sig_<hex>\nbody: %s\nfirst answer:\n%s",
					rec.Path, sig, err, rec.Body, s.rec.raw(t.Name()+"#1"))
			}
			if err := sdkUpstreamToolPair(rec.Path, rec.Body); err != nil {
				t.Errorf("upstream %s: %v\nbody: %s", rec.Path, err, rec.Body)
			}
			s.check(t, r.caseID, got, sdkWant{finish: tc.client.finish(false), out: sdkTextTokens + 4})
		})
	}
}
