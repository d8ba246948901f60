package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
)

// Request body limits: every admin body is capped; import bundles get more room.
const (
	MaxBodyBytes   = 1 << 20
	MaxImportBytes = 64 << 20
)

// httpStatus maps an error code to its HTTP status.
var httpStatus = map[Code]int{
	CodeInvalid:          http.StatusBadRequest,
	CodeUnauthenticated:  http.StatusUnauthorized,
	CodePermissionDenied: http.StatusForbidden,
	CodeNotFound:         http.StatusNotFound,
	CodeConflict:         http.StatusConflict,
	CodeInUse:            http.StatusConflict,
	CodeTooLarge:         http.StatusRequestEntityTooLarge,
	CodeValidation:       http.StatusUnprocessableEntity,
	CodeInternal:         http.StatusInternalServerError,
}

// restHandler serves one endpoint: it returns the status and body to send, or an error. A rawBody body is
// written as it is; any other as JSON.
type restHandler func(s *Service, r *http.Request) (int, any, error)

// rawBody is an answer that is not JSON (the spend CSV): its headers and bytes.
type rawBody struct {
	header http.Header
	data   []byte
}

// RegisterHTTP registers the admin REST API (docs/admin-api.md) on mux: every REST route of the operation tables
// (operations.go), each needing its declared role. Every route requires an admin bearer token.
func RegisterHTTP(mux *http.ServeMux, s *Service) { registerHTTP(mux, s) }

// registerHTTP registers on anything with ServeMux.Handle (the role test records the patterns).
func registerHTTP(mux interface{ Handle(string, http.Handler) }, s *Service) {
	for _, ops := range resources {
		for _, op := range ops {
			if op.rest == "" {
				continue
			}
			if op.role == RoleNone || op.serve == nil {
				panic(fmt.Sprintf("admin: REST route %q declares no role or no handler", op.rest))
			}
			mux.Handle(op.rest, s.restEndpoint(op.role, op.serve))
		}
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// deleteBy serves a DELETE of the resource whose id is the path parameter name, with no body: 204.
func deleteBy(name string, del func(s *Service, ctx context.Context, id int64) error) restHandler {
	return func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, name)
		if err != nil {
			return 0, nil, err
		}
		if err := emptyBody(r); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, del(s, r.Context(), id)
	}
}

// restEndpoint authenticates, runs fn and writes its JSON answer or error.
func (s *Service) restEndpoint(need Role, fn restHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authorize(r.Context(), r.Header.Get("Authorization"), need)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(WithPrincipal(r.Context(), p))
		status, body, err := fn(s, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if raw, ok := body.(rawBody); ok {
			for k, v := range raw.header {
				w.Header()[k] = v
			}
			w.WriteHeader(status)
			_, _ = w.Write(raw.data)
			return
		}
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, body)
	})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"encode response","details":[]}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorBody is the admin error shape: {"error":{"code","message","details":[…]}}.
type errorBody struct {
	Error struct {
		Code    Code     `json:"code"`
		Message string   `json:"message"`
		Details []Detail `json:"details"`
	} `json:"error"`
}

func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *Error
	if !errors.As(err, &ae) {
		ae = &Error{Code: CodeInternal, Message: "internal error", Cause: err}
	}
	status, ok := httpStatus[ae.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status >= 500 {
		s.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("admin request refused", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	var body errorBody
	body.Error.Code, body.Error.Message, body.Error.Details = ae.Code, ae.Message, nonNil(ae.Details)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-admin"`)
	}
	writeJSON(w, status, body)
}

// decodeBody decodes one JSON value into v, refusing unknown fields, trailing data and bodies over
// limit (413).
func decodeBody(r *http.Request, limit int64, v any) error {
	body, err := readBody(r, limit)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

func readBody(r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, errorf(CodeInvalid, "read body: %v", err)
	}
	if int64(len(body)) > limit {
		return nil, errorf(CodeTooLarge, "request body is larger than %d bytes", limit)
	}
	return body, nil
}

// decodeStrict decodes exactly one JSON value with unknown fields refused.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(CodeInvalid, "malformed JSON: unexpected data after the JSON value")
	}
	return nil
}

// jsonError describes a decoding failure as a 400 naming the field where the decoder says.
func jsonError(err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errorf(CodeInvalid, "malformed JSON: empty body")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(CodeInvalid, "malformed JSON: unexpected end of input")
	case errors.As(err, &syn):
		return errorf(CodeInvalid, "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		f := jsonPath(typ.Field)
		if f == "" {
			f = "(body)"
		}
		return &Error{Code: CodeInvalid, Message: "wrong JSON type",
			Details: []Detail{field(f, "want %s, got JSON %s", typeName(typ.Type.String()), typ.Value)}}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return &Error{Code: CodeInvalid, Message: "unknown field", Details: []Detail{field(name, "unknown field")}}
	}
	return errorf(CodeInvalid, "malformed JSON: %v", err)
}

// jsonPath is the JSON key path of a decoding error's field: encoding/json names an embedded struct by its
// Go type (e.g. "RuleInput.input_price" for PriceRuleInput's embedded pricing.RuleInput), which is not a key
// the client wrote. Every key of this API is lower snake_case, so an upper-case segment is such a name.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	keep := parts[:0]
	for _, p := range parts {
		if p != "" && !unicode.IsUpper(rune(p[0])) {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ".")
}

func typeName(goType string) string {
	switch {
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "string"):
		return "a string"
	case strings.Contains(goType, "bool"):
		return "a boolean"
	case strings.HasPrefix(goType, "[]") || strings.HasPrefix(goType, "*[]"):
		return "an array"
	case strings.Contains(goType, "Time"):
		return "an RFC 3339 timestamp string"
	}
	return "an object"
}

func emptyBody(r *http.Request) error {
	body, err := readBody(r, MaxBodyBytes)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		return errorf(CodeInvalid, "this endpoint takes no request body")
	}
	return nil
}

// pathID parses a positive integer path parameter.
func pathID(r *http.Request, name string) (int64, error) {
	v := r.PathValue(name)
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, errorf(CodeInvalid, "%s must be a positive integer, got %q", name, v)
	}
	return id, nil
}

func pageParams(r *http.Request) (int, string, error) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, "", errorf(CodeInvalid, "limit must be an integer, got %q", v)
		}
		if n <= 0 {
			return 0, "", errorf(CodeInvalid, "limit must be between 1 and %d, got %d", MaxPageSize, n)
		}
		limit = n
	}
	return limit, q.Get("cursor"), nil
}
