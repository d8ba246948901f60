package jsonkit

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// errStructure is what walkMembers and walkElements report for a value that is not a well-formed object
// or array (or is truncated) up to the point the walk reached.
var errStructure = errors.New("malformed JSON structure")

// walkMembers calls fn with the raw key (without its quotes, still escaped) and the raw value of every
// top-level member of the object data, in order, until fn returns false. It checks the structure only
// (strings, nesting, separators; values are not validated) and never allocates. It reports where the
// object's closing brace is (-1 when fn stopped the walk) or errStructure. Strings are skipped eight bytes
// at a time: relayed stream events, walked once each (ReadRelay), are mostly string bytes.
func walkMembers(data []byte, fn func(key, value []byte) bool) (closing int, err error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return -1, errStructure
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return -1, errStructure
		}
		ke := skipStr(data, i)
		if ke < 0 {
			return -1, errStructure
		}
		key := data[i+1 : ke-1]
		i = skipSpace(data, ke)
		if i >= len(data) || data[i] != ':' {
			return -1, errStructure
		}
		i = skipSpace(data, i+1)
		vs := i
		ve := skipVal(data, i)
		if ve < 0 {
			return -1, errStructure
		}
		if !fn(key, data[vs:ve]) {
			return -1, nil
		}
		i = skipSpace(data, ve)
		if i >= len(data) {
			return -1, errStructure
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return i, nil
		default:
			return -1, errStructure
		}
	}
}

// walkElements calls fn with the raw value of every element of the array arr, in order, until fn returns
// false. Like walkMembers it checks the structure only and never allocates.
func walkElements(arr []byte, fn func(elem []byte) bool) error {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errStructure
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for {
		ve := skipVal(arr, i)
		if ve < 0 {
			return errStructure
		}
		if !fn(arr[i:ve]) {
			return nil
		}
		i = skipSpace(arr, ve)
		if i >= len(arr) {
			return errStructure
		}
		switch arr[i] {
		case ',':
			i = skipSpace(arr, i+1)
		case ']':
			return nil
		default:
			return errStructure
		}
	}
}

// quoteOrBackslash8 flags, by the high bit of each, the bytes of w that are a quote or a backslash (the
// lowest flagged byte is exactly the first such byte, as in SpecialMask8).
func quoteOrBackslash8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := (w ^ '"'*ones - ones) &^ (w ^ '"'*ones)
	bslash := (w ^ '\\'*ones - ones) &^ (w ^ '\\'*ones)
	return (quote | bslash) & highs
}

// skipStr returns the index just past the string starting at b[i] == '"' (a backslash escapes the next
// byte), or -1 when it is not closed.
func skipStr(b []byte, i int) int {
	j := i + 1
	for {
		for j+8 <= len(b) {
			m := quoteOrBackslash8(binary.LittleEndian.Uint64(b[j:]))
			if m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		for j < len(b) && b[j] != '"' && b[j] != '\\' {
			j++
		}
		if j >= len(b) {
			return -1
		}
		if b[j] == '"' {
			return j + 1
		}
		j += 2 // an escape and the byte it escapes
	}
}

// skipVal returns the index just past the value starting at b[i], or -1.
func skipVal(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return skipStr(b, i)
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := skipStr(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		for j := i; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return -1
				}
				return j
			}
		}
		return -1
	}
}
