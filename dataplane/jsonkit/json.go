package jsonkit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// JSON and content helpers shared by the dialect codecs.

// decodeOpts configure Unmarshal: encoding/json's name matching (strings.EqualFold, so "Stream" is stream
// but "s_tream" is not — the go-json-experiment default would also ignore '_' and '-', which the gateway's
// own reading of a body, jsonkit.ParseRequest, does not; the last of duplicate names wins) on the
// go-json-experiment decoder, with strings and raw values that point into the input instead of copies
// (viewString, viewRaw).
var decodeOpts = jsonv2.JoinOptions(
	jsonv2.MatchCaseInsensitiveNames(true),
	jsonv1.MatchCaseSensitiveDelimiter(true),
	jsontext.AllowDuplicateNames(true),
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(viewString),
		jsonv2.UnmarshalFromFunc(viewRaw),
	)),
)

// Unmarshal decodes a request or a buffered response body (or a value inside one) in one pass, without
// the second validation pass and the per-value reflection of encoding/json. Decoded strings and raw values
// share data's memory: data must not be modified afterwards (the request decoders decode from st.own: a copy
// or a body the caller lent; response decoders from OwnedCopy of the
// caller's body, and stream decoders, whose event buffers are reused, keep only what they copy).
func Unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, decodeOpts)
}

// eventOpts configure UnmarshalEvent: the name matching of the Unmarshal options, but decoded strings are copies (an
// upstream event's bytes are the stream reader's buffer, reused for the next event), and invalid UTF-8 is
// carried instead of failing the stream (encoding/json replaced it; the client encoders still do).
var eventOpts = jsonv2.JoinOptions(
	jsonv2.MatchCaseInsensitiveNames(true),
	jsonv1.MatchCaseSensitiveDelimiter(true),
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
)

// UnmarshalEvent decodes one upstream stream event (3-4× faster than encoding/json on these small objects,
// with a third of its allocations).
func UnmarshalEvent(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, eventOpts)
}

// OwnedCopy is the one copy of a caller's body the decoded canonical form points into.
func OwnedCopy(b []byte) []byte { return bytes.Clone(b) }

var ErrNotString = errors.New("not a JSON string")

// viewString decodes a JSON string into a string sharing the input's memory when it has no escapes (the
// usual case: no allocation); null leaves the string unchanged, as encoding/json does.
func viewString(dec *jsontext.Decoder, s *string) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		return nil
	case '"':
	default:
		return fmt.Errorf("cannot unmarshal %s into a string: %w", v.Kind(), ErrNotString)
	}
	in := v[1 : len(v)-1]
	if len(in) == 0 {
		*s = ""
		return nil
	}
	if bytes.IndexByte(in, '\\') < 0 {
		*s = unsafe.String(&in[0], len(in)) // v points into the immutable input (see Unmarshal)
		return nil
	}
	b, err := jsontext.AppendUnquote(make([]byte, 0, len(v)), v)
	if err != nil {
		return err
	}
	*s = unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
	return nil
}

// ValidStringOf is StringOf for a value the hand-written decoder read (Reader.Raw): valid JSON without
// surrounding whitespace, strings valid UTF-8, so only a backslash can make it differ from its view and
// the check is one IndexByte instead of a second validating scan.
func ValidStringOf(raw []byte, s *string) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return StringOf(raw, s)
	}
	in := raw[1 : len(raw)-1]
	switch {
	case len(in) == 0:
		*s = ""
	case bytes.IndexByte(in, '\\') < 0:
		*s = unsafe.String(unsafe.SliceData(in), len(in)) // raw is never modified (see Reader)
	default:
		*s = Unquote(in)
	}
	return true
}

// StringOf decodes raw when it is one JSON string, as Unmarshal into a string does but without a decoder
// (and sharing raw's memory when there is no escape); false when raw is anything else.
func StringOf(raw []byte, s *string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	in := raw[1 : len(raw)-1]
	i := PlainRun(bytesView(in), 0)
	plain := true
	for _, c := range in[i:] {
		if c < 0x20 || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain && utf8.Valid(in[i:]) {
		*s = unsafe.String(unsafe.SliceData(in), len(in)) // raw is never modified (see Unmarshal)
		return true
	}
	b, err := jsontext.AppendUnquote(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return false
	}
	*s = unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
	return true
}

// viewRaw keeps a raw value as the input's bytes (capacity clipped, so an append copies).
func viewRaw(dec *jsontext.Decoder, r *json.RawMessage) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	*r = json.RawMessage(v[:len(v):len(v)])
	return nil
}

// encBuf is a pooled encoder: json.NewEncoder per value was the largest allocation source per event.
type encBuf struct {
	b   bytes.Buffer
	enc *json.Encoder
}

var encPool = sync.Pool{New: func() any {
	e := &encBuf{}
	e.enc = json.NewEncoder(&e.b)
	e.enc.SetEscapeHTML(false)
	return e
}}

// AppendJSON appends v's JSON (without HTML escaping, so `<`, `>` and `&` in model text stay readable).
// The types the stream encoders build events from (obj, strings, integers, raw JSON) take a direct path;
// everything else goes through a pooled encoding/json encoder.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case Obj:
		return t.appendTo(dst)
	case []any:
		dst = append(dst, '[')
		for i, x := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendJSON(dst, x); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case []Obj:
		dst = append(dst, '[')
		for i, x := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = x.appendTo(dst); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case string:
		return AppendString(dst, t), nil
	case int:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int64:
		return strconv.AppendInt(dst, t, 10), nil
	case bool:
		return strconv.AppendBool(dst, t), nil
	case nil:
		return append(dst, "null"...), nil
	case json.RawMessage:
		if len(t) == 0 {
			return append(dst, "null"...), nil
		}
		return append(dst, t...), nil
	}
	e := encPool.Get().(*encBuf)
	e.b.Reset()
	err := e.enc.Encode(v)
	if err == nil {
		out := e.b.Bytes()
		dst = append(dst, out[:len(out)-1]...)
	}
	if e.b.Cap() <= 64<<10 {
		encPool.Put(e)
	}
	if err != nil {
		return dst, fmt.Errorf("encode json: %w", err)
	}
	return dst, nil
}

// AppendString appends s as a JSON string the way encoding/json does with HTML escaping off: '"', '\\' and
// control characters escaped, U+2028 and U+2029 as \u2028 and \u2029, each byte of invalid UTF-8 as \ufffd.
// Runs that need no change are copied in one append.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start, i := 0, 0 // PlainRun, with the first eight bytes tested here (as in Reader.Key)
	if len(s) >= 8 {
		if m := SpecialMask8(binary.LittleEndian.Uint64(StringBytes(s))); m != 0 {
			i = bits.TrailingZeros64(m) >> 3
		} else {
			i = PlainRun(s, 8)
		}
	} else {
		i = PlainRun(s, 0)
	}
	for i < len(s) {
		if c := s[i]; c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				start = i + size
			case r == '\u2028' || r == '\u2029':
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
				start = i + size
			}
			i += size
		} else {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
		}
		// the next byte to look at: eight bytes tested here (the quotes of arguments are close together)
		if i+8 <= len(s) {
			if m := SpecialMask8(binary.LittleEndian.Uint64(StringBytes(s[i:]))); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				continue
			}
			i += 8
		}
		i = PlainRun(s, i)
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Marshal encodes v without HTML escaping.
func Marshal(v any) ([]byte, error) { return AppendJSON(nil, v) }

func MustMarshal(v any) []byte {
	b, err := Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

// ValidJSON is json.Valid, read by the hand-written reader (Reader, several times faster than encoding/json's
// scanner) when the two cannot disagree: printable ASCII without a backslash (encoding/json accepts invalid
// UTF-8 and lone surrogate escapes, Reader refuses them) and too short to reach the nesting limit.
func ValidJSON(v []byte) bool {
	if len(v) < maxJSONDepth && printableASCII(bytesView(v)) && bytes.IndexByte(v, '\\') < 0 {
		if ok, sure := ValidPlainJSON(v); sure {
			return ok
		}
		d := Reader{B: v}
		return d.Done(d.Skip()) == nil
	}
	return json.Valid(v)
}

// ValidPlainJSON is json.Valid for printable ASCII without a backslash (whitespace is only ' ', a string ends
// at the next quote), in one loop: the small values ValidJSON mostly sees (arguments, tool results) cost a
// fraction of a read by Reader. sure is false past 64 levels of nesting (ok is then not known).
func ValidPlainJSON(v []byte) (ok, sure bool) {
	var objects uint64 // bit k: the container at depth k+1 is an object
	var object bool
	depth, i := 0, 0
value:
	for i < len(v) && v[i] == ' ' {
		i++
	}
	if i >= len(v) {
		return false, true
	}
	switch c := v[i]; c {
	case '{', '[':
		i++
		for i < len(v) && v[i] == ' ' {
			i++
		}
		if i < len(v) && v[i] == c+2 { // '}' or ']'
			i++
			goto after
		}
		if depth == 64 {
			return false, false
		}
		if c == '{' {
			objects |= 1 << depth
		} else {
			objects &^= 1 << depth
		}
		depth++
		if c == '{' {
			goto name
		}
		goto value
	case '"':
		n := bytes.IndexByte(v[i+1:], '"')
		if n < 0 {
			return false, true
		}
		i += n + 2
	case 't':
		if !bytes.HasPrefix(v[i:], []byte("true")) {
			return false, true
		}
		i += 4
	case 'f':
		if !bytes.HasPrefix(v[i:], []byte("false")) {
			return false, true
		}
		i += 5
	case 'n':
		if !bytes.HasPrefix(v[i:], []byte("null")) {
			return false, true
		}
		i += 4
	default:
		if i = numberEnd(v, i); i < 0 {
			return false, true
		}
	}
after:
	for i < len(v) && v[i] == ' ' {
		i++
	}
	if depth == 0 {
		return i == len(v), true
	}
	if i >= len(v) {
		return false, true
	}
	object = objects&(1<<(depth-1)) != 0
	switch v[i] {
	case ',':
		i++
		if object {
			goto name
		}
		goto value
	case '}':
		if !object {
			return false, true
		}
	case ']':
		if object {
			return false, true
		}
	default:
		return false, true
	}
	i++
	depth--
	goto after
name:
	for i < len(v) && v[i] == ' ' {
		i++
	}
	if i >= len(v) || v[i] != '"' {
		return false, true
	}
	n := bytes.IndexByte(v[i+1:], '"')
	if n < 0 {
		return false, true
	}
	i += n + 2
	for i < len(v) && v[i] == ' ' {
		i++
	}
	if i >= len(v) || v[i] != ':' {
		return false, true
	}
	i++
	goto value
}

// numberEnd is the end of the JSON number at v[i:], or -1 when none starts there.
func numberEnd(v []byte, i int) int {
	if v[i] == '-' {
		i++
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case i < len(v) && v[i] >= '1' && v[i] <= '9':
		i = digitsEnd(v, i+1)
	default:
		return -1
	}
	if i < len(v) && v[i] == '.' {
		if i++; i >= len(v) || v[i] < '0' || v[i] > '9' {
			return -1
		}
		i = digitsEnd(v, i+1)
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		if i++; i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if i >= len(v) || v[i] < '0' || v[i] > '9' {
			return -1
		}
		i = digitsEnd(v, i+1)
	}
	return i
}

// CompactJSON returns s compacted when it is valid JSON, else s unchanged.
func CompactJSON(s []byte) []byte {
	if IsCompact(s) && ValidJSON(s) {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, s) != nil {
		return s
	}
	return b.Bytes()
}

// CompactValid is CompactJSON for a value known to be valid JSON (read by Reader, which accepts less than
// json.Valid): no second validation.
func CompactValid(s []byte) []byte {
	if IsCompact(s) {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, s) != nil {
		return s
	}
	return b.Bytes()
}

// ArgsObject converts alpha's argument string to a JSON object for beta/gamma. Empty means {}. Text that is
// not a JSON object is kept, never dropped: it is wrapped as {"_raw": "<text>"} (policy; the upstream then
// sees what the model produced).
func ArgsObject(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if t == "" {
		return json.RawMessage("{}")
	}
	// strings are immutable: a compact object is returned as a view of s, no copy
	if v := StringBytes(t); t[0] == '{' && ValidJSON(v) {
		return CompactValid(v)
	}
	return MustMarshal(map[string]string{"_raw": s})
}

// ArgsString converts an object to alpha's compact argument string.
func ArgsString(r json.RawMessage) string {
	if len(r) == 0 || string(r) == "null" {
		return "{}"
	}
	return string(CompactJSON(r))
}

// Obj is a JSON object with a fixed key order, written as alternating keys and values. The stream encoders
// use it so events read like the vendors' (`{"type":...}` first).
type Obj []any

// MarshalJSON writes the keys in order.
func (o Obj) MarshalJSON() ([]byte, error) { return o.appendTo(make([]byte, 0, 64)) }

// appendTo appends the object; keys are package literals and need no escaping.
func (o Obj) appendTo(b []byte) ([]byte, error) {
	b = append(b, '{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := o[i].(string)
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		var err error
		if b, err = AppendJSON(b, o[i+1]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// IsJSONString reports whether raw JSON is a string, so polymorphic fields (string or array) are parsed once
// instead of attempting a string parse of a whole array.
func IsJSONString(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '"'
	}
	return false
}
