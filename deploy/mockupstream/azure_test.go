package mockupstream

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/azure"
	"github.com/openai/openai-go/option"
)

func azureMock(t *testing.T) *testBundle {
	t.Helper()
	return setup(t, Options{Clouds: CloudOptions{AzureKeys: []string{"az-key-1"}, AzureEntraTokens: []string{"entra-token-1"}}})
}

func TestAzureDeploymentFormWithSDK(t *testing.T) {
	b := azureMock(t)
	c := openai.NewClient(azure.WithEndpoint(b.srv.URL, "2024-10-21"), azure.WithAPIKey("az-key-1"),
		option.WithHTTPClient(b.srv.Client()), option.WithMaxRetries(0))
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-deploy-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if resp.Model != "gpt-deploy-1" || resp.Choices[0].Message.Content == "" {
		t.Fatalf("chat %+v", resp)
	}
	emb, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "emb-deploy",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil || len(emb.Data) != 1 {
		t.Fatalf("embeddings: %v", err)
	}
	recs := b.mock.Requests()
	if recs[0].Path != "/openai/deployments/gpt-deploy-1/chat/completions" || recs[0].Query != "api-version=2024-10-21" {
		t.Fatalf("request %s?%s", recs[0].Path, recs[0].Query)
	}
	bl := b.mock.Bills()
	if len(bl) != 2 || bl[0].Provider != ProviderAzure || bl[0].APIKey != "az-key-1" || bl[0].Model != "gpt-deploy-1" ||
		bl[0].Endpoint != EndpointCompletions || bl[0].Input != resp.Usage.PromptTokens || bl[0].Output != resp.Usage.CompletionTokens {
		t.Fatalf("bills %+v usage %+v", bl, resp.Usage)
	}
}

func TestAzureV1FormAndEntra(t *testing.T) {
	b := azureMock(t)
	body := `{"model":"gpt-x","input":"hi"}`
	r := b.post(t, "/openai/v1/responses", body, "Authorization", "Bearer entra-token-1")
	if m := decodeJSON(t, r.body); m["object"] != "response" || m["model"] != "gpt-x" {
		t.Fatalf("responses %s", r.body)
	}
	b.post(t, "/openai/v1/images/generations", `{"model":"img-x","prompt":"cat"}`, "api-key", "az-key-1")
	b.post(t, "/openai/deployments/img-d/images/generations?api-version=2025-04-01-preview", `{"prompt":"cat"}`, "api-key", "az-key-1")
	if bl := b.mock.Bills(); len(bl) != 3 || bl[0].APIKey != "entra-token-1" || bl[2].Model != "img-d" || bl[2].Endpoint != EndpointImages {
		t.Fatalf("bills %+v", bl)
	}
}

func TestAzureRefusals(t *testing.T) {
	b := azureMock(t)
	chat := `{"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, path string
		headers    []string
		status     int
	}{
		{"no key", "/openai/deployments/d/chat/completions?api-version=2024-10-21", nil, 401},
		{"wrong key", "/openai/deployments/d/chat/completions?api-version=2024-10-21", []string{"api-key", "nope"}, 401},
		{"unknown Entra token", "/openai/v1/chat/completions", []string{"Authorization", "Bearer nope"}, 401},
		{"missing api-version", "/openai/deployments/d/chat/completions", []string{"api-key", "az-key-1"}, 404},
		{"unknown operation", "/openai/deployments/d/audio/speech?api-version=x", []string{"api-key", "az-key-1"}, 404},
	} {
		r := b.call(t, http.MethodPost, tc.path, chat, tc.headers...)
		e, _ := decodeJSON(t, r.body)["error"].(map[string]any)
		if r.status != tc.status || e == nil || e["code"] != azureCode(tc.status) || e["message"] == "" {
			t.Fatalf("%s: %d %s, want %d with Azure's error shape", tc.name, r.status, r.body, tc.status)
		}
	}
	if len(b.mock.Bills()) != 0 {
		t.Fatal("refused calls billed")
	}
	// The official client sees a wrong key as a 401 API error.
	c := openai.NewClient(azure.WithEndpoint(b.srv.URL, "2024-10-21"), azure.WithAPIKey("wrong"),
		option.WithHTTPClient(b.srv.Client()), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "d",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key through the client: %v", err)
	}
}

func azureCode(status int) string { return map[int]string{401: "401", 404: "404", 429: "429"}[status] }

func TestAzureThrottle(t *testing.T) {
	b := azureMock(t)
	b.mock.SetCloudSwitches(CloudSwitches{Throttle: true})
	r := b.call(t, http.MethodPost, "/openai/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		"api-key", "az-key-1", "x-mock-retry-after", "3")
	e, _ := decodeJSON(t, r.body)["error"].(map[string]any)
	if r.status != http.StatusTooManyRequests || r.header.Get("retry-after") != "3" || e == nil || e["code"] != "429" {
		t.Fatalf("throttled: %d %v %s", r.status, r.header, r.body)
	}
}

// Chat answers carry Azure's content-filter results: the prompt's verdict in the body (and as a stream's
// first chunk, with no choices), each choice's own.
func TestAzureContentFilterResults(t *testing.T) {
	b := azureMock(t)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	m := decodeJSON(t, b.post(t, "/openai/v1/chat/completions", body, "api-key", "az-key-1").body)
	pfr, _ := m["prompt_filter_results"].([]any)
	ch := m["choices"].([]any)[0].(map[string]any)
	if len(pfr) != 1 || ch["content_filter_results"] == nil {
		t.Fatalf("answer %v", m)
	}
	r := b.post(t, "/openai/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "api-key", "az-key-1")
	evs := parseSSE(t, r.body)
	first := evs[0].json(t)
	if c, _ := first["choices"].([]any); len(c) != 0 || first["prompt_filter_results"] == nil {
		t.Fatalf("first chunk %v", first)
	}
	// First-party answers have none.
	fp := decodeJSON(t, b.post(t, "/v1/chat/completions", body).body)
	if fp["prompt_filter_results"] != nil {
		t.Fatalf("first-party answer %v", fp)
	}
}
