package beta

import (
	"testing"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

func TestReadRelay(t *testing.T) {
	tests := []struct {
		data             string
		terminal, failed bool
	}{
		{`{"type":"message_stop"}`, true, false},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, false, true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"message_stop error"}}`, false, false},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`, false, false},
		{`{"error":null,"type":"error"}`, false, false}, // a null error member is no error
		{`{"type":"message_stop"`, true, false},         // decided by the members read before the break
	}
	for _, tt := range tests {
		var r jsonkit.Relay
		ReadRelay([]byte(tt.data), &r)
		if r.Terminal != tt.terminal || r.Failed != tt.failed {
			t.Errorf("ReadRelay(%s): terminal %v failed %v, want %v %v", tt.data, r.Terminal, r.Failed, tt.terminal, tt.failed)
		}
	}
}
