package gamma

import (
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// gammaBody is a buffered generateContent answer with cached content, thoughts and modality details.
const gammaBody = `{"candidates": [{"content": {"role": "model", "parts": [{"text": "4 C and cloudy."}]},
   "finishReason": "STOP", "index": 0}],
 "usageMetadata": {"promptTokenCount": 1200, "cachedContentTokenCount": 1024, "candidatesTokenCount": 44,
   "thoughtsTokenCount": 256, "toolUsePromptTokenCount": 0, "totalTokenCount": 1500,
   "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1115}, {"modality": "IMAGE", "tokenCount": 85}],
   "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 44}]},
 "modelVersion": "g-1-flash-001", "responseId": "q3Xk..."}`

func TestBillBodyRules(t *testing.T) {
	std := http.Header{}
	std.Set(TierHeader, "standard")
	gen, embed := vocab.KindGammaGenerateContent, vocab.KindGamma
	tests := []struct {
		name  string
		kind  vocab.Kind
		op    vocab.Operation
		hdr   http.Header
		body  string
		want  usage.Usage
		found bool
	}{
		{"cached leaves input; thoughts are output", gen, vocab.OpGenerateContent, nil, gammaBody, usage.Usage{Input: 176, CacheRead: 1024, Output: 300}, true},
		{"the header's tier", gen, vocab.OpGenerateContent, std, gammaBody, usage.Usage{Input: 176, CacheRead: 1024, Output: 300, ReportedTier: "standard"}, true},
		{"the header beats usageMetadata.serviceTier", gen, vocab.OpGenerateContent, std,
			`{"usageMetadata":{"promptTokenCount":5,"serviceTier":"SERVICE_TIER_PRIORITY"}}`, usage.Usage{Input: 5, ReportedTier: "standard"}, true},
		{"usageMetadata.serviceTier enum", gen, vocab.OpGenerateContent, nil,
			`{"usageMetadata":{"promptTokenCount":5,"serviceTier":"SERVICE_TIER_FLEX"}}`, usage.Usage{Input: 5, ReportedTier: "flex"}, true},
		{"trafficType fallback", gen, vocab.OpGenerateContent, nil,
			`{"usageMetadata":{"promptTokenCount":5,"trafficType":"ON_DEMAND_FLEX"}}`, usage.Usage{Input: 5, ReportedTier: "flex"}, true},
		{"tool-use prompt is input", gen, vocab.OpGenerateContent, nil,
			`{"usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1024,"toolUsePromptTokenCount":100,"candidatesTokenCount":4}}`,
			usage.Usage{Input: 276, CacheRead: 1024, Output: 4}, true},
		{"IMAGE modality is image output", gen, vocab.OpGenerateContent, nil,
			`{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":1300,"candidatesTokensDetails":[{"modality":"TEXT","tokenCount":10},{"modality":"image","tokenCount":1290}]}}`,
			usage.Usage{Input: 10, Output: 10, ImageOutput: 1290}, true},
		{"counts as strings and floats", gen, vocab.OpGenerateContent, nil, `{"usageMetadata":{"promptTokenCount":"10","candidatesTokenCount":3.0}}`, usage.Usage{Input: 10, Output: 3}, true},
		{"prompt blocked, no usage", gen, vocab.OpGenerateContent, nil, `{"promptFeedback":{"blockReason":"SAFETY"}}`, usage.Usage{}, false},
		{"no usage, the header's tier", gen, vocab.OpGenerateContent, std, `{"candidates":[]}`, usage.Usage{ReportedTier: "standard"}, false},
		{"embedding", embed, vocab.OpCreateEmbedding, nil, `{"embedding":{"values":[0.1]},"usageMetadata":{"promptTokenCount":7}}`, usage.Usage{Input: 7}, true},
		{"embedding: totalTokenCount without promptTokenCount, less cached", embed, vocab.OpCreateEmbedding, nil,
			`{"usageMetadata":{"totalTokenCount":9,"cachedContentTokenCount":2}}`, usage.Usage{Input: 7, CacheRead: 2}, true},
		{"embedding without usage", embed, vocab.OpCreateEmbedding, nil, `{"embedding":{"values":[0.1]}}`, usage.Usage{}, false},
		{"not billed: count tokens", embed, vocab.OpCountTokens, nil, `{"totalTokens":9}`, usage.Usage{}, false},
	}
	for _, tt := range tests {
		got, found, err := BillBody(tt.kind, tt.op, []byte(tt.body), tt.hdr)
		if err != nil || got != tt.want || found != tt.found {
			t.Errorf("%s: BillBody = %+v, %v, %v; want %+v, %v", tt.name, got, found, err, tt.want, tt.found)
		}
	}
	for _, b := range []string{``, `{`, `[]`, `{"usageMetadata":{"promptTokenCount":true}}`, `{"usageMetadata":{"promptTokenCount":1.5}}`} {
		if _, _, err := BillBody(gen, vocab.OpGenerateContent, []byte(b), nil); err == nil {
			t.Errorf("BillBody(%q) = nil error, want one", b)
		}
	}
}

// Stream usage is the latest usageMetadata snapshot, taken whole (issue 27 item 7); the header's tier
// survives a snapshot without one; JSON-array elements are read as SSE payloads are.
func TestRelayBillingRules(t *testing.T) {
	flex := http.Header{}
	flex.Set(TierHeader, "flex")
	tests := []struct {
		name   string
		hdr    http.Header
		events []string
		want   usage.Usage
	}{
		{"cumulative, the latest wins", nil, []string{
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"4 C"}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":" and cloudy."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":5,"totalTokenCount":14}}`},
			usage.Usage{Input: 9, Output: 5}},
		{"serviceTier of the latest snapshot", nil, []string{
			`{"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":3,"thoughtsTokenCount":50}}`,
			`{"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":9,"thoughtsTokenCount":50,"serviceTier":"PRIORITY"}}`},
			usage.Usage{Input: 40, CacheRead: 60, Output: 59, ReportedTier: "priority"}},
		// Recorded (gemini-3 with server-side search): an earlier chunk counts 21 candidates, the last one none
		// (proto3 omits zeros). Merging fields of different chunks would bill 99 output tokens.
		{"taken whole, not merged field by field", nil, []string{
			`{"usageMetadata":{"promptTokenCount":87,"candidatesTokenCount":21,"thoughtsTokenCount":78,"totalTokenCount":186,"serviceTier":"standard"}}`,
			`{"usageMetadata":{"promptTokenCount":87,"thoughtsTokenCount":78,"totalTokenCount":165}}`},
			usage.Usage{Input: 87, Output: 78}},
		{"the header's tier survives a snapshot without one", flex, []string{
			`{"usageMetadata":{"promptTokenCount":5,"cachedContentTokenCount":2,"candidatesTokenCount":1,"serviceTier":"standard"}}`,
			`{"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3}}`},
			usage.Usage{Input: 5, Output: 3, ReportedTier: "flex"}},
		{"a chunk whose usageMetadata does not decode bills nothing", nil, []string{
			`{"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3}}`,
			`{"usageMetadata":{"promptTokenCount":"x","candidatesTokenCount":4}}`, `not json`},
			usage.Usage{Input: 5, Output: 3}},
	}
	for _, tt := range tests {
		var evs [][]byte
		for _, e := range tt.events {
			evs = append(evs, []byte(e))
		}
		if got, found := relayBilled(evs, tt.hdr); !found || got != tt.want {
			t.Errorf("%s: %+v found %v, want %+v", tt.name, got, found, tt.want)
		}
	}
}
