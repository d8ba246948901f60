package mockupstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/proxy"
	"github.com/tollgate/tollgate/dataplane/tokencount"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// gatewayRecords is what the gateway records for a stream it received as body (whole SSE events, as the
// mock flushes them): the latest usage the events reported (the data plane's relay billing or stream accumulator), else the
// local count of the request and, for alpha chat and beta, of the relayed delta text (proxy.CountLocally),
// and for a beta stream cut before message_delta its reported input side with the output counted — the
// data plane's rule, through its own functions (docs/dataplane.md, "Local token counting").
func gatewayRecords(t *testing.T, kind vocab.Kind, model, reqBody string, hdr http.Header, body []byte) usage.Usage {
	t.Helper()
	// streams are billed from their relay reader's members (dataplane/proxy respond.go).
	var betaBill beta.Billing
	var gammaBill gamma.Billing
	gammaBill.ObserveHeader(hdr)
	var chatBill alpha.Billing
	if kind == vocab.KindAlphaResponses {
		chatBill = alpha.ResponsesBilling()
	}
	var text strings.Builder
	for _, ev := range parseSSE(t, body) {
		var rel jsonkit.Relay
		switch kind {
		case vocab.KindBetaMessages:
			beta.ReadRelay([]byte(ev.data), &rel)
			if rel.HasUsage {
				betaBill.ObserveRelay(&rel)
			}
			text.Write(beta.AppendOutputText(nil, &rel))
			continue
		case vocab.KindAlphaChatCompletions:
			alpha.ReadChatRelay([]byte(ev.data), &rel)
			if rel.HasUsage {
				chatBill.ObserveRelay(&rel)
			}
		case vocab.KindAlphaResponses:
			alpha.ReadResponsesRelay([]byte(ev.data), &rel)
			if rel.HasUsage {
				chatBill.ObserveRelay(&rel)
			}
		default:
			gamma.ReadRelay([]byte(ev.data), &rel)
			if rel.HasUsage {
				gammaBill.ObserveRelay(&rel)
			}
		}
		if kind != vocab.KindAlphaChatCompletions || ev.data == "[DONE]" {
			continue
		}
		var d struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
			t.Fatalf("chunk %s: %v", ev.data, err)
		}
		for _, c := range d.Choices {
			text.WriteString(c.Delta.Content)
			for _, tc := range c.Delta.ToolCalls {
				text.WriteString(tc.Function.Arguments)
			}
		}
	}
	var reported usage.Usage
	var found bool
	outputReported := true
	switch kind {
	case vocab.KindBetaMessages:
		reported, found = betaBill.Usage()
		outputReported = betaBill.OutputReported()
	case vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses:
		reported, found = chatBill.Usage()
	default:
		reported, found = gammaBill.Usage()
	}
	if found && outputReported {
		return reported
	}
	// The gateway keeps the first tokencount.MaxExactBytes of the text (cut at a character) and its length.
	kept := text.String()
	if len(kept) > tokencount.MaxExactBytes {
		n := tokencount.MaxExactBytes
		for n > 0 && !utf8.RuneStart(kept[n]) {
			n--
		}
		kept = kept[:n]
	}
	u, counted := proxy.CountLocally(kind, vocab.OpStreamGenerateContent, model, []byte(reqBody), kept, int64(text.Len()))
	if !counted {
		t.Fatal("the gateway's local counter counted nothing")
	}
	if found {
		// A beta stream cut before message_delta: the input side as reported, the output counted.
		reported.Output = u.Output
		return reported
	}
	return u
}

// clientCut reads events whole events of a stream and goes away; the mock holds the stream there
// (x-mock-stall-after), so nothing it wrote is left unread.
func (b *testBundle) clientCut(t *testing.T, path, body string, events int, headers ...string) (http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	req.Header.Set("x-mock-stall-after", strconv.Itoa(events))
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	br := bufio.NewReader(resp.Body)
	for n := 0; n < events; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", n, err)
		}
		got = append(got, line...)
		if line == "\n" {
			n++
		}
	}
	cancel()
	_ = resp.Body.Close()
	return resp.Header, got
}

// billOf waits for the exchange of key to end and returns its bill (false: none).
func (b *testBundle) billOf(t *testing.T, key string) (Bill, bool) {
	t.Helper()
	if _, err := b.mock.Wait(testCtx(t), func(r Request) bool { return r.APIKey == key && r.Done }); err != nil {
		t.Fatalf("exchange of %s never ended: %v", key, err)
	}
	for _, bl := range b.mock.Bills() {
		if bl.APIKey == key {
			return bl, true
		}
	}
	return Bill{}, false
}

func TestCutStreamsAreBilledAsTheGatewayRecordsThem(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	chat := `{"model":"m-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	chatTool := `{"model":"m-1","stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}],"messages":[{"role":"user","content":"weather?"}]}`
	resp := `{"model":"m-1","stream":true,"input":"hello there, how are you today?","instructions":"be brief"}`
	beta := `{"model":"b-1","max_tokens":100,"stream":true,"system":"be brief","messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	gamma := `{"contents":[{"role":"user","parts":[{"text":"hello there, how are you today?"}]}]}`
	cases := []struct {
		name, path, body string
		kind             vocab.Kind
		model            string
		client           bool // the client leaves after cut events; else the mock cuts after them
		cut              int
		hdr              []string
		fromUsage        bool // the bill is usage the stream reported, not a local count
	}{
		{"alpha chat cut by the upstream", "/v1/chat/completions", chat, vocab.KindAlphaChatCompletions, "m-1", false, 4, nil, false},
		{"alpha chat left by the client", "/v1/chat/completions", chat, vocab.KindAlphaChatCompletions, "m-1", true, 5, nil, false},
		// 400 words of 1 KiB: the text written before the cut is longer than the gateway counts exactly.
		{"alpha chat long text cut", "/v1/chat/completions", chat, vocab.KindAlphaChatCompletions, "m-1", false, 300,
			[]string{"x-mock-chunks", "400", "x-mock-word-bytes", "1000"}, false},
		{"alpha chat tool call cut", "/v1/chat/completions", chatTool, vocab.KindAlphaChatCompletions, "m-1", false, 3, []string{"x-mock-tool-call", "1"}, false},
		{"alpha chat cut after its usage chunk", "/v1/chat/completions", chat, vocab.KindAlphaChatCompletions, "m-1", false, 11, []string{"x-mock-usage", "cached"}, true},
		{"alpha responses cut", "/v1/responses", resp, vocab.KindAlphaResponses, "m-1", false, 6, nil, false},
		{"alpha responses left by the client", "/v1/responses", resp, vocab.KindAlphaResponses, "m-1", true, 6, nil, false},
		{"beta cut after message_start", "/v1/messages", beta, vocab.KindBetaMessages, "b-1", false, 4, []string{"x-mock-usage", "cached"}, true},
		{"beta left by the client", "/v1/messages", beta, vocab.KindBetaMessages, "b-1", true, 5, nil, true},
		{"beta without usage cut", "/v1/messages", beta, vocab.KindBetaMessages, "b-1", false, 4, []string{"x-mock-usage", "none"}, false},
		{"gamma cut", "/v1beta/models/g-1-flash:streamGenerateContent?alt=sse", gamma, vocab.KindGammaGenerateContent, "g-1-flash", false, 3, []string{"x-mock-usage", "cached"}, true},
		{"gamma left by the client", "/v1beta/models/g-1-flash:streamGenerateContent?alt=sse", gamma, vocab.KindGammaGenerateContent, "g-1-flash", true, 2, nil, true},
		// An in-stream error after output: the generation was interrupted, billed like a cut.
		{"alpha chat error after text", "/v1/chat/completions", chat, vocab.KindAlphaChatCompletions, "m-1", false, 4, []string{"x-mock-stream-error-after", "3"}, false},
		{"beta error after text", "/v1/messages", beta, vocab.KindBetaMessages, "b-1", false, 6, []string{"x-mock-stream-error-after", "5"}, true},
		{"gamma error after text", "/v1beta/models/g-1-flash:streamGenerateContent?alt=sse", gamma, vocab.KindGammaGenerateContent, "g-1-flash", false, 3, []string{"x-mock-stream-error-after", "2"}, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "sk-cut-" + strconv.Itoa(i)
			hdr := append([]string{"Authorization", "Bearer " + key, "x-api-key", key, "x-goog-api-key", key,
				"anthropic-version", betaVersion}, tc.hdr...)
			var h http.Header
			var body []byte
			if tc.client {
				h, body = b.clientCut(t, tc.path, tc.body, tc.cut, hdr...)
			} else if slices.Contains(tc.hdr, "x-mock-stream-error-after") {
				r := b.call(t, http.MethodPost, tc.path, tc.body, hdr...)
				if r.status != http.StatusOK || r.err != nil {
					t.Fatalf("status %d, read error %v: want 200 ended by its error event", r.status, r.err)
				}
				h, body = r.header, r.body
			} else {
				r := b.call(t, http.MethodPost, tc.path, tc.body, append(hdr, "x-mock-disconnect-after", strconv.Itoa(tc.cut))...)
				if r.status != http.StatusOK || !errors.Is(r.err, io.ErrUnexpectedEOF) {
					t.Fatalf("status %d, read error %v: want 200 cut short", r.status, r.err)
				}
				h, body = r.header, r.body
			}
			if n := len(parseSSE(t, body)); n != tc.cut {
				t.Fatalf("received %d events, want %d", n, tc.cut)
			}
			bill, ok := b.billOf(t, key)
			if !ok {
				t.Fatal("the cut stream was not billed")
			}
			u := gatewayRecords(t, tc.kind, tc.model, tc.body, h, body)
			want := Bill{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, Cache5m: u.CacheCreation5m,
				Cache30m: u.CacheCreation30m, Cache1h: u.CacheCreation1h, ImageOut: u.ImageOutput}
			got := bill
			got.Seq, got.At, got.Endpoint, got.APIKey, got.Model, got.Tier, got.Requests = 0, time.Time{}, "", "", "", "", 0
			if got != want || bill.Requests != 1 || bill.Model != tc.model {
				t.Fatalf("bill %+v, want the gateway's record %+v (model %s, 1 request)", bill, want, tc.model)
			}
			if u.ReportedTier != "" && bill.Tier != u.ReportedTier {
				t.Errorf("bill tier %q, the gateway records %q", bill.Tier, u.ReportedTier)
			}
			if u.Input == 0 {
				t.Error("nothing counted: the case proves nothing")
			}
			// A local count of alpha chat counts the delivered text too; a reported usage is the stream's.
			if tc.kind == vocab.KindAlphaChatCompletions && !tc.fromUsage && tc.cut > 1 && u.Output == 0 {
				t.Error("alpha chat output text not counted")
			}
		})
	}
}

func TestStreamsNotBilledWhenNothingWasGenerated(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	chat := `{"model":"m-1","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	// Cut after the headers, before any event; ended by an in-stream error before any text (alpha chat's
	// role chunk, alpha responses before its usage): the gateway settles a failed request.
	b.call(t, http.MethodPost, "/v1/chat/completions", chat, "Authorization", "Bearer sk-none-1",
		"x-mock-disconnect-after", "0", "x-mock-disconnect-headers", "1")
	b.call(t, http.MethodPost, "/v1/chat/completions", chat, "Authorization", "Bearer sk-none-2",
		"x-mock-stream-error-after", "1")
	b.call(t, http.MethodPost, "/v1/responses", `{"model":"m-1","stream":true,"input":"hello"}`, "Authorization", "Bearer sk-none-3",
		"x-mock-stream-error-after", "6")
	for _, key := range []string{"sk-none-1", "sk-none-2", "sk-none-3"} {
		if bill, ok := b.billOf(t, key); ok {
			t.Errorf("%s billed %+v, want nothing", key, bill)
		}
	}
}
