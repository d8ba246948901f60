package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/dataplane/tokencount"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// A translated attempt whose upstream reported no usage is counted locally from what the provider bills:
// the upstream request (the translated body) in the upstream dialect, never the client's body in the
// client's dialect (docs/reconciliation.md, "Local counting"). A beta messages client through an alpha chat
// upstream: a stream cut before its usage chunk, and a buffered answer without usage.
func TestTranslatedAttemptCountedInUpstreamDialect(t *testing.T) {
	const client = `{"model":"chat","max_tokens":50,"system":"be brief","messages":[{"role":"user","content":"hello there"},` +
		`{"role":"assistant","content":"hi"},{"role":"user","content":"tell me a story"}]}`
	for _, tc := range []struct {
		name   string
		stream bool
		op     vocab.Operation
	}{
		{"stream", true, vocab.OpStreamGenerateContent},
		{"buffered", false, vocab.OpGenerateContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []byte // the body the upstream received
			b := setup(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				sent = body
				mu.Unlock()
				if !tc.stream {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m-1","choices":[{"index":0,`+
						`"message":{"role":"assistant","content":"Once upon a time"},"finish_reason":"stop"}]}`)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				for _, ev := range []string{`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m-1","choices":[{"index":0,"delta":{"role":"assistant","content":"Once"}}]}`,
					`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m-1","choices":[{"index":0,"delta":{"content":" upon a time"}}]}`} {
					_, _ = io.WriteString(w, "data: "+ev+"\n\n")
				}
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // cut before the usage chunk and [DONE]
			}, func(s *snapshotv1.Snapshot) {
				dest, op := "alpha_chat_completions", string(tc.op)
				s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: 3, ProviderId: 1, Operation: op, Kind: "beta_messages",
					Implementation: "transform_to", DestOperation: &op, DestKind: &dest, Enabled: true})
			})
			b.h.o.Transformer = &Translator{}
			type counted struct {
				kind vocab.Kind
				op   vocab.Operation
				body string
			}
			var got []counted
			b.h.o.LocalUsage = func(kind vocab.Kind, op vocab.Operation, model string, req []byte, out string, n int64) (usage.Usage, bool) {
				got = append(got, counted{kind, op, string(req)})
				return CountLocally(kind, op, model, req, out, n)
			}
			front := httptest.NewServer(b.h)
			t.Cleanup(front.Close)
			body := client
			if tc.stream {
				body = client[:len(client)-1] + `,"stream":true}`
			}
			resp := postTo(t, front, "/v1/messages", body, map[string]string{"anthropic-version": "2023-06-01"})
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("client got %d, want 200", resp.StatusCode)
			}
			r := oneRecord(t, b)
			mu.Lock()
			upstreamBody := string(sent)
			mu.Unlock()
			if len(got) != 1 || got[0].kind != vocab.KindAlphaChatCompletions || got[0].op != tc.op || got[0].body != upstreamBody {
				t.Fatalf("counted %+v, want one count of the upstream body %s as %s %s", got, upstreamBody, vocab.KindAlphaChatCompletions, tc.op)
			}
			if !tokencount.Supported() {
				if r.GetSource() != "estimated" {
					t.Fatalf("record source %s, want the estimate (no tokenizer)", r.GetSource())
				}
				return
			}
			want, err := tokencount.CountPrompt(vocab.KindAlphaChatCompletions, "m-1", []byte(upstreamBody))
			if err != nil {
				t.Fatal(err)
			}
			clientCount, _ := tokencount.CountPrompt(vocab.KindBetaMessages, "m-1", []byte(body))
			if want == clientCount {
				t.Fatalf("the client's and upstream's counts agree (%d): the test cannot tell them apart", want)
			}
			if r.GetSource() != "local" || r.GetTokens().GetInput() != want {
				t.Fatalf("record source %s input %d, want local %d (the upstream body; the client's counts %d)",
					r.GetSource(), r.GetTokens().GetInput(), want, clientCount)
			}
		})
	}
}
