package canon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// RequestError is a client request the translator refuses: HTTP 400 naming the offending field. The data
// plane renders it in the client's dialect (ErrorBody does that).
type RequestError struct {
	Status  int    // always 400
	Field   string // JSON path of the offending field, e.g. "n" or "generationConfig.candidateCount"
	Message string
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("field %s: %s", e.Field, e.Message)
}

func Refuse(field, format string, args ...any) *RequestError {
	return &RequestError{Status: http.StatusBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

func BadRequest(field string, err error) *RequestError {
	return &RequestError{Status: http.StatusBadRequest, Field: field, Message: err.Error()}
}

// errClass is the dialect-neutral error class an upstream error maps to, and from which the client
// dialect's error type and status are chosen.
type errClass int

const (
	ClassInvalid errClass = iota
	classAuth
	classPermission
	classNotFound
	classTooLarge
	classRateLimit
	ClassServer
	classOverloaded
	classTimeout
)

// APIError is the canonical error.
type APIError struct {
	Status     int
	Class      errClass
	Message    string
	Code       string // alpha code, when known
	Param      string
	RetryAfter string // seconds, for Retry-After
}

func (e *APIError) Error() string { return fmt.Sprintf("upstream error %d: %s", e.Status, e.Message) }

func classForStatus(status int) errClass {
	switch {
	case status == 401:
		return classAuth
	case status == 403:
		return classPermission
	case status == 404:
		return classNotFound
	case status == 413:
		return classTooLarge
	case status == 429:
		return classRateLimit
	case status == 503 || status == 529:
		return classOverloaded
	case status == 504:
		return classTimeout
	case status >= 500:
		return ClassServer
	}
	return ClassInvalid
}

// ParseUpstreamError reads an error body of any dialect (alpha, beta, gamma, or not JSON at all).
func ParseUpstreamError(status int, header http.Header, body []byte) *APIError {
	e := &APIError{Status: status, Class: classForStatus(status)}
	if header != nil {
		e.RetryAfter = header.Get("Retry-After")
	}
	var env struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
		// alpha responses stream error event
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &env) != nil {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 512 {
			e.Message = e.Message[:512]
		}
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
		return e
	}
	if !jsonkit.StartsObject(env.Error) {
		if env.Message != "" {
			e.Message = env.Message
			e.Code = rawString(env.Code)
			return e
		}
		e.Message = http.StatusText(status)
		return e
	}
	var inner struct {
		Message string            `json:"message"`
		Type    string            `json:"type"`
		Code    json.RawMessage   `json:"code"`
		Param   json.RawMessage   `json:"param"`
		Status  string            `json:"status"`
		Details []json.RawMessage `json:"details"`
	}
	_ = json.Unmarshal(env.Error, &inner)
	e.Message = inner.Message
	e.Code = rawString(inner.Code)
	e.Param = rawString(inner.Param)
	switch {
	case inner.Status != "": // gamma
		if c := gammaStatusClass(inner.Status); c >= 0 {
			e.Class = c
		}
		for _, d := range inner.Details {
			var ri struct {
				Type  string `json:"@type"`
				Delay string `json:"retryDelay"`
			}
			if json.Unmarshal(d, &ri) == nil && strings.HasSuffix(ri.Type, "google.rpc.RetryInfo") && e.RetryAfter == "" {
				if dur, err := time.ParseDuration(ri.Delay); err == nil {
					e.RetryAfter = strconv.Itoa(int((dur + time.Second - 1) / time.Second))
				}
			}
		}
		e.Code = ""
	case env.Type == "error": // beta
		if c := betaTypeClass(inner.Type); c >= 0 {
			e.Class = c
		}
	default: // alpha
		if inner.Type == "server_error" && e.Class == ClassInvalid {
			e.Class = ClassServer
		}
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

func rawString(r json.RawMessage) string {
	if len(r) == 0 || string(r) == "null" {
		return ""
	}
	var s string
	if jsonkit.IsJSONString(r) && json.Unmarshal(r, &s) == nil {
		return s
	}
	return string(r)
}

func gammaStatusClass(s string) errClass {
	switch s {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return ClassInvalid
	case "UNAUTHENTICATED":
		return classAuth
	case "PERMISSION_DENIED":
		return classPermission
	case "NOT_FOUND":
		return classNotFound
	case "RESOURCE_EXHAUSTED":
		return classRateLimit
	case "UNAVAILABLE":
		return classOverloaded
	case "DEADLINE_EXCEEDED":
		return classTimeout
	case "INTERNAL", "UNKNOWN":
		return ClassServer
	}
	return -1
}

func betaTypeClass(s string) errClass {
	switch s {
	case "invalid_request_error", "billing_error":
		return ClassInvalid
	case "authentication_error":
		return classAuth
	case "permission_error":
		return classPermission
	case "not_found_error":
		return classNotFound
	case "request_too_large":
		return classTooLarge
	case "rate_limit_error":
		return classRateLimit
	case "api_error":
		return ClassServer
	case "overloaded_error":
		return classOverloaded
	case "timeout_error":
		return classTimeout
	}
	return -1
}

// status returns the HTTP status for the client family.
func (e *APIError) StatusFor(family vocab.Kind) int {
	switch e.Class {
	case classOverloaded:
		if family == vocab.KindBeta {
			return 529
		}
		return http.StatusServiceUnavailable
	case classTimeout:
		return http.StatusGatewayTimeout
	}
	if e.Status >= 400 && e.Status != 529 {
		return e.Status
	}
	switch e.Class {
	case classAuth:
		return 401
	case classPermission:
		return 403
	case classNotFound:
		return 404
	case classTooLarge:
		return 413
	case classRateLimit:
		return 429
	case ClassServer:
		return 500
	}
	return 400
}

func (e *APIError) AlphaType() string {
	switch e.Class {
	case classAuth:
		return "authentication_error"
	case classPermission:
		return "permission_error"
	case classNotFound:
		return "not_found_error"
	case classRateLimit:
		return "rate_limit_exceeded"
	case ClassServer, classOverloaded, classTimeout:
		return "server_error"
	}
	return "invalid_request_error"
}

func (e *APIError) AlphaCode() string {
	if e.Code != "" {
		return e.Code
	}
	if e.Class == classRateLimit {
		return "rate_limit_exceeded"
	}
	return ""
}

func (e *APIError) betaType() string {
	switch e.Class {
	case classAuth:
		return "authentication_error"
	case classPermission:
		return "permission_error"
	case classNotFound:
		return "not_found_error"
	case classTooLarge:
		return "request_too_large"
	case classRateLimit:
		return "rate_limit_error"
	case ClassServer:
		return "api_error"
	case classOverloaded:
		return "overloaded_error"
	case classTimeout:
		return "timeout_error"
	}
	return "invalid_request_error"
}

func (e *APIError) gammaStatus() string {
	switch e.Class {
	case classAuth:
		return "UNAUTHENTICATED"
	case classPermission:
		return "PERMISSION_DENIED"
	case classNotFound:
		return "NOT_FOUND"
	case classRateLimit:
		return "RESOURCE_EXHAUSTED"
	case ClassServer:
		if e.Status == http.StatusBadGateway { // an upstream that failed (e.g. a cut stream), as httperr maps 502
			return "UNAVAILABLE"
		}
		return "INTERNAL"
	case classOverloaded:
		return "UNAVAILABLE"
	case classTimeout:
		return "DEADLINE_EXCEEDED"
	}
	return "INVALID_ARGUMENT"
}

// Fields are e as an error body says it to a client of family (the dialect packages' ErrorBody write them).
func (e *APIError) Fields(family vocab.Kind) ErrorFields {
	f := ErrorFields{Status: e.StatusFor(family), Message: e.Message, AlphaType: e.AlphaType(), Param: e.Param,
		BetaType: e.betaType(), GammaStatus: e.gammaStatus()}
	if c := e.AlphaCode(); c != "" {
		f.AlphaCode = &c
	}
	if e.RetryAfter != "" && e.Class == classRateLimit {
		f.RetryDelay = e.RetryAfter
	}
	return f
}
