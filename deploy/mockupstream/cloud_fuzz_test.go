package mockupstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// FuzzParseSigV4 checks the Authorization parser never panics, and that what it accepts names a
// five-part credential scope and a signature.
func FuzzParseSigV4(f *testing.F) {
	req, _ := http.NewRequest(http.MethodPost, "http://h/model/m/invoke", strings.NewReader("{}"))
	_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AK", SecretAccessKey: "s"}, req,
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "bedrock", "us-east-1", time.Unix(1760000000, 0))
	f.Add(req.Header.Get("Authorization"))
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request, SignedHeaders=host, Signature=00")
	f.Add("AWS4-HMAC-SHA256 Credential=//// , Signature")
	f.Add("Bearer x")
	f.Fuzz(func(t *testing.T, h string) {
		a, err := parseSigV4(h)
		if err != nil {
			return
		}
		if a.accessKey == "" || a.signature == "" || len(a.signedHeaders) == 0 {
			t.Fatalf("accepted %q as %+v", h, a)
		}
	})
}

var fuzzCloudRoutes = []string{
	"/model/anthropic.c-v1:0/invoke", "/model/anthropic.c-v1%3A0/invoke-with-response-stream", "/model/m/converse",
	"/model/m/converse-stream", "/model/m/count-tokens", "/model//invoke", "/model/a/b/converse",
	"/v1/projects/p/locations/l/publishers/google/models/g:generateContent",
	"/v1/projects/p/locations/l/publishers/google/models/g:streamGenerateContent?alt=sse",
	"/v1/projects/p/locations/l/publishers/anthropic/models/c:rawPredict",
	"/v1/projects/p/locations/l/publishers/anthropic/models/c:streamRawPredict", "/v1/projects/p:x",
	"/openai/deployments/d/chat/completions?api-version=1", "/openai/deployments/d/responses?api-version=1",
	"/openai/deployments/d/embeddings?api-version=1", "/openai/v1/images/generations", "/openai/deployments//x",
	"/token",
}

// FuzzCloudHandler feeds random bodies and path tails to the authenticated cloud routes and random
// assertions to the token endpoint: never a panic, always a status.
func FuzzCloudHandler(f *testing.F) {
	for i, s := range []string{invokeBody, `{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"t"}}],"toolChoice":{"any":{}}},"additionalModelRequestFields":{"thinking":{"type":"enabled"}},"inferenceConfig":{"maxTokens":-1}}`,
		`{"anthropic_version":"vertex-2023-10-16","max_tokens":3,"messages":[{"role":"user","content":"x"}]}`,
		`{"contents":[{"parts":[{"text":"x"}]}]}`, `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`,
		`grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c`, `null`, `[]`, "", "\x00"} {
		f.Add(uint8(i), s, "")
	}
	m := New(Options{MaxRecords: 4, Clouds: CloudOptions{BedrockAPIKeys: []string{"k"}, AzureKeys: []string{"k"}}})
	m.googleTokens = map[string]googleToken{"k": {subject: "sa", expires: time.Now().Add(time.Hour)}}
	f.Fuzz(func(t *testing.T, route uint8, body, tail string) {
		u := fuzzCloudRoutes[int(route)%len(fuzzCloudRoutes)]
		if tail != "" {
			u += url.PathEscape(tail)
		}
		req := httptest.NewRequest(http.MethodPost, "http://mock"+"/"+strings.TrimPrefix(u, "/"), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		req.Header.Set("api-key", "k")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("x-mock-chunks", "3")
		req.Header.Set("x-mock-stream-error-after", []string{"", "1", "5"}[int(route)%3])
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
