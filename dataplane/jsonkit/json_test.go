package jsonkit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// refStringOf is StringOf before it skipped plain bytes eight at a time.
func refStringOf(raw []byte, s *string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	in := raw[1 : len(raw)-1]
	plain := true
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain && utf8.Valid(in) {
		*s = string(in)
		return true
	}
	b, err := jsontext.AppendUnquote(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return false
	}
	*s = string(b)
	return true
}

// FuzzStringOf: StringOf decodes what it did before the eight-byte skip.
func FuzzStringOf(f *testing.F) {
	for _, s := range []string{`"abc"`, `"abcdefghijklmnop"`, `"abcdefgh\"ij"`, "\"abcdefgh\xffij\"", `"abcdefghé"`, ` "x" `, `"\u00e9abcdefgh"`, `5`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want, got string
		okWant := refStringOf(raw, &want)
		okGot := StringOf(raw, &got)
		if okWant != okGot || want != got {
			t.Fatalf("%q: stringOf %v %q, want %v %q", raw, okGot, got, okWant, want)
		}
	})
}

// TestValidPlainJSON: the one-loop validator agrees with json.Valid on short texts of JSON's own bytes
// (the fuzzer rarely builds nested values by chance).
func TestValidPlainJSON(t *testing.T) {
	const alphabet = `{}[]",: 0123-.eE+truefalsnlx`
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 0, 24)
	for range 300000 {
		b = b[:0]
		for range 1 + rng.IntN(20) {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		ok, sure := ValidPlainJSON(b)
		if !sure {
			t.Fatalf("validPlainJSON(%q) not sure", b)
		}
		if want := json.Valid(b); ok != want {
			t.Fatalf("validPlainJSON(%q) = %v, json.Valid %v", b, ok, want)
		}
	}
}

// FuzzAppendString: the direct string encoder matches encoding/json (HTML escaping off).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\n\r\t\x00\x1f", "<>&", "\u2028\u2029", "héllo 🌍", "\xff", "abcdefg\xffhij\xe2\x80", "0123456789abcdef\u2028x\x7f\"<"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		if want := bytes.TrimSuffix(b.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// FuzzValidJSON: ValidJSON (the hand-written reader where it applies) agrees with json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"city":"Oslo","days":3}`, `{"a":[1,2.5e3,-0,true,null]}`, `{"a":1,}`, `[01]`, ` "x" `, `"\ud800"`,
		"\"\xff\"", `{"a":"b"}x`, `[[[[]]]]`, `1.`, `-`, `"a\u0041"`, "\"\x7f\"", `{}`, `nul`,
		`[ ]`, `{ "a" : [ 1 , { } , "x" ] } `, `{"a":1 "b":2}`, `[1,]`, `{"a"}`, `-01`, `1e+`, `0.5E-3`, `[}`, `{]`, `[1]]`,
		`{"a":{"b":{"c":[true,false,null]}}}`, strings.Repeat("[", 64) + strings.Repeat("]", 64),
		strings.Repeat("[", 65) + strings.Repeat("]", 65), strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := ValidJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}
