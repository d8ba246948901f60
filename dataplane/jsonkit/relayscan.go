package jsonkit

import (
	"encoding/binary"
	"math/bits"
)

// relayMembers walks the top-level members of the object data as vocab.Members does (the same structure
// checks, the same members, values not validated) and calls fn with each raw key and value; it reports
// where the object's closing brace is (-1 on a structural error). Strings are skipped eight bytes at a
// time: relayed stream events are mostly string bytes.
func relayMembers(data []byte, fn func(key, value []byte)) (closing int) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return -1
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return -1
		}
		ke := skipStr(data, i)
		if ke < 0 {
			return -1
		}
		key := data[i+1 : ke-1]
		i = skipSpace(data, ke)
		if i >= len(data) || data[i] != ':' {
			return -1
		}
		i = skipSpace(data, i+1)
		vs := i
		ve := skipVal(data, i)
		if ve < 0 {
			return -1
		}
		fn(key, data[vs:ve])
		i = skipSpace(data, ve)
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return i
		default:
			return -1
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

// skipVal returns the index just past the value starting at b[i], or -1 (vocab.Members's skipValue).
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
