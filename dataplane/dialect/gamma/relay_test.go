package gamma

import (
	"testing"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

func TestReadRelay(t *testing.T) {
	tests := []struct {
		data             string
		terminal, failed bool
	}{
		{`{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3}}`, true, false},
		{`{"candidates":[{"content":{"parts":[{"text":"hi"}]}}]}`, false, false},
		{`{"error":{"code":503,"message":"unavailable","status":"UNAVAILABLE"}}`, false, true},
		{`{"error":null,"candidates":[]}`, false, false},
	}
	for _, tt := range tests {
		var r jsonkit.Relay
		ReadRelay([]byte(tt.data), &r)
		if r.Terminal != tt.terminal || r.Failed != tt.failed {
			t.Errorf("ReadRelay(%s): terminal %v failed %v, want %v %v", tt.data, r.Terminal, r.Failed, tt.terminal, tt.failed)
		}
	}
}
