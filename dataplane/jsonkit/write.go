package jsonkit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"unsafe"
)

// Writer writes JSON straight into one buffer: the request encoders use it instead of building trees of maps and
// structs for encoding/json. It writes exactly what encoding/json writes for the same values with HTML
// escaping off (strings through AppendString, numbers as encoding/json formats them, raw values compacted);
// separators come from the last byte written, so callers only say key, value, open and close.
type Writer struct {
	B []byte `json:"-"`
}

// sep writes the comma a key or an array element needs after a previous member or element.
func (w *Writer) sep() {
	if n := len(w.B); n > 0 {
		switch w.B[n-1] {
		case '{', '[', ':':
		default:
			w.B = append(w.B, ',')
		}
	}
}

// Key writes a member name; names are package literals and need no escaping.
func (w *Writer) Key(k string) {
	w.sep()
	w.B = append(w.B, '"')
	w.B = append(w.B, k...)
	w.B = append(w.B, '"', ':')
}

func (w *Writer) Open(c byte) {
	w.sep()
	w.B = append(w.B, c)
}

func (w *Writer) Close(c byte) { w.B = append(w.B, c) }

func (w *Writer) Str(s string) {
	w.sep()
	w.B = AppendString(w.B, s)
}

func (w *Writer) Int(n int64) {
	w.sep()
	w.B = strconv.AppendInt(w.B, n, 10)
}

func (w *Writer) Null() {
	w.sep()
	w.B = append(w.B, "null"...)
}

func (w *Writer) Bool(v bool) {
	w.sep()
	w.B = strconv.AppendBool(w.B, v)
}

// Float writes f as encoding/json does (shortest repr., exponent form outside [1e-6, 1e21)).
func (w *Writer) Float(f float64) {
	w.sep()
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	w.B = strconv.AppendFloat(w.B, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(w.B); n >= 4 && w.B[n-4] == 'e' && w.B[n-3] == '-' && w.B[n-2] == '0' {
			w.B[n-2] = w.B[n-1]
			w.B = w.B[:n-1]
		}
	}
}

// Raw writes a JSON value compacted, as encoding/json writes a json.RawMessage; empty is null.
func (w *Writer) Raw(r json.RawMessage) {
	w.sep()
	if len(r) == 0 {
		w.B = append(w.B, "null"...)
		return
	}
	if IsCompact(r) {
		w.B = append(w.B, r...)
		return
	}
	var buf bytes.Buffer
	if json.Compact(&buf, r) != nil {
		w.B = append(w.B, "null"...)
		return
	}
	w.B = append(w.B, buf.Bytes()...)
}

// IsCompact reports whether a valid JSON value has no whitespace outside its strings. A value without a
// byte at or below ' ' anywhere (the usual case, found eight bytes at a time) has none; else its strings
// are followed byte by byte.
func IsCompact(r []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	b := r
	for ; len(b) >= 8; b = b[8:] {
		if v := binary.LittleEndian.Uint64(b); (v-0x21*ones)&^v&highs != 0 { // a byte below 0x21
			return IsCompactSlow(r)
		}
	}
	for _, c := range b {
		if c <= ' ' {
			return IsCompactSlow(r)
		}
	}
	return true
}

// IsCompactSlow is IsCompact following the strings.
func IsCompactSlow(r []byte) bool {
	in := false
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// ArgsView is alpha's compact argument string of an object, sharing r's memory when r is already compact
// (the canonical form's arguments are never modified).
func ArgsView(r json.RawMessage) string {
	if len(r) == 0 || string(r) == "null" {
		return "{}"
	}
	if IsCompact(r) {
		return unsafe.String(unsafe.SliceData(r), len(r))
	}
	return string(CompactJSON(r))
}

// StringBytes views s as bytes for reading (nothing writes to them).
func StringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// CompactText is a JSON value's compact text, sharing r's memory when r is already compact (r is never
// modified: see Unmarshal).
func CompactText(r []byte) string {
	if IsCompact(r) && ValidJSON(r) {
		return unsafe.String(unsafe.SliceData(r), len(r))
	}
	return string(CompactJSON(r))
}

// CompactValidText is CompactText for a value known to be valid JSON (see CompactValid).
func CompactValidText(r []byte) string {
	c := CompactValid(r)
	return unsafe.String(unsafe.SliceData(c), len(c)) // c is r or a new buffer, neither written again
}

// OptFloat writes "k": *f when f is set (an optional request parameter).
func (w *Writer) OptFloat(k string, f *float64) {
	if f != nil {
		w.Key(k)
		w.Float(*f)
	}
}

// OptInt writes "k": *n when n is set.
func (w *Writer) OptInt(k string, n *int64) {
	if n != nil {
		w.Key(k)
		w.Int(*n)
	}
}

// StrList writes "k": [s…] when ss is not empty.
func (w *Writer) StrList(k string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.Key(k)
	w.Open('[')
	for _, s := range ss {
		w.Str(s)
	}
	w.Close(']')
}

// AtArrayStart reports whether the last thing written opened an array (nothing inside it yet).
func (w *Writer) AtArrayStart() bool { return len(w.B) > 0 && w.B[len(w.B)-1] == '[' }

// AtObjectStart reports whether the last thing written opened an object (nothing inside it yet).
func (w *Writer) AtObjectStart() bool { return len(w.B) > 0 && w.B[len(w.B)-1] == '{' }

// AfterObject reports whether the last thing written closed an object.
func (w *Writer) AfterObject() bool { return len(w.B) > 0 && w.B[len(w.B)-1] == '}' }
