package jsonkit

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Reader reads the JSON of a client request by hand: one pass over the translator's own copy of the body, with
// the request shapes' decoders (decode*In in the dialect files) filling their structs member by member — no
// reflection, and no set-up cost per value (the go-json-experiment decoder cost ~1 µs per Unmarshal call,
// which gamma paid ~80 times per request).
//
// It accepts exactly what the go-json-experiment decoder configured as the Unmarshal options accepted and fills the
// same values (FuzzHandDecoders compares them on arbitrary input):
//   - strict RFC 8259 syntax, valid UTF-8 in strings (escaped surrogates must pair), nesting depth ≤ 10,000,
//     nothing but whitespace after the value;
//   - member names: an exact match first, else strings.EqualFold ('_' and '-' significant), the last of
//     duplicate names wins (an object member is merged into the object a duplicate already set);
//   - null: a string keeps its value, a bool, number, pointer, slice or struct becomes its zero value, a raw
//     value is the four bytes "null";
//   - numbers: an integer member takes only an integer literal in range; a float member fails on overflow;
//   - strings without escapes and raw values are views of the input (never modified afterwards).
type Reader struct {
	B     []byte `json:"-"`
	I     int    `json:"-"`
	Depth int    `json:"-"`
	spare []byte // room for the short strings with escapes it unquotes (one allocation for many)
}

// Scratch is reused storage for the decoded members that do not outlive a beta.DecodeRequest call (the
// messages, contents or input items before they become the canonical form): growing them afresh for every
// request was a good part of the bytes a request allocated.
type Scratch[T any] struct{ pool sync.Pool }

// Get returns an empty slice to read into.
func (s *Scratch[T]) Get() []T {
	if v, ok := s.pool.Get().(*[]T); ok {
		return (*v)[:0]
	}
	return nil
}

// Put keeps v's storage for the next request, cleared (so it holds nothing of this request's body).
func (s *Scratch[T]) Put(v []T) {
	if cap(v) == 0 || cap(v) > 1024 {
		return
	}
	v = v[:cap(v)]
	clear(v)
	s.pool.Put(&v)
}

// maxJSONDepth is the go-json-experiment decoder's nesting limit.
const maxJSONDepth = 10000

// readError is a syntax error or a value of the wrong kind, at a byte offset of the value being read.
type readError struct {
	off int
	msg string
}

func (e *readError) Error() string { return fmt.Sprintf("%s at offset %d", e.msg, e.off) }

func (d *Reader) Fail(msg string) error { return &readError{off: d.I, msg: msg} }

// kindName names a JSON kind as peek returns it, for errors.
func kindName(k byte) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '0':
		return "number"
	}
	return "invalid value"
}

// Mismatch is the error for a value of kind k where want was expected.
func (d *Reader) Mismatch(k byte, want string) error {
	if k == 0 {
		return d.syntax()
	}
	return d.Fail("cannot read JSON " + kindName(k) + " as " + want)
}

// syntax is the error at the current position, which does not start a value.
func (d *Reader) syntax() error {
	if d.I >= len(d.B) {
		return d.Fail("unexpected end of JSON input")
	}
	return d.Fail(fmt.Sprintf("invalid character %q", d.B[d.I]))
}

// Ws skips whitespace. Every token starts above ' ' (and compact JSON has no whitespace), so one
// comparison settles the usual case.
func (d *Reader) Ws() {
	for d.I < len(d.B) {
		if c := d.B[d.I]; c > ' ' || (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
			return
		}
		d.I++
	}
}

// Peek skips whitespace and returns the kind of the next value: '{', '[', '"', 'n', 't', 'f', '0' (a
// number), or 0 when none starts here.
func (d *Reader) Peek() byte {
	d.Ws()
	if d.I < len(d.B) {
		return valueKind[d.B[d.I]]
	}
	return 0
}

// valueKind is peek's kind of a value by its first byte (a table keeps peek small enough to inline).
var valueKind = func() (t [256]byte) {
	for _, c := range []byte(`{["ntf`) {
		t[c] = c
	}
	for _, c := range []byte("-0123456789") {
		t[c] = '0'
	}
	return t
}()

// Done is err, else the error of end: d := Reader{b: body}; err := d.done(v.read(&d)) reads body as one value.
func (d *Reader) Done(err error) error {
	if err != nil {
		return err
	}
	return d.end()
}

// end reports an error unless only whitespace follows the value.
func (d *Reader) end() error {
	d.Ws()
	if d.I < len(d.B) {
		return d.Fail(fmt.Sprintf("invalid character %q after top-level value", d.B[d.I]))
	}
	return nil
}

// Literal consumes lit (null, true or false).
func (d *Reader) Literal(lit string) error {
	if len(d.B)-d.I < len(lit) || string(d.B[d.I:d.I+len(lit)]) != lit {
		return d.Fail("invalid literal, want " + lit)
	}
	d.I += len(lit)
	return nil
}

// Open consumes '{' or '[' (the caller peeked it).
func (d *Reader) Open() error {
	d.I++
	d.Depth++
	if d.Depth > maxJSONDepth {
		return d.Fail("exceeded max depth")
	}
	return nil
}

// Key reads the next member name of an object opened with open, or reports false at its end. first is
// true for the first call on an object.
func (d *Reader) Key(first bool) (string, bool, error) {
	d.Ws()
	if d.I >= len(d.B) {
		return "", false, d.syntax()
	}
	if d.B[d.I] == '}' {
		d.I++
		d.Depth--
		return "", false, nil
	}
	if !first {
		if d.B[d.I] != ',' {
			return "", false, d.Fail(fmt.Sprintf("invalid character %q after object member (expecting ',' or '}')", d.B[d.I]))
		}
		d.I++
		d.Ws()
		if d.I >= len(d.B) {
			return "", false, d.syntax()
		}
	}
	if d.B[d.I] != '"' {
		return "", false, d.Fail(fmt.Sprintf("invalid character %q at start of object name", d.B[d.I]))
	}
	var name string
	// PlainRun, with the first eight bytes tested here: most names end there, and then cost no call.
	end := d.I + 1
	if end+8 <= len(d.B) {
		if m := SpecialMask8(binary.LittleEndian.Uint64(d.B[end:])); m != 0 {
			end += bits.TrailingZeros64(m) >> 3
		} else {
			end = PlainRun(bytesView(d.B), end+8)
		}
	} else {
		end = PlainRun(bytesView(d.B), end)
	}
	if end < len(d.B) && d.B[end] == '"' {
		if end > d.I+1 {
			name = unsafe.String(&d.B[d.I+1], end-d.I-1) // a plain name (the usual case): a view, as StrTok gives
		}
		d.I = end + 1
	} else {
		var err error
		if name, err = d.StrTok(); err != nil {
			return "", false, err
		}
	}
	d.Ws()
	if d.I >= len(d.B) || d.B[d.I] != ':' {
		return "", false, d.Fail("missing ':' after object name")
	}
	d.I++
	return name, true, nil
}

// elem reports whether an array opened with open has another element (and positions before it).
func (d *Reader) elem(first bool) (bool, error) {
	d.Ws()
	if d.I >= len(d.B) {
		return false, d.syntax()
	}
	if d.B[d.I] == ']' {
		d.I++
		d.Depth--
		return false, nil
	}
	if !first {
		if d.B[d.I] != ',' {
			return false, d.Fail(fmt.Sprintf("invalid character %q after array element (expecting ',' or ']')", d.B[d.I]))
		}
		d.I++
		d.Ws()
		if d.I < len(d.B) && d.B[d.I] == ']' {
			return false, d.Fail("invalid character ']' after ','")
		}
	}
	return true, nil
}

// StrTok reads a string token (at '"'): a view of the input without escapes, else a new unquoted string.
func (d *Reader) StrTok() (string, error) {
	start := d.I + 1
	escaped, err := d.ScanStr()
	if err != nil {
		return "", err
	}
	end := d.I - 1
	if escaped {
		return d.Unquote(d.B[start:end]), nil
	}
	if end == start {
		return "", nil
	}
	return unsafe.String(&d.B[start], end-start), nil // the input is never modified (see Reader)
}

// ScanStr consumes and validates a string token (at '"') and reports whether it has escapes.
func (d *Reader) ScanStr() (escaped bool, err error) {
	b := d.B
	i := d.I + 1 // PlainRun, with the first eight bytes tested here (as in key)
	if i+8 <= len(b) {
		if m := SpecialMask8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
		} else {
			i = PlainRun(bytesView(b), i+8)
		}
	} else {
		i = PlainRun(bytesView(b), i)
	}
	for ; ; i = PlainRun(bytesView(b), i) {
		if i >= len(b) {
			d.I = i
			return false, d.Fail("unexpected end of JSON input in string")
		}
		c := b[i]
		switch {
		case c == '"':
			d.I = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				d.I = i
				return false, d.Fail("unexpected end of JSON input in string")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				v1, ok := hex4(b, i+2)
				if !ok {
					d.I = i
					return false, d.Fail("invalid escape sequence in string")
				}
				i += 6
				if utf16.IsSurrogate(rune(v1)) {
					v2, ok := hex4(b, i+2)
					if !ok || b[i] != '\\' || b[i+1] != 'u' || utf16.DecodeRune(rune(v1), rune(v2)) == utf8.RuneError {
						d.I = i - 6
						return false, d.Fail("invalid surrogate escape sequence in string")
					}
					i += 6
				}
			default:
				d.I = i
				return false, d.Fail("invalid escape sequence in string")
			}
		case c < 0x20:
			d.I = i
			return false, d.Fail("invalid control character in string")
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				d.I = i
				return false, d.Fail("invalid UTF-8 in string")
			}
			i += n
		}
	}
}

// PlainRun returns the index of the first byte at or after i that ends a plain run of a string ('"', '\\',
// a control character or a byte of a multi-byte UTF-8 sequence), or len(s) when there is none. The first
// sixteen bytes are tested eight at a time (most strings, member names and ids, end there); a longer run
// is found with IndexByte (vectorised) for the quote and one cheap pass over the bytes before it
// (printableASCII, IndexByte for a backslash), falling back to eight at a time when those find anything.
func PlainRun(s string, i int) int {
	if i < len(s) {
		b := StringBytes(s[i:])
		for k := 0; k < 2 && len(b) >= 8; k++ {
			if m := SpecialMask8(binary.LittleEndian.Uint64(b)); m != 0 {
				return len(s) - len(b) + bits.TrailingZeros64(m)>>3
			}
			b = b[8:]
		}
		i = len(s) - len(b)
	}
	if len(s)-i >= 16 {
		n := strings.IndexByte(s[i:], '"')
		if n < 0 {
			n = len(s) - i
		}
		if run := s[i : i+n]; printableASCII(run) && strings.IndexByte(run, '\\') < 0 {
			return i + n
		}
	}
	for ; i+8 <= len(s); i += 8 {
		if m := SpecialMask8(binary.LittleEndian.Uint64(StringBytes(s[i:]))); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(s); i++ {
		if !plainByte[s[i]] {
			return i
		}
	}
	return i
}

// plainByte marks the bytes that continue a plain run of a string (see PlainRun): one load per byte of a
// short tail instead of four comparisons.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// printableASCII reports whether every byte of s is in [0x20, 0x7f] (no control character, no byte of a
// multi-byte UTF-8 sequence). Eight bytes v hold one outside exactly when (v | v-0x20…) has a high bit set:
// with every byte at least 0x20 no borrow crosses bytes.
func printableASCII(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	b := StringBytes(s)
	for len(b) >= 32 { // a fixed-length window: no bounds checks in the loop
		c := b[:32:32]
		v, w := binary.LittleEndian.Uint64(c), binary.LittleEndian.Uint64(c[8:])
		x, y := binary.LittleEndian.Uint64(c[16:]), binary.LittleEndian.Uint64(c[24:])
		if (v|(v-0x20*ones)|w|(w-0x20*ones)|x|(x-0x20*ones)|y|(y-0x20*ones))&highs != 0 {
			return false
		}
		b = b[32:]
	}
	if len(b) >= 16 {
		v, w := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		if (v|(v-0x20*ones)|w|(w-0x20*ones))&highs != 0 {
			return false
		}
		b = b[16:]
	}
	if len(b) >= 8 {
		if v := binary.LittleEndian.Uint64(b); (v|(v-0x20*ones))&highs != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// bytesView views b as a string for reading (b is never written while the view is used).
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// hex4 parses the four hex digits at b[i:].
func hex4(b []byte, i int) (uint16, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// Unquote decodes the (validated) inside of a string with escapes, into memory of its own.
func Unquote(in []byte) string {
	out := make([]byte, len(in))
	return unsafe.String(unsafe.SliceData(out), unquoteTo(out, in)) // out is never written again
}

// UnquoteSpare is the room Reader.Unquote takes at a time for strings of up to unquoteShort bytes (arguments,
// ids, outputs): a size class of its own, at most a quarter of it left unused when the next does not fit.
const UnquoteSpare, unquoteShort = 1024, 256

// Unquote is unquote for a short string into d.spare, so a request's many short escaped strings (alpha's
// arguments, function outputs) cost one allocation (the strings share it, and keep it alive).
func (d *Reader) Unquote(in []byte) string {
	if len(in) > unquoteShort {
		return Unquote(in)
	}
	n := len(d.spare)
	if cap(d.spare)-n < len(in) {
		d.spare, n = make([]byte, 0, UnquoteSpare), 0
	}
	m := unquoteTo(d.spare[n:n+len(in)], in)
	if m == 0 {
		return ""
	}
	d.spare = d.spare[:n+m]
	return unsafe.String(&d.spare[n], m) // spare is only appended to past n+m
}

// unquoteTo decodes the (validated) inside of a string with escapes into out (len(out) == len(in): the
// decoded text is never longer) and returns its length: the bytes before the next backslash are copied up
// to eight at a time.
func unquoteTo(out, in []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i, j := 0, 0
	for i < len(in) {
		if i+8 <= len(in) { // copy the eight bytes (j <= i: they fit), keep those before a backslash
			v := binary.LittleEndian.Uint64(in[i:])
			binary.LittleEndian.PutUint64(out[j:], v)
			bs := v ^ ('\\' * ones)
			m := (bs - ones) &^ bs & highs // the lowest bit set marks the first backslash exactly
			if m == 0 {
				i, j = i+8, j+8
				continue
			}
			n := bits.TrailingZeros64(m) >> 3
			i, j = i+n, j+n
		} else if c := in[i]; c != '\\' {
			out[j] = c
			i, j = i+1, j+1
			continue
		}
		switch in[i+1] { // in[i] is a backslash
		case 'b':
			out[j] = '\b'
		case 'f':
			out[j] = '\f'
		case 'n':
			out[j] = '\n'
		case 'r':
			out[j] = '\r'
		case 't':
			out[j] = '\t'
		case 'u':
			v1, _ := hex4(in, i+2)
			r := rune(v1)
			if utf16.IsSurrogate(r) {
				v2, _ := hex4(in, i+8)
				r = utf16.DecodeRune(r, rune(v2))
				i += 6
			}
			j += utf8.EncodeRune(out[j:], r)
			i += 6
			continue
		default: // '"', '\\', '/'
			out[j] = in[i+1]
		}
		i, j = i+2, j+1
	}
	return j
}

// number consumes a number token (the caller peeked '0') and returns its bytes.
func (d *Reader) number() ([]byte, error) {
	b, start, i := d.B, d.I, d.I
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digitsEnd(b, i+1)
	default:
		d.I = i
		return nil, d.syntax()
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.I = i
			return nil, d.syntax()
		}
		i = digitsEnd(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.I = i
			return nil, d.syntax()
		}
		i = digitsEnd(b, i+1)
	}
	d.I = i
	return b[start:i:i], nil
}

// digitsEnd returns the index of the first byte at or after i that is not a decimal digit.
func digitsEnd(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// Skip consumes one value of any kind, validating it (with the errors key, elem and the typed readers give).
func (d *Reader) Skip() error {
	d.Ws()
	if d.I >= len(d.B) {
		return d.syntax()
	}
	switch d.B[d.I] {
	case '"':
		_, err := d.ScanStr()
		return err
	case '{':
		return d.skipObject()
	case '[':
		return d.skipArray()
	case 'n':
		return d.Literal("null")
	case 't':
		return d.Literal("true")
	case 'f':
		return d.Literal("false")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		_, err := d.number()
		return err
	}
	return d.syntax()
}

// skipObject consumes an object (at '{'), reading a string value in place rather than through skip.
func (d *Reader) skipObject() error {
	if err := d.Open(); err != nil {
		return err
	}
	for first := true; ; first = false {
		_, more, err := d.Key(first)
		if !more || err != nil {
			return err
		}
		if err := d.skipValue(); err != nil {
			return err
		}
	}
}

// skipArray consumes an array (at '['), reading a string element in place rather than through skip.
func (d *Reader) skipArray() error {
	if err := d.Open(); err != nil {
		return err
	}
	for first := true; ; first = false {
		more, err := d.elem(first)
		if !more || err != nil {
			return err
		}
		if err := d.skipValue(); err != nil {
			return err
		}
	}
}

// skipValue consumes one member value or element: the usual string read here, anything else by skip.
func (d *Reader) skipValue() error {
	d.Ws()
	if d.I < len(d.B) && d.B[d.I] == '"' {
		_, err := d.ScanStr()
		return err
	}
	return d.Skip()
}

// Raw reads any value as its bytes (capacity clipped, so an append copies).
func (d *Reader) Raw(dst *json.RawMessage) error {
	d.Ws()
	start := d.I
	if err := d.Skip(); err != nil {
		return err
	}
	*dst = json.RawMessage(d.B[start:d.I:d.I])
	return nil
}

// Mark skips whitespace and returns the position and depth a value starts at, for kept.
func (d *Reader) Mark() (start, depth int) {
	d.Ws()
	return d.I, d.Depth
}

// Kept finishes reading a value in the body's one pass that was kept raw and read again later: err is the
// read of the value that started at start, depth (mark), and the value's text goes to *raw. An error that
// is not the body's syntax (a value of the wrong kind: skipping the value from its start succeeds) is
// returned as keep, as reading *raw alone reports it (offset from the value's start), and reading goes on
// after the value, so a later syntax error still wins; the caller reports keep where it read the raw value
// before. A syntax error is returned as err. (The read is the caller's: a read passed in as a func value
// would move the reader to the heap.)
func (d *Reader) Kept(start, depth int, err error, raw *json.RawMessage) (keep, syntax error) {
	if err != nil {
		d.I, d.Depth = start, depth
		if err := d.Skip(); err != nil {
			return nil, err
		}
		if re, ok := err.(*readError); ok {
			err = &readError{off: re.off - start, msg: re.msg}
		}
	}
	*raw = json.RawMessage(d.B[start:d.I:d.I])
	return err, nil
}

// Str reads a string member; null leaves *dst unchanged.
func (d *Reader) Str(dst *string) error {
	switch k := d.Peek(); k {
	case '"':
		s, err := d.StrTok()
		if err != nil {
			return err
		}
		*dst = s
		return nil
	case 'n':
		return d.Literal("null")
	default:
		return d.Mismatch(k, "string")
	}
}

// StrPtr reads an optional string member; null sets nil.
func (d *Reader) StrPtr(dst **string) error {
	switch k := d.Peek(); k {
	case '"':
		s, err := d.StrTok()
		if err != nil {
			return err
		}
		if *dst == nil {
			*dst = new(string)
		}
		**dst = s
		return nil
	case 'n':
		*dst = nil
		return d.Literal("null")
	default:
		return d.Mismatch(k, "string")
	}
}

// Boolean reads a bool member; null sets false.
func (d *Reader) Boolean(dst *bool) error {
	switch k := d.Peek(); k {
	case 't':
		*dst = true
		return d.Literal("true")
	case 'f':
		*dst = false
		return d.Literal("false")
	case 'n':
		*dst = false
		return d.Literal("null")
	default:
		return d.Mismatch(k, "bool")
	}
}

// BoolPtr reads an optional bool member; null sets nil.
func (d *Reader) BoolPtr(dst **bool) error {
	switch k := d.Peek(); k {
	case 't', 'f':
		if *dst == nil {
			*dst = new(bool)
		}
		return d.Boolean(*dst)
	case 'n':
		*dst = nil
		return d.Literal("null")
	default:
		return d.Mismatch(k, "bool")
	}
}

// int64Of reads an integer literal (no fraction or exponent) in range.
func (d *Reader) int64Of() (int64, error) {
	at := d.I
	b, err := d.number()
	if err != nil {
		return 0, err
	}
	neg := b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	var v uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, &readError{off: at, msg: "cannot read JSON number " + string(b) + " as an integer"}
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, &readError{off: at, msg: "JSON number " + string(b) + " out of range"}
		}
		v = v*10 + uint64(c-'0')
	}
	if (neg && v > 1<<63) || (!neg && v > 1<<63-1) {
		return 0, &readError{off: at, msg: "JSON number " + string(b) + " out of range"}
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// Integer reads an int member; null sets 0.
func (d *Reader) Integer(dst *int) error {
	switch k := d.Peek(); k {
	case '0':
		v, err := d.int64Of()
		if err != nil {
			return err
		}
		*dst = int(v)
		return nil
	case 'n':
		*dst = 0
		return d.Literal("null")
	default:
		return d.Mismatch(k, "integer")
	}
}

// IntPtr reads an optional int member; null sets nil.
func (d *Reader) IntPtr(dst **int) error {
	switch k := d.Peek(); k {
	case '0':
		v, err := d.int64Of()
		if err != nil {
			return err
		}
		if *dst == nil {
			*dst = new(int)
		}
		**dst = int(v)
		return nil
	case 'n':
		*dst = nil
		return d.Literal("null")
	default:
		return d.Mismatch(k, "integer")
	}
}

// Int64Ptr reads an optional int64 member; null sets nil.
func (d *Reader) Int64Ptr(dst **int64) error {
	switch k := d.Peek(); k {
	case '0':
		v, err := d.int64Of()
		if err != nil {
			return err
		}
		if *dst == nil {
			*dst = new(int64)
		}
		**dst = v
		return nil
	case 'n':
		*dst = nil
		return d.Literal("null")
	default:
		return d.Mismatch(k, "integer")
	}
}

// FloatPtr reads an optional float64 member; null sets nil, a number beyond float64 fails.
func (d *Reader) FloatPtr(dst **float64) error {
	switch k := d.Peek(); k {
	case '0':
		at := d.I
		b, err := d.number()
		if err != nil {
			return err
		}
		v, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
		if err != nil {
			return &readError{off: at, msg: "JSON number " + string(b) + " out of range"}
		}
		if *dst == nil {
			*dst = new(float64)
		}
		**dst = v
		return nil
	case 'n':
		*dst = nil
		return d.Literal("null")
	default:
		return d.Mismatch(k, "number")
	}
}

// Strs reads a string array member: null sets nil, an array replaces the slice (empty, not nil, when it
// has no element), a null element is "".
func (d *Reader) Strs(dst *[]string) error {
	switch k := d.Peek(); k {
	case '[':
		if err := d.Open(); err != nil {
			return err
		}
		out := (*dst)[:0]
		if out == nil {
			out = []string{}
		}
		for first := true; ; first = false {
			ok, err := d.elem(first)
			if err != nil {
				*dst = out
				return err
			}
			if !ok {
				*dst = out
				return nil
			}
			out = append(out, "")
			if err := d.Str(&out[len(out)-1]); err != nil {
				*dst = out
				return err
			}
		}
	case 'n':
		*dst = nil
		return d.Literal("null")
	default:
		return d.Mismatch(k, "array")
	}
}

// RawList reads an array member of raw values (null sets nil, as strs).
func (d *Reader) RawList(dst *[]json.RawMessage) error {
	switch k := d.Peek(); k {
	case '[':
		if err := d.Open(); err != nil {
			return err
		}
		out := (*dst)[:0]
		if out == nil {
			out = []json.RawMessage{}
		}
		for first := true; ; first = false {
			ok, err := d.elem(first)
			if err != nil {
				*dst = out
				return err
			}
			if !ok {
				*dst = out
				return nil
			}
			out = append(out, nil)
			if err := d.Raw(&out[len(out)-1]); err != nil {
				*dst = out
				return err
			}
		}
	case 'n':
		*dst = nil
		return d.Literal("null")
	default:
		return d.Mismatch(k, "array")
	}
}

// Object reads an object member: null reports null (the caller zeroes its value), else member is called
// for each name with the decoder positioned at the value, which it must consume.
func (d *Reader) Object(member func(name string) error) (null bool, err error) {
	switch k := d.Peek(); k {
	case '{':
		if err := d.Open(); err != nil {
			return false, err
		}
		for first := true; ; first = false {
			name, ok, err := d.Key(first)
			if err != nil {
				return false, err
			}
			if !ok {
				return false, nil
			}
			if err := member(name); err != nil {
				return false, err
			}
		}
	case 'n':
		return true, d.Literal("null")
	default:
		return false, d.Mismatch(k, "object")
	}
}

// Array reads an array member: null reports null, else each is called per element (index from 0).
func (d *Reader) Array(each func(i int) error) (null bool, err error) {
	switch k := d.Peek(); k {
	case '[':
		if err := d.Open(); err != nil {
			return false, err
		}
		for i := 0; ; i++ {
			ok, err := d.elem(i == 0)
			if err != nil || !ok {
				return false, err
			}
			if err := each(i); err != nil {
				return false, err
			}
		}
	case 'n':
		return true, d.Literal("null")
	default:
		return false, d.Mismatch(k, "array")
	}
}

// MemberNames is a struct's member names (FieldOf), with a table of the one name a member name can equal
// exactly, found from its length and first and last bytes.
type MemberNames struct {
	Names []string `json:"-"`
	slot  [64]int8 // index + 1 of the only name with a hash, 0 for none, -1 for several
}

// Fields makes the MemberNames of names (never empty).
func Fields(names ...string) *MemberNames {
	f := &MemberNames{Names: names}
	for i, n := range names {
		switch h := nameHash(n); f.slot[h] {
		case 0:
			f.slot[h] = int8(i + 1)
		default:
			f.slot[h] = -1
		}
	}
	return f
}

// nameHash is a non-empty name's slot in MemberNames.slot.
func nameHash(n string) uint {
	return (uint(len(n))*7 + uint(n[0]) + uint(n[len(n)-1])*3) & 63
}

// Match is the declared name that member name matches, as the go-json-experiment decoder configured by
// Unmarshal matches it: an exact match first, else the first strings.EqualFold match; "" for none. The
// readers switch on it by name.
func (f *MemberNames) Match(name string) string {
	if i := FieldOf(name, f); i >= 0 {
		return f.Names[i]
	}
	return ""
}

// FieldOf is the index in f.Names of the name Match returns; -1 for none.
func FieldOf(name string, f *MemberNames) int {
	if name != "" {
		switch k := f.slot[nameHash(name)]; {
		case k > 0:
			if f.Names[k-1] == name {
				return int(k - 1)
			}
		case k < 0:
			for i, n := range f.Names {
				if n == name {
					return i
				}
			}
		}
	}
	for i, n := range f.Names {
		if strings.EqualFold(n, name) {
			return i
		}
	}
	return -1
}

// Want starts an optional object member: null sets *p nil and reports false; otherwise *p is allocated
// when nil, and the caller reads the member into it (merged into what a duplicate name set).
func Want[T any](d *Reader, p **T) (bool, error) {
	if d.Peek() == KindNull {
		*p = nil
		return false, d.Literal("null")
	}
	if *p == nil {
		*p = new(T)
	}
	return true, nil
}

// SliceResult is what a slice member holds after an array (empty, not nil) or null (nil).
func SliceResult[T any](out []T, null bool) []T {
	if null {
		return nil
	}
	if out == nil {
		return []T{}
	}
	return out
}
