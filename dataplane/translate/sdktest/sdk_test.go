package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	openai "github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
	"google.golang.org/genai"

	"github.com/tollgate/tollgate/dataplane/translate"
	"github.com/tollgate/tollgate/shared/vocab"
)

// The official SDKs (openai-go, anthropic-sdk-go, genai) parse every translated response and stream,
// tool calls included, and every keepalive form of a synthesised stream.

type sdkCall struct {
	Name string
	Args map[string]any
}

func (c sdkCall) String() string { return fmt.Sprintf("%s(%v)", c.Name, c.Args) }

func parseArgs(t *testing.T, s []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(s, &m); err != nil {
		t.Fatalf("tool arguments %q are not a JSON object: %v", s, err)
	}
	return m
}

// serve starts a server answering every request with body (as a stream when sse is set).
func serve(t *testing.T, body []byte, sse bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func serveError(t *testing.T, cr translate.ClientResponse) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range cr.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(cr.Status)
		_, _ = w.Write(cr.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// sdkParse runs client kind's SDK against srv and returns the tool calls it saw.
func sdkParse(t *testing.T, client vocab.Kind, srv *httptest.Server, stream bool) ([]sdkCall, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var calls []sdkCall
	switch client {
	case vocab.KindAlphaChatCompletions:
		c := openai.NewClient(ooption.WithBaseURL(srv.URL+"/v1/"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
		params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
		if !stream {
			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				return nil, err
			}
			for _, tc := range resp.Choices[0].Message.ToolCalls {
				calls = append(calls, sdkCall{tc.Function.Name, parseArgs(t, []byte(tc.Function.Arguments))})
			}
			return calls, nil
		}
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			return nil, err
		}
		if len(acc.Choices) == 0 {
			return nil, fmt.Errorf("no choices accumulated")
		}
		for _, tc := range acc.Choices[0].Message.ToolCalls {
			calls = append(calls, sdkCall{tc.Function.Name, parseArgs(t, []byte(tc.Function.Arguments))})
		}
		return calls, nil
	case vocab.KindAlphaResponses:
		c := openai.NewClient(ooption.WithBaseURL(srv.URL+"/v1/"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
		params := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
		if !stream {
			resp, err := c.Responses.New(ctx, params)
			if err != nil {
				return nil, err
			}
			for _, it := range resp.Output {
				if it.Type == "function_call" {
					calls = append(calls, sdkCall{it.Name, parseArgs(t, []byte(it.Arguments))})
				}
			}
			return calls, nil
		}
		s := c.Responses.NewStreaming(ctx, params)
		deltas := map[string]string{}
		completed := false
		for s.Next() {
			ev := s.Current()
			switch ev.Type {
			case "response.function_call_arguments.delta":
				deltas[ev.ItemID] += ev.Delta.OfString
			case "error":
				return nil, fmt.Errorf("error event: %s", ev.Message)
			case "response.failed":
				return nil, fmt.Errorf("response failed")
			case "response.completed":
				completed = true
				for _, it := range ev.Response.Output {
					if it.Type == "function_call" {
						if deltas[it.ID] != it.Arguments {
							t.Errorf("streamed arguments %q != final %q", deltas[it.ID], it.Arguments)
						}
						calls = append(calls, sdkCall{it.Name, parseArgs(t, []byte(it.Arguments))})
					}
				}
			}
		}
		if err := s.Err(); err != nil {
			return nil, err
		}
		if !completed {
			return nil, fmt.Errorf("no response.completed")
		}
		return calls, nil
	case vocab.KindBetaMessages:
		c := anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
		params := anthropic.MessageNewParams{Model: "b", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
		var msg anthropic.Message
		if !stream {
			resp, err := c.Messages.New(ctx, params)
			if err != nil {
				return nil, err
			}
			msg = *resp
		} else {
			s := c.Messages.NewStreaming(ctx, params)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					return nil, err
				}
			}
			if err := s.Err(); err != nil {
				return nil, err
			}
		}
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				calls = append(calls, sdkCall{b.Name, parseArgs(t, b.Input)})
			}
		}
		if stream && msg.StopReason == "" {
			return nil, fmt.Errorf("no stop_reason accumulated")
		}
		return calls, nil
	case vocab.KindGammaGenerateContent:
		c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
		if err != nil {
			return nil, err
		}
		if !stream {
			resp, err := c.Models.GenerateContent(ctx, "g", genai.Text("hi"), nil)
			if err != nil {
				return nil, err
			}
			for _, fc := range resp.FunctionCalls() {
				calls = append(calls, sdkCall{fc.Name, fc.Args})
			}
			return calls, nil
		}
		sawFinish := false
		for resp, err := range c.Models.GenerateContentStream(ctx, "g", genai.Text("hi"), nil) {
			if err != nil {
				return nil, err
			}
			for _, fc := range resp.FunctionCalls() {
				calls = append(calls, sdkCall{fc.Name, fc.Args})
			}
			if len(resp.Candidates) > 0 && resp.Candidates[0].FinishReason != "" {
				sawFinish = true
			}
		}
		if !sawFinish {
			return nil, fmt.Errorf("no finishReason")
		}
		return calls, nil
	}
	return nil, fmt.Errorf("unknown kind %s", client)
}

func checkCalls(t *testing.T, got []sdkCall, cities ...string) {
	t.Helper()
	if len(got) != len(cities) {
		t.Fatalf("tool calls = %v, want %d calls for %v", got, len(cities), cities)
	}
	for i, c := range got {
		if c.Name != "get_weather" || c.Args["city"] != cities[i] {
			t.Errorf("tool call %d = %v, want get_weather(city=%s)", i, c, cities[i])
		}
	}
}

func readFixture(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", "testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSDKResponses(t *testing.T) {
	for _, up := range allKinds {
		for _, client := range allKinds {
			if client == up {
				continue
			}
			t.Run(fmt.Sprintf("%s_from_%s", client, up), func(t *testing.T) {
				tr := newT(t, translate.Pair{Op: vocab.OpGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: up})
				if _, err := tr.Request(translate.ClientRequest{Body: clientRequestFor(client, false), Model: "x"}); err != nil {
					t.Fatal(err)
				}
				out, err := tr.Response(readFixture(t, "responses", string(up)+".tools.json"))
				if err != nil {
					t.Fatal(err)
				}
				calls, err := sdkParse(t, client, serve(t, out, false), false)
				if err != nil {
					t.Fatalf("SDK rejected translated response: %v\n%s", err, out)
				}
				checkCalls(t, calls, "Oslo", "Bergen")
			})
		}
	}
}

func TestSDKStreams(t *testing.T) {
	streamCities := map[vocab.Kind][]string{
		vocab.KindAlphaChatCompletions: {"Oslo", "Bergen"},
		vocab.KindAlphaResponses:       {"Oslo"},
		vocab.KindBetaMessages:         {"Oslo", "Bergen"},
		vocab.KindGammaGenerateContent: {"Oslo", "Bergen"},
	}
	for _, up := range allKinds {
		for _, client := range allKinds {
			if client == up {
				continue
			}
			t.Run(fmt.Sprintf("%s_from_%s", client, up), func(t *testing.T) {
				tr := newT(t, translate.Pair{Op: vocab.OpStreamGenerateContent, Kind: client, DestOp: vocab.OpStreamGenerateContent, DestKind: up})
				if _, err := tr.Request(translate.ClientRequest{Body: clientRequestFor(client, true), Model: "x", Stream: true, GammaSSE: true}); err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				if err := tr.NewStream(&out).Pump(bytes.NewReader(readFixture(t, "streams", string(up)+".tools.sse")), false, nil); err != nil {
					t.Fatal(err)
				}
				calls, err := sdkParse(t, client, serve(t, out.Bytes(), true), true)
				if err != nil {
					t.Fatalf("SDK rejected translated stream: %v\n%s", err, out.Bytes())
				}
				checkCalls(t, calls, streamCities[up]...)
			})
			t.Run(fmt.Sprintf("%s_from_%s_midstream_error", client, up), func(t *testing.T) {
				tr := newT(t, translate.Pair{Op: vocab.OpStreamGenerateContent, Kind: client, DestOp: vocab.OpStreamGenerateContent, DestKind: up})
				if _, err := tr.Request(translate.ClientRequest{Body: clientRequestFor(client, true), Model: "x", Stream: true, GammaSSE: true}); err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				s := tr.NewStream(&out)
				if err := s.Pump(bytes.NewReader(readFixture(t, "streams", string(up)+".error.sse")), false, nil); err != nil {
					t.Fatal(err)
				}
				if s.UpstreamError() == nil {
					t.Error("UpstreamError() = nil after an in-stream error")
				}
				if _, err := sdkParse(t, client, serve(t, out.Bytes(), true), true); err == nil {
					t.Fatalf("SDK accepted a stream carrying an error:\n%s", out.Bytes())
				}
			})
		}
	}
}

// TestSDKSynthesizedWithKeepalives: every keepalive form, then the synthesised stream, parsed by the SDKs.
func TestSDKSynthesizedWithKeepalives(t *testing.T) {
	for _, up := range allKinds {
		for _, client := range allKinds {
			t.Run(fmt.Sprintf("%s_from_%s", client, up), func(t *testing.T) {
				tr := newT(t, translate.Pair{Op: vocab.OpStreamGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: up})
				if _, err := tr.Request(translate.ClientRequest{Body: clientRequestFor(client, true), Model: "x", Stream: true, GammaSSE: true}); err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				for range 3 {
					if err := tr.Keepalive(&out); err != nil {
						t.Fatal(err)
					}
				}
				if err := tr.Synthesize(&out, 200, nil, readFixture(t, "responses", string(up)+".tools.json")); err != nil {
					t.Fatal(err)
				}
				calls, err := sdkParse(t, client, serve(t, out.Bytes(), true), true)
				if err != nil {
					t.Fatalf("SDK rejected synthesised stream with keepalives: %v\n%q", err, out.Bytes())
				}
				checkCalls(t, calls, "Oslo", "Bergen")
			})
		}
	}
}

// TestSDKErrors: translated upstream errors are recognised as API errors with the right status.
func TestSDKErrors(t *testing.T) {
	for _, name := range []string{"alpha.429", "beta.529", "gamma.429", "beta.400"} {
		raw := readFixture(t, "errors", name+".json")
		var status int
		fmt.Sscanf(name[len(name)-3:], "%d", &status)
		for _, client := range allKinds {
			t.Run(name+"_to_"+string(client), func(t *testing.T) {
				dest := vocab.KindBetaMessages
				if client == dest {
					dest = vocab.KindGammaGenerateContent
				}
				tr := newT(t, translate.Pair{Op: vocab.OpGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: dest})
				cr := tr.Error(status, nil, raw)
				_, err := sdkParse(t, client, serveError(t, cr), false)
				if err == nil {
					t.Fatal("SDK accepted an error response")
				}
				var code int
				switch e := err.(type) {
				case *openai.Error:
					code = e.StatusCode
				case *anthropic.Error:
					code = e.StatusCode
				case genai.APIError:
					code = e.Code
				default:
					t.Fatalf("SDK error %T %v is not the SDK's API error", err, err)
				}
				if code != cr.Status {
					t.Errorf("SDK saw status %d, want %d", code, cr.Status)
				}
			})
		}
	}
}

var allKinds = []vocab.Kind{vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses, vocab.KindBetaMessages, vocab.KindGammaGenerateContent}

func newT(t testing.TB, p translate.Pair) *translate.Translator {
	t.Helper()
	tr, err := translate.New(p, translate.Options{NewID: func() string { return "T3st" }, Now: func() time.Time { return time.Unix(1760000000, 0) }})
	if err != nil {
		t.Fatalf("New(%v) = %v", p, err)
	}
	return tr
}

func clientRequestFor(k vocab.Kind, stream bool) []byte {
	switch k {
	case vocab.KindAlphaChatCompletions:
		if stream {
			return []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
		}
		return []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	case vocab.KindAlphaResponses:
		return []byte(fmt.Sprintf(`{"model":"m","input":"hi","stream":%v}`, stream))
	case vocab.KindBetaMessages:
		return []byte(fmt.Sprintf(`{"model":"b","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stream":%v}`, stream))
	}
	return []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
}

// TestSDKKeepaliveAlternatives records why each dialect's keepalive form was chosen: it runs the SDKs against
// the forms that were rejected and logs the outcome (the chosen forms are asserted by
// TestSDKSynthesizedWithKeepalives). Versions: openai-go v1.12.0, genai v1.77.0.
func TestSDKKeepaliveAlternatives(t *testing.T) {
	cases := []struct {
		client vocab.Kind
		form   string
	}{
		{vocab.KindAlphaChatCompletions, ": keepalive\n\n"}, // comment + blank line: openai-go v1 dispatches an empty event
		{vocab.KindAlphaChatCompletions, "\n\n"},            // blank lines alone: same
		{vocab.KindGammaGenerateContent, ": keepalive\n\n"}, // genai: a non-data line is a stream error
		{vocab.KindGammaGenerateContent, "\n"},              // genai: one blank line is glued to the next event
	}
	for _, tc := range cases {
		tr := newT(t, translate.Pair{Op: vocab.OpStreamGenerateContent, Kind: tc.client, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindBetaMessages})
		if _, err := tr.Request(translate.ClientRequest{Body: clientRequestFor(tc.client, true), Model: "x", Stream: true, GammaSSE: true}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		out.WriteString(tc.form)
		if err := tr.Synthesize(&out, 200, nil, readFixture(t, "responses", "beta_messages.tools.json")); err != nil {
			t.Fatal(err)
		}
		_, err := sdkParse(t, tc.client, serve(t, out.Bytes(), true), true)
		t.Logf("%s SDK with keepalive %q: err=%v", tc.client, tc.form, err)
	}
}
