package jsonkit

import (
	"bytes"
	"testing"

	"github.com/tollgate/tollgate/shared/vocab"
)

// FuzzReadRelay: the one pass walks exactly the members vocab.Members walks, finds each member's first
// occurrence where a scan for that member alone (vocab.TopLevelField) finds it, and Whole agrees with a
// sound structure and nothing but whitespace after the closing brace.
func FuzzReadRelay(f *testing.F) {
	for _, s := range []string{`{"type":"message_stop"}`, `{"choices":[],"usage":{"a":1},"usage":null,"service_tier":"x"}`,
		`{"error":null,"type":"error"} x`, `{}`, ` { } `, `{"a":"\"}"}`, `{"type":1,"type":"x"`, `[DONE]`, `{"type":"message_stop"}`, `{"type":"message\u005fstop"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Relay
		ReadRelay(data, &r)
		for name, got := range map[string][]byte{"type": r.Type, "error": r.Error, "choices": r.Choices, "usage": r.FirstUsage} {
			s, e, found, err := vocab.TopLevelField(data, name)
			if err == nil && found && !bytes.Equal(got, data[s:e]) {
				t.Fatalf("%s: %q, TopLevelField %q", name, got, data[s:e])
			}
			if err == nil && !found && got != nil {
				t.Fatalf("%s: %q, TopLevelField none", name, got)
			}
		}
		if v, ok := vocab.StringValue(r.Type); r.TypeIs("message_stop") != (ok && string(v) == "message_stop") {
			t.Fatalf("TypeIs(message_stop) %v for type %q", r.TypeIs("message_stop"), r.Type)
		}
		var want, got [][]byte
		werr := vocab.Members(data, func(k, v []byte) bool { want = append(want, k, v); return true })
		closing := relayMembers(data, func(k, v []byte) { got = append(got, k, v) })
		if (werr != nil) != (closing < 0) || len(want) != len(got) {
			t.Fatalf("members %q (closing %d), vocab.Members %q (%v)", got, closing, want, werr)
		}
		for i := range want {
			if !bytes.Equal(want[i], got[i]) {
				t.Fatalf("members %q, vocab.Members %q", got, want)
			}
		}
		if r.Whole != (werr == nil && len(bytes.TrimRight(data[closing+1:], " \t\r\n")) == 0) {
			t.Fatalf("whole %v, closing brace at %d of %q", r.Whole, closing, data)
		}
	})
}

func TestEmptyArray(t *testing.T) {
	for v, want := range map[string]bool{`[]`: true, "[ \n]": true, `[1]`: false, `{}`: false, ``: false, `null`: false} {
		if EmptyArray([]byte(v)) != want {
			t.Errorf("EmptyArray(%s) != %v", v, want)
		}
	}
}
