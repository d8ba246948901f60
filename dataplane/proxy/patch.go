package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"unicode/utf8"

	"github.com/tollgate/tollgate/shared/vocab"
)

// errNoModel means the request body names no model.
var errNoModel = errors.New("model is required")

// bodyModel returns the top-level "model" of a JSON body and the byte range of its value.
func bodyModel(body []byte) (model string, start, end int, err error) {
	s, e, found, err := vocab.TopLevelField(body, "model")
	if err != nil {
		return "", 0, 0, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	if !found {
		return "", 0, 0, errNoModel
	}
	v, ok := vocab.StringValue(body[s:e])
	if !ok || len(v) == 0 {
		return "", 0, 0, errors.New("model must be a non-empty string without escapes")
	}
	return string(v), s, e, nil
}

// patchModel returns body with the value at [start, end) replaced by model as a JSON string, appended to
// dst[:0]. Every other byte is kept, so unknown fields survive exactly.
func patchModel(dst, body []byte, start, end int, model string) []byte {
	dst = append(dst[:0], body[:start]...)
	dst = appendJSONString(dst, model)
	return append(dst, body[end:]...)
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

// multipartModel returns the "model" form field of a multipart/form-data body.
func multipartModel(contentType string, body []byte) (string, error) {
	boundary, err := multipartBoundary(contentType)
	if err != nil {
		return "", err
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return "", errNoModel
		}
		if err != nil {
			return "", fmt.Errorf("read multipart body: %w", err)
		}
		if p.FormName() == "model" {
			v, err := io.ReadAll(io.LimitReader(p, 1024))
			if err != nil {
				return "", fmt.Errorf("read multipart model: %w", err)
			}
			if len(v) == 0 {
				return "", errNoModel
			}
			return string(v), nil
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
