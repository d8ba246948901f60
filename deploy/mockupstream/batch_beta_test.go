package mockupstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
)

func (b *testBundle) anthropic(key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(b.srv.URL), aoption.WithAPIKey(key),
		aoption.WithHTTPClient(b.srv.Client()), aoption.WithMaxRetries(0))
}

func betaRequests(ids ...string) []anthropic.MessageBatchNewParamsRequest {
	out := make([]anthropic.MessageBatchNewParamsRequest, 0, len(ids))
	for _, id := range ids {
		out = append(out, anthropic.MessageBatchNewParamsRequest{CustomID: id, Params: anthropic.MessageBatchNewParamsRequestParams{
			Model: "b-1", MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello " + id))}}})
	}
	return out
}

func betaResults(ctx context.Context, t *testing.T, c anthropic.Client, id string) []anthropic.MessageBatchIndividualResponse {
	t.Helper()
	st := c.Messages.Batches.ResultsStreaming(ctx, id, anthropic.MessageBatchResultsParams{})
	defer func() { _ = st.Close() }()
	var out []anthropic.MessageBatchIndividualResponse
	for st.Next() {
		out = append(out, st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatalf("ResultsStreaming(%s): %v", id, err)
	}
	return out
}

func TestBetaBatchLifecycleWithSDK(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{APIKey: "sk-b"})
	manualBatches(t, b.mock)
	c := b.anthropic("sk-b")
	bt, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: betaRequests("q1", "q2", "q3", "q4")})
	if err != nil {
		t.Fatalf("Batches.New: %v", err)
	}
	if bt.ProcessingStatus != anthropic.MessageBatchProcessingStatusInProgress || bt.RequestCounts.Processing != 4 ||
		!strings.HasPrefix(bt.ID, "msgbatch_") || bt.ResultsURL != "" || bt.ExpiresAt.Sub(bt.CreatedAt).Hours() != 24 {
		t.Fatalf("created = %s", bt.RawJSON())
	}
	for _, null := range []string{`"results_url":null`, `"ended_at":null`, `"archived_at":null`, `"cancel_initiated_at":null`} {
		if !strings.Contains(bt.RawJSON(), null) {
			t.Errorf("created batch lacks %s: %s", null, bt.RawJSON())
		}
	}

	// Results are not available until the batch ends; counts stay "processing" until then.
	var apiErr *anthropic.Error
	st := c.Messages.Batches.ResultsStreaming(ctx, bt.ID, anthropic.MessageBatchResultsParams{})
	if st.Next() || !errors.As(st.Err(), &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("results before the end: %v, want 400", st.Err())
	}
	drive(t, b.mock, bt.ID, BatchAction{FailLines: map[string]int{"q2": 529}, Process: 2})
	got, err := c.Messages.Batches.Get(ctx, bt.ID, anthropic.MessageBatchGetParams{})
	if err != nil || got.RequestCounts.Processing != 4 || got.RequestCounts.Succeeded != 0 {
		t.Fatalf("mid-run counts = %+v, %v", got.RequestCounts, err)
	}
	if _, err := c.Messages.Batches.Delete(ctx, bt.ID, anthropic.MessageBatchDeleteParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("delete in progress: %v, want 400", err)
	}

	// Cancelled after two answered lines: canceling, then ended with the rest canceled.
	cc, err := c.Messages.Batches.Cancel(ctx, bt.ID, anthropic.MessageBatchCancelParams{})
	if err != nil || cc.ProcessingStatus != anthropic.MessageBatchProcessingStatusCanceling || cc.CancelInitiatedAt.IsZero() {
		t.Fatalf("Cancel = %+v, %v", cc, err)
	}
	drive(t, b.mock, bt.ID, BatchAction{Advance: 1})
	got, err = c.Messages.Batches.Get(ctx, bt.ID, anthropic.MessageBatchGetParams{})
	want := anthropic.MessageBatchRequestCounts{Succeeded: 1, Errored: 1, Canceled: 2}
	if err != nil || got.ProcessingStatus != anthropic.MessageBatchProcessingStatusEnded || got.EndedAt.IsZero() ||
		got.RequestCounts.Processing != 0 || got.RequestCounts.Succeeded != want.Succeeded || got.RequestCounts.Errored != want.Errored ||
		got.RequestCounts.Canceled != want.Canceled || got.ResultsURL != b.srv.URL+"/v1/messages/batches/"+bt.ID+"/results" {
		t.Fatalf("ended = %s, %v", got.RawJSON(), err)
	}

	res := betaResults(ctx, t, c, bt.ID)
	var kinds []string
	for _, r := range res {
		kinds = append(kinds, r.CustomID+":"+r.Result.Type)
	}
	if strings.Join(kinds, ",") != "q1:succeeded,q2:errored,q3:canceled,q4:canceled" {
		t.Fatalf("results = %v", kinds)
	}
	if res[1].Result.Error.Error.Type != "overloaded_error" {
		t.Errorf("errored result = %s", res[1].Result.RawJSON())
	}
	// The succeeded message is the plain /v1/messages answer to the same params, billed at tier batch.
	params, err := json.Marshal(betaRequests("q1")[0].Params)
	if err != nil {
		t.Fatal(err)
	}
	before := len(b.mock.Bills())
	plain := b.post(t, "/v1/messages", string(params), "x-api-key", "sk-b", "anthropic-version", "2023-06-01")
	msg := res[0].Result.Message
	if compact(t, plain.body) != compact(t, []byte(msg.RawJSON())) {
		t.Errorf("succeeded message\n%s\nwant the plain answer\n%s", msg.RawJSON(), plain.body)
	}
	bills := batchBills(b.mock, bt.ID)
	pb := b.mock.Bills()[before]
	if len(bills) != 1 || bills[0].Tier != BatchTier || bills[0].Endpoint != EndpointMessages || bills[0].Input != pb.Input ||
		bills[0].Output != pb.Output || bills[0].Input != msg.Usage.InputTokens || bills[0].Output != msg.Usage.OutputTokens {
		t.Errorf("batch bills = %+v, plain bill %+v, message usage %+v", bills, pb, msg.Usage)
	}

	del, err := c.Messages.Batches.Delete(ctx, bt.ID, anthropic.MessageBatchDeleteParams{})
	if err != nil || del.ID != bt.ID || string(del.Type) != "message_batch_deleted" {
		t.Fatalf("Delete = %+v, %v", del, err)
	}
	if _, err := c.Messages.Batches.Get(ctx, bt.ID, anthropic.MessageBatchGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("Get after delete: %v, want 404", err)
	}
}

func TestBetaBatchExpireListAndBounds(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{})
	manualBatches(t, b.mock)
	c := b.anthropic("k")
	var ids []string
	for i := range 3 {
		bt, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: betaRequests(fmt.Sprintf("r%d", i), "other")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{bt.ID}, ids...) // newest first
	}
	// Expired: the answered line keeps its result, the other expires.
	drive(t, b.mock, ids[0], BatchAction{ExpireLines: []string{"other"}, Advance: 1})
	got, err := c.Messages.Batches.Get(ctx, ids[0], anthropic.MessageBatchGetParams{})
	if err != nil || got.ProcessingStatus != "ended" || got.RequestCounts.Succeeded != 1 || got.RequestCounts.Expired != 1 {
		t.Fatalf("expired = %+v, %v", got, err)
	}
	if res := betaResults(ctx, t, c, ids[0]); len(res) != 2 || res[1].Result.Type != "expired" {
		t.Fatalf("expired results = %+v", res)
	}

	// List: newest first, after_id / before_id pages with first_id, last_id, has_more.
	page, err := c.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(2)})
	if err != nil || len(page.Data) != 2 || !page.HasMore || page.FirstID != ids[0] || page.LastID != ids[1] {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	var all []string
	for it := c.Messages.Batches.ListAutoPaging(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(1)}); it.Next(); {
		all = append(all, it.Current().ID)
	}
	if strings.Join(all, ",") != strings.Join(ids, ",") {
		t.Fatalf("auto-paged = %v, want %v", all, ids)
	}
	before, err := c.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{BeforeID: anthropic.String(ids[2]), Limit: anthropic.Int(1)})
	if err != nil || len(before.Data) != 1 || before.Data[0].ID != ids[1] || !before.HasMore {
		t.Fatalf("before_id page = %+v, %v", before, err)
	}

	// Hostile input: the provider's error shape, nothing stored.
	n := len(b.mock.Batches())
	for name, body := range map[string]string{
		"no requests":  `{"requests":[]}`,
		"bad id":       `{"requests":[{"custom_id":"has space","params":{"model":"b-1","max_tokens":1,"messages":[]}}]}`,
		"duplicate id": `{"requests":[{"custom_id":"a","params":{"model":"b-1"}},{"custom_id":"a","params":{"model":"b-1"}}]}`,
		"no params":    `{"requests":[{"custom_id":"a"}]}`,
	} {
		r := b.call(t, http.MethodPost, "/v1/messages/batches", body, "x-api-key", "k", "anthropic-version", "2023-06-01")
		if r.status != 400 || !strings.Contains(string(r.body), `"invalid_request_error"`) {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	b.mock.SetBatchConfig(BatchConfig{StepMS: intPtr(0), MaxLines: 1})
	if _, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: betaRequests("a", "b")}); err == nil ||
		!strings.Contains(err.Error(), "request_too_large") {
		t.Errorf("too many requests: %v, want 413 request_too_large", err)
	}
	if got := len(b.mock.Batches()); got != n {
		t.Errorf("refused batches were stored: %d, want %d", got, n)
	}
	r := b.call(t, http.MethodGet, "/v1/messages/batches", "", "x-api-key", "k")
	if r.status != 400 || !strings.Contains(string(r.body), "anthropic-version") {
		t.Errorf("without anthropic-version: %d %s", r.status, r.body)
	}
}
