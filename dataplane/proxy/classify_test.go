package proxy

import (
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/vocab"
	"net/http"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	beta := http.Header{"Anthropic-Version": {"2023-06-01"}}
	streamBody := []byte(`{"model":"m","stream":true}`)
	tests := []struct {
		name, method, path, query string
		h                         http.Header
		body                      string
		want                      Class
		ok                        bool
	}{
		{"chat", "POST", "/v1/chat/completions", "", nil, `{"model":"m"}`, Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaChatCompletions, ModelInBody: true}, true},
		{"chat stream", "POST", "/v1/chat/completions", "", nil, string(streamBody), Class{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindAlphaChatCompletions, ModelInBody: true, Stream: true}, true},
		{"chat stream false", "POST", "/v1/chat/completions", "", nil, `{"stream":false}`, Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaChatCompletions, ModelInBody: true}, true},
		{"chat nested stream ignored", "POST", "/v1/chat/completions", "", nil, `{"x":{"stream":true}}`, Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaChatCompletions, ModelInBody: true}, true},
		{"chat GET", "GET", "/v1/chat/completions", "", nil, "", Class{}, false},
		{"responses", "POST", "/v1/responses", "", nil, string(streamBody), Class{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindAlphaResponses, ModelInBody: true, Stream: true}, true},
		{"responses get", "GET", "/v1/responses/resp_1", "", nil, "", Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaResponses, NoModel: true}, true},
		{"responses delete", "DELETE", "/v1/responses/resp_1", "", nil, "", Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaResponses, NoModel: true}, true},
		{"responses cancel", "POST", "/v1/responses/resp_1/cancel", "", nil, "", Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaResponses, NoModel: true}, true},
		{"responses input_items", "GET", "/v1/responses/resp_1/input_items", "", nil, "", Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaResponses, NoModel: true}, true},
		{"responses bad sub", "GET", "/v1/responses/resp_1/nope", "", nil, "", Class{}, false},
		{"compact", "POST", "/v1/responses/compact", "", nil, "{}", Class{Op: vocab.OpCompactContent, Kind: vocab.KindAlpha, ModelInBody: true}, true},
		{"input tokens", "POST", "/v1/responses/input_tokens", "", nil, "{}", Class{Op: vocab.OpCountTokens, Kind: vocab.KindAlpha, ModelInBody: true}, true},
		{"conversations", "POST", "/v1/conversations", "", nil, "{}", Class{Op: vocab.OpCreateConversation, Kind: vocab.KindAlpha, ModelInBody: true}, true},
		{"conversation get", "GET", "/v1/conversations/c1", "", nil, "", Class{Op: vocab.OpCreateConversation, Kind: vocab.KindAlpha, NoModel: true}, true},
		{"conversation items", "POST", "/v1/conversations/c1/items", "", nil, "", Class{Op: vocab.OpCreateConversation, Kind: vocab.KindAlpha, NoModel: true}, true},
		{"conversation item delete", "DELETE", "/v1/conversations/c1/items/i1", "", nil, "", Class{Op: vocab.OpCreateConversation, Kind: vocab.KindAlpha, NoModel: true}, true},
		{"conversation item post", "POST", "/v1/conversations/c1/items/i1", "", nil, "", Class{}, false},
		{"models alpha", "GET", "/v1/models", "", nil, "", Class{Op: vocab.OpListModels, Kind: vocab.KindAlpha, NoModel: true}, true},
		{"models gamma v1 header", "GET", "/v1/models", "", http.Header{"X-Goog-Api-Key": {"k"}}, "", Class{Op: vocab.OpListModels, Kind: vocab.KindGamma, NoModel: true}, true},
		{"models gamma v1 query", "GET", "/v1/models", "key=k&pageSize=5", nil, "", Class{Op: vocab.OpListModels, Kind: vocab.KindGamma, NoModel: true}, true},
		{"model gamma v1", "GET", "/v1/models/g-1", "", http.Header{"X-Goog-Api-Key": {"k"}}, "", Class{Op: vocab.OpGetModel, Kind: vocab.KindGamma, PathModel: "g-1"}, true},
		{"gamma v1 generate", "POST", "/v1/models/g-1:generateContent", "", nil, "{}", Class{Op: vocab.OpGenerateContent, Kind: vocab.KindGammaGenerateContent, PathModel: "g-1"}, true},
		{"gamma v1 stream", "POST", "/v1/models/g-1:streamGenerateContent", "alt=sse", nil, "{}", Class{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindGammaGenerateContent, PathModel: "g-1", Stream: true, GammaSSE: true}, true},
		{"alpha model id with colons", "GET", "/v1/models/ft:m-1:org:x", "", nil, "", Class{Op: vocab.OpGetModel, Kind: vocab.KindAlpha, PathModel: "ft:m-1:org:x"}, true},
		{"gamma v1 unknown verb", "POST", "/v1/models/g-1:nope", "", nil, "{}", Class{}, false},
		{"models beta", "GET", "/v1/models", "", beta, "", Class{Op: vocab.OpListModels, Kind: vocab.KindBeta, NoModel: true}, true},
		{"model alpha", "GET", "/v1/models/m-1", "", nil, "", Class{Op: vocab.OpGetModel, Kind: vocab.KindAlpha, PathModel: "m-1"}, true},
		{"model scoped", "GET", "/v1/models/prov/m-1", "", nil, "", Class{Op: vocab.OpGetModel, Kind: vocab.KindAlpha, PathModel: "prov/m-1"}, true},
		{"model beta", "GET", "/v1/models/b-1", "", beta, "", Class{Op: vocab.OpGetModel, Kind: vocab.KindBeta, PathModel: "b-1"}, true},
		{"embeddings", "POST", "/v1/embeddings", "", nil, "{}", Class{Op: vocab.OpCreateEmbedding, Kind: vocab.KindAlpha, ModelInBody: true}, true},
		{"image", "POST", "/v1/images/generations", "", nil, string(streamBody), Class{Op: vocab.OpCreateImage, Kind: vocab.KindAlpha, ModelInBody: true, Stream: true}, true},
		{"image edit", "POST", "/v1/images/edits", "", nil, "--b\r\nContent-Disposition: form-data; name=\"stream\"\r\n\r\ntrue\r\n--b--", Class{Op: vocab.OpEditImage, Kind: vocab.KindAlpha, ModelInBody: true, Multipart: true, Stream: true}, true},
		{"rerank", "POST", "/v1/rerank", "", nil, "{}", Class{Op: vocab.OpRerank, Kind: vocab.KindAlpha, ModelInBody: true}, true},
		{"rerank bare", "POST", "/rerank", "", nil, "{}", Class{Op: vocab.OpRerank, Kind: vocab.KindAlpha, ModelInBody: true}, true},
		{"rerank v2", "POST", "/v2/rerank", "", nil, "{}", Class{Op: vocab.OpRerank, Kind: vocab.KindAlpha, ModelInBody: true}, true},
		{"messages", "POST", "/v1/messages", "", beta, string(streamBody), Class{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindBetaMessages, ModelInBody: true, Stream: true}, true},
		{"count tokens beta", "POST", "/v1/messages/count_tokens", "", beta, "{}", Class{Op: vocab.OpCountTokens, Kind: vocab.KindBeta, ModelInBody: true}, true},
		{"gamma generate", "POST", "/v1beta/models/g-1:generateContent", "", nil, "{}", Class{Op: vocab.OpGenerateContent, Kind: vocab.KindGammaGenerateContent, PathModel: "g-1"}, true},
		{"gamma stream", "POST", "/v1beta/models/g-1:streamGenerateContent", "", nil, "{}", Class{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindGammaGenerateContent, PathModel: "g-1", Stream: true}, true},
		{"gamma stream sse", "POST", "/v1beta/models/g-1:streamGenerateContent", "alt=sse&key=k", nil, "{}", Class{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindGammaGenerateContent, PathModel: "g-1", Stream: true, GammaSSE: true}, true},
		{"gamma count", "POST", "/v1beta/models/g-1:countTokens", "", nil, "{}", Class{Op: vocab.OpCountTokens, Kind: vocab.KindGamma, PathModel: "g-1"}, true},
		{"gamma embed", "POST", "/v1beta/models/g-1:embedContent", "", nil, "{}", Class{Op: vocab.OpCreateEmbedding, Kind: vocab.KindGamma, PathModel: "g-1"}, true},
		{"gamma batch embed", "POST", "/v1beta/models/g-1:batchEmbedContents", "", nil, "{}", Class{Op: vocab.OpCreateEmbedding, Kind: vocab.KindGamma, PathModel: "g-1"}, true},
		{"gamma models", "GET", "/v1beta/models", "", nil, "", Class{Op: vocab.OpListModels, Kind: vocab.KindGamma, NoModel: true}, true},
		{"gamma model", "GET", "/v1beta/models/g-1", "", nil, "", Class{Op: vocab.OpGetModel, Kind: vocab.KindGamma, PathModel: "g-1"}, true},
		{"gamma unknown verb", "POST", "/v1beta/models/g-1:frobnicate", "", nil, "{}", Class{}, false},
		{"gamma empty model", "POST", "/v1beta/models/:generateContent", "", nil, "{}", Class{}, false},
		{"unknown", "GET", "/v2/whatever", "", nil, "", Class{}, false},
		{"root", "GET", "/", "", nil, "", Class{}, false},
		{"models empty id", "GET", "/v1/models/", "", nil, "", Class{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			if h == nil {
				h = http.Header{}
			}
			got, ok := Classify(tt.method, tt.path, tt.query, h)
			if ok && tt.body != "" && !got.Multipart && got.PathModel == "" {
				req, err := jsonkit.ParseRequest([]byte(tt.body))
				if err != nil {
					t.Fatalf("jsonkit.ParseRequest(%s): %v", tt.body, err)
				}
				got = got.WithStream(req.Stream)
			}
			if ok && got.Multipart {
				got = got.WithStream(strings.Contains(tt.body, "true"))
			}
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("Classify(%s %s) = %+v, %v, want %+v, %v", tt.method, tt.path, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"/v1/chat/completions", "/v1/models/a/b", "/v1beta/models/g:streamGenerateContent",
		"/v1/responses/x/cancel", "/v1/conversations/a/items/b", "/rerank", "/v1beta/models/::"} {
		f.Add("POST", s, "alt=sse", `{"stream":true,"model":"m"}`)
		f.Add("GET", s, "", "")
	}
	f.Fuzz(func(t *testing.T, method, path, query, body string) {
		c, ok := Classify(method, path, query, http.Header{})
		if req, err := jsonkit.ParseRequest([]byte(body)); ok && err == nil {
			c = c.WithStream(req.Stream)
		}
		if !ok {
			if c.Op != "" && c.Kind == "" {
				t.Fatalf("not ok but partial class %+v", c)
			}
			return
		}
		if !c.Op.Valid() {
			t.Fatalf("Classify(%q) op %q invalid", path, c.Op)
		}
		if !vocab.KindFits(c.Op, c.Kind) {
			t.Fatalf("Classify(%q) = %+v: kind does not fit op", path, c)
		}
		if c.Op == vocab.OpStreamGenerateContent && !c.Stream {
			t.Fatalf("Classify(%q) = %+v: streaming op without Stream", path, c)
		}
		if c.PathModel != "" && !strings.Contains(path, c.PathModel) {
			t.Fatalf("Classify(%q) path model %q not in path", path, c.PathModel)
		}
		if c.PathModel == "" && !c.ModelInBody && !c.NoModel {
			t.Fatalf("Classify(%q) = %+v: no model location", path, c)
		}
	})
}

func BenchmarkClassify(b *testing.B) {
	h := http.Header{}
	body := []byte(`{"model":"chat","messages":[{"role":"user","content":"hello"}],"stream":true}`)
	b.ReportAllocs()
	for b.Loop() {
		c, ok := Classify("POST", "/v1/chat/completions", "", h)
		req, err := jsonkit.ParseRequest(body)
		if c = c.WithStream(req.Stream); !ok || err != nil || !c.Stream {
			b.Fatal("misclassified")
		}
	}
}
