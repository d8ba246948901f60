package mockupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestBatchControlsOverHTTP drives a batch through /_mock/batches as an out-of-process test would.
func TestBatchControlsOverHTTP(t *testing.T) {
	b := setup(t, Options{})
	r := b.call(t, http.MethodPut, "/_mock/batches", `{"step_ms":0,"flush_lines":2}`)
	if r.status != 200 {
		t.Fatalf("PUT config = %d %s", r.status, r.body)
	}
	if cfg := b.mock.BatchConfig(); cfg.StepMS == nil || *cfg.StepMS != 0 || cfg.FlushLines != 2 {
		t.Fatalf("config = %+v", cfg)
	}
	created := b.post(t, "/v1/messages/batches",
		`{"requests":[{"custom_id":"a","params":{"model":"b-1","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}},`+
			`{"custom_id":"b","params":{"model":"b-1","max_tokens":8,"messages":[{"role":"user","content":"yo"}]}}]}`,
		"anthropic-version", "2023-06-01")
	var bt struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(created.body, &bt); err != nil {
		t.Fatal(err)
	}
	r = b.call(t, http.MethodPost, "/_mock/batches/"+bt.ID, `{"fail_lines":{"b":400},"process":1}`)
	var v BatchView
	if err := json.Unmarshal(r.body, &v); r.status != 200 || err != nil || v.Succeeded != 1 || v.Pending != 1 || v.State != "in_progress" {
		t.Fatalf("process = %d %s", r.status, r.body)
	}
	// Hostile actions are refused and change nothing.
	for _, body := range []string{`{"fail_lines":{"nope":500}}`, `{"fail_lines":{"b":200}}`, `{"fail":"x"}`, `{"advance":-1}`, `{"bogus":1}`} {
		r = b.call(t, http.MethodPost, "/_mock/batches/"+bt.ID, body)
		if r.status != http.StatusConflict && r.status != http.StatusBadRequest {
			t.Errorf("%s = %d %s, want a refusal", body, r.status, r.body)
		}
	}
	r = b.call(t, http.MethodPost, "/_mock/batches/"+bt.ID, `{"advance":1}`)
	if err := json.Unmarshal(r.body, &v); err != nil || v.State != "ended" || v.Succeeded != 1 || v.Errored != 1 {
		t.Fatalf("advance = %s", r.body)
	}
	r = b.call(t, http.MethodGet, "/_mock/batches", "")
	var list struct {
		Config  BatchConfig `json:"config"`
		Batches []BatchView `json:"batches"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Batches) != 1 || list.Batches[0].ID != bt.ID {
		t.Fatalf("GET /_mock/batches = %s", r.body)
	}
	if r = b.call(t, http.MethodGet, "/_mock/batches/msgbatch_nope", ""); r.status != 404 {
		t.Errorf("unknown batch = %d", r.status)
	}
	// The errored line was answered with beta's error shape at the status asked for.
	res := b.call(t, http.MethodGet, "/v1/messages/batches/"+bt.ID+"/results", "", "anthropic-version", "2023-06-01")
	lines := strings.Split(strings.TrimSpace(string(res.body)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error"`) {
		t.Fatalf("results = %s", res.body)
	}
	b.mock.Reset()
	if n := len(b.mock.Batches()); n != 0 || b.mock.BatchConfig().StepMS != nil {
		t.Errorf("after Reset: %d batches, config %+v", n, b.mock.BatchConfig())
	}
}

// TestBatchConcurrentUse creates, polls, lists and drives batches of every dialect at once (run with -race).
func TestBatchConcurrentUse(t *testing.T) {
	b := setup(t, Options{})
	b.mock.SetBatchConfig(BatchConfig{StepMS: intPtr(1)})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.call(t, http.MethodPost, "/v1/messages/batches", fmt.Sprintf(
				`{"requests":[{"custom_id":"c%d","params":{"model":"b-1","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}}]}`, i),
				"anthropic-version", "2023-06-01")
			var bt struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(r.body, &bt); err != nil || r.status != 200 {
				errs <- fmt.Errorf("beta create = %d %s (%v)", r.status, r.body, err)
				return
			}
			g := b.call(t, http.MethodPost, "/v1beta/models/g-1-flash:batchGenerateContent",
				`{"batch":{"inputConfig":{"requests":{"requests":[{"request":{"contents":[{"parts":[{"text":"hi"}]}]}}]}}}}`)
			var op struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(g.body, &op); err != nil || g.status != 200 {
				errs <- fmt.Errorf("gamma create = %d %s (%v)", g.status, g.body, err)
				return
			}
			for range 20 {
				b.call(t, http.MethodGet, "/v1/messages/batches/"+bt.ID, "", "anthropic-version", "2023-06-01")
				b.call(t, http.MethodGet, "/v1/messages/batches", "", "anthropic-version", "2023-06-01")
				b.call(t, http.MethodGet, "/v1beta/"+op.Name, "")
				_, _ = b.mock.DriveBatch(op.Name, BatchAction{Advance: 1})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	views := b.mock.Batches()
	if len(views) != 16 {
		t.Fatalf("%d batches, want 16", len(views))
	}
	for _, v := range views {
		if v.Succeeded != 1 || (v.State != "ended" && v.State != "BATCH_STATE_SUCCEEDED") {
			t.Errorf("batch %+v did not complete", v)
		}
	}
	if n := len(b.mock.Bills()); n != 16 {
		t.Errorf("%d bills, want one per line (16)", n)
	}
}

// TestBatchStoreBounded: the bytes kept are capped; an ended batch is forgotten to make room, an open one
// never is, and a batch that does not fit is refused in the dialect's shape.
func TestBatchStoreBounded(t *testing.T) {
	b := setup(t, Options{})
	b.mock.SetBatchConfig(BatchConfig{StepMS: intPtr(0), MaxStoredBytes: 900})
	create := func(prompt string) result {
		return b.call(t, http.MethodPost, "/v1/messages/batches", fmt.Sprintf(
			`{"requests":[{"custom_id":"a","params":{"model":"b-1","max_tokens":8,"messages":[{"role":"user","content":%q}]}}]}`, prompt),
			"anthropic-version", "2023-06-01")
	}
	first := create(strings.Repeat("x", 300))
	var bt struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(first.body, &bt); err != nil || first.status != 200 {
		t.Fatalf("first = %d %s", first.status, first.body)
	}
	second := create(strings.Repeat("y", 300))
	if second.status != 200 {
		t.Fatalf("second = %d %s", second.status, second.body)
	}
	if r := create(strings.Repeat("z", 300)); r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), `"rate_limit_error"`) {
		t.Fatalf("third with both open = %d %s, want 429 rate_limit_error", r.status, r.body)
	}
	if n := len(b.mock.Batches()); n != 2 {
		t.Fatalf("%d batches kept after a refusal, want 2", n)
	}
	drive(t, b.mock, bt.ID, BatchAction{Advance: 1}) // ends the first (its answer now counts too)
	if r := create(strings.Repeat("z", 300)); r.status != 200 {
		t.Fatalf("third after the first ended = %d %s", r.status, r.body)
	}
	views := b.mock.Batches()
	if len(views) != 2 || views[0].ID == bt.ID {
		t.Fatalf("kept = %+v, want the ended first batch forgotten", views)
	}
}
