package jsonkit

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// maxDepth is the deepest nesting a request body may have: jsontext's own limit, so validate and the
// decoders behind it (translate) agree.
const maxDepth = 10000

// validator checks a JSON text in one pass with what jsontext.Value.IsValid accepts under its default
// options — RFC 8259 grammar, valid UTF-8, escapes that are Unicode scalar values (no lone surrogate), no
// object at any depth that repeats a member name (names compared after unescaping), nesting at most
// maxDepth — and hands the top-level object's members to a callback on the way, so ParseRequest reads the
// body once. It is several times faster than jsontext (no token state machine, no name hashing for small
// objects) and allocates only for an object with many members or names written with escapes.
// FuzzValidateMatchesJSONText checks that it accepts exactly what jsontext accepts.
type validator struct {
	b     []byte
	depth int
	// keepTop says to keep in top the top-level members whose names may be decision keys.
	keepTop bool
	top     []member
	// names holds the member names of the objects being read, innermost last: each object's names start
	// at the index it recorded when it opened.
	names []nameSpan
	// unescaped holds the decoded names of the names written with escapes, in the same stack order.
	unescaped []byte
}

// member is a top-level member kept for ParseRequest: its raw name (without the quotes) and raw value.
type member struct{ key, value []byte }

// nameSpan is one member name: the range of its decoded bytes, in the body (a name without escapes: its
// raw bytes without the quotes) or, escaped, in validator.unescaped.
type nameSpan struct {
	start, end int
	escaped    bool
}

// linearNames and linearNameBytes bound the objects whose names are compared pairwise (as jsontext
// bounds its linear search); a larger object's names go to a set.
const (
	linearNames     = 32
	linearNameBytes = 1024
)

var validators = sync.Pool{New: func() any {
	return &validator{names: make([]nameSpan, 0, 64), unescaped: make([]byte, 0, 256), top: make([]member, 0, 8)}
}}

func getValidator() *validator { return validators.Get().(*validator) }

// putValidator returns v to the pool unless a hostile body grew its storage.
func putValidator(v *validator) {
	if cap(v.names) > 4096 || cap(v.unescaped) > 64<<10 || cap(v.top) > 256 {
		return
	}
	*v = validator{names: v.names[:0], unescaped: v.unescaped[:0], top: v.top[:0]}
	validators.Put(v)
}

// run reports whether b is exactly one JSON value that jsontext.Value.IsValid accepts. With keepTop, the
// members of a top-level object whose names may be decision keys (mayDecide) are kept in v.top, in order.
func (v *validator) run(b []byte, keepTop bool) bool {
	v.b, v.keepTop, v.top = b, keepTop, v.top[:0]
	end, ok := v.value(skipSpace(b, 0))
	return ok && skipSpace(b, end) == len(b)
}

// validJSON reports whether b is exactly one JSON value that jsontext.Value.IsValid accepts.
func validJSON(b []byte) bool {
	v := getValidator()
	defer putValidator(v)
	return v.run(b, false)
}

// mayDecide reports whether a member name (decoded) is a decision key or one under case folding: the
// only top-level members ParseRequest looks at.
func mayDecide(name []byte) bool {
	for _, k := range decisionKeys {
		if bytes.EqualFold(name, []byte(k)) {
			return true
		}
	}
	return false
}

// value validates the value starting at b[i] and returns the index just past it.
func (v *validator) value(i int) (int, bool) {
	b := v.b
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '{':
		return v.object(i)
	case '[':
		return v.array(i)
	case '"':
		end, _, ok := v.str(i)
		return end, ok
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			return number(b, i)
		}
		return 0, false
	}
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// number validates an RFC 8259 number at b[i]; what follows it is the caller's grammar.
func number(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, false
		}
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, false
		}
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	}
	return i, true
}

// plain marks the bytes a string holds as they are: printable ASCII but the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// SpecialMask8 flags the bytes of w (8 bytes of a JSON string read little-endian) that cannot stand in it
// as they are — below 0x20, a quote, a backslash or above 0x7F — by the high bit of each: zero when all 8
// are plain. It is the one 8-byte string scan of the data plane (this validator, translate's reader and
// writer). The lowest flagged byte is
// exactly the first byte that is not plain (the bit tricks of "Bit Twiddling Hacks": a zero byte of x
// shows in (x-0x01..)&^x&0x80..; a borrow can flag bytes above the first such byte, never below it), so
// bits.TrailingZeros64(SpecialMask8(w))/8 is that byte's index.
func SpecialMask8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ctl := (w - 0x20*ones) &^ w
	quote := (w ^ '"'*ones - ones) &^ (w ^ '"'*ones)
	bslash := (w ^ '\\'*ones - ones) &^ (w ^ '\\'*ones)
	return (ctl | quote | bslash | w) & highs
}

// str validates the string starting at b[i] == '"' and returns the index just past its closing quote and
// whether it holds an escape.
func (v *validator) str(i int) (end int, escaped, ok bool) {
	b := v.b
	j := i + 1
	for {
		// Eight bytes at a time to the first byte that is not plain; the last few bytes of b one by one.
		for j+8 <= len(b) {
			if m := SpecialMask8(binary.LittleEndian.Uint64(b[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		for j < len(b) && plain[b[j]] {
			j++
		}
		if j >= len(b) {
			return 0, false, false
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped, true
		case c == '\\':
			escaped = true
			n, ok := escape(b, j)
			if !ok {
				return 0, false, false
			}
			j = n
		case c < 0x20:
			return 0, false, false
		default: // a multi-byte character
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, false
			}
			j += size
		}
	}
}

// escape validates the escape at b[j] == '\\' and returns the index past it; a \u escape must be a
// Unicode scalar value (a high surrogate followed by a low one, or no surrogate).
func escape(b []byte, j int) (int, bool) {
	if j+1 >= len(b) {
		return 0, false
	}
	switch b[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return j + 2, true
	case 'u':
		r, ok := hex4Rune(b, j+2)
		if !ok {
			return 0, false
		}
		switch {
		case 0xDC00 <= r && r <= 0xDFFF:
			return 0, false // a low surrogate alone
		case 0xD800 <= r && r <= 0xDBFF:
			if j+7 >= len(b) || b[j+6] != '\\' || b[j+7] != 'u' {
				return 0, false
			}
			lo, ok := hex4Rune(b, j+8)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return 0, false
			}
			return j + 12, true
		}
		return j + 6, true
	}
	return 0, false
}

func hex4Rune(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (v *validator) object(i int) (int, bool) {
	if v.depth++; v.depth > maxDepth {
		return 0, false
	}
	base, ubase := len(v.names), len(v.unescaped)
	end, ok := v.members(i, base)
	v.names, v.unescaped = v.names[:base], v.unescaped[:ubase]
	v.depth--
	return end, ok
}

// members validates the object at b[i] == '{' whose names are recorded from v.names[base].
func (v *validator) members(i, base int) (int, bool) {
	b := v.b
	var set map[string]struct{} // the names once the object is beyond linearNames or linearNameBytes
	nameBytes := 0
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		ke, escaped, ok := v.str(i)
		if !ok {
			return 0, false
		}
		ks := i + 1
		name := nameSpan{ks, ke - 1, false}
		if escaped {
			us := len(v.unescaped)
			v.unescaped, _ = jsontext.AppendUnquote(v.unescaped, b[i:ke]) // valid: str accepted it
			name = nameSpan{us, len(v.unescaped), true}
		}
		nameBytes += name.end - name.start
		if set == nil && len(v.names)-base < linearNames && nameBytes <= linearNameBytes {
			if v.seen(v.names[base:], name) {
				return 0, false
			}
			v.names = append(v.names, name)
		} else {
			if set == nil {
				set = make(map[string]struct{}, 2*linearNames)
				for _, n := range v.names[base:] {
					set[string(v.bytes(n))] = struct{}{}
				}
			}
			k := v.bytes(name)
			if _, dup := set[string(k)]; dup {
				return 0, false
			}
			set[string(k)] = struct{}{}
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		vs := skipSpace(b, i+1)
		ve, ok := v.value(vs)
		if !ok {
			return 0, false
		}
		if v.depth == 1 && v.keepTop && mayDecide(v.bytes(name)) {
			v.top = append(v.top, member{b[ks : ke-1], b[vs:ve]})
		}
		i = skipSpace(b, ve)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// seen reports whether name equals one of names (decoded names compared).
func (v *validator) seen(names []nameSpan, name nameSpan) bool {
	k := v.bytes(name)
	for _, n := range names {
		if n.end-n.start == len(k) && bytes.Equal(v.bytes(n), k) {
			return true
		}
	}
	return false
}

// bytes returns a name's decoded bytes.
func (v *validator) bytes(n nameSpan) []byte {
	if n.escaped {
		return v.unescaped[n.start:n.end]
	}
	return v.b[n.start:n.end]
}

func (v *validator) array(i int) (int, bool) {
	if v.depth++; v.depth > maxDepth {
		return 0, false
	}
	end, ok := v.elements(i)
	v.depth--
	return end, ok
}

// elements validates the array at b[i] == '['.
func (v *validator) elements(i int) (int, bool) {
	b := v.b
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		ve, ok := v.value(i)
		if !ok {
			return 0, false
		}
		i = skipSpace(b, ve)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}
