package jsonkit

import (
	"bytes"
	"testing"

	"github.com/tollgate/tollgate/shared/vocab"
)

// FuzzReadRelay: the one pass finds each member's first occurrence where a scan for that member alone
// (vocab.TopLevelField) finds it, and Whole agrees with a full structural scan plus nothing after the object.
func FuzzReadRelay(f *testing.F) {
	for _, s := range []string{`{"type":"message_stop"}`, `{"choices":[],"usage":{"a":1},"usage":null,"service_tier":"x"}`,
		`{"error":null,"type":"error"} x`, `{}`, ` { } `, `{"a":"\"}"}`, `{"type":1,"type":"x"`, `[DONE]`} {
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
		if r.Whole && vocab.Members(data, func(_, _ []byte) bool { return true }) != nil {
			t.Fatal("whole, but the structure is not sound")
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
