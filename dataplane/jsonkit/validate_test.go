package jsonkit

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// validateCases are bodies on both sides of every rule validJSON shares with jsontext.
var validateCases = []string{
	`{}`, ` {"a":1} `, `{"a":1}x`, `{"a":1}{}`, `[]`, `[1,2,]`, `[,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`,
	`"x"`, `1`, `-0`, `-`, `01`, `1.`, `1.5e`, `1.5e+3`, `1E-0`, `-01`, `.5`, `1e`, `[1true]`, `[true false]`,
	`[tru]`, `[nul]`, `[truex]`, `{"a":nulll}`, "[1]\x00", "{\"a\":1}\t\r\n ", "\ufeff{}",
	`{"a":"\u00e9"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud83d"}`, `{"a":"\ude00"}`, `{"a":"\ud83d\u0041"}`, `{"a":"\ud83dx"}`,
	`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\xed\xa0\x80\"}",
	"{\"a\":\"\xc3\xa9\"}", "{\"a\":\"\xef\xbf\xbd\"}", `{"a":"\/\b\f\n\r\t\"\\"}`,
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"\u0061":1,"\u0061":2}`, `{"a":{"b":1,"b":1}}`,
	`{"a":{"b":1},"b":{"a":1}}`, `[{"a":1},{"a":1}]`, `{"A":1,"a":2}`, `{"a\"":1,"a\u0022":2}`, `{"":1,"":2}`,
	`{"a":[{"x":1,"y":{"x":2}}],"b":"\\"}`,
}

func TestValidateMatchesJSONText(t *testing.T) {
	cases := append([]string{}, validateCases...)
	// Objects around linearNames members, with and without a repeated (or escaped) name at the end.
	for _, n := range []int{linearNames - 1, linearNames, linearNames + 1, 3 * linearNames} {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		for _, last := range []string{`"k0":0}`, `"k\u0030":0}`, `"new":0}`, `"k` + fmt.Sprint(n-1) + `":0}`} {
			cases = append(cases, b.String()+last)
		}
	}
	// Long names past linearNameBytes, with a repeat among them.
	long := strings.Repeat("n", 300)
	cases = append(cases, `{"`+long+`1":1,"`+long+`2":2,"`+long+`3":3,"`+long+`4":4,"`+long+`2":5}`,
		`{"`+long+`1":1,"`+long+`2":2,"`+long+`3":3,"`+long+`4":4,"`+long+`5":5}`)
	// Nesting at jsontext's limit and one beyond.
	for _, d := range []int{maxDepth, maxDepth + 1} {
		cases = append(cases, strings.Repeat("[", d)+strings.Repeat("]", d),
			"{"+strings.Repeat(`"a":{`, d-1)+strings.Repeat("}", d))
	}
	for _, c := range cases {
		got, want := validJSON([]byte(c)), jsontext.Value(c).IsValid()
		if got != want {
			t.Errorf("validJSON(%.80q) = %v, jsontext %v", c, got, want)
		}
	}
}

// FuzzValidateMatchesJSONText: validJSON accepts exactly the texts jsontext accepts, and keeps the
// top-level members of an object that may be decision members exactly as Members reads them.
func FuzzValidateMatchesJSONText(f *testing.F) {
	for _, c := range validateCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v := getValidator()
		defer putValidator(v)
		valid := v.run(b, true)
		var got [][2]string
		for _, m := range v.top {
			got = append(got, [2]string{string(m.key), string(m.value)})
		}
		if want := jsontext.Value(b).IsValid(); valid != want {
			t.Fatalf("validJSON(%q) = %v, jsontext %v", b, valid, want)
		}
		if !valid || b[skipSpace(b, 0)] != '{' {
			return
		}
		var want [][2]string
		kv, _, ok := refMembers(b)
		if !ok {
			t.Fatalf("decoder refuses %q", b)
		}
		for i := 0; i < len(kv); i += 2 {
			if name, err := memberName(kv[i]); err == nil && mayDecide(name) {
				want = append(want, [2]string{string(kv[i]), string(kv[i+1])})
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("top-level members %q, Members %q", got, want)
		}
	})
}

// BenchmarkValidate10KB compares validJSON with jsontext.Value.IsValid on the 10 KB chat body.
func BenchmarkValidate10KB(b *testing.B) {
	body := benchBody()
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !validJSON(body) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("jsontext", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !jsontext.Value(body).IsValid() {
				b.Fatal("invalid")
			}
		}
	})
}

// TestSpecialMask8: the 8-byte test flags a word exactly when one of its bytes is not plain, and its lowest
// flagged byte is the first byte that is not plain, whatever the bytes after it.
func TestSpecialMask8(t *testing.T) {
	after := []byte{0x00, 0x1F, 0x20, '"', '\\', 'a', 0x7F, 0x80, 0xC3, 0xFF}
	for c := range 256 {
		for p := range 8 {
			for _, a := range after {
				w := []byte("aZ09 ~!}")
				w[p] = byte(c)
				for q := p + 1; q < 8; q++ {
					w[q] = a
				}
				first := 8
				for k, x := range w {
					if !plain[x] {
						first = k
						break
					}
				}
				m := SpecialMask8(binary.LittleEndian.Uint64(w))
				if got := bits.TrailingZeros64(m) >> 3; got != first || (m == 0) != (first == 8) {
					t.Fatalf("SpecialMask8(%q) = %#x: first flagged byte %d, want %d", w, m, got, first)
				}
			}
		}
	}
}
