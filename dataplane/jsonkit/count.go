package jsonkit

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Count is a token count as providers write it: an integer, an integer in a string (proto3 JSON int64), or a
// number whose fraction is all zeros ("12.0"); a negative count reads as 0; null leaves it unset. Set says
// the member was present with a count, so a reader keeps the latest value reported (a later 0 included).
type Count struct {
	V   int64
	Set bool
}

var errCount = errors.New("invalid token count")

// UnmarshalJSON reads one count value.
func (c *Count) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	v, err := parseCount(b)
	if err != nil {
		if len(b) > 32 {
			b = b[:32]
		}
		return fmt.Errorf("%w %q", err, b)
	}
	c.V, c.Set = v, true
	return nil
}

// Merge takes o when it was present (the latest value reported wins).
func (c *Count) Merge(o Count) {
	if o.Set {
		*c = o
	}
}

func parseCount(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	var v int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := int64(b[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, errCount
		}
		v = v*10 + d
	}
	if i == 0 {
		return 0, errCount
	}
	if i < len(b) {
		if b[i] != '.' || i+1 == len(b) {
			return 0, errCount
		}
		for _, ch := range b[i+1:] {
			if ch != '0' {
				return 0, errCount
			}
		}
	}
	if neg {
		return 0, nil
	}
	return v, nil
}

// Name is a name member providers write as a string (a service tier, a speed): the string, unescaped; any
// other JSON value is not a name and leaves it unset.
type Name struct {
	S   string
	Set bool
}

// UnmarshalJSON reads one name value.
func (n *Name) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '"' {
		return nil // null, numbers, objects: not a name
	}
	if inner := b[1 : len(b)-1]; b[len(b)-1] == '"' && bytes.IndexByte(inner, '\\') < 0 {
		n.S, n.Set = string(inner), true // a copy: the bytes may be a reused event buffer
		return nil
	}
	var s string
	if err := Unmarshal(b, &s); err != nil {
		return err
	}
	n.S, n.Set = strings.Clone(s), true
	return nil
}

// PlainString returns the text of a raw string value written without escapes, without copying it; ok is
// false for any other value (one with escapes is read with Name).
func PlainString(raw []byte) (text []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}
