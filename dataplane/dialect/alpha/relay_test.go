package alpha

import (
	"testing"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

func TestReadChatRelay(t *testing.T) {
	tests := []struct {
		data                         string
		terminal, failed, usageChunk bool
		usage, tier                  string
	}{
		{`[DONE]`, true, false, false, "", ""},
		{`{"error":{"message":"overloaded","type":"server_error"}}`, false, true, false, "", ""},
		{`{"error":null,"choices":[]}`, false, false, false, "", ""},
		{`{"choices":[{"delta":{"content":"error [DONE] finishReason"}}],"service_tier":"default"}`, false, false, false, "", `"default"`},
		{`{"choices":[ ],"usage":{"prompt_tokens":1},"service_tier":"flex"}`, false, false, true, `{"prompt_tokens":1}`, `"flex"`},
		{`{"choices":[],"usage":null}`, false, false, false, "null", ""},
		{`{"choices":[{"delta":{}}],"usage":{"prompt_tokens":1}}`, false, false, false, `{"prompt_tokens":1}`, ""},
	}
	for _, tt := range tests {
		var r jsonkit.Relay
		ReadChatRelay([]byte(tt.data), &r)
		if r.Terminal != tt.terminal || r.Failed != tt.failed || r.UsageChunk != tt.usageChunk ||
			string(r.Usage) != tt.usage || string(r.Tier) != tt.tier {
			t.Errorf("ReadChatRelay(%s) = %+v", tt.data, r)
		}
	}
}

func TestReadResponsesRelay(t *testing.T) {
	tests := []struct {
		data             string
		terminal, failed bool
	}{
		{`{"type":"response.completed","response":{"error":null,"usage":{"input_tokens":1}}}`, true, false},
		{`{"type":"response.incomplete","response":{}}`, true, false},
		{`{"type":"error","code":"server_error","message":"boom","sequence_number":3}`, false, true},
		{`{"type":"response.failed","response":{"status":"failed"}}`, false, true},
		{`{"type":"response.output_text.delta","delta":"response.completed"}`, false, false},
	}
	for _, tt := range tests {
		var r jsonkit.Relay
		ReadResponsesRelay([]byte(tt.data), &r)
		if r.Terminal != tt.terminal || r.Failed != tt.failed {
			t.Errorf("ReadResponsesRelay(%s): terminal %v failed %v, want %v %v", tt.data, r.Terminal, r.Failed, tt.terminal, tt.failed)
		}
	}
}
