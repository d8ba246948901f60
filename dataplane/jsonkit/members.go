package jsonkit

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Lookups in a JSON value that was already framed (an event's data, a buffered body), for the readers that
// need a member or two of it and decline anything they cannot decide exactly (local counting's text
// extraction). They walk the value with walkMembers and walkElements.

// IsNull reports whether a raw value is JSON null or absent (nil).
func IsNull(v []byte) bool { return v == nil || string(v) == "null" }

// Member returns the raw value of member name of obj (nil when absent); obj may be null or absent.
// ok is false when obj is another type, or name is repeated or has a case-folded or escaped variant.
func Member(obj []byte, name string) (v []byte, ok bool) {
	v, _, ok = Members2(obj, name, "")
	return v, ok
}

// Members2 is Member for two names at once ("" for none).
func Members2(obj []byte, a, b string) (va, vb []byte, ok bool) {
	if IsNull(obj) {
		return nil, nil, true
	}
	if obj[0] != '{' {
		return nil, nil, false
	}
	ok = true
	_, err := walkMembers(obj, func(k, v []byte) bool {
		switch {
		case string(k) == a:
			ok = va == nil
			va = v
		case b != "" && string(k) == b:
			ok = vb == nil
			vb = v
		case bytes.IndexByte(k, '\\') >= 0 || bytes.EqualFold(k, []byte(a)) || (b != "" && bytes.EqualFold(k, []byte(b))):
			ok = false
		}
		return ok
	})
	return va, vb, ok && err == nil
}

// EachElement calls fn for every non-null element of the array arr (null or absent: none); false when
// arr is another type or fn refused an element.
func EachElement(arr []byte, fn func(elem []byte) bool) bool {
	if IsNull(arr) {
		return true
	}
	if arr[0] != '[' {
		return false
	}
	ok := true
	err := walkElements(arr, func(e []byte) bool {
		if !IsNull(e) {
			ok = fn(e)
		}
		return ok
	})
	return ok && err == nil
}

// AppendText appends the text of a JSON string value v (null or absent: nothing); false for any
// other type.
func AppendText(dst, v []byte) ([]byte, bool) {
	if IsNull(v) {
		return dst, true
	}
	if len(v) < 2 || v[0] != '"' {
		return dst, false
	}
	if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return append(dst, s...), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return dst, false
	}
	return append(dst, s...), true
}
