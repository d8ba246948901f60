package jsonkit

import (
	"testing"
)

// TestIsCompact: the eight-bytes-at-a-time test agrees with following the strings, for whitespace (and any
// byte up to ' ') at every position inside and outside a string.
func TestIsCompact(t *testing.T) {
	bases := []string{`{"city":"Oslo","days":3}`, `["a b","c\"d",1,{"x":[true,null]}]`, `"just a string of some length"`, `{}`}
	for _, base := range bases {
		if got, want := IsCompact([]byte(base)), IsCompactSlow([]byte(base)); got != want {
			t.Fatalf("isCompact(%s) = %v, want %v", base, got, want)
		}
		for i := 0; i <= len(base); i++ {
			for _, c := range []byte{' ', '\t', '\n', '\r', 0x1f, 0x21, 0x80} {
				v := []byte(base[:i] + string(c) + base[i:])
				if got, want := IsCompact(v), IsCompactSlow(v); got != want {
					t.Fatalf("isCompact(%q) = %v, want %v", v, got, want)
				}
			}
		}
	}
}
