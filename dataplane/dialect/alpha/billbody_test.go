package alpha

import (
	"testing"

	"github.com/tollgate/tollgate/shared/usage"
)

// chatBody is a buffered chat completion with cache reads and reasoning.
const chatBody = `{"id": "chatcmpl-123", "object": "chat.completion", "created": 1760000000, "model": "m-1",
 "service_tier": "default", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}],
 "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
   "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
   "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0}}}`

func TestBillChatBodyRules(t *testing.T) {
	tests := []struct {
		name, body string
		want       usage.Usage
		found      bool
	}{
		{"cached leaves input", chatBody, usage.Usage{Input: 176, CacheRead: 1024, Output: 300, ReportedTier: "default"}, true},
		{"image_tokens subset", `{"usage":{"prompt_tokens":10,"completion_tokens":5000,"completion_tokens_details":{"image_tokens":4160}}}`,
			usage.Usage{Input: 10, Output: 840, ImageOutput: 4160}, true},
		{"image_tokens above completion is clamped", `{"usage":{"completion_tokens":100,"completion_tokens_details":{"image_tokens":4160}}}`,
			usage.Usage{ImageOutput: 100}, true},
		{"cache_write → 30m (alpha's one cache lifetime) and leaves input",
			`{"usage":{"prompt_tokens":2000,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":500,"cache_write_tokens":300}}}`,
			usage.Usage{Input: 1200, CacheRead: 500, CacheCreation30m: 300, Output: 1}, true},
		{"cached above prompt clamps input at 0", `{"usage":{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":200}}}`,
			usage.Usage{Input: 0, CacheRead: 200}, true},
		{"without usage", `{"service_tier":"flex","choices":[]}`, usage.Usage{ReportedTier: "flex"}, false},
		{"null usage", `{"usage":null}`, usage.Usage{}, false},
		{"counts as strings and floats", `{"usage":{"prompt_tokens":"12","completion_tokens":3.0}}`, usage.Usage{Input: 12, Output: 3}, true},
		{"negative counts clamp", `{"usage":{"prompt_tokens":-12,"completion_tokens":3}}`, usage.Usage{Output: 3}, true},
		{"usage.service_tier when no top-level tier", `{"usage":{"prompt_tokens":1,"service_tier":"priority"}}`,
			usage.Usage{Input: 1, ReportedTier: "priority"}, true},
	}
	for _, tt := range tests {
		got, found, err := BillChatBody([]byte(tt.body))
		if err != nil || got != tt.want || found != tt.found {
			t.Errorf("%s: BillChatBody = %+v, %v, %v; want %+v, %v", tt.name, got, found, err, tt.want, tt.found)
		}
	}
	for _, b := range []string{``, `{`, `[]`, `{"usage":{"prompt_tokens":1.5}}`, `{"usage":{"prompt_tokens":"x"}}`,
		`{"usage":{"prompt_tokens":99999999999999999999}}`, `{"usage":{"prompt_tokens":1e3}}`} {
		if _, _, err := BillChatBody([]byte(b)); err == nil {
			t.Errorf("BillChatBody(%q) = nil error, want one", b)
		}
	}
}

func TestRelayChatBillingRules(t *testing.T) {
	stream := [][]byte{
		[]byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"default","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`),
		[]byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"default","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}],"usage":null}`),
		[]byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"default","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`),
		[]byte(`[DONE]`),
	}
	if got, found := relayBilled(stream); !found || got != (usage.Usage{Input: 9, Output: 2, ReportedTier: "default"}) {
		t.Errorf("whole stream: %+v found %v", got, found)
	}
	if got, found := relayBilled(stream[:2]); found || got != (usage.Usage{ReportedTier: "default"}) {
		t.Errorf("cut before the usage chunk: %+v found %v, want the tier alone, not found", got, found)
	}
}
