package jsonkit

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Request is what the gateway decides on in a JSON request body: the members that routing, permissions,
// classification, admission and pricing read. ParseRequest fills it only for a body every JSON decoder
// reads the same way, so the gateway's reading is the upstream's (docs/dataplane.md "One reading of a
// request body").
type Request struct {
	// Model is the byte range [start, end) of the top-level "model" value (a string, quotes included);
	// HasModel is false when the body names none (or null).
	Model    [2]int
	HasModel bool
	// Stream is the top-level "stream" member (true only for the literal true).
	Stream bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// StreamOptions is the byte range of the top-level "stream_options" value (an object or null) when
	// HasStreamOptions; IncludeUsageAt that of its "include_usage" value when HasIncludeUsage. They let
	// the data plane edit the member in place (proxy: asking the upstream for usage).
	StreamOptions, IncludeUsageAt     [2]int
	HasStreamOptions, HasIncludeUsage bool
	// Speed, ServiceTier and ServiceTierCamel are the decoded top-level "speed", "service_tier" and
	// "serviceTier" strings ("" when absent or null).
	Speed, ServiceTier, ServiceTierCamel string
}

// BodyError is a request body ParseRequest refuses; Param names the member at fault when there is one.
type BodyError struct {
	Message string
	Param   string
}

func (e *BodyError) Error() string { return e.Message }

// decisionKeys are the top-level members the gateway reads; streamOptionKeys those of stream_options.
var (
	decisionKeys     = [...]string{"model", "stream", "stream_options", "speed", "service_tier", "serviceTier"}
	streamOptionKeys = [...]string{"include_usage"}
)

// ParseRequest validates a JSON request body and reads the members the gateway decides on. It refuses
// (with a *BodyError) any body a JSON decoder upstream could read differently from the gateway:
//
//   - anything but exactly one JSON object (RFC 8259 grammar; an array, a scalar or trailing data);
//   - invalid UTF-8, or an escape that is not a Unicode scalar value (a lone surrogate);
//   - an object, at any depth, that repeats a member name, names compared after unescaping (a
//     last-key-wins decoder and a first-key-wins one disagree on it);
//   - in an object the gateway reads, a member whose name matches a decision key only when letters are
//     folded ("Stream", "ſtream"): Go's encoding/json folds case when it matches struct fields;
//   - a decision member of the wrong type (a "stream" that is not true, false or null, a non-string
//     "model"): lenient decoders coerce such values in ways the gateway cannot predict.
//
// Member names written with escapes are read decoded ("mod\u0065l" is model). It allocates only for the
// decoded tier strings and never for bodies without escaped decision names.
func ParseRequest(body []byte) (Request, error) {
	var req Request
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return req, &BodyError{Message: "the request body must be a JSON object"}
	}
	// One pass validates the body and keeps the top-level members that may be decision members.
	v := getValidator()
	defer putValidator(v)
	if !v.run(body, true) {
		return req, invalidJSON(body)
	}
	for _, m := range v.top {
		name, err := memberName(m.key)
		if err != nil {
			return req, err
		}
		k, err := matchKey(name, decisionKeys[:])
		if err != nil {
			return req, err
		}
		if k != "" {
			if err := req.set(k, body, m.value); err != nil {
				return req, err
			}
		}
	}
	return req, nil
}

// invalidJSON describes why a body is not valid JSON; only refused bodies pay for it.
func invalidJSON(body []byte) error {
	d := jsontext.NewDecoder(bytes.NewReader(body))
	_, err := d.ReadValue()
	if err == nil {
		if _, err = d.ReadToken(); err == io.EOF {
			err = nil
		} else {
			err = fmt.Errorf("data after the JSON object")
		}
	}
	msg := "the request body is not valid JSON"
	if err != nil {
		msg += ": " + err.Error()
	}
	return &BodyError{Message: msg}
}

// memberName returns a member's name decoded (key is its raw text without the quotes); it allocates only
// for a name written with escapes.
func memberName(key []byte) ([]byte, error) {
	if bytes.IndexByte(key, '\\') < 0 {
		return key, nil
	}
	dst := make([]byte, 0, len(key)+2)
	dst = append(dst, '"')
	dst = append(dst, key...)
	dst = append(dst, '"')
	name, err := jsontext.AppendUnquote(nil, dst)
	if err != nil {
		return nil, &BodyError{Message: fmt.Sprintf("member name %s: %v", dst, err)}
	}
	return name, nil
}

// matchKey returns the key of keys that name is, "" for none; a name equal to one only under case
// folding is an error.
func matchKey(name []byte, keys []string) (string, error) {
	for _, k := range keys {
		if string(name) == k {
			return k, nil
		}
	}
	for _, k := range keys {
		if bytes.EqualFold(name, []byte(k)) {
			return "", &BodyError{Param: k,
				Message: fmt.Sprintf("member %q differs from %q only in letter case; send %q", name, k, k)}
		}
	}
	return "", nil
}

func (r *Request) set(key string, body, v []byte) error {
	switch key {
	case "model":
		if isNull(v) {
			return nil
		}
		if v[0] != '"' {
			return typeError(key, "a string")
		}
		start := offset(body, v)
		r.Model, r.HasModel = [2]int{start, start + len(v)}, true
	case "stream":
		b, err := boolValue(key, v)
		r.Stream = b
		return err
	case "stream_options":
		start := offset(body, v)
		r.StreamOptions, r.HasStreamOptions = [2]int{start, start + len(v)}, true
		if isNull(v) {
			return nil
		}
		if v[0] != '{' {
			return typeError(key, "an object")
		}
		var err error
		_, _ = walkMembers(v, func(k, val []byte) bool {
			var name []byte
			if name, err = memberName(k); err != nil {
				return false
			}
			var m string
			if m, err = matchKey(name, streamOptionKeys[:]); err != nil || m == "" {
				return err == nil
			}
			r.IncludeUsage, err = boolValue("stream_options.include_usage", val)
			at := offset(body, val)
			r.IncludeUsageAt, r.HasIncludeUsage = [2]int{at, at + len(val)}, true
			return err == nil
		})
		return err
	case "speed":
		return stringValue(key, v, &r.Speed)
	case "service_tier":
		return stringValue(key, v, &r.ServiceTier)
	case "serviceTier":
		return stringValue(key, v, &r.ServiceTierCamel)
	}
	return nil
}

func isNull(v []byte) bool { return string(v) == "null" }

func boolValue(key string, v []byte) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, typeError(key, "true or false")
}

func stringValue(key string, v []byte, dst *string) error {
	if isNull(v) {
		return nil
	}
	if v[0] != '"' {
		return typeError(key, "a string")
	}
	if s, ok := PlainString(v); ok {
		*dst = string(s)
		return nil
	}
	s, err := jsontext.AppendUnquote(nil, v)
	if err != nil || !utf8.Valid(s) {
		return typeError(key, "a string")
	}
	*dst = string(s)
	return nil
}

func typeError(key, want string) error {
	return &BodyError{Param: key, Message: fmt.Sprintf("%s must be %s", key, want)}
}

// offset returns where sub, a subslice of b, starts in b (s := b[i:j] has cap(b)-i capacity).
func offset(b, sub []byte) int { return cap(b) - cap(sub) }

// AppendForwarded appends to dst[:0] the body forwarded on a passthrough cell: body (which ParseRequest
// read as r) with the model value replaced by model as a JSON string when rename is set and, when askUsage
// is set and the body does not already ask, stream_options.include_usage set to true in the fewest bytes —
// the include_usage value replaced, the member inserted first in an existing stream_options object, a null
// stream_options replaced, or a stream_options member inserted first in the top-level object. Every other
// byte is kept, so unknown members survive exactly.
func (r *Request) AppendForwarded(dst, body []byte, model string, rename, askUsage bool) []byte {
	type edit struct {
		start, end int
		lit        string // the replacement, or model's JSON string when model is set
		model      bool
	}
	var buf [2]edit
	edits := buf[:0]
	if askUsage && !r.IncludeUsage {
		so := r.StreamOptions
		switch {
		case r.HasIncludeUsage: // false or null
			edits = append(edits, edit{start: r.IncludeUsageAt[0], end: r.IncludeUsageAt[1], lit: "true"})
		case r.HasStreamOptions && body[so[0]] == '{':
			edits = append(edits, edit{start: so[0] + 1, end: so[0] + 1, lit: firstMember(body, so[0]+1, `"include_usage":true`)})
		case r.HasStreamOptions: // null
			edits = append(edits, edit{start: so[0], end: so[1], lit: `{"include_usage":true}`})
		default:
			at := skipSpace(body, 0) + 1 // ParseRequest read one object: its first byte past white space
			edits = append(edits, edit{start: at, end: at, lit: firstMember(body, at, `"stream_options":{"include_usage":true}`)})
		}
	}
	if rename && r.HasModel {
		e := edit{start: r.Model[0], end: r.Model[1], model: true}
		if len(edits) > 0 && edits[0].start > e.start {
			edits = append(edits, edits[0])
			edits[0] = e
		} else {
			edits = append(edits, e)
		}
	}
	dst = dst[:0]
	at := 0
	for _, e := range edits {
		dst = append(dst, body[at:e.start]...)
		if e.model {
			dst = AppendString(dst, model)
		} else {
			dst = append(dst, e.lit...)
		}
		at = e.end
	}
	return append(dst, body[at:]...)
}

// firstMember returns member followed by a comma when the object whose content starts at body[at] has
// members.
func firstMember(body []byte, at int, member string) string {
	if i := skipSpace(body, at); i < len(body) && body[i] == '}' {
		return member
	}
	return member + ","
}
