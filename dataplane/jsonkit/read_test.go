package jsonkit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzUnquote: unquote (eight bytes at a time between escapes) decodes what the reader validated as
// encoding/json does, for strings encoded with and without escapes of every kind.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{"", `{"city":"Oslo","days":3}`, "a\"b\\c/d", "\n\r\t\b\f\x00\x1f", "héllo 🌍 \u2028", "0123456789abcdef\"", `\\\\\\\\\\`} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, everyRune bool) {
		if !utf8.ValidString(s) {
			return
		}
		quoted := string(AppendString(nil, s))
		if everyRune { // every rune escaped: \u, surrogate pairs and the short escapes
			var b strings.Builder
			b.WriteByte('"')
			for _, r := range s {
				switch {
				case r == '/':
					b.WriteString(`\/`)
				case r > 0xffff:
					r -= 0x10000
					fmt.Fprintf(&b, `\u%04X\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				default:
					fmt.Fprintf(&b, `\u%04x`, r)
				}
			}
			b.WriteByte('"')
			quoted = b.String()
		}
		d := Reader{B: []byte(quoted)}
		if _, err := d.ScanStr(); err != nil {
			t.Fatalf("scanStr(%s): %v", quoted, err)
		}
		var want string
		if err := json.Unmarshal([]byte(quoted), &want); err != nil {
			t.Fatal(err)
		}
		if got := Unquote([]byte(quoted[1 : len(quoted)-1])); got != want {
			t.Fatalf("unquote(%s) = %q, want %q", quoted, got, want)
		}
		// into shared room: every string decoded stays as it was while more are decoded after it
		var room Reader
		var got []string
		for range 3 * UnquoteSpare / max(len(quoted), 1) {
			got = append(got, room.Unquote([]byte(quoted[1:len(quoted)-1])))
		}
		for i, g := range got {
			if g != want {
				t.Fatalf("jr.unquote(%s) #%d = %q, want %q", quoted, i, g, want)
			}
		}
	})
}

// TestPlainRun: the 8-byte test of the string scanner stops at the first byte that ends a plain run,
// wherever it is among the eight and whatever follows it.
func TestPlainRun(t *testing.T) {
	special := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80 }
	for c := 0; c < 256; c++ {
		for at := range 8 {
			for _, after := range []byte{'a', 0x00, 0x1f, 0x20, '"', '\\', 0x80, 0xff} {
				b := []byte("abcdefghijk")
				b[at] = byte(c)
				for j := at + 1; j < 8; j++ {
					b[j] = after
				}
				want := len(b)
				for j := range b {
					if special(b[j]) {
						want = j
						break
					}
				}
				if got := PlainRun(string(b), 0); got != want {
					t.Fatalf("%q: plainRun %d, want %d", b, got, want)
				}
			}
		}
	}
	// long runs (the IndexByte path), from every start, with one special byte anywhere or none
	plain := strings.Repeat("The quick brown fox jumps. ", 3)
	for _, c := range []byte{0x00, 0x1f, '"', '\\', 0x7f, 0x80, 0xe2, 0xff} {
		for at := -1; at < len(plain); at++ {
			b := []byte(plain)
			want := len(b)
			if at >= 0 {
				b[at] = c
				if special(c) {
					want = at
				}
			}
			for from := 0; from < len(b); from += 5 {
				w := want
				if w < from {
					w = len(b)
				}
				if got := PlainRun(string(b), from); got != w {
					t.Fatalf("%q from %d: plainRun %d, want %d", b, from, got, w)
				}
			}
		}
	}
}
