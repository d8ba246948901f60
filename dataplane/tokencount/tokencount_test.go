//go:build !notokenizer

package tokencount_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/dataplane/tokencount"
	"github.com/tollgate/tollgate/shared/vocab"
)

func TestCountText(t *testing.T) {
	t.Parallel()
	if !tokencount.Supported() {
		t.Fatal("Supported() = false in the default build")
	}
	tests := []struct {
		kind  vocab.Kind
		model string
		text  string
		want  int64
	}{
		{vocab.KindAlphaChatCompletions, "gpt-4o-mini", "hello world", 2},
		{vocab.KindAlphaChatCompletions, "gpt-4", "hello world", 2},
		{vocab.KindAlphaResponses, "gpt-4o", "", 0},
		{vocab.KindAlphaChatCompletions, "gpt-4o", "tiktoken is great!", 6},
		{vocab.KindAlphaChatCompletions, "gpt-3.5-turbo", "tiktoken is great!", 6},
	}
	for _, tt := range tests {
		got, err := tokencount.CountText(tt.kind, tt.model, tt.text)
		if err != nil || got != tt.want {
			t.Errorf("CountText(%s, %s, %q) = %d, %v; want %d", tt.kind, tt.model, tt.text, got, err, tt.want)
		}
	}
}

func TestEncoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind      vocab.Kind
		model     string
		enc       string
		wantExact bool
	}{
		{vocab.KindAlphaChatCompletions, "gpt-4o-2024-08-06", "o200k_base", true},
		{vocab.KindAlphaResponses, "o3-mini", "o200k_base", true},
		{vocab.KindAlphaChatCompletions, "gpt-4-turbo", "cl100k_base", true},
		{vocab.KindAlphaChatCompletions, "openai/gpt-3.5-turbo", "cl100k_base", true},
		{vocab.KindBetaMessages, "b-1", "o200k_base", false},
		{vocab.KindGammaGenerateContent, "g-1", "o200k_base", false},
	}
	for _, tt := range tests {
		enc, exact := tokencount.Encoding(tt.kind, tt.model)
		if enc != tt.enc || exact != tt.wantExact {
			t.Errorf("Encoding(%s, %s) = %s, %v; want %s, %v", tt.kind, tt.model, enc, exact, tt.enc, tt.wantExact)
		}
	}
}

func TestCountPrompt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind vocab.Kind
		body string
		want int64
	}{
		// 3 priming + (3 + "user" 1 + "hello world" 2) = 9, as the upstream reports for gpt-4o.
		{"alpha chat", vocab.KindAlphaChatCompletions, `{"model":"gpt-4o","messages":[{"role":"user","content":"hello world"}]}`, 9},
		{"alpha chat parts skip images", vocab.KindAlphaChatCompletions, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"hello world"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, 9},
		{"alpha responses", vocab.KindAlphaResponses, `{"model":"gpt-4o","instructions":"hello world","input":"hello world"}`, 4},
		{"beta", vocab.KindBetaMessages, `{"model":"b-1","system":"hello world","messages":[{"role":"user","content":[{"type":"text","text":"hello world"},{"type":"image","source":{"type":"base64","data":"AAAA"}}]}]}`, 4},
		{"gamma", vocab.KindGammaGenerateContent, `{"systemInstruction":{"parts":[{"text":"hello world"}]},"contents":[{"role":"user","parts":[{"text":"hello world"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}]}`, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tokencount.CountPrompt(tt.kind, "gpt-4o", []byte(tt.body))
			if err != nil || got != tt.want {
				t.Errorf("CountPrompt(%s) = %d, %v; want %d", tt.name, got, err, tt.want)
			}
		})
	}
	if _, err := tokencount.CountPrompt(vocab.KindBetaMessages, "b", []byte("{not json")); err == nil {
		t.Error("CountPrompt(malformed) = nil error")
	}
	u, exact, err := tokencount.Count(vocab.KindAlphaChatCompletions, "gpt-4o", []byte(tests[0].body), "hello world")
	if err != nil || u.Input != 9 || u.Output != 2 || !exact {
		t.Errorf("Count = %+v, %v, %v; want input 9 output 2 exact", u, exact, err)
	}
}

func TestCountTextExtrapolatesLongText(t *testing.T) {
	t.Parallel()
	unit := "hello world, "
	half := strings.Repeat(unit, tokencount.MaxExactBytes/len(unit))
	n1, err := tokencount.CountText(vocab.KindAlphaChatCompletions, "gpt-4o", half)
	if err != nil {
		t.Fatal(err)
	}
	n2, err := tokencount.CountText(vocab.KindAlphaChatCompletions, "gpt-4o", half+half)
	if err != nil {
		t.Fatal(err)
	}
	if n2 < 2*n1-10 || n2 > 2*n1+10 {
		t.Errorf("CountText(2×%d bytes) = %d, want about 2 × %d", len(half), n2, n1)
	}
}

func BenchmarkCountText(b *testing.B) {
	tokencount.Warm()
	text := "The quick brown fox jumps over the lazy dog. "
	for len(text) < 4096 {
		text += text
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := tokencount.CountText(vocab.KindAlphaChatCompletions, "gpt-4o", text); err != nil {
			b.Fatal(err)
		}
	}
}

// The bench harness's stream: a one-word prompt and an eight-word answer (the per-request floor of local
// counting).
func BenchmarkCountSmallChat(b *testing.B) {
	body := []byte(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tokencount.Count(vocab.KindAlphaChatCompletions, "m-1", body, "Amet consectetur adipiscing elit sed do eiusmod tempor."); err != nil {
			b.Fatal(err)
		}
	}
}

func TestResponseText(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"id":"x","model":"m","choices":[{"message":{"role":"assistant","content":"Hello there"}}],"usage":null}`, "Hello there"},
		{`{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`, `{"a":1}`},
		{`{"type":"message","content":[{"type":"text","text":"Beta says"}]}`, "Beta says"},
		{`{"candidates":[{"content":{"role":"model","parts":[{"text":"Gamma says"}]}}]}`, "Gamma says"},
		{`{"output":[{"type":"message","content":[{"type":"output_text","text":"Resp"}]}]}`, "Resp"},
	} {
		got, err := tokencount.ResponseText([]byte(tc.body))
		if err != nil || got != tc.want {
			t.Errorf("ResponseText(%s) = %q, %v; want %q", tc.body, got, err, tc.want)
		}
	}
	if _, err := tokencount.ResponseText([]byte(`{"choices":`)); err == nil {
		t.Error("a cut body was read")
	}
}

func FuzzResponseText(f *testing.F) {
	for _, s := range []string{`{"choices":[{"message":{"content":"a"}}]}`, `{"content":[{"text":"b"}]}`, `[`, `"x"`, `{"text":5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := tokencount.ResponseText(body)
		if err != nil && got != "" {
			t.Fatalf("error %v with text %q", err, got)
		}
		if err == nil && !json.Valid(body) {
			t.Fatalf("text %q read from invalid JSON", got)
		}
	})
}
