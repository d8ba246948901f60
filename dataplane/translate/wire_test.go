package translate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
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
		quoted := string(jsonkit.AppendString(nil, s))
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
		d := jsonkit.Reader{B: []byte(quoted)}
		if _, err := d.ScanStr(); err != nil {
			t.Fatalf("scanStr(%s): %v", quoted, err)
		}
		var want string
		if err := json.Unmarshal([]byte(quoted), &want); err != nil {
			t.Fatal(err)
		}
		if got := jsonkit.Unquote([]byte(quoted[1 : len(quoted)-1])); got != want {
			t.Fatalf("unquote(%s) = %q, want %q", quoted, got, want)
		}
		// into shared room: every string decoded stays as it was while more are decoded after it
		var room jsonkit.Reader
		var got []string
		for range 3 * jsonkit.UnquoteSpare / max(len(quoted), 1) {
			got = append(got, room.Unquote([]byte(quoted[1:len(quoted)-1])))
		}
		for i, g := range got {
			if g != want {
				t.Fatalf("jr.unquote(%s) #%d = %q, want %q", quoted, i, g, want)
			}
		}
	})
}

// TestIsCompact: the eight-bytes-at-a-time test agrees with following the strings, for whitespace (and any
// byte up to ' ') at every position inside and outside a string.
func TestIsCompact(t *testing.T) {
	bases := []string{`{"city":"Oslo","days":3}`, `["a b","c\"d",1,{"x":[true,null]}]`, `"just a string of some length"`, `{}`}
	for _, base := range bases {
		if got, want := jsonkit.IsCompact([]byte(base)), jsonkit.IsCompactSlow([]byte(base)); got != want {
			t.Fatalf("isCompact(%s) = %v, want %v", base, got, want)
		}
		for i := 0; i <= len(base); i++ {
			for _, c := range []byte{' ', '\t', '\n', '\r', 0x1f, 0x21, 0x80} {
				v := []byte(base[:i] + string(c) + base[i:])
				if got, want := jsonkit.IsCompact(v), jsonkit.IsCompactSlow(v); got != want {
					t.Fatalf("isCompact(%q) = %v, want %v", v, got, want)
				}
			}
		}
	}
}

// TestCallNames: the last call with an id names it, kept in place up to 32 calls and in a map beyond.
func TestCallNames(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 100} {
		var msgs []canon.Message
		for i := range n {
			msgs = append(msgs, canon.Message{Role: "assistant", Parts: []canon.Part{
				{Type: canon.PartToolCall, CallID: fmt.Sprint("c", i%20), Name: fmt.Sprint("f", i)},
				{Type: canon.PartText, CallID: "text", Name: "not a call"},
				{Type: canon.PartToolCall, Name: "no id"},
			}})
		}
		var c canon.CallNames
		c.ToolNames(msgs)
		for i := range 20 {
			want := ""
			for j := range n {
				if j%20 == i {
					want = fmt.Sprint("f", j)
				}
			}
			if got := c.Get(fmt.Sprint("c", i)); got != want {
				t.Fatalf("%d calls: name of c%d = %q, want %q", n, i, got, want)
			}
		}
		if c.Get("text") != "" || c.Get("") != "" || (*canon.CallNames)(nil).Get("c0") != "" {
			t.Fatalf("%d calls: a name for no call", n)
		}
	}
}

// refFieldOf is FieldOf as it was before the table: the exact match first, else the first EqualFold match.
func refFieldOf(name string, names []string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	for i, n := range names {
		if strings.EqualFold(n, name) {
			return i
		}
	}
	return -1
}

// TestFieldOf: the table finds what the lists found, for every name of the request shapes' lists, their
// case variants, names sharing a slot, and names of none.
func TestFieldOf(t *testing.T) {
	lists := []*jsonkit.MemberNames{alpha.RespRequestNames, alpha.RespItemNames, alpha.RespContentNames, alpha.ChatRequestNames, alpha.ChatMessageNames,
		gamma.PartNames, gamma.CallNames, jsonkit.Fields("a", "A", "ab", "ba", "b_a", "B-A", "x", "xx", "xxx", "k", "K")}
	for _, f := range lists {
		var probes []string
		for _, n := range f.Names {
			probes = append(probes, n, strings.ToUpper(n), strings.ToLower(n), n+"x", "x"+n, n[:len(n)-1], "")
		}
		for _, p := range probes {
			if got, want := jsonkit.FieldOf(p, f), refFieldOf(p, f.Names); got != want {
				t.Fatalf("fieldOf(%q, %q) = %d, want %d", p, f.Names, got, want)
			}
		}
	}
}

// TestPendingCalls: the calls kept in place answer as the map of each name's unanswered ids did (the code
// before), below and beyond 32 calls, with and without ids on the responses.
func TestPendingCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		var c gamma.PendingCalls
		ref := map[string][]string{}
		for step := range 10 + round%120 {
			name := fmt.Sprint("f", rng.IntN(3))
			if rng.IntN(2) == 0 {
				id := fmt.Sprint("id", rng.IntN(40))
				c.Add(name, id)
				ref[name] = append(ref[name], id)
				continue
			}
			id := ""
			if rng.IntN(2) == 0 {
				id = fmt.Sprint("id", rng.IntN(40))
			}
			want := id
			if q := ref[name]; len(q) > 0 {
				if want == "" {
					want = q[0]
				}
				for qi, v := range q {
					if v == want {
						ref[name] = append(q[:qi:qi], q[qi+1:]...)
						break
					}
				}
			}
			if got := c.Answer(name, id); got != want {
				t.Fatalf("round %d step %d: answer(%q, %q) = %q, want %q", round, step, name, id, got, want)
			}
		}
	}
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
		ok, sure := jsonkit.ValidPlainJSON(b)
		if !sure {
			t.Fatalf("validPlainJSON(%q) not sure", b)
		}
		if want := json.Valid(b); ok != want {
			t.Fatalf("validPlainJSON(%q) = %v, json.Valid %v", b, ok, want)
		}
	}
}
