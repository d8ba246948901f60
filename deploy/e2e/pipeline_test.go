package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	openai "github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
)

// Issue 14 items 1 and 2b through the real data plane (dataplane/app) in front of the real mock upstream.

// The official alpha SDK creates a response, retrieves it, lists its input items, cancels it, continues
// from it and deletes it through the gateway, unchanged: the ids the gateway hands out name the provider
// holding the response, and each of those requests reaches that provider with the upstream's own id and
// settles with one row (cost 0 for the stored-resource requests).
func TestPipelineStoredResponsesSDK(t *testing.T) {
	e := dpStart(t, nil)
	ctx := context.Background()
	c := openai.NewClient(ooption.WithBaseURL(e.url+"/v1/"), ooption.WithAPIKey(dpKeyMain), ooption.WithMaxRetries(0))
	created, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "chat",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.ID, "resp_tg1.") {
		t.Fatalf("created id %q, want a gateway id naming provider 1 (alpha1)", created.ID)
	}
	upstreamID := "resp_" + strings.TrimPrefix(created.ID, "resp_tg1.")
	got, err := c.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != created.ID || got.OutputText() != created.OutputText() {
		t.Fatalf("retrieved %q %q, want %q %q", got.ID, got.OutputText(), created.ID, created.OutputText())
	}
	if last := e.lastMock(); last.Method != "GET" || last.Path != "/v1/responses/"+upstreamID {
		t.Fatalf("upstream received %s %s, want GET /v1/responses/%s", last.Method, last.Path, upstreamID)
	}
	if _, err := c.Responses.InputItems.List(ctx, created.ID, responses.InputItemListParams{}); err != nil {
		t.Fatal(err)
	}
	cancelled, err := c.Responses.Cancel(ctx, created.ID)
	if err != nil || cancelled.ID != created.ID {
		t.Fatalf("cancel: %v %+v", err, cancelled)
	}
	next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", PreviousResponseID: openai.String(created.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")}})
	if err != nil {
		t.Fatal(err)
	}
	if next.PreviousResponseID != created.ID || !strings.Contains(e.lastMock().Body, `"previous_response_id":"`+upstreamID+`"`) {
		t.Fatalf("follow-up previous_response_id %q, upstream body %s", next.PreviousResponseID, e.lastMock().Body)
	}
	if err := c.Responses.Delete(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound {
		t.Fatalf("retrieve after delete: %v, want the provider's 404", err)
	}
	recs := e.outboxAtLeast(7)
	if len(recs) != 7 {
		t.Fatalf("%d records, want 7 (one per request)", len(recs))
	}
	// A response of declared length reaches the client before its record is appended, so the records of
	// consecutive requests may be appended out of order: count, do not index.
	billed, notFound := 0, 0
	for _, r := range recs {
		if r["provider_id"] != int64(1) {
			t.Fatalf("record %v, want provider 1", r)
		}
		if r["cost"] != "0" {
			billed++
		}
		if r["status"] == int32(404) {
			notFound++
		}
	}
	if billed != 2 || notFound != 1 {
		t.Fatalf("%d billed records (want the 2 creations), %d with status 404 (want the retrieval after delete): %v", billed, notFound, recs)
	}
}

// A streamed creation's events carry gateway ids, so the SDK's streamed response can be retrieved.
func TestPipelineStoredResponseFromStream(t *testing.T) {
	e := dpStart(t, nil)
	ctx := context.Background()
	c := openai.NewClient(ooption.WithBaseURL(e.url+"/v1/"), ooption.WithAPIKey(dpKeyMain), ooption.WithMaxRetries(0))
	st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "chat",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	var id string
	var text strings.Builder
	for st.Next() {
		ev := st.Current()
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.output_text.delta":
			text.WriteString(ev.Delta.OfString)
		case "response.completed":
			if ev.Response.ID != id {
				t.Fatalf("completed id %q, created id %q", ev.Response.ID, id)
			}
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "resp_tg1.") || text.Len() == 0 {
		t.Fatalf("streamed id %q text %q", id, text.String())
	}
	got, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != text.String() {
		t.Fatalf("retrieve streamed response: %v %q, want %q", err, got.OutputText(), text.String())
	}
}

// A forged or foreign id reaches no provider: a key restricted to the chat route (provider 1) gets 404 for
// an id naming provider 3, the upstream is never called, and nothing is recorded.
func TestPipelineStoredIDNotForgeable(t *testing.T) {
	e := dpStart(t, nil)
	for _, path := range []string{"/v1/responses/resp_tg3.abc", "/v1/responses/resp_plain", "/v1/conversations/conv_tg3.abc/items"} {
		r := e.do("GET", path, "", "Authorization", "Bearer "+dpKeyRestricted)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, `"code":"not_found"`) {
			t.Fatalf("GET %s: %d %s, want 404 not_found", path, r.status, r.body)
		}
	}
	if n := len(e.mock.Requests()); n != 0 {
		t.Fatalf("the upstream received %d requests", n)
	}
	if n := len(e.outbox()); n != 0 {
		t.Fatalf("%d records for refused ids", n)
	}
}

// A conversation created without a model goes to the default provider (the first route by name the key
// may use whose provider passes conversations through: "buffered", provider 6), and its sub-resources
// follow its id there.
func TestPipelineConversationWithoutModel(t *testing.T) {
	e := dpStart(t, nil)
	auth := []string{"Authorization", "Bearer " + dpKeyMain}
	r := e.do("POST", "/v1/conversations", `{"metadata":{"topic":"demo"}}`, auth...)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var conv struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.body), &conv); err != nil || !strings.HasPrefix(conv.ID, "conv_tg6.") {
		t.Fatalf("conversation %s (%v), want an id naming provider 6", r.body, err)
	}
	upstreamID := "conv_" + strings.TrimPrefix(conv.ID, "conv_tg6.")
	for _, tt := range []struct{ method, sub, body string }{
		{"GET", "", ""},
		{"POST", "/items", `{"items":[{"type":"message","role":"user","content":"hi"}]}`},
		{"GET", "/items/msg_1", ""},
		{"DELETE", "", ""},
	} {
		r := e.do(tt.method, "/v1/conversations/"+conv.ID+tt.sub, tt.body, auth...)
		if r.status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", tt.method, tt.sub, r.status, r.body)
		}
		if last := e.lastMock(); last.Method != tt.method || last.Path != "/v1/conversations/"+upstreamID+tt.sub || last.APIKey != "sk-buf" {
			t.Fatalf("upstream received %s %s (key %s), want %s /v1/conversations/%s%s with provider 6's key",
				last.Method, last.Path, last.APIKey, tt.method, upstreamID, tt.sub)
		}
		if tt.sub == "/items/msg_1" && !strings.Contains(r.body, `"id":"msg_1"`) {
			t.Fatalf("an item keeps its id: %s", r.body)
		}
	}
	for _, rec := range e.outboxAtLeast(5) {
		if rec["provider_id"] != int64(6) || rec["cost"] != "0" || rec["status"] != int32(200) {
			t.Fatalf("record %v, want provider 6, cost 0, 200", rec)
		}
	}
}

// One decoding per stream: a transformed stream (a beta client on an alpha provider) and a passthrough
// gamma JSON-array stream are billed from the usage the upstream reported, read from the same events that
// produced the client's bytes.
func TestPipelineStreamsBilledFromTheirEvents(t *testing.T) {
	e := dpStart(t, nil)
	beta := e.do("POST", "/v1/messages", `{"model":"chat","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hello"}]}`,
		"x-api-key", dpKeyMain, "anthropic-version", "2023-06-01")
	if beta.status != http.StatusOK || !strings.Contains(beta.body, "event: message_stop") {
		t.Fatalf("beta stream: %d %s", beta.status, beta.body)
	}
	gamma := e.do("POST", "/v1beta/models/gem:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`,
		"x-goog-api-key", dpKeyMain)
	if gamma.status != http.StatusOK || !strings.HasPrefix(strings.TrimSpace(gamma.body), "[") || !strings.HasSuffix(strings.TrimSpace(gamma.body), "]") {
		t.Fatalf("gamma stream: %d %s", gamma.status, gamma.body)
	}
	for name, r := range map[string]response{"beta via alpha": beta, "gamma array": gamma} {
		recs := e.recordsOf(r)
		if len(recs) != 1 {
			t.Fatalf("%s: %d records", name, len(recs))
		}
		rec := recs[0]
		if rec["source"] != "upstream" || rec["end_state"] != "completed" || rec["input"].(int64) == 0 || rec["output"].(int64) == 0 {
			t.Fatalf("%s: record %v, want completed with the upstream's usage", name, rec)
		}
	}
}
