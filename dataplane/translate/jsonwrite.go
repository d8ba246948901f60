package translate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"unsafe"
)

// jw writes JSON straight into one buffer: the request encoders use it instead of building trees of maps and
// structs for encoding/json. It writes exactly what encoding/json writes for the same values with HTML
// escaping off (strings through appendString, numbers as encoding/json formats them, raw values compacted);
// separators come from the last byte written, so callers only say key, value, open and close.
type jw struct{ b []byte }

// sep writes the comma a key or an array element needs after a previous member or element.
func (w *jw) sep() {
	if n := len(w.b); n > 0 {
		switch w.b[n-1] {
		case '{', '[', ':':
		default:
			w.b = append(w.b, ',')
		}
	}
}

// key writes a member name; names are package literals and need no escaping.
func (w *jw) key(k string) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *jw) open(c byte) {
	w.sep()
	w.b = append(w.b, c)
}

func (w *jw) close(c byte) { w.b = append(w.b, c) }

func (w *jw) str(s string) {
	w.sep()
	w.b = appendString(w.b, s)
}

func (w *jw) int(n int64) {
	w.sep()
	w.b = strconv.AppendInt(w.b, n, 10)
}

func (w *jw) null() {
	w.sep()
	w.b = append(w.b, "null"...)
}

func (w *jw) bool(v bool) {
	w.sep()
	w.b = strconv.AppendBool(w.b, v)
}

// float writes f as encoding/json does (shortest repr., exponent form outside [1e-6, 1e21)).
func (w *jw) float(f float64) {
	w.sep()
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1]
			w.b = w.b[:n-1]
		}
	}
}

// raw writes a JSON value compacted, as encoding/json writes a json.RawMessage; empty is null.
func (w *jw) raw(r json.RawMessage) {
	w.sep()
	if len(r) == 0 {
		w.b = append(w.b, "null"...)
		return
	}
	if isCompact(r) {
		w.b = append(w.b, r...)
		return
	}
	var buf bytes.Buffer
	if json.Compact(&buf, r) != nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, buf.Bytes()...)
}

// isCompact reports whether a valid JSON value has no whitespace outside its strings. A value without a
// byte at or below ' ' anywhere (the usual case, found eight bytes at a time) has none; else its strings
// are followed byte by byte.
func isCompact(r []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	b := r
	for ; len(b) >= 8; b = b[8:] {
		if v := binary.LittleEndian.Uint64(b); (v-0x21*ones)&^v&highs != 0 { // a byte below 0x21
			return isCompactSlow(r)
		}
	}
	for _, c := range b {
		if c <= ' ' {
			return isCompactSlow(r)
		}
	}
	return true
}

// isCompactSlow is isCompact following the strings.
func isCompactSlow(r []byte) bool {
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

// argsView is alpha's compact argument string of an object, sharing r's memory when r is already compact
// (the canonical form's arguments are never modified).
func argsView(r json.RawMessage) string {
	if len(r) == 0 || string(r) == "null" {
		return "{}"
	}
	if isCompact(r) {
		return unsafe.String(unsafe.SliceData(r), len(r))
	}
	return string(compactJSON(r))
}

// requestSizeHint estimates an upstream request body's size from the canonical request, so the encoders
// write it into one buffer: the text of every part plus about what the dialects' JSON around a part and a
// message costs, and a tenth for escapes (the 10 KB benchmark requests come out ~11–24 % above their
// bodies: a smaller buffer to allocate and clear, and fewer collections, than the old 50 % margin).
func requestSizeHint(r *request) int {
	n := 256
	for _, s := range r.System {
		n += len(s)
	}
	for i := range r.Messages {
		parts := r.Messages[i].Parts
		n += 16
		for j := range parts {
			p := &parts[j]
			n += 48 + len(p.Text) + len(p.Data) + len(p.Args) + len(p.CallID) + len(p.Name) + len(p.Signature)
			if p.x != nil {
				n += len(p.x.URL)
			}
			for k := range p.ResultParts {
				n += 32 + len(p.ResultParts[k].Text) + len(p.ResultParts[k].Data)
			}
		}
	}
	for _, t := range r.Tools {
		n += 64 + len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n + n/10
}

// stringBytes views s as bytes for reading (nothing writes to them).
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// compactText is a JSON value's compact text, sharing r's memory when r is already compact (r is never
// modified: see unmarshal).
func compactText(r []byte) string {
	if isCompact(r) && validJSON(r) {
		return unsafe.String(unsafe.SliceData(r), len(r))
	}
	return string(compactJSON(r))
}

// compactValidText is compactText for a value known to be valid JSON (see compactValid).
func compactValidText(r []byte) string {
	c := compactValid(r)
	return unsafe.String(unsafe.SliceData(c), len(c)) // c is r or a new buffer, neither written again
}

// optFloat writes "k": *f when f is set (an optional request parameter).
func (w *jw) optFloat(k string, f *float64) {
	if f != nil {
		w.key(k)
		w.float(*f)
	}
}

// optInt writes "k": *n when n is set.
func (w *jw) optInt(k string, n *int64) {
	if n != nil {
		w.key(k)
		w.int(*n)
	}
}

// strList writes "k": [s…] when ss is not empty.
func (w *jw) strList(k string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.key(k)
	w.open('[')
	for _, s := range ss {
		w.str(s)
	}
	w.close(']')
}
