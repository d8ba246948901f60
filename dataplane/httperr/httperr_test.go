package httperr

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/vocab"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name string
		kind vocab.Kind
		err  error
		want string
		code int
	}{
		{"alpha unsupported", vocab.KindAlphaChatCompletions, Unsupported(vocab.OpRerank, vocab.KindAlpha, ""),
			`{"error":{"message":"operation rerank with kind alpha is not supported","type":"invalid_request_error","param":null,"code":"unsupported_operation"}}`, 400},
		{"alpha forbidden", vocab.KindAlpha, Forbidden("m"),
			`{"error":{"message":"this API key may not use model \"m\"","type":"permission_error","param":"model","code":"model_not_allowed"}}`, 403},
		{"alpha quota", vocab.KindAlphaResponses, QuotaExceeded("over"),
			`{"error":{"message":"over","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, 402},
		{"beta unsupported", vocab.KindBetaMessages, Unsupported(vocab.OpRerank, vocab.KindBeta, ""),
			`{"type":"error","error":{"type":"invalid_request_error","message":"unsupported_operation: operation rerank with kind beta is not supported"}}`, 400},
		{"gamma unsupported", vocab.KindGamma, Unsupported(vocab.OpRerank, vocab.KindGamma, ""),
			`{"error":{"code":400,"message":"operation rerank with kind gamma is not supported","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"unsupported_operation","domain":"tollgate"}]}}`, 400},
		{"beta forbidden", vocab.KindBetaMessages, Forbidden("m"),
			`{"type":"error","error":{"type":"permission_error","message":"model_not_allowed: this API key may not use model \"m\""}}`, 403},
		{"beta 401", vocab.KindBetaMessages, Unauthorized("bad key"),
			`{"type":"error","error":{"type":"authentication_error","message":"bad key"}}`, 401},
		{"beta 413", vocab.KindBeta, TooLarge(10),
			`{"type":"error","error":{"type":"request_too_large","message":"request body exceeds 10 bytes"}}`, 413},
		{"beta 504", vocab.KindBetaMessages, Timeout(errors.New("slow")),
			`{"type":"error","error":{"type":"timeout_error","message":"the upstream did not answer in time"}}`, 504},
		{"gamma 404", vocab.KindGammaGenerateContent, UnknownModel("g"),
			`{"error":{"code":404,"message":"the model \"g\" does not exist","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"model_not_found","domain":"tollgate"}]}}`, 404},
		{"gamma 429", vocab.KindGamma, RateLimited("slow down", 1500*time.Millisecond),
			`{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"},{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"rate_limit_exceeded","domain":"tollgate"}]}}`, 429},
		{"plain error is 500", "", errors.New("boom"),
			`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal_error"}}`, 500},
		{"alpha 502", vocab.KindAlpha, AllFailed(errors.New("x")),
			`{"error":{"message":"every upstream candidate failed","type":"server_error","param":null,"code":"upstream_failed"}}`, 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Write(rec, tt.kind, tt.err)
			if rec.Code != tt.code || rec.Body.String() != tt.want {
				t.Errorf("Write() = %d %s, want %d %s", rec.Code, rec.Body, tt.code, tt.want)
			}
			if rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q", rec.Header().Get("Content-Type"))
			}
		})
	}
	rec := httptest.NewRecorder()
	Write(rec, vocab.KindAlpha, RateLimited("x", 3*time.Second))
	if got := rec.Header().Get("Retry-After"); got != "3" {
		t.Errorf("Retry-After = %q, want 3", got)
	}
	if rec.Code != http.StatusTooManyRequests {
		t.Errorf("status = %d", rec.Code)
	}
	cause := errors.New("cause")
	if !errors.Is(AllFailed(cause), cause) {
		t.Error("AllFailed does not unwrap to its cause")
	}
}
