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

	"github.com/tollgate/tollgate/dataplane/httperr"
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
	m, ok := jsonkit.PlainString(body[req.Model[0]:req.Model[1]])
	if !ok || len(m) == 0 {
		return "", errors.New("model must be a non-empty string without escapes")
	}
	return string(m), nil
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
