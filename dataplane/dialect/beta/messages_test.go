package beta

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestContextManagementRefusedAcrossDialects: beta's context editing (`context_management`, the
// server-side clearing of old tool results and thinking as a conversation grows) has no counterpart in
// the canonical form or any other dialect. Dropped on the way to another dialect, the upstream would see
// the whole uncleared conversation — a larger, dearer prompt that may no longer fit — so it is refused,
// naming the member, like `mcp_servers` and `container`. Absent or null, the request translates.
func TestContextManagementRefusedAcrossDialects(t *testing.T) {
	const head = `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		name, body string
		refused    bool
	}{
		{"edits", head + `,"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":30000}}]}}`, true},
		{"empty object", head + `,"context_management":{}}`, true},
		{"null", head + `,"context_management":null}`, false},
		{"absent", head + `}`, false},
	} {
		st := canon.NewState(canon.Options{})
		st.Client, st.Upstream = vocab.KindBetaMessages, vocab.KindAlphaChatCompletions
		r, err := Messages{}.DecodeRequest([]byte(c.body), st)
		if !c.refused {
			if err != nil || r == nil || len(r.Messages) != 1 {
				t.Errorf("%s: %v, want the request translated", c.name, err)
			}
			continue
		}
		var re *canon.RequestError
		if !errors.As(err, &re) || re.Field != "context_management" || re.Status != 400 {
			t.Errorf("%s: %v, want a 400 refusal naming context_management", c.name, err)
		}
	}
}
