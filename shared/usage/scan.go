package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// errNotObject is returned for stream payloads that are not a JSON object.
var errNotObject = errors.New("not a JSON object")

// objectFields scans the JSON object in data and stores in out[j] the raw value of keys[j] (the
// last occurrence wins; absent keys leave out[j] nil). Other values are skipped without being
// decoded, so a stream event costs one linear pass plus decoding the few values that matter.
// Only the structure is checked (strings, nesting, separators); values that are used are
// validated when they are decoded.
func objectFields(data []byte, keys []string, out [][]byte) error {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return errNotObject
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return trailing(data, i+1)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return fmt.Errorf("object key expected at offset %d", i)
		}
		ke, err := skipString(data, i)
		if err != nil {
			return err
		}
		key := data[i+1 : ke-1]
		i = skipWS(data, ke)
		if i >= len(data) || data[i] != ':' {
			return fmt.Errorf("':' expected at offset %d", i)
		}
		i = skipWS(data, i+1)
		vs := i
		if i, err = skipValue(data, i); err != nil {
			return err
		}
		for j, k := range keys {
			if string(key) == k {
				out[j] = data[vs:i]
			}
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return fmt.Errorf("unterminated object")
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return trailing(data, i+1)
		default:
			return fmt.Errorf("',' or '}' expected at offset %d", i)
		}
	}
}

func trailing(data []byte, i int) error {
	if skipWS(data, i) != len(data) {
		return fmt.Errorf("data after the object at offset %d", i)
	}
	return nil
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset just past the string starting at data[i] == '"'.
func skipString(data []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, fmt.Errorf("unterminated string at offset %d", i)
		}
		j += k
		// The quote is escaped when an odd number of backslashes precedes it.
		n := 0
		for p := j - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j, nil
		}
	}
}

// skipValue returns the offset just past the value starting at data[i].
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, fmt.Errorf("value expected at offset %d", i)
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				j, err := skipString(data, i)
				if err != nil {
					return 0, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, fmt.Errorf("unterminated container")
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			if j == i {
				return 0, fmt.Errorf("value expected at offset %d", i)
			}
			return j, nil
		case '{', '[', '"', ':':
			return 0, fmt.Errorf("unexpected %q at offset %d", data[j], j)
		}
		j++
	}
	if j == i {
		return 0, fmt.Errorf("value expected at offset %d", i)
	}
	return j, nil
}

// arrayElems calls fn with the raw value of each element of the JSON array in data.
func arrayElems(data []byte, fn func(elem []byte) error) error {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return errors.New("not a JSON array")
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		return trailing(data, i+1)
	}
	for {
		vs := i
		var err error
		if i, err = skipValue(data, i); err != nil {
			return err
		}
		if err := fn(data[vs:i]); err != nil {
			return err
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return errors.New("unterminated array")
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case ']':
			return trailing(data, i+1)
		default:
			return fmt.Errorf("',' or ']' expected at offset %d", i)
		}
	}
}

// isNull reports whether a raw value is absent or JSON null.
func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// decodeObject decodes a raw usage value (an object) into v; null and absent leave v untouched
// and report false.
func decodeObject(raw []byte, v any) (bool, error) {
	if isNull(raw) {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, err
	}
	return true, nil
}

// mergeRawTier merges a tier name read from a raw value into t: strings only, anything else is
// ignored.
func (t *tierName) mergeRaw(raw []byte) {
	if len(raw) == 0 {
		return
	}
	n := *t
	if err := n.UnmarshalJSON(raw); err == nil {
		t.merge(n)
	}
}
