// Package httperr owns the data plane's one edge error type and how it is written: every client-facing
// error carries an HTTP status, a code, a message the client may see and a cause that is only logged,
// and is rendered in the inbound dialect's error shape: alpha {"error":{message,type,param,code}}, beta
// {"type":"error","error":{type,message}}, gamma {"error":{code,message,status,details}} (Render).
package httperr

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Codes carried by gateway errors (alpha `error.code`; also used in logs and metrics).
const (
	CodeInvalidRequest       = "invalid_request"
	CodeUnsupportedOperation = "unsupported_operation"
	CodeInvalidAPIKey        = "invalid_api_key"
	CodeModelNotAllowed      = "model_not_allowed"
	// CodeModelUnpriced: refused by the unpriced-model policy deny (docs/pricing.md, "Unpriced models").
	CodeModelUnpriced     = "model_unpriced"
	CodeModelNotFound     = "model_not_found"
	CodeNotFound          = "not_found"
	CodeRequestTooLarge   = "request_too_large"
	CodeInsufficientQuota = "insufficient_quota"
	CodeRateLimitExceeded = "rate_limit_exceeded"
	CodeUpstreamFailed    = "upstream_failed"
	CodeUpstreamTimeout   = "upstream_timeout"
	CodeInternal          = "internal_error"
	// CodeCostCapExceeded: no candidate's worst case fits the request's X-Tollgate-Max-Cost (402);
	// CodeInvalidCostCap: the header's syntax (400). docs/cost.md, "A cost cap per request".
	CodeCostCapExceeded = "cost_cap_exceeded"
	CodeInvalidCostCap  = "invalid_cost_cap"
)

// Error is an error answered to a client. Message is what the client sees; Cause is only logged.
type Error struct {
	Status  int
	Code    string
	Message string
	// Param names the offending request field (alpha `error.param`), if any.
	Param string
	// RetryAfter, when positive, is sent as the Retry-After header (whole seconds, rounded up) and as
	// gamma's RetryInfo.
	RetryAfter time.Duration
	// Tollgate, when not nil, is the gateway's machine-readable object of the error (canon.ErrorFields.Tollgate).
	Tollgate map[string]any
	Cause    error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// Malformed is a 400 for a request the gateway cannot parse.
func Malformed(msg string, cause error) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: msg, Cause: cause}
}

// Unsupported is the 400 unsupported-operation error: the routing cell refuses the operation.
func Unsupported(op vocab.Operation, kind vocab.Kind, detail string) *Error {
	msg := fmt.Sprintf("operation %s with kind %s is not supported", op, kind)
	if detail != "" {
		msg += ": " + detail
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeUnsupportedOperation, Message: msg}
}

// Unauthorized is a 401 for a missing, unknown, disabled or expired key.
func Unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: CodeInvalidAPIKey, Message: msg}
}

// Forbidden is the 403 for a model outside the key's allowed models.
func Forbidden(model string) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeModelNotAllowed,
		Message: fmt.Sprintf("this API key may not use model %q", model), Param: "model"}
}

// UnknownModel is the 404 for a model no route or provider serves.
func UnknownModel(model string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeModelNotFound,
		Message: fmt.Sprintf("the model %q does not exist", model), Param: "model"}
}

// NotFound is the 404 for a path the gateway does not serve.
func NotFound(method, path string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf("no such endpoint: %s %s", method, path)}
}

// TooLarge is the 413 for a body beyond the limit.
func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeRequestTooLarge,
		Message: fmt.Sprintf("request body exceeds %d bytes", limit)}
}

// QuotaExceeded is the 402 for a quota-bearing scope that would go over its limit.
func QuotaExceeded(msg string) *Error {
	return &Error{Status: http.StatusPaymentRequired, Code: CodeInsufficientQuota, Message: msg}
}

// RateLimited is the 429 for a key over its RPM or TPM limit.
func RateLimited(msg string, retryAfter time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimitExceeded, Message: msg, RetryAfter: retryAfter}
}

// AllFailed is the 502 when every upstream candidate failed.
func AllFailed(cause error) *Error {
	return &Error{Status: http.StatusBadGateway, Code: CodeUpstreamFailed, Message: "every upstream candidate failed", Cause: cause}
}

// Timeout is the 504 when the upstream did not answer in time.
func Timeout(cause error) *Error {
	return &Error{Status: http.StatusGatewayTimeout, Code: CodeUpstreamTimeout, Message: "the upstream did not answer in time", Cause: cause}
}

// Internal is a 500 hiding cause from the client.
func Internal(cause error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Cause: cause}
}

// As returns err as an *Error, wrapping anything else as Internal.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}

// Write answers err in the error shape of the dialect family of kind (alpha when kind is empty).
func Write(w http.ResponseWriter, kind vocab.Kind, err error) {
	e := As(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(retrySeconds(e.RetryAfter), 10))
	}
	body := Body(kind, e)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

func retrySeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// Fields are what one error body says (canon.ErrorFields).
type Fields = canon.ErrorFields

// Render writes f as the error body of the dialect family of kind (alpha when kind is empty), by that
// dialect's package.
func Render(kind vocab.Kind, f Fields) []byte {
	switch kind.Family() {
	case vocab.KindBeta:
		return beta.ErrorBody(f)
	case vocab.KindGamma:
		return gamma.ErrorBody(f)
	}
	return alpha.ErrorBody(f)
}

// Body renders e in the error shape of kind's dialect family.
func Body(kind vocab.Kind, e *Error) []byte {
	f := Fields{Status: e.Status, Message: e.Message, AlphaType: alphaType(e.Status, e.Code), AlphaCode: &e.Code,
		Param: e.Param, BetaType: betaType(e.Status), GammaStatus: gammaStatus(e.Status), Reason: e.Code, Tollgate: e.Tollgate}
	if e.Code == CodeCostCapExceeded {
		f.Reason = "COST_CAP_EXCEEDED" // gamma's ErrorInfo reason, in Google's form (docs/cost.md)
	}
	if kind.Family() == vocab.KindBeta && (e.Code == CodeUnsupportedOperation || e.Code == CodeModelUnpriced || e.Code == CodeModelNotAllowed) {
		// beta bodies have no code member: the gateway's code leads the message, machine-readable, where
		// the beta error type alone cannot tell it apart (an unpriced-model refusal and a model the key
		// may not use are both a permission_error).
		f.Message = e.Code + ": " + e.Message
	}
	if e.RetryAfter > 0 {
		f.RetryDelay = strconv.FormatInt(retrySeconds(e.RetryAfter), 10)
	}
	return Render(kind, f)
}

func alphaType(status int, code string) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusPaymentRequired || code == CodeInsufficientQuota:
		return "insufficient_quota"
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func betaType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529, http.StatusServiceUnavailable:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func gammaStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusPaymentRequired, http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "INVALID_ARGUMENT"
}
