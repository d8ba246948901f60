package jsonkit

import (
	"bytes"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzReadRelay: on a JSON object, the one pass walks exactly the members the JSON library's decoder reads
// (raw names and values), takes each member's first occurrence, and Whole holds exactly when nothing but
// white space follows the object.
func FuzzReadRelay(f *testing.F) {
	for _, s := range []string{`{"type":"message_stop"}`, `{"choices":[],"usage":{"a":1},"usage":null,"service_tier":"x"}`,
		`{"error":null,"type":"error"} x`, `{}`, ` { } `, `{"a":"\"}"}`, `{"type":1,"type":"x"`, `[DONE]`, `{"type":"message_stop"}`, `{"type":"message\u005fstop"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Relay
		ReadRelay(data, &r)
		want, end, ok := refMembers(data)
		if !ok {
			return // values are not validated: a sound structure with an invalid value may still be Whole
		}
		first := map[string][]byte{}
		for i := 0; i < len(want); i += 2 {
			if _, seen := first[string(want[i])]; !seen {
				first[string(want[i])] = want[i+1]
			}
		}
		for name, got := range map[string][]byte{"type": r.Type, "error": r.Error, "choices": r.Choices, "usage": r.FirstUsage} {
			if !bytes.Equal(got, first[name]) {
				t.Fatalf("%s: %q, decoder %q", name, got, first[name])
			}
		}
		if v, ok := PlainString(r.Type); r.TypeIs("message_stop") != (ok && string(v) == "message_stop") {
			t.Fatalf("TypeIs(message_stop) %v for type %q", r.TypeIs("message_stop"), r.Type)
		}
		var got [][]byte
		closing, err := walkMembers(data, func(k, v []byte) bool { got = append(got, k, v); return true })
		if err != nil || len(want) != len(got) {
			t.Fatalf("members %q (%v), decoder %q", got, err, want)
		}
		for i := range want {
			if !bytes.Equal(want[i], got[i]) {
				t.Fatalf("members %q, decoder %q", got, want)
			}
		}
		if closing+1 != end || r.Whole != (len(bytes.TrimRight(data[end:], " \t\r\n")) == 0) {
			t.Fatalf("whole %v, closing brace at %d (decoder %d) of %q", r.Whole, closing, end, data)
		}
	})
}

// refMembers reads the top-level members of the JSON object at the start of data with the JSON library's
// decoder (repeated names and invalid UTF-8 allowed): raw names without quotes and raw values, in turn, and
// the offset just past the object; ok is false when data does not start with a valid JSON object.
func refMembers(data []byte) (kv [][]byte, end int, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, 0, false
	}
	d := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, 0, false
	}
	for d.PeekKind() != '}' {
		k, err := d.ReadValue()
		if err != nil {
			return nil, 0, false
		}
		v, err := d.ReadValue()
		if err != nil {
			return nil, 0, false
		}
		kv = append(kv, bytes.Clone(k[1:len(k)-1]), bytes.Clone(v))
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, 0, false
	}
	return kv, int(d.InputOffset()), true
}

func TestEmptyArray(t *testing.T) {
	for v, want := range map[string]bool{`[]`: true, "[ \n]": true, `[1]`: false, `{}`: false, ``: false, `null`: false} {
		if EmptyArray([]byte(v)) != want {
			t.Errorf("EmptyArray(%s) != %v", v, want)
		}
	}
}
