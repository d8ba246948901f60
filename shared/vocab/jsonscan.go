package vocab

import "errors"

// ErrJSON is returned by TopLevelField when the body is not a JSON object (or is truncated) up to the
// point the scan reached.
var ErrJSON = errors.New("malformed JSON object")

// TopLevelField finds key among the top-level members of the JSON object body without decoding it. It
// returns the byte range [start, end) of the member's value (a string value's range includes its quotes)
// and found=false when the object has no such member. Keys are compared byte-for-byte with their raw,
// still-escaped text, so a key written with escapes is not matched (JSON encoders do not escape plain
// ASCII keys). The scan stops at the first match; the rest of the body is not validated. It never
// allocates.
func TopLevelField(body []byte, key string) (start, end int, found bool, err error) {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return 0, 0, false, ErrJSON
	}
	i = skipWS(body, i+1)
	if i < len(body) && body[i] == '}' {
		return 0, 0, false, nil
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return 0, 0, false, ErrJSON
		}
		ks := i + 1
		ke, err := skipString(body, i)
		if err != nil {
			return 0, 0, false, err
		}
		match := string(body[ks:ke-1]) == key
		i = skipWS(body, ke)
		if i >= len(body) || body[i] != ':' {
			return 0, 0, false, ErrJSON
		}
		i = skipWS(body, i+1)
		vs := i
		ve, err := skipValue(body, i)
		if err != nil {
			return 0, 0, false, err
		}
		if match {
			return vs, ve, true, nil
		}
		i = skipWS(body, ve)
		if i >= len(body) {
			return 0, 0, false, ErrJSON
		}
		switch body[i] {
		case ',':
			i = skipWS(body, i+1)
		case '}':
			return 0, 0, false, nil
		default:
			return 0, 0, false, ErrJSON
		}
	}
}

// Members calls fn with the raw key (without its quotes, still escaped) and the raw value of every member
// of the JSON object obj, in order, until fn returns false. Like TopLevelField it checks the structure
// only (strings, nesting, separators) and never allocates; values are not validated.
func Members(obj []byte, fn func(key, value []byte) bool) error {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ErrJSON
	}
	i = skipWS(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return ErrJSON
		}
		ke, err := skipString(obj, i)
		if err != nil {
			return err
		}
		key := obj[i+1 : ke-1]
		i = skipWS(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return ErrJSON
		}
		i = skipWS(obj, i+1)
		vs := i
		ve, err := skipValue(obj, i)
		if err != nil {
			return err
		}
		if !fn(key, obj[vs:ve]) {
			return nil
		}
		i = skipWS(obj, ve)
		if i >= len(obj) {
			return ErrJSON
		}
		switch obj[i] {
		case ',':
			i = skipWS(obj, i+1)
		case '}':
			return nil
		default:
			return ErrJSON
		}
	}
}

// Elements calls fn with the raw value of every element of the JSON array arr, in order, until fn
// returns false. It checks the structure only and never allocates.
func Elements(arr []byte, fn func(elem []byte) bool) error {
	i := skipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return ErrJSON
	}
	i = skipWS(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for {
		vs := i
		ve, err := skipValue(arr, i)
		if err != nil {
			return err
		}
		if !fn(arr[vs:ve]) {
			return nil
		}
		i = skipWS(arr, ve)
		if i >= len(arr) {
			return ErrJSON
		}
		switch arr[i] {
		case ',':
			i = skipWS(arr, i+1)
		case ']':
			return nil
		default:
			return ErrJSON
		}
	}
}

// StringValue returns the contents of a JSON string value v (with its quotes) when it has no escapes;
// ok is false for any other value or an escaped string.
func StringValue(v []byte) (s []byte, ok bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, false
	}
	s = v[1 : len(v)-1]
	for _, c := range s {
		if c == '\\' || c < 0x20 {
			return nil, false
		}
	}
	return s, true
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, ErrJSON
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, ErrJSON
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, ErrJSON
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return 0, ErrJSON
				}
				return j, nil
			}
			j++
		}
		return 0, ErrJSON
	}
}
