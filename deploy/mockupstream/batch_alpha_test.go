package mockupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
)

func intPtr(n int) *int { return &n }

// manualBatches makes every batch move only when driven.
func manualBatches(t *testing.T, m *Server) {
	t.Helper()
	m.SetBatchConfig(BatchConfig{StepMS: intPtr(0)})
}

func (b *testBundle) openai(key string) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(b.srv.URL+"/v1/"), ooption.WithAPIKey(key),
		ooption.WithHTTPClient(b.srv.Client()), ooption.WithMaxRetries(0))
}

func alphaChatLine(id, prompt string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"m-1","messages":[{"role":"user","content":%q}]}}`,
		id, prompt)
}

func drive(t *testing.T, m *Server, id string, a BatchAction) BatchView {
	t.Helper()
	v, err := m.DriveBatch(id, a)
	if err != nil {
		t.Fatalf("DriveBatch(%s, %+v): %v", id, a, err)
	}
	return v
}

// uploadBatch uploads lines as a batch input file and creates a chat completions batch over it.
func uploadBatch(ctx context.Context, t *testing.T, c openai.Client, lines ...string) *openai.Batch {
	t.Helper()
	content := strings.Join(lines, "\n") + "\n"
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(content), "in.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	if f.Purpose != "batch" || f.Bytes != int64(len(content)) || !strings.HasPrefix(f.ID, "file-") || !strings.Contains(f.RawJSON(), `"status":"processed"`) {
		t.Fatalf("uploaded file = %+v", f)
	}
	bt, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: shared.Metadata{"job": "nightly"}})
	if err != nil {
		t.Fatalf("Batches.New: %v", err)
	}
	return bt
}

// readFile downloads a file's content with the SDK and parses its JSONL lines.
func readFile(ctx context.Context, t *testing.T, c openai.Client, id string) []map[string]json.RawMessage {
	t.Helper()
	resp, err := c.Files.Content(ctx, id)
	if err != nil {
		t.Fatalf("Files.Content(%s): %v", id, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("file %s line %q: %v", id, sc.Text(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read file %s: %v", id, err)
	}
	return out
}

func rawStr(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatalf("compact %q: %v", raw, err)
	}
	return buf.String()
}

func batchBills(m *Server, id string) []Bill {
	var out []Bill
	for _, b := range m.Bills() {
		if b.Batch == id {
			out = append(out, b)
		}
	}
	return out
}

func TestAlphaBatchLifecycleWithSDK(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{APIKey: "sk-a"})
	manualBatches(t, b.mock)
	c := b.openai("sk-a")
	lines := []string{alphaChatLine("r1", "first"), alphaChatLine("r2", "second"), alphaChatLine("r3", "third")}
	bt := uploadBatch(ctx, t, c, lines...)
	if bt.Status != openai.BatchStatusValidating || bt.RequestCounts.Total != 3 || bt.Endpoint != "/v1/chat/completions" ||
		bt.CompletionWindow != "24h" || bt.Metadata["job"] != "nightly" || bt.ExpiresAt != bt.CreatedAt+86400 || bt.OutputFileID != "" {
		t.Fatalf("created batch = %+v", bt)
	}
	if !strings.Contains(bt.RawJSON(), `"output_file_id":null`) || !strings.Contains(bt.RawJSON(), `"errors":null`) {
		t.Errorf("absent fields must be null like the provider's: %s", bt.RawJSON())
	}

	get := func(want openai.BatchStatus) *openai.Batch {
		t.Helper()
		got, err := c.Batches.Get(ctx, bt.ID)
		if err != nil {
			t.Fatalf("Batches.Get: %v", err)
		}
		if got.Status != want {
			t.Fatalf("status = %s, want %s (%s)", got.Status, want, got.RawJSON())
		}
		return got
	}
	get(openai.BatchStatusValidating)
	drive(t, b.mock, bt.ID, BatchAction{Advance: 1})
	if got := get(openai.BatchStatusInProgress); got.InProgressAt == 0 {
		t.Errorf("in_progress_at not set: %s", got.RawJSON())
	}
	drive(t, b.mock, bt.ID, BatchAction{FailLines: map[string]int{"r2": 500}, Process: 1})
	if got := get(openai.BatchStatusInProgress); got.RequestCounts.Completed != 1 || got.RequestCounts.Failed != 0 {
		t.Fatalf("after one line: counts = %+v", got.RequestCounts)
	}
	drive(t, b.mock, bt.ID, BatchAction{Advance: 1})
	get(openai.BatchStatusFinalizing)
	drive(t, b.mock, bt.ID, BatchAction{Advance: 1})
	done := get(openai.BatchStatusCompleted)
	if done.RequestCounts.Total != 3 || done.RequestCounts.Completed != 2 || done.RequestCounts.Failed != 1 ||
		done.OutputFileID == "" || done.ErrorFileID == "" || done.CompletedAt == 0 || done.FinalizingAt == 0 {
		t.Fatalf("completed batch = %s", done.RawJSON())
	}

	// Each output line's body is the mock's plain answer to the same body; its usage is billed at tier batch.
	out := readFile(ctx, t, c, done.OutputFileID)
	if len(out) != 2 || rawStr(out[0]["custom_id"]) != "r1" || rawStr(out[1]["custom_id"]) != "r3" {
		t.Fatalf("output file = %v", out)
	}
	bills := batchBills(b.mock, bt.ID)
	if len(bills) != 2 {
		t.Fatalf("batch bills = %+v, want 2", bills)
	}
	for i, line := range out {
		var resp struct {
			StatusCode int             `json:"status_code"`
			RequestID  string          `json:"request_id"`
			Body       json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(line["response"], &resp); err != nil || resp.StatusCode != 200 || string(line["error"]) != "null" ||
			!strings.HasPrefix(rawStr(line["id"]), "batch_req_") || resp.RequestID == "" {
			t.Fatalf("output line %d = %v (%v)", i, line, err)
		}
		var in alphaBatchLine
		if err := json.Unmarshal([]byte(lines[2*i]), &in); err != nil {
			t.Fatal(err)
		}
		before := len(b.mock.Bills())
		plain := b.post(t, "/v1/chat/completions", string(in.Body), "Authorization", "Bearer sk-a")
		if compact(t, plain.body) != compact(t, resp.Body) {
			t.Errorf("line %d body\n%s\nwant the plain answer\n%s", i, resp.Body, plain.body)
		}
		pb := b.mock.Bills()[before]
		got := bills[i]
		if got.Tier != BatchTier || got.Endpoint != EndpointCompletions || got.APIKey != "sk-a" || got.Model != "m-1" ||
			got.Input != pb.Input || got.Output != pb.Output || got.CacheRead != pb.CacheRead || got.Requests != 1 {
			t.Errorf("line %d bill = %+v, plain bill = %+v", i, got, pb)
		}
		var body chatCompletion
		if err := json.Unmarshal(resp.Body, &body); err != nil || int64(body.Usage.PromptTokens) != got.Input+got.CacheRead+got.Cache30m ||
			int64(body.Usage.CompletionTokens) != got.Output {
			t.Errorf("line %d usage %+v does not match its bill %+v (%v)", i, body.Usage, got, err)
		}
	}
	errs := readFile(ctx, t, c, done.ErrorFileID)
	if len(errs) != 1 || rawStr(errs[0]["custom_id"]) != "r2" {
		t.Fatalf("error file = %v", errs)
	}
	var errResp struct {
		StatusCode int `json:"status_code"`
		Body       struct {
			Error alphaErrorPayload `json:"error"`
		} `json:"body"`
	}
	if err := json.Unmarshal(errs[0]["response"], &errResp); err != nil || errResp.StatusCode != 500 || errResp.Body.Error.Type != "server_error" {
		t.Errorf("error line = %s (%v)", errs[0]["response"], err)
	}

	// The result files are files: metadata, deletion.
	f, err := c.Files.Get(ctx, done.OutputFileID)
	if err != nil || f.Purpose != "batch_output" || !strings.HasSuffix(f.Filename, "_output.jsonl") {
		t.Fatalf("output file = %+v (%v)", f, err)
	}
	del, err := c.Files.Delete(ctx, done.OutputFileID)
	if err != nil || !del.Deleted || del.ID != done.OutputFileID {
		t.Fatalf("Files.Delete = %+v, %v", del, err)
	}
	var apiErr *openai.Error
	if _, err := c.Files.Get(ctx, done.OutputFileID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("Get of a deleted file: %v, want 404", err)
	}
	if _, err := c.Batches.Cancel(ctx, bt.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Fatalf("Cancel of a completed batch: %v, want 409", err)
	}
}

func TestAlphaBatchCancelExpireAndList(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{})
	manualBatches(t, b.mock)
	c := b.openai("sk-x")

	// Cancelled mid-run: the answered line is in the output file, the rest are batch_cancelled errors.
	bt := uploadBatch(ctx, t, c, alphaChatLine("a", "one"), alphaChatLine("b", "two"), alphaChatLine("c", "three"))
	drive(t, b.mock, bt.ID, BatchAction{Advance: 1, Process: 0})
	drive(t, b.mock, bt.ID, BatchAction{Process: 1})
	cc, err := c.Batches.Cancel(ctx, bt.ID)
	if err != nil || cc.Status != openai.BatchStatusCancelling || cc.CancellingAt == 0 {
		t.Fatalf("Cancel = %+v, %v", cc, err)
	}
	drive(t, b.mock, bt.ID, BatchAction{Advance: 1})
	got, err := c.Batches.Get(ctx, bt.ID)
	if err != nil || got.Status != openai.BatchStatusCancelled || got.CancelledAt == 0 || got.RequestCounts.Completed != 1 {
		t.Fatalf("cancelled batch = %+v, %v", got, err)
	}
	if out := readFile(ctx, t, c, got.OutputFileID); len(out) != 1 || rawStr(out[0]["custom_id"]) != "a" {
		t.Fatalf("cancelled output = %v", out)
	}
	errs := readFile(ctx, t, c, got.ErrorFileID)
	if len(errs) != 2 || !strings.Contains(string(errs[0]["error"]), `"batch_cancelled"`) || string(errs[0]["response"]) != "null" {
		t.Fatalf("cancelled error file = %v", errs)
	}
	if n := len(batchBills(b.mock, bt.ID)); n != 1 {
		t.Errorf("cancelled batch billed %d lines, want 1", n)
	}

	// Lines set to expire: the batch ends expired once the rest are answered.
	ex := uploadBatch(ctx, t, c, alphaChatLine("x", "one"), alphaChatLine("y", "two"))
	drive(t, b.mock, ex.ID, BatchAction{ExpireLines: []string{"y"}, Advance: 2})
	got, err = c.Batches.Get(ctx, ex.ID)
	if err != nil || got.Status != openai.BatchStatusExpired || got.ExpiredAt == 0 || got.RequestCounts.Completed != 1 {
		t.Fatalf("expired batch = %+v, %v", got, err)
	}
	if errs := readFile(ctx, t, c, got.ErrorFileID); len(errs) != 1 || !strings.Contains(string(errs[0]["error"]), `"batch_expired"`) {
		t.Fatalf("expired error file = %v", errs)
	}

	// Failed at validation (admin): status failed, errors listed, nothing answered.
	fl := uploadBatch(ctx, t, c, alphaChatLine("f", "one"))
	drive(t, b.mock, fl.ID, BatchAction{Fail: "quota exhausted"})
	got, err = c.Batches.Get(ctx, fl.ID)
	if err != nil || got.Status != openai.BatchStatusFailed || got.FailedAt == 0 || len(got.Errors.Data) != 1 ||
		got.Errors.Data[0].Message != "quota exhausted" || got.OutputFileID != "" {
		t.Fatalf("failed batch = %+v, %v", got, err)
	}

	// List: newest first, cursor pages with has_more, first_id/last_id.
	page, err := c.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(2)})
	if err != nil || len(page.Data) != 2 || !page.HasMore || page.Data[0].ID != fl.ID || page.Data[1].ID != ex.ID {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	if !strings.Contains(page.RawJSON(), `"first_id":"`+fl.ID) || !strings.Contains(page.RawJSON(), `"last_id":"`+ex.ID) {
		t.Errorf("page ids: %s", page.RawJSON())
	}
	var ids []string
	for it := c.Batches.ListAutoPaging(ctx, openai.BatchListParams{Limit: openai.Int(1)}); it.Next(); {
		ids = append(ids, it.Current().ID)
	}
	if strings.Join(ids, ",") != strings.Join([]string{fl.ID, ex.ID, bt.ID}, ",") {
		t.Fatalf("auto-paged ids = %v", ids)
	}
}

func TestAlphaBatchValidationAndBounds(t *testing.T) {
	b := setup(t, Options{APIKey: "sk-a"})
	manualBatches(t, b.mock)
	ctx := context.Background()
	c := b.openai("sk-a")

	// Bad lines fail the batch at validation, each named with its line number and code.
	bt := uploadBatch(ctx, t, c, alphaChatLine("ok", "x"), `{"custom_id":"u","method":"POST","url":"/v1/embeddings","body":{"model":"m-1"}}`,
		`not json`, alphaChatLine("ok", "dup"),
		`{"custom_id":"mini","method":"POST","url":"/v1/chat/completions","body":{"model":"m-1-mini","messages":[]}}`)
	drive(t, b.mock, bt.ID, BatchAction{Advance: 1})
	got, err := c.Batches.Get(ctx, bt.ID)
	if err != nil || got.Status != openai.BatchStatusFailed {
		t.Fatalf("invalid batch = %+v, %v", got, err)
	}
	var codes []string
	for _, e := range got.Errors.Data {
		codes = append(codes, fmt.Sprintf("%d:%s", e.Line, e.Code))
	}
	if strings.Join(codes, ",") != "2:invalid_url,3:invalid_json_line,4:duplicate_custom_id,5:mismatched_model" {
		t.Fatalf("validation errors = %v", codes)
	}
	if n := len(batchBills(b.mock, bt.ID)); n != 0 {
		t.Errorf("failed batch billed %d lines", n)
	}

	// Bounds: refused with alpha's error shape, nothing stored.
	b.mock.SetBatchConfig(BatchConfig{StepMS: intPtr(0), MaxLines: 2, MaxLineBytes: 300})
	refused := func(name string, lines ...string) {
		t.Helper()
		before := len(b.mock.Batches())
		f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(strings.Join(lines, "\n")), "in.jsonl", "application/jsonl"),
			Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" {
			t.Errorf("%s: err = %v, want 400 invalid_request_error", name, err)
		}
		if after := len(b.mock.Batches()); after != before {
			t.Errorf("%s: a refused batch was stored", name)
		}
	}
	refused("too many lines", alphaChatLine("1", "a"), alphaChatLine("2", "b"), alphaChatLine("3", "c"))
	refused("line too large", alphaChatLine("1", strings.Repeat("x", 400)))

	raw := b.call(t, http.MethodPost, "/v1/batches", `{"input_file_id":"file-x","endpoint":"/v1/images/generations","completion_window":"24h"}`,
		"Authorization", "Bearer sk-a")
	if raw.status != 400 || !strings.Contains(string(raw.body), `"invalid_request_error"`) {
		t.Errorf("bad endpoint = %d %s", raw.status, raw.body)
	}
	raw = b.call(t, http.MethodPost, "/v1/batches", `{"input_file_id":"file-x","endpoint":"/v1/chat/completions","completion_window":"1h"}`,
		"Authorization", "Bearer sk-a")
	if raw.status != 400 {
		t.Errorf("bad window = %d %s", raw.status, raw.body)
	}
	raw = b.call(t, http.MethodGet, "/v1/batches/batch_nope", "", "Authorization", "Bearer sk-a")
	if raw.status != 404 {
		t.Errorf("unknown batch = %d %s", raw.status, raw.body)
	}
	raw = b.call(t, http.MethodGet, "/v1/batches", "", "Authorization", "Bearer wrong")
	if raw.status != 401 || !strings.Contains(string(raw.body), "invalid_api_key") {
		t.Errorf("wrong key = %d %s", raw.status, raw.body)
	}
	// The store keeps at most MaxBatches: the oldest ended one is forgotten, open ones are never dropped.
	b.mock.SetBatchConfig(BatchConfig{StepMS: intPtr(0), MaxBatches: 2})
	open := uploadBatch(ctx, t, c, alphaChatLine("1", "a"))
	var apiErr *openai.Error
	third, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(alphaChatLine("1", "z")), "in.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: third.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h}); err != nil {
		t.Fatalf("third batch (the failed one is forgotten): %v", err)
	}
	if _, err := c.Batches.Get(ctx, bt.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("the oldest ended batch is still kept: %v", err)
	}
	if _, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: third.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h}); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Errorf("batch beyond the cap with none ended: %v, want 429", err)
	}
	if _, err := c.Batches.Get(ctx, open.ID); err != nil {
		t.Errorf("an open batch was dropped: %v", err)
	}
}

// TestBatchTimeScale: with a step, batches move on their own; a cut results download closes mid-body and a
// re-read gets the whole file.
func TestBatchTimeScaleAndCutDownload(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{})
	b.mock.SetBatchConfig(BatchConfig{StepMS: intPtr(20), CutResults: 1, CutAfterLines: 1})
	c := b.openai("k")
	bt := uploadBatch(ctx, t, c, alphaChatLine("1", "a"), alphaChatLine("2", "b"), alphaChatLine("3", "c"))
	deadline := time.Now().Add(5 * time.Second)
	var got *openai.Batch
	seen := map[openai.BatchStatus]bool{}
	for {
		var err error
		if got, err = c.Batches.Get(ctx, bt.ID); err != nil {
			t.Fatal(err)
		}
		seen[got.Status] = true
		if got.Status == openai.BatchStatusCompleted || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got.Status != openai.BatchStatusCompleted || got.RequestCounts.Completed != 3 {
		t.Fatalf("batch did not complete on its own: %s", got.RawJSON())
	}
	if !seen[openai.BatchStatusInProgress] && !seen[openai.BatchStatusFinalizing] {
		t.Logf("polling saw only %v (fine on a slow machine)", seen)
	}
	resp, err := c.Files.Content(ctx, got.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	partial, rerr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if rerr == nil || bytes.Count(partial, []byte("\n")) != 1 {
		t.Fatalf("cut download: %d lines, err %v; want 1 line then a broken connection", bytes.Count(partial, []byte("\n")), rerr)
	}
	if whole := readFile(ctx, t, c, got.OutputFileID); len(whole) != 3 {
		t.Fatalf("re-read after the cut: %d lines, want 3", len(whole))
	}
}

// TestAlphaBatchResponsesAndEmbeddings: the other two batch endpoints answer each line as their plain
// endpoint does and bill it under that endpoint's report at tier batch.
func TestAlphaBatchResponsesAndEmbeddings(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{})
	manualBatches(t, b.mock)
	c := b.openai("k")
	for _, tc := range []struct {
		endpoint openai.BatchNewParamsEndpoint
		body     string
		billed   string
	}{
		{openai.BatchNewParamsEndpointV1Responses, `{"model":"m-1","input":"hello there","store":false}`, EndpointCompletions},
		{openai.BatchNewParamsEndpointV1Embeddings, `{"model":"emb-1","input":["a","b"]}`, EndpointEmbeddings},
	} {
		line := fmt.Sprintf(`{"custom_id":"only","method":"POST","url":%q,"body":%s}`, tc.endpoint, tc.body)
		f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(line), "in.jsonl", "application/jsonl"),
			Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		bt, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: tc.endpoint,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		if err != nil {
			t.Fatal(err)
		}
		drive(t, b.mock, bt.ID, BatchAction{Advance: 3})
		got, err := c.Batches.Get(ctx, bt.ID)
		if err != nil || got.Status != openai.BatchStatusCompleted || got.RequestCounts.Completed != 1 {
			t.Fatalf("%s: batch = %+v, %v", tc.endpoint, got, err)
		}
		out := readFile(ctx, t, c, got.OutputFileID)
		var resp struct {
			Body json.RawMessage `json:"body"`
		}
		if len(out) != 1 || json.Unmarshal(out[0]["response"], &resp) != nil {
			t.Fatalf("%s: output = %v", tc.endpoint, out)
		}
		before := len(b.mock.Bills())
		plain := b.post(t, string(tc.endpoint), tc.body)
		if compact(t, plain.body) != compact(t, resp.Body) {
			t.Errorf("%s: line body\n%s\nwant\n%s", tc.endpoint, resp.Body, plain.body)
		}
		bills, pb := batchBills(b.mock, bt.ID), b.mock.Bills()[before]
		if len(bills) != 1 || bills[0].Endpoint != tc.billed || bills[0].Tier != BatchTier || bills[0].Input != pb.Input || bills[0].Output != pb.Output {
			t.Errorf("%s: bills %+v, plain %+v", tc.endpoint, bills, pb)
		}
	}
	// The usage report shows the batch line apart from the plain answer: batch true, service_tier batch.
	r := b.call(t, http.MethodGet, fmt.Sprintf("/v1/organization/usage/completions?start_time=%d", time.Now().Add(-time.Hour).Unix()), "")
	var page struct {
		Data []struct {
			Results []struct {
				Batch    bool   `json:"batch"`
				Tier     string `json:"service_tier"`
				Requests int    `json:"num_model_requests"`
			} `json:"results"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Data) == 0 {
		t.Fatalf("usage report = %d %s (%v)", r.status, r.body, err)
	}
	kinds := map[string]int{}
	for _, bucket := range page.Data {
		for _, res := range bucket.Results {
			kinds[fmt.Sprintf("%v/%s", res.Batch, res.Tier)] += res.Requests
		}
	}
	if kinds["true/batch"] != 1 || kinds["false/default"] != 1 || len(kinds) != 2 {
		t.Errorf("usage report rows = %v, want one batch and one plain request", kinds)
	}
}

func TestAlphaFileList(t *testing.T) {
	ctx := context.Background()
	b := setup(t, Options{})
	c := b.openai("k")
	var ids []string
	for i := range 3 {
		f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(alphaChatLine(fmt.Sprint(i), "x")), "in.jsonl",
			"application/jsonl"), Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{f.ID}, ids...) // newest first
	}
	if _, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader("x"), "notes.txt", "text/plain"),
		Purpose: openai.FilePurposeAssistants}); err != nil {
		t.Fatal(err)
	}
	page, err := c.Files.List(ctx, openai.FileListParams{Purpose: openai.String("batch"), Limit: openai.Int(2)})
	if err != nil || len(page.Data) != 2 || !page.HasMore || page.Data[0].ID != ids[0] {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	var all []string
	for it := c.Files.ListAutoPaging(ctx, openai.FileListParams{Purpose: openai.String("batch"), Limit: openai.Int(1)}); it.Next(); {
		all = append(all, it.Current().ID)
	}
	if strings.Join(all, ",") != strings.Join(ids, ",") {
		t.Fatalf("auto-paged = %v, want %v", all, ids)
	}
	asc, err := c.Files.List(ctx, openai.FileListParams{Order: openai.FileListParamsOrderAsc})
	if err != nil || len(asc.Data) != 4 || asc.Data[0].ID != ids[2] || asc.Data[3].Purpose != "assistants" {
		t.Fatalf("ascending list = %+v, %v", asc, err)
	}
}
