package mockupstream

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func benchRoute(b *testing.B, path, body string, headers ...string) {
	m := New(Options{MaxRecords: -1})
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

func BenchmarkAlphaChat(b *testing.B) { benchRoute(b, "/v1/chat/completions", chatBody) }

func BenchmarkAlphaChatStream(b *testing.B) {
	benchRoute(b, "/v1/chat/completions", `{"model":"m","messages":[1],"stream":true,"stream_options":{"include_usage":true}}`)
}

func BenchmarkBetaStream(b *testing.B) {
	benchRoute(b, "/v1/messages", betaBody+`,"stream":true}`, "anthropic-version", betaVersion)
}

func BenchmarkGammaStream(b *testing.B) {
	benchRoute(b, "/v1beta/models/g:streamGenerateContent?alt=sse", gammaBody)
}
