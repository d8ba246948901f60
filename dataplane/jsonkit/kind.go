package jsonkit

import "github.com/go-json-experiment/json/jsontext"

// The kinds of a JSON value by its first byte, as Reader.Peek and the library's jsontext.Value.Kind report
// them (untyped, so both compare with them; Peek reports both booleans as 't' or 'f').
const (
	KindNull   = 'n'
	KindString = '"'
	KindNumber = '0'
	KindObject = '{'
	KindArray  = '['
)

// Decoder is the JSON library's token decoder, named here so that a wire type's UnmarshalJSONFrom method
// (called by the library with the caller's options) needs no import of the token level.
type Decoder = jsontext.Decoder

// StartsObject reports whether raw JSON text begins with an object (no leading space is expected: raw is a
// value the library or Reader delimited).
func StartsObject(raw []byte) bool { return len(raw) > 0 && raw[0] == KindObject }

// View is b as a string without a copy, for bytes that are only ever appended to after the view is taken.
func View(b []byte) string { return bytesView(b) }
