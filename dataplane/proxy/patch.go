package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"unicode/utf8"

	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/shared/vocab"
)

// errNoModel means the request body names no model.
var errNoModel = errors.New("model is required")

// readRequest reads what the gateway decides on from the body, once and with the meaning every upstream
// gives it: a JSON body through jsonkit.ParseRequest (which refuses bodies decoders could read differently),
// a multipart form through multipartFields. The class takes the body's stream flag.
func (h *Handler) readRequest(r *http.Request, c *call) error {
	switch {
	case c.class.Multipart:
		f, err := multipartFields(r.Header.Get("Content-Type"), c.body)
		if err != nil {
			return httperr.Malformed(err.Error(), err)
		}
		c.model, c.class = f.model, c.class.WithStream(f.stream)
	case len(c.body) > 0 || c.class.ModelInBody:
		req, err := jsonkit.ParseRequest(c.body)
		if err != nil {
			e := httperr.Malformed(err.Error(), err)
			var be *jsonkit.BodyError
			if errors.As(err, &be) {
				e.Param = be.Param
			}
			return e
		}
		c.req, c.class = req, c.class.WithStream(req.Stream)
	}
	return nil
}

// bodyModel returns the model named by a JSON body that jsonkit.ParseRequest read as req; errNoModel when
// it names none.
func bodyModel(body []byte, req jsonkit.Request) (string, error) {
	if !req.HasModel {
		return "", errNoModel
	}
	m, ok := vocab.StringValue(body[req.Model[0]:req.Model[1]])
	if !ok || len(m) == 0 {
		return "", errors.New("model must be a non-empty string without escapes")
	}
	return string(m), nil
}

// patchModel returns body with the value at [start, end) replaced by model as a JSON string, appended to
// dst[:0]. Every other byte is kept, so unknown fields survive exactly.
func patchModel(dst, body []byte, start, end int, model string) []byte {
	dst = append(dst[:0], body[:start]...)
	dst = appendJSONString(dst, model)
	return append(dst, body[end:]...)
}

// patchBody returns the body forwarded on a passthrough cell, appended to dst[:0]: body with the model
// value (req.Model) replaced by model when rename is set and, when askUsage is set and the body does not
// already ask, stream_options.include_usage set to true in the fewest bytes — the include_usage value
// replaced, the member inserted first in an existing stream_options object, a null stream_options
// replaced, or a stream_options member inserted first in the top-level object. Every other byte is kept.
// req is what jsonkit.ParseRequest read from body.
func patchBody(dst, body []byte, req jsonkit.Request, model string, rename, askUsage bool) []byte {
	type edit struct {
		start, end int
		lit        string // the replacement, or model's JSON string when model is set
		model      bool
	}
	var buf [2]edit
	edits := buf[:0]
	if askUsage && !req.IncludeUsage {
		so := req.StreamOptions
		switch {
		case req.HasIncludeUsage: // false or null
			edits = append(edits, edit{start: req.IncludeUsageAt[0], end: req.IncludeUsageAt[1], lit: "true"})
		case req.HasStreamOptions && body[so[0]] == '{':
			edits = append(edits, edit{start: so[0] + 1, end: so[0] + 1, lit: firstMember(body[so[0]+1:], `"include_usage":true`)})
		case req.HasStreamOptions: // null
			edits = append(edits, edit{start: so[0], end: so[1], lit: `{"include_usage":true}`})
		default:
			at := bytes.IndexByte(body, '{') + 1 // ParseRequest read one object: its first byte past whitespace
			edits = append(edits, edit{start: at, end: at, lit: firstMember(body[at:], `"stream_options":{"include_usage":true}`)})
		}
	}
	if rename && req.HasModel {
		e := edit{start: req.Model[0], end: req.Model[1], model: true}
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
			dst = appendJSONString(dst, model)
		} else {
			dst = append(dst, e.lit...)
		}
		at = e.end
	}
	return append(dst, body[at:]...)
}

// firstMember returns member followed by a comma when the object whose content starts at rest has members.
func firstMember(rest []byte, member string) string {
	if t := bytes.TrimLeft(rest, " \t\r\n"); len(t) > 0 && t[0] == '}' {
		return member
	}
	return member + ","
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
			i++
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			i++
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	return append(dst, '"')
}

// formFields are the multipart form fields the gateway decides on.
type formFields struct {
	model  string
	stream bool
}

// maxFormField bounds a decision field's value; a longer one is refused, never truncated.
const maxFormField = 1024

// multipartFields reads the "model" and "stream" fields of a multipart/form-data body. A repeated field,
// an over-long one or a stream that is not true or false is refused: form decoders upstream disagree on
// which of two values wins.
func multipartFields(contentType string, body []byte) (formFields, error) {
	var f formFields
	boundary, err := multipartBoundary(contentType)
	if err != nil {
		return f, err
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	seen := map[string]bool{}
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return f, fmt.Errorf("read multipart body: %w", err)
		}
		name := p.FormName()
		if name != "model" && name != "stream" {
			continue
		}
		if seen[name] {
			return f, fmt.Errorf("form field %q is repeated", name)
		}
		seen[name] = true
		v, err := io.ReadAll(io.LimitReader(p, maxFormField+1))
		if err != nil {
			return f, fmt.Errorf("read multipart %s: %w", name, err)
		}
		if len(v) > maxFormField {
			return f, fmt.Errorf("form field %q exceeds %d bytes", name, maxFormField)
		}
		switch {
		case name == "model":
			f.model = string(v)
		case string(v) == "true":
			f.stream = true
		case string(v) != "false":
			return f, fmt.Errorf("form field \"stream\" must be true or false")
		}
	}
}

// patchMultipartModel rewrites the "model" form field of a multipart body, keeping every other part and
// the boundary (so the client's Content-Type stays valid).
func patchMultipartModel(contentType string, body []byte, model string) ([]byte, error) {
	boundary, err := multipartBoundary(contentType)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(len(body) + len(model))
	mw := multipart.NewWriter(&out)
	if err := mw.SetBoundary(boundary); err != nil {
		return nil, fmt.Errorf("multipart boundary: %w", err)
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read multipart body: %w", err)
		}
		pw, err := mw.CreatePart(textproto.MIMEHeader(p.Header))
		if err != nil {
			return nil, fmt.Errorf("write multipart part: %w", err)
		}
		if p.FormName() == "model" {
			_, err = io.WriteString(pw, model)
		} else {
			_, err = io.Copy(pw, p)
		}
		if err != nil {
			return nil, fmt.Errorf("copy multipart part: %w", err)
		}
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("close multipart body: %w", err)
	}
	return out.Bytes(), nil
}

func multipartBoundary(contentType string) (string, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return "", fmt.Errorf("want multipart/form-data with a boundary, got %q", contentType)
	}
	return params["boundary"], nil
}
