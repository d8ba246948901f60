package mockupstream

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/v1/chat/completions"},
	{http.MethodPost, "/v1/responses"},
	{http.MethodPost, "/v1/responses/compact"},
	{http.MethodPost, "/v1/responses/input_tokens"},
	{http.MethodPost, "/v1/conversations"},
	{http.MethodPost, "/v1/conversations/conv_1/items"},
	{http.MethodGet, "/v1/models/m-1"},
	{http.MethodPost, "/v1/embeddings"},
	{http.MethodPost, "/v1/images/generations"},
	{http.MethodPost, "/v1/images/edits"},
	{http.MethodPost, "/v1/rerank"},
	{http.MethodPost, "/v2/rerank"},
	{http.MethodPost, "/v1/messages"},
	{http.MethodPost, "/v1/messages/count_tokens"},
	{http.MethodPost, "/v1beta/models/g:generateContent"},
	{http.MethodPost, "/v1beta/models/g:streamGenerateContent"},
	{http.MethodPost, "/v1beta/models/g:streamGenerateContent?alt=sse"},
	{http.MethodPost, "/v1beta/models/g:countTokens"},
	{http.MethodPost, "/v1beta/models/g:embedContent"},
	{http.MethodPost, "/v1beta/models/g:batchEmbedContents"},
}

// FuzzHandler feeds random bodies and control values to every route: the handler must never panic
// and must always answer a status.
func FuzzHandler(f *testing.F) {
	seeds := []string{
		chatBody, betaBody + `,"stream":true}`, gammaBody, `{"model":"m","input":"x","stream":true}`,
		`{"model":"m","messages":[{}],"stream":true,"stream_options":{"include_usage":true},"tools":[{"function":{"name":"f","parameters":{"properties":{"a":{"type":7}}}}}],"tool_choice":"required"}`,
		`{"model":"m","input":[[1,2],[3]],"encoding_format":"base64","dimensions":-5}`,
		`{"query":"q","documents":[{"text":1},"a",null],"top_n":-1}`,
		`{"prompt":"p","n":-3,"stream":true,"partial_images":99}`,
		`{"requests":[{"content":{"parts":[{"text":""}]}}]}`,
		`{"contents":[{}],"generationConfig":{"thinkingConfig":{"thinkingBudget":-1,"includeThoughts":true}}}`,
		`null`, `[]`, `{"model":null}`, "", "\x00\xff",
	}
	for i, s := range seeds {
		f.Add(uint8(i), s, "3", "1")
	}
	m := New(Options{MaxRecords: 4})
	f.Fuzz(func(t *testing.T, route uint8, body, chunks, ctl string) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(rt.method, rt.path, strings.NewReader(body))
		req.Header.Set("anthropic-version", betaVersion)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=xyz")
		req.Header.Set("x-mock-chunks", chunks)
		req.Header.Set("x-mock-tool-call", ctl)
		req.Header.Set("x-mock-usage", []string{"full", "none", "aggregate", "cached", "image_tokens", ctl}[int(route)%6])
		req.Header.Set("x-mock-stream-error-after", ctl)
		req.Header.Set("x-mock-served-tier", ctl)
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, req)
		if rec.Code < 200 || rec.Code > 599 {
			t.Fatalf("status %d", rec.Code)
		}
		if _, err := io.ReadAll(rec.Result().Body); err != nil {
			t.Fatalf("read: %v", err)
		}
	})
}
