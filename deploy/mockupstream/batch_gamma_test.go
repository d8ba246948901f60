package mockupstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genai"
)

func (b *testBundle) genai(t *testing.T, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPClient: b.srv.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: b.srv.URL}})
	if err != nil {
		t.Fatalf("genai.NewClient: %v", err)
	}
	return c
}

func gammaInlined(keys ...string) *genai.BatchJobSource {
	src := &genai.BatchJobSource{}
	for _, k := range keys {
		src.InlinedRequests = append(src.InlinedRequests, &genai.InlinedRequest{Contents: genai.Text("hello " + k),
			Metadata: map[string]string{"key": k}})
	}
	return src
}

func TestGammaBatchLifecycleWithSDK(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{APIKey: "g-key"})
	manualBatches(t, b.mock)
	c := b.genai(t, "g-key")
	job, err := c.Batches.Create(ctx, "g-1-flash", gammaInlined("k1", "k2", "k3"), &genai.CreateBatchJobConfig{DisplayName: "nightly"})
	if err != nil {
		t.Fatalf("Batches.Create: %v", err)
	}
	if job.State != genai.JobStatePending || !strings.HasPrefix(job.Name, "batches/") || job.DisplayName != "nightly" ||
		job.Model != "models/g-1-flash" || job.CreateTime.IsZero() {
		t.Fatalf("created = %+v", job)
	}
	get := func(want genai.JobState) *genai.BatchJob {
		t.Helper()
		got, err := c.Batches.Get(ctx, job.Name, nil)
		if err != nil {
			t.Fatalf("Batches.Get: %v", err)
		}
		if got.State != want {
			t.Fatalf("state = %s, want %s", got.State, want)
		}
		return got
	}
	drive(t, b.mock, job.Name, BatchAction{Advance: 1})
	get(genai.JobStateRunning)
	drive(t, b.mock, job.Name, BatchAction{FailLines: map[string]int{"k2": 429}, Process: 1})
	raw := b.call(t, http.MethodGet, "/v1beta/"+job.Name, "", "x-goog-api-key", "g-key")
	if !strings.Contains(string(raw.body), `"batchStats":{"requestCount":"3","successfulRequestCount":"1","pendingRequestCount":"2"}`) ||
		strings.Contains(string(raw.body), `"done"`) {
		t.Errorf("running operation = %s", raw.body)
	}
	drive(t, b.mock, job.Name, BatchAction{Advance: 1})
	done := get(genai.JobStateSucceeded)
	if done.EndTime.IsZero() || done.Dest == nil || len(done.Dest.InlinedResponses) != 3 {
		t.Fatalf("succeeded = %+v", done)
	}
	raw = b.call(t, http.MethodGet, "/v1beta/"+job.Name, "", "x-goog-api-key", "g-key")
	var op struct {
		Done     bool `json:"done"`
		Response struct {
			Type string          `json:"@type"`
			Out  json.RawMessage `json:"inlinedResponses"`
		} `json:"response"`
	}
	if err := json.Unmarshal(raw.body, &op); err != nil || !op.Done || !strings.HasSuffix(op.Response.Type, "GenerateContentBatchOutput") ||
		len(op.Response.Out) == 0 {
		t.Errorf("done operation = %s (%v)", raw.body, err)
	}

	rs := done.Dest.InlinedResponses
	if rs[0].Metadata["key"] != "k1" || rs[1].Metadata["key"] != "k2" || rs[1].Error == nil || rs[1].Response != nil ||
		rs[1].Error.Code == nil || *rs[1].Error.Code != 8 || rs[2].Response == nil {
		t.Fatalf("inlined responses = %+v %+v %+v", rs[0], rs[1], rs[2])
	}
	// Each response is the plain generateContent answer to the same request, usage included, billed at tier batch.
	var in struct {
		Batch struct {
			InputConfig struct {
				Requests struct {
					Requests []struct {
						Request json.RawMessage `json:"request"`
					} `json:"requests"`
				} `json:"requests"`
			} `json:"inputConfig"`
		} `json:"batch"`
	}
	var createBody string
	for _, r := range b.mock.Requests() {
		if strings.HasSuffix(r.Path, ":batchGenerateContent") {
			createBody = r.Body
		}
	}
	if err := json.Unmarshal([]byte(createBody), &in); err != nil || len(in.Batch.InputConfig.Requests.Requests) != 3 {
		t.Fatalf("the SDK's create body %s (%v)", createBody, err)
	}
	bills := batchBills(b.mock, job.Name)
	if len(bills) != 2 {
		t.Fatalf("batch bills = %+v", bills)
	}
	for i, idx := range []int{0, 2} {
		before := len(b.mock.Bills())
		plain := b.post(t, "/v1beta/models/g-1-flash:generateContent", string(in.Batch.InputConfig.Requests.Requests[idx].Request),
			"x-goog-api-key", "g-key")
		var want genai.GenerateContentResponse
		if err := json.Unmarshal(plain.body, &want); err != nil {
			t.Fatal(err)
		}
		got := rs[idx].Response
		if got.ResponseID != want.ResponseID || got.Text() != want.Text() || got.UsageMetadata == nil ||
			got.UsageMetadata.PromptTokenCount != want.UsageMetadata.PromptTokenCount ||
			got.UsageMetadata.CandidatesTokenCount != want.UsageMetadata.CandidatesTokenCount {
			t.Errorf("response %d = %+v, want the plain answer %+v", idx, got, want)
		}
		pb := b.mock.Bills()[before]
		if bl := bills[i]; bl.Tier != BatchTier || bl.Endpoint != EndpointGenerateContent || bl.Input != pb.Input || bl.Output != pb.Output ||
			bl.Model != "g-1-flash" || int32(bl.Input) != got.UsageMetadata.PromptTokenCount {
			t.Errorf("bill %d = %+v, plain %+v", idx, bl, pb)
		}
	}
}

func TestGammaBatchCancelExpireListAndBounds(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{})
	manualBatches(t, b.mock)
	c := b.genai(t, "k")
	var names []string
	for range 3 {
		job, err := c.Batches.Create(ctx, "g-1-flash", gammaInlined("a", "b"), nil)
		if err != nil {
			t.Fatal(err)
		}
		names = append([]string{job.Name}, names...)
	}
	// Cancelled while running: CANCELLED, the answered request kept.
	drive(t, b.mock, names[0], BatchAction{Advance: 1, Process: 0})
	drive(t, b.mock, names[0], BatchAction{Process: 1})
	if err := c.Batches.Cancel(ctx, names[0], nil); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	drive(t, b.mock, names[0], BatchAction{Advance: 1})
	got, err := c.Batches.Get(ctx, names[0], nil)
	if err != nil || got.State != genai.JobStateCancelled || got.Dest == nil || len(got.Dest.InlinedResponses) != 1 {
		t.Fatalf("cancelled = %+v, %v", got, err)
	}
	if err := c.Batches.Cancel(ctx, names[0], nil); err == nil || !strings.Contains(err.Error(), "FAILED_PRECONDITION") {
		t.Errorf("cancel of an ended batch: %v", err)
	}
	// Expired and failed.
	drive(t, b.mock, names[1], BatchAction{ExpireLines: []string{"#1"}, Advance: 2})
	if got, err := c.Batches.Get(ctx, names[1], nil); err != nil || got.State != genai.JobStateExpired || len(got.Dest.InlinedResponses) != 1 {
		t.Fatalf("expired = %+v, %v", got, err)
	}
	drive(t, b.mock, names[2], BatchAction{Fail: "backend unavailable"})
	raw := b.call(t, http.MethodGet, "/v1beta/"+names[2], "", "x-goog-api-key", "k")
	if !strings.Contains(string(raw.body), `"BATCH_STATE_FAILED"`) || !strings.Contains(string(raw.body), `"error":{"code":13,"message":"backend unavailable"}`) {
		t.Errorf("failed operation = %s", raw.body)
	}

	// List: newest first, pageSize / pageToken.
	page, err := c.Batches.List(ctx, &genai.ListBatchJobsConfig{PageSize: 2})
	if err != nil || len(page.Items) != 2 || page.Items[0].Name != names[0] || page.NextPageToken == "" {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	next, err := page.Next(ctx)
	if err != nil || len(next.Items) != 1 || next.Items[0].Name != names[2] {
		t.Fatalf("second page = %+v, %v", next, err)
	}
	var all []string
	for job, err := range c.Batches.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, job.Name)
	}
	if strings.Join(all, ",") != strings.Join(names, ",") {
		t.Fatalf("All = %v, want %v", all, names)
	}
	if _, err := c.Batches.Delete(ctx, names[2], nil); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := c.Batches.Get(ctx, names[2], nil); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Errorf("Get after delete: %v", err)
	}

	// Bounds and hostile input: gamma's error shape, nothing stored.
	n := len(b.mock.Batches())
	b.mock.SetBatchConfig(BatchConfig{StepMS: intPtr(0), MaxLines: 1})
	if _, err := c.Batches.Create(ctx, "g-1-flash", gammaInlined("a", "b"), nil); err == nil || !strings.Contains(err.Error(), "INVALID_ARGUMENT") {
		t.Errorf("too many requests: %v", err)
	}
	for name, body := range map[string]string{
		"no batch":    `{}`,
		"no requests": `{"batch":{"input_config":{"requests":{"requests":[]}}}}`,
		"file input":  `{"batch":{"input_config":{"file_name":"files/x"}}}`,
	} {
		r := b.call(t, http.MethodPost, "/v1beta/models/g-1-flash:batchGenerateContent", body, "x-goog-api-key", "k")
		if r.status != 400 || !strings.Contains(string(r.body), `"INVALID_ARGUMENT"`) {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	if got := len(b.mock.Batches()); got != n {
		t.Errorf("refused batches stored: %d, want %d", got, n)
	}
	// snake_case field names (the REST docs' spelling) are accepted like the SDK's camelCase.
	b.mock.SetBatchConfig(BatchConfig{StepMS: intPtr(0)})
	r := b.post(t, "/v1beta/models/g-1-flash:batchGenerateContent",
		`{"batch":{"display_name":"snake","input_config":{"requests":{"requests":[{"request":{"contents":[{"parts":[{"text":"hi"}]}]},"metadata":{"key":"s1"}}]}}}}`,
		"x-goog-api-key", "k")
	if !strings.Contains(string(r.body), `"displayName":"snake"`) || !strings.Contains(string(r.body), `"BATCH_STATE_PENDING"`) {
		t.Errorf("snake_case create = %s", r.body)
	}
}
