package beta

import (
	"testing"

	"github.com/tollgate/tollgate/shared/usage"
)

// betaBody is a buffered messages answer with thinking, a tool call, cache reads and 5-minute cache writes.
const betaBody = `{"id": "msg_01X", "type": "message", "role": "assistant", "model": "b-1-20250101",
 "content": [{"type": "thinking", "thinking": "...", "signature": "EqQB..."},
   {"type": "text", "text": "Checking."},
   {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Oslo"}}],
 "stop_reason": "tool_use", "stop_sequence": null,
 "usage": {"input_tokens": 176, "cache_creation_input_tokens": 1024, "cache_read_input_tokens": 2048,
   "cache_creation": {"ephemeral_5m_input_tokens": 1024, "ephemeral_1h_input_tokens": 0},
   "output_tokens": 300, "output_tokens_details": {"thinking_tokens": 256},
   "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
   "service_tier": "standard", "inference_geo": "us"}}`

func TestBillBodyRules(t *testing.T) {
	tests := []struct {
		name, body string
		want       usage.Usage
		found      bool
	}{
		{"answer", betaBody, usage.Usage{Input: 176, CacheCreation5m: 1024, CacheRead: 2048, Output: 300, ReportedTier: "standard"}, true},
		{"1h split", `{"usage":{"input_tokens":1,"cache_creation_input_tokens":1500,"cache_creation":{"ephemeral_5m_input_tokens":500,"ephemeral_1h_input_tokens":1000},"output_tokens":2}}`,
			usage.Usage{Input: 1, CacheCreation5m: 500, CacheCreation1h: 1000, Output: 2}, true},
		{"aggregate without split → 5m", `{"usage":{"input_tokens":1,"cache_creation_input_tokens":700}}`,
			usage.Usage{Input: 1, CacheCreation5m: 700}, true},
		{"aggregate above split: remainder 5m", `{"usage":{"cache_creation_input_tokens":1600,"cache_creation":{"ephemeral_1h_input_tokens":1000}}}`,
			usage.Usage{CacheCreation5m: 600, CacheCreation1h: 1000}, true},
		{"speed fast beats service_tier standard", `{"usage":{"input_tokens":1,"service_tier":"standard","speed":"fast"}}`,
			usage.Usage{Input: 1, ReportedTier: "fast"}, true},
		{"speed standard yields to service_tier", `{"usage":{"input_tokens":1,"service_tier":"priority","speed":"standard"}}`,
			usage.Usage{Input: 1, ReportedTier: "priority"}, true},
		{"top-level tier without usage", `{"service_tier":"SERVICE_TIER_FLEX","content":[]}`, usage.Usage{ReportedTier: "flex"}, false},
		{"null usage", `{"usage":null}`, usage.Usage{}, false},
	}
	for _, tt := range tests {
		got, found, err := BillBody([]byte(tt.body))
		if err != nil || got != tt.want || found != tt.found {
			t.Errorf("%s: BillBody = %+v, %v, %v; want %+v, %v", tt.name, got, found, err, tt.want, tt.found)
		}
	}
	for _, b := range []string{`{`, `[]`, `"x"`, `{"usage":{"input_tokens":{}}}`} {
		if _, _, err := BillBody([]byte(b)); err == nil {
			t.Errorf("BillBody(%s) = nil error, want one", b)
		}
	}
}

func TestRelayBillingRules(t *testing.T) {
	tests := []struct {
		name     string
		events   []string
		want     usage.Usage
		reported bool
	}{
		{"start then delta", []string{
			`{"type":"message_start","message":{"id":"msg_01X","type":"message","role":"assistant","model":"b-1","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
			`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`,
			`{"type":"message_stop"}`},
			usage.Usage{Input: 25, Output: 42, ReportedTier: "standard"}, true},
		{"cumulative deltas are not summed", []string{
			`{"type":"message_start","message":{"usage":{"input_tokens":25,"cache_creation_input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}`,
			`{"type":"message_delta","usage":{"output_tokens":10}}`,
			`{"type":"message_delta","usage":{"input_tokens":25,"cache_creation_input_tokens":10,"cache_read_input_tokens":5,"output_tokens":42,"speed":"fast"}}`},
			usage.Usage{Input: 25, CacheCreation5m: 10, CacheRead: 5, Output: 42, ReportedTier: "fast"}, true},
		{"a malformed event keeps the usage so far", []string{
			`{"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}`,
			`{"type":"message_delta","usage":{"output_tokens":`},
			usage.Usage{Input: 25, Output: 1}, false},
	}
	for _, tt := range tests {
		events := make([][]byte, len(tt.events))
		for i, e := range tt.events {
			events[i] = []byte(e)
		}
		got, found, reported := relayBilled(events)
		if got != tt.want || !found || reported != tt.reported {
			t.Errorf("%s: relay billing %+v found %v output reported %v; want %+v, output reported %v", tt.name, got, found, reported, tt.want, tt.reported)
		}
	}
}
