package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/shell"
)

// curlRequest reads line as a shell would (mvdan.cc/sh) and builds the request curl would send for the
// flags the examples use (-sS, -H, -d; -d makes it a POST). Any other flag fails the test: the test must
// understand the whole line it runs. env expands variables such as $TOLLGATE_API_KEY (nil: none).
func curlRequest(t *testing.T, ctx context.Context, line string, env func(string) string) *http.Request {
	t.Helper()
	args, err := shell.Fields(line, env)
	if err != nil {
		t.Fatalf("%s: not a shell command: %v", line, err)
	}
	if len(args) == 0 || args[0] != "curl" {
		t.Fatalf("%s: not a curl command", line)
	}
	var url, body string
	header := http.Header{}
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-sS":
		case a == "-H" || a == "-d":
			if i+1 == len(args) {
				t.Fatalf("%s: %s without a value", line, a)
			}
			i++
			if a == "-d" {
				body = args[i]
				continue
			}
			name, value, ok := strings.Cut(args[i], ":")
			if !ok {
				t.Fatalf("%s: header %q has no colon", line, args[i])
			}
			header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		case strings.HasPrefix(a, "-"):
			t.Fatalf("%s: flag %s is not one this test understands", line, a)
		default:
			if url != "" {
				t.Fatalf("%s: two URLs (%s, %s)", line, url, a)
			}
			url = a
		}
	}
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	req.Header = header
	return req
}

// runCurlLine performs line and fails t unless it answers 200 in the shape of its path's dialect.
func runCurlLine(t *testing.T, ctx context.Context, line string, env func(string) string) {
	t.Helper()
	req := curlRequest(t, ctx, line, env)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s\n= %d %s", line, resp.StatusCode, raw)
	}
	if err := dialectShape(req.URL.Path, raw); err != nil {
		t.Fatalf("%s\nanswered %s\n%v", line, raw, err)
	}
}

// dialectShape checks that raw is a complete, non-streaming answer in the dialect path belongs to: an
// assistant text and token usage where that dialect puts them.
func dialectShape(path string, raw []byte) error {
	decode := func(v any) error {
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		return nil
	}
	switch {
	case path == "/v1/chat/completions":
		var out struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := decode(&out); err != nil {
			return err
		}
		if out.Object != "chat.completion" || len(out.Choices) == 0 || out.Choices[0].Message.Role != "assistant" ||
			out.Choices[0].Message.Content == "" || out.Choices[0].FinishReason == "" || out.Usage.TotalTokens == 0 {
			return fmt.Errorf("not an alpha chat completion")
		}
	case path == "/v1/responses":
		var out struct {
			Object string `json:"object"`
			Status string `json:"status"`
			Output []struct {
				Type    string `json:"type"`
				Role    string `json:"role"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
			Usage struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := decode(&out); err != nil {
			return err
		}
		if out.Object != "response" || out.Status != "completed" || len(out.Output) == 0 || out.Output[0].Type != "message" ||
			len(out.Output[0].Content) == 0 || out.Output[0].Content[0].Type != "output_text" || out.Output[0].Content[0].Text == "" ||
			out.Usage.InputTokens == 0 || out.Usage.OutputTokens == 0 {
			return fmt.Errorf("not an alpha response")
		}
	case path == "/v1/messages":
		var out struct {
			Type       string `json:"type"`
			Role       string `json:"role"`
			StopReason string `json:"stop_reason"`
			Content    []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			Usage struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := decode(&out); err != nil {
			return err
		}
		if out.Type != "message" || out.Role != "assistant" || out.StopReason == "" || len(out.Content) == 0 ||
			out.Content[0].Type != "text" || out.Content[0].Text == "" || out.Usage.InputTokens == 0 || out.Usage.OutputTokens == 0 {
			return fmt.Errorf("not a beta message")
		}
	case strings.HasPrefix(path, "/v1beta/models/") && strings.HasSuffix(path, ":generateContent"):
		var out struct {
			Candidates []struct {
				Content struct {
					Role  string `json:"role"`
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
			UsageMetadata struct {
				PromptTokenCount     int `json:"promptTokenCount"`
				CandidatesTokenCount int `json:"candidatesTokenCount"`
			} `json:"usageMetadata"`
		}
		if err := decode(&out); err != nil {
			return err
		}
		if len(out.Candidates) == 0 || out.Candidates[0].Content.Role != "model" || len(out.Candidates[0].Content.Parts) == 0 ||
			out.Candidates[0].Content.Parts[0].Text == "" || out.Candidates[0].FinishReason == "" ||
			out.UsageMetadata.PromptTokenCount == 0 || out.UsageMetadata.CandidatesTokenCount == 0 {
			return fmt.Errorf("not a gamma generateContent answer")
		}
	default:
		return fmt.Errorf("no dialect shape known for %s", path)
	}
	return nil
}

// TestDialectShapeRejectsAnotherDialect: the shape check is not satisfied by any JSON: each dialect's
// answer fails every other dialect's check.
func TestDialectShapeRejectsAnotherDialect(t *testing.T) {
	answers := map[string]string{
		"/v1/chat/completions":             `{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`,
		"/v1/responses":                    `{"object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":2,"output_tokens":1}}`,
		"/v1/messages":                     `{"type":"message","role":"assistant","stop_reason":"end_turn","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":2,"output_tokens":1}}`,
		"/v1beta/models/m:generateContent": `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}}`,
	}
	for path, answer := range answers {
		for other, otherAnswer := range answers {
			err := dialectShape(path, []byte(otherAnswer))
			if (path == other) != (err == nil) {
				t.Errorf("dialectShape(%s, answer of %s) = %v", path, other, err)
			}
		}
		if err := dialectShape(path, []byte(answer)); err != nil {
			t.Errorf("dialectShape(%s) = %v", path, err)
		}
	}
}

// TestExamplesCoverEveryDialectWithItsSDK: one example per dialect kind the issue names, each naming the
// SDKs of its dialect and carrying the key in that dialect's header.
func TestExamplesCoverEveryDialectWithItsSDK(t *testing.T) {
	want := []struct{ path, sdk, keyHeader string }{
		{"/v1/chat/completions", "OpenAI", "Authorization: Bearer " + KeyPlaceholder},
		{"/v1/responses", "OpenAI", "Authorization: Bearer " + KeyPlaceholder},
		{"/v1/messages", "Anthropic", "x-api-key: " + KeyPlaceholder},
		{"/v1beta/models/" + DemoModel + ":generateContent", "Google Gen AI", "x-goog-api-key: " + KeyPlaceholder},
	}
	got := Examples(DemoModel)
	if len(got) != len(want) {
		t.Fatalf("%d examples, want %d", len(got), len(want))
	}
	for i, w := range want {
		e := got[i]
		if e.Path != w.path || !strings.HasPrefix(e.SDK, w.sdk) || !strings.Contains(strings.Join(e.Headers, "\n"), w.keyHeader) {
			t.Errorf("example %d = %+v, want path %s, SDK %s…, header %s", i, e, w.path, w.sdk, w.keyHeader)
		}
	}
}

// TestReadmeShowsEveryExample: the README prints the banner's requests for the default data-plane
// address with the key as $TOLLGATE_API_KEY, each under the same comment line naming its SDKs, and a
// shell expands each to the request the banner's line sends.
func TestReadmeShowsEveryExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const base, key = "http://127.0.0.1:8080", "tg-demo"
	env := func(name string) string {
		if name == "TOLLGATE_API_KEY" {
			return key
		}
		return ""
	}
	for _, e := range Examples(DemoModel) {
		line := e.CurlLine(base, "$TOLLGATE_API_KEY")
		if !strings.Contains(string(readme), e.Comment(base)+"\n"+line+"\n") {
			t.Errorf("README lacks, as two lines:\n%s\n%s", e.Comment(base), line)
			continue
		}
		got, want := curlRequest(t, context.Background(), line, env), curlRequest(t, context.Background(), e.CurlLine(base, key), nil)
		if got.URL.String() != want.URL.String() || fmt.Sprint(got.Header) != fmt.Sprint(want.Header) {
			t.Errorf("README line %s expands to %s %v, the banner's to %s %v", line, got.URL, got.Header, want.URL, want.Header)
		}
	}
}
