package usage

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/shared/vocab"
)

// Fixtures are each dialect's documented usage examples, plus variants.
const (
	alphaChatBody = `{"id": "chatcmpl-123", "object": "chat.completion", "created": 1760000000,
 "model": "m-1-2025-01-01", "service_tier": "default", "system_fingerprint": "fp_x",
 "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
   "message": {"role": "assistant", "content": null, "refusal": null, "tool_calls": [{"id": "call_abc",
     "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}],
 "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
   "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0, "image_tokens": 85, "text_tokens": 1115},
   "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0, "text_tokens": 44,
     "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}}`

	alphaResponsesBody = `{"id": "resp_123", "object": "response", "created_at": 1760000000, "status": "completed",
 "model": "m-1-2025-01-01", "service_tier": "flex", "error": null, "incomplete_details": null,
 "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
   {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
    "content": [{"type": "output_text", "text": "4 C and cloudy.", "annotations": []}]}],
 "usage": {"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 0},
   "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 256}, "total_tokens": 1500}}`

	alphaImageBody = `{"created": 1760000000, "background": "opaque", "output_format": "png", "quality": "high", "size": "1024x1024",
 "data": [{"b64_json": "iVBOR...", "revised_prompt": null}],
 "usage": {"input_tokens": 50, "input_tokens_details": {"text_tokens": 40, "image_tokens": 10},
   "output_tokens": 4160, "output_tokens_details": {"text_tokens": 0, "image_tokens": 4160}, "total_tokens": 4210}}`

	alphaEmbeddingBody = `{"object": "list", "model": "emb-1",
 "data": [{"object": "embedding", "index": 0, "embedding": [0.0123, -0.0456]}],
 "usage": {"prompt_tokens": 8, "total_tokens": 8}}`

	rerankBody = `{"id": "rerank-1", "model": "rr-1", "usage": {"total_tokens": 23},
 "results": [{"index": 0, "relevance_score": 0.97, "document": {"text": "Paris is the capital."}}]}`

	gammaBody = `{"candidates": [{"content": {"role": "model", "parts": [{"text": "4 C and cloudy."}]},
   "finishReason": "STOP", "index": 0,
   "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]}],
 "usageMetadata": {"promptTokenCount": 1200, "cachedContentTokenCount": 1024, "candidatesTokenCount": 44,
   "thoughtsTokenCount": 256, "toolUsePromptTokenCount": 0, "totalTokenCount": 1500,
   "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1115}, {"modality": "IMAGE", "tokenCount": 85}],
   "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 1024}],
   "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 44}]},
 "modelVersion": "g-1-flash-001", "responseId": "q3Xk..."}`
)

// sse splits an SSE transcript into the data payloads of its events.
func sse(t testing.TB, transcript string) [][]byte {
	if t != nil {
		t.Helper()
	}
	var out [][]byte
	for _, line := range strings.Split(transcript, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, []byte(d))
		}
	}
	return out
}

const (
	alphaResponsesStream = `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"in_progress","content":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel","logprobs":[]}

event: response.completed
data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","service_tier":"priority","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello","annotations":[]}]}],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":11}}}
`

	gammaStream = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"4 C"}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"g-1-flash-001","responseId":"q3Xk"}

data: {"candidates":[{"content":{"role":"model","parts":[{"text":" and cloudy."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":5,"totalTokenCount":14},"modelVersion":"g-1-flash-001","responseId":"q3Xk"}
`

	imageStream = `event: image_generation.partial_image
data: {"type":"image_generation.partial_image","b64_json":"...","partial_image_index":0,"created_at":1,"background":"opaque","output_format":"png","quality":"high","size":"1024x1024"}

event: image_generation.completed
data: {"type":"image_generation.completed","b64_json":"...","created_at":1,"background":"opaque","output_format":"png","quality":"high","size":"1024x1024","usage":{"input_tokens":50,"input_tokens_details":{"text_tokens":40,"image_tokens":10},"output_tokens":4160,"total_tokens":4210}}

data: [DONE]
`
)

func TestBodies(t *testing.T) {
	t.Parallel()
	gammaHdr := http.Header{}
	gammaHdr.Set("X-Gamma-Service-Tier", "standard")
	tests := []struct {
		name      string
		fn        func([]byte) (Usage, bool, error)
		body      string
		want      Usage
		wantFound bool
	}{
		{"gamma §3.3 (no header)", func(b []byte) (Usage, bool, error) { return FromGamma(b, nil) }, gammaBody,
			Usage{Input: 176, CacheRead: 1024, Output: 300}, true},
		{"gamma header tier", func(b []byte) (Usage, bool, error) { return FromGamma(b, gammaHdr) }, gammaBody,
			Usage{Input: 176, CacheRead: 1024, Output: 300, ReportedTier: "standard"}, true},
		{"gamma header beats usageMetadata.serviceTier", func(b []byte) (Usage, bool, error) { return FromGamma(b, gammaHdr) },
			`{"usageMetadata":{"promptTokenCount":5,"serviceTier":"SERVICE_TIER_PRIORITY"}}`,
			Usage{Input: 5, ReportedTier: "standard"}, true},
		{"gamma usageMetadata.serviceTier enum", func(b []byte) (Usage, bool, error) { return FromGamma(b, nil) },
			`{"usageMetadata":{"promptTokenCount":5,"serviceTier":"SERVICE_TIER_FLEX"}}`,
			Usage{Input: 5, ReportedTier: "flex"}, true},
		{"gamma trafficType fallback", func(b []byte) (Usage, bool, error) { return FromGamma(b, nil) },
			`{"usageMetadata":{"promptTokenCount":5,"trafficType":"ON_DEMAND_FLEX"}}`,
			Usage{Input: 5, ReportedTier: "flex"}, true},
		{"gamma tool-use prompt is input", func(b []byte) (Usage, bool, error) { return FromGamma(b, nil) },
			`{"usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1024,"toolUsePromptTokenCount":100,"candidatesTokenCount":4}}`,
			Usage{Input: 276, CacheRead: 1024, Output: 4}, true},
		{"gamma image modality → image output", func(b []byte) (Usage, bool, error) { return FromGamma(b, nil) },
			`{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":1300,"candidatesTokensDetails":[{"modality":"TEXT","tokenCount":10},{"modality":"IMAGE","tokenCount":1290}]}}`,
			Usage{Input: 10, Output: 10, ImageOutput: 1290}, true},
		{"gamma prompt blocked, no usage", func(b []byte) (Usage, bool, error) { return FromGamma(b, nil) },
			`{"promptFeedback":{"blockReason":"SAFETY"}}`, Usage{}, false},
		{"gamma embedding", func(b []byte) (Usage, bool, error) { return FromGammaEmbedding(b, nil) },
			`{"embedding":{"values":[0.1]},"usageMetadata":{"promptTokenCount":7}}`, Usage{Input: 7}, true},
		{"gamma embedding without usage", func(b []byte) (Usage, bool, error) { return FromGammaEmbedding(b, nil) },
			`{"embedding":{"values":[0.1]}}`, Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, found, err := tt.fn([]byte(tt.body))
			if err != nil {
				t.Fatalf("extract = error %v", err)
			}
			if got != tt.want || found != tt.wantFound {
				t.Errorf("extract = %+v, %v; want %+v, %v", got, found, tt.want, tt.wantFound)
			}
		})
	}
}

func TestBodyErrors(t *testing.T) {
	t.Parallel()
	if _, _, err := FromGamma([]byte(`{"usageMetadata":{"promptTokenCount":true}}`), nil); err == nil {
		t.Errorf("FromGamma(bool count) = nil error, want error")
	}
}

func TestStreams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		kind      vocab.Kind
		op        vocab.Operation
		hdr       string
		events    []string
		want      Usage
		wantFound bool
	}{
		{name: "gamma §3.4 with header", kind: vocab.KindGammaGenerateContent, hdr: "flex",
			events: toStrings(sse(t, gammaStream)), want: Usage{Input: 9, Output: 5, ReportedTier: "flex"}, wantFound: true},
		{name: "gamma JSON-array elements, cumulative", kind: vocab.KindGammaGenerateContent, events: []string{
			`{"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":3,"thoughtsTokenCount":50}}`,
			`{"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":9,"thoughtsTokenCount":50,"serviceTier":"PRIORITY"}}`},
			want: Usage{Input: 40, CacheRead: 60, Output: 59, ReportedTier: "priority"}, wantFound: true},
		// Recorded (gemini-3 with server-side search): an earlier chunk counts 21 candidates, the last one none
		// (proto3 omits zeros) and its total, 165 = 87 prompt + 78 thoughts, counts none either. Each snapshot is
		// taken whole: merging fields of different chunks would bill 99 output tokens.
		{name: "gamma usageMetadata taken whole, not merged field by field", kind: vocab.KindGammaGenerateContent, events: []string{
			`{"usageMetadata":{"promptTokenCount":87,"candidatesTokenCount":21,"thoughtsTokenCount":78,"totalTokenCount":186,"serviceTier":"standard"}}`,
			`{"usageMetadata":{"promptTokenCount":87,"thoughtsTokenCount":78,"totalTokenCount":165}}`},
			want: Usage{Input: 87, Output: 78}, wantFound: true},
		{name: "gamma header tier survives a snapshot without one", kind: vocab.KindGammaGenerateContent, hdr: "flex", events: []string{
			`{"usageMetadata":{"promptTokenCount":5,"cachedContentTokenCount":2,"candidatesTokenCount":1,"serviceTier":"standard"}}`,
			`{"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3}}`},
			want: Usage{Input: 5, Output: 3, ReportedTier: "flex"}, wantFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			acc := NewStreamAccumulator(tt.kind, tt.op)
			if acc == nil {
				t.Fatalf("NewStreamAccumulator(%s, %s) = nil", tt.kind, tt.op)
			}
			if tt.hdr != "" {
				h := http.Header{}
				h.Set(GammaTierHeader, tt.hdr)
				acc.ObserveHeader(h)
			}
			for _, ev := range tt.events {
				if err := acc.Observe([]byte(ev)); err != nil {
					t.Fatalf("Observe(%s) = %v", ev, err)
				}
			}
			got, found := acc.Result()
			if got != tt.want || found != tt.wantFound {
				t.Errorf("Result() = %+v, %v; want %+v, %v", got, found, tt.want, tt.wantFound)
			}
		})
	}
}

func toStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

func TestNewStreamAccumulatorUnsupported(t *testing.T) {
	t.Parallel()
	if acc := NewStreamAccumulator(vocab.KindAlpha, vocab.OpCreateEmbedding); acc != nil {
		t.Errorf("NewStreamAccumulator(alpha, create_embedding) = %T, want nil", acc)
	}
}

func TestFromBodyDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind vocab.Kind
		op   vocab.Operation
		body string
		want Usage
	}{
		{vocab.KindGammaGenerateContent, vocab.OpGenerateContent, gammaBody, Usage{Input: 176, CacheRead: 1024, Output: 300}},
		{vocab.KindGamma, vocab.OpCreateEmbedding, `{"usageMetadata":{"promptTokenCount":7}}`, Usage{Input: 7}},
	}
	for _, tt := range tests {
		got, _, err := FromBody(tt.kind, tt.op, []byte(tt.body), nil)
		if err != nil || got != tt.want {
			t.Errorf("FromBody(%s, %s) = %+v, %v; want %+v", tt.kind, tt.op, got, err, tt.want)
		}
	}
}

func TestPromptTokens(t *testing.T) {
	t.Parallel()
	u := Usage{Input: 1, Output: 100, CacheRead: 2, CacheCreation5m: 4, CacheCreation30m: 8, CacheCreation1h: 16, ImageOutput: 1000}
	if got := u.PromptTokens(); got != 31 {
		t.Errorf("PromptTokens() = %d, want 31", got)
	}
	if got := u.TotalTokens(); got != 1131 {
		t.Errorf("TotalTokens() = %d, want 1131", got)
	}
	big := Usage{Input: math.MaxInt64, CacheRead: math.MaxInt64, CacheCreation5m: -5}
	if got := big.PromptTokens(); got != math.MaxInt64 {
		t.Errorf("PromptTokens(saturating) = %d, want MaxInt64", got)
	}
}

// The gamma stream decoder (no encoding/json) agrees with the body decoder.
func TestGammaStreamDecoderMatchesBody(t *testing.T) {
	t.Parallel()
	for _, body := range []string{gammaBody,
		`{"usageMetadata":{"promptTokenCount":"10","candidatesTokenCount":1300.0,"candidatesTokensDetails":[{"modality":"TEXT","tokenCount":10},{"modality":"image","tokenCount":1290}],"serviceTier":"FLEX"}}`,
		`{"usageMetadata":{"promptTokenCount":9,"candidatesTokensDetails":[],"trafficType":"ON_DEMAND_PRIORITY"}}`,
		`{"usageMetadata":{"thoughtsTokenCount":7,"toolUsePromptTokenCount":3,"cachedContentTokenCount":null}}`,
		`{"usageMetadata":{}}`,
	} {
		want, wantFound, err := FromGamma([]byte(body), nil)
		if err != nil {
			t.Fatalf("FromGamma(%s) = %v", body, err)
		}
		var s GammaStream
		if err := s.Observe([]byte(body)); err != nil {
			t.Fatalf("Observe(%s) = %v", body, err)
		}
		if got, found := s.Result(); got != want || found != wantFound {
			t.Errorf("stream %s = %+v, %v; body %+v, %v", body, got, found, want, wantFound)
		}
	}
	var s GammaStream
	for _, bad := range []string{`{"usageMetadata":{"promptTokenCount":1.5}}`, `{"usageMetadata":{"candidatesTokensDetails":[{"tokenCount":"x"}]}}`,
		`{"usageMetadata":{"candidatesTokensDetails":{}}}`, `{"usageMetadata":[1]}`} {
		if err := s.Observe([]byte(bad)); err == nil {
			t.Errorf("Observe(%s) = nil, want error", bad)
		}
	}
}
