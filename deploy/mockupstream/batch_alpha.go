package mockupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"time"
)

// alpha's batch API: files (POST /v1/files, GET /v1/files/{id}, GET /v1/files/{id}/content, DELETE
// /v1/files/{id}) and batches (POST /v1/batches, GET /v1/batches, GET /v1/batches/{id}, POST
// /v1/batches/{id}/cancel). A batch's input is an uploaded file of purpose "batch" whose JSONL lines are
// {custom_id, method, url, body}; its results are two files of purpose "batch_output".

// alphaBatchEndpoints are the endpoints an alpha batch may target.
var alphaBatchEndpoints = []string{"/v1/chat/completions", "/v1/responses", "/v1/embeddings"}

// maxStoredFileBytes caps the bytes of every alpha file kept: storing more forgets the oldest files.
const maxStoredFileBytes = 512 << 20

// alphaFile is an uploaded or result file.
type alphaFile struct {
	ID        string  `json:"id"`
	Object    string  `json:"object"`
	Bytes     int     `json:"bytes"`
	CreatedAt int64   `json:"created_at"`
	ExpiresAt *int64  `json:"expires_at"`
	Filename  string  `json:"filename"`
	Purpose   string  `json:"purpose"`
	Status    string  `json:"status"`
	Details   *string `json:"status_details"`
	content   []byte
}

// alphaBatchInfo is what an alpha batch has beyond the shared lifecycle.
type alphaBatchInfo struct {
	endpoint, inputFileID, window string
	metadata                      map[string]string
	outputFileID, errorFileID     string
}

// addFileLocked stores f, forgetting the oldest files beyond the count and byte caps.
func (s *Server) addFileLocked(f *alphaFile) {
	st := s.batches
	total := len(f.content)
	for _, old := range st.files {
		total += len(old.content)
	}
	for len(st.files) > 0 && (len(st.files) >= st.cfg.maxFiles() || total > maxStoredFileBytes) {
		total -= len(st.files[0].content)
		delete(st.fileIDs, st.files[0].ID)
		st.files = st.files[1:]
	}
	st.files = append(st.files, f)
	st.fileIDs[f.ID] = f
}

func newAlphaFile(name, purpose string, content []byte, at time.Time) *alphaFile {
	return &alphaFile{ID: randomID("file-", 24), Object: "file", Bytes: len(content), CreatedAt: at.Unix(),
		Filename: name, Purpose: purpose, Status: "processed", content: content}
}

// alphaFiles answers /v1/files and /v1/files/{id}[/content].
func (x *exchange) alphaFiles(rest string) {
	m := x.r.Method
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case rest == "" && m == http.MethodPost:
		x.alphaUpload()
	case rest == "" && m == http.MethodGet:
		x.alphaFileList()
	case id != "" && sub == "" && (m == http.MethodGet || m == http.MethodDelete):
		st := x.s.batches
		st.mu.Lock()
		f := st.fileIDs[id]
		if f != nil && m == http.MethodDelete {
			delete(st.fileIDs, id)
			st.files = slices.DeleteFunc(st.files, func(g *alphaFile) bool { return g.ID == id })
		}
		var meta alphaFile
		if f != nil {
			meta = *f
		}
		st.mu.Unlock()
		switch {
		case f == nil:
			x.fail(http.StatusNotFound, fmt.Sprintf("No such File object: %s", id))
		case m == http.MethodDelete:
			x.writeJSON(map[string]any{"id": id, "object": "file", "deleted": true})
		default:
			x.writeJSON(meta)
		}
	case id != "" && sub == "content" && m == http.MethodGet:
		st := x.s.batches
		st.mu.Lock()
		f := st.fileIDs[id]
		st.mu.Unlock()
		if f == nil {
			x.fail(http.StatusNotFound, fmt.Sprintf("No such File object: %s", id))
			return
		}
		x.writeResultLines("application/octet-stream", splitLines(f.content))
	default:
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s /v1/files/%s", m, rest))
	}
}

// alphaFileList answers GET /v1/files: purpose, order (desc by default), after, limit (1–10000, default 10000).
func (x *exchange) alphaFileList() {
	q := x.r.URL.Query()
	limit, err := listLimit(x.r, "limit", 10000, 10000)
	if err != nil {
		x.fail(http.StatusBadRequest, err.Error())
		return
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		x.fail(http.StatusBadRequest, fmt.Sprintf("Invalid value for 'order': %q; expected 'asc' or 'desc'.", order))
		return
	}
	st := x.s.batches
	st.mu.Lock()
	var list []alphaFile
	for _, f := range st.files {
		if p := q.Get("purpose"); p == "" || f.Purpose == p {
			list = append(list, *f)
		}
	}
	st.mu.Unlock()
	if order != "asc" {
		slices.Reverse(list)
	}
	page, more, ok := pageOf(list, func(f alphaFile) string { return f.ID }, q.Get("after"), "", limit)
	if !ok {
		x.fail(http.StatusNotFound, fmt.Sprintf("No such File object: %s", q.Get("after")))
		return
	}
	out := fields{"object", "list", "data", nonNilFiles(page), "first_id", nil, "last_id", nil, "has_more", more}
	if len(page) > 0 {
		out[5], out[7] = page[0].ID, page[len(page)-1].ID
	}
	x.writeJSON(out)
}

func nonNilFiles(v []alphaFile) []alphaFile {
	if v == nil {
		return []alphaFile{}
	}
	return v
}

// splitLines cuts content after each newline (file content is immutable: the lines alias it).
func splitLines(content []byte) [][]byte {
	var out [][]byte
	for len(content) > 0 {
		i := bytes.IndexByte(content, '\n')
		if i < 0 {
			return append(out, content)
		}
		out = append(out, content[:i+1])
		content = content[i+1:]
	}
	return out
}

// alphaUpload stores a multipart upload (fields purpose and file).
func (x *exchange) alphaUpload() {
	_, params, err := mime.ParseMediaType(x.r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		x.fail(http.StatusBadRequest, "expected multipart/form-data with a boundary")
		return
	}
	mr := multipart.NewReader(bytes.NewReader(x.body), params["boundary"])
	var purpose, name string
	var content []byte
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			x.fail(http.StatusBadRequest, fmt.Sprintf("read multipart form: %v", err))
			return
		}
		data, err := io.ReadAll(p)
		if err != nil {
			x.fail(http.StatusBadRequest, fmt.Sprintf("read multipart form: %v", err))
			return
		}
		switch p.FormName() {
		case "purpose":
			purpose = string(data)
		case "file":
			name, content = p.FileName(), data
		}
	}
	switch {
	case purpose == "":
		x.fail(http.StatusBadRequest, "Missing required parameter: 'purpose'.")
		return
	case content == nil:
		x.fail(http.StatusBadRequest, "Missing required parameter: 'file'.")
		return
	case purpose == "batch" && !strings.HasSuffix(name, ".jsonl"):
		x.fail(http.StatusBadRequest, "Invalid file format for Batch API. Must be .jsonl")
		return
	}
	f := newAlphaFile(name, purpose, content, time.Now())
	if purpose == "batch" {
		exp := f.CreatedAt + 30*24*3600
		f.ExpiresAt = &exp
	}
	st := x.s.batches
	st.mu.Lock()
	x.s.addFileLocked(f)
	meta := *f
	st.mu.Unlock()
	x.writeJSON(meta)
}

// alphaBatchLine is one line of a batch input file.
type alphaBatchLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// alphaBatches answers /v1/batches, /v1/batches/{id} and /v1/batches/{id}/cancel.
func (x *exchange) alphaBatches(rest string) {
	m := x.r.Method
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case rest == "" && m == http.MethodPost:
		x.alphaBatchCreate()
	case rest == "" && m == http.MethodGet:
		x.alphaBatchList()
	case id != "" && (sub == "" && m == http.MethodGet || sub == "cancel" && m == http.MethodPost):
		st := x.s.batches
		st.mu.Lock()
		b := x.s.batchLocked(DialectAlpha, id)
		switch {
		case b == nil:
			st.mu.Unlock()
			x.fail(http.StatusNotFound, fmt.Sprintf("No batch found with id '%s'.", id))
		case sub == "cancel" && b.phase == phaseEnded:
			status := alphaStatus(b)
			st.mu.Unlock()
			x.fail(http.StatusConflict, fmt.Sprintf("Cannot cancel a batch with status '%s'.", status))
		default:
			if sub == "cancel" && !b.cancelling {
				b.cancelling, b.cancelAt = true, time.Now()
			}
			v := alphaBatchJSON(b)
			st.mu.Unlock()
			x.writeJSON(v)
		}
	default:
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s /v1/batches/%s", m, rest))
	}
}

func (x *exchange) alphaBatchCreate() {
	var req struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata"`
	}
	if !x.decode(&req) {
		return
	}
	switch {
	case req.InputFileID == "":
		x.fail(http.StatusBadRequest, "Missing required parameter: 'input_file_id'.")
		return
	case !slices.Contains(alphaBatchEndpoints, req.Endpoint):
		x.fail(http.StatusBadRequest, fmt.Sprintf("Invalid value for 'endpoint': %q; supported values are %s.", req.Endpoint,
			strings.Join(alphaBatchEndpoints, ", ")))
		return
	case req.CompletionWindow != "24h":
		x.fail(http.StatusBadRequest, fmt.Sprintf("Invalid value for 'completion_window': %q; the only supported value is '24h'.",
			req.CompletionWindow))
		return
	case len(req.Metadata) > 16:
		x.fail(http.StatusBadRequest, "Invalid 'metadata': at most 16 key-value pairs are allowed.")
		return
	}
	st := x.s.batches
	v, status, msg := func() (fields, int, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		f := st.fileIDs[req.InputFileID]
		if f == nil {
			return nil, http.StatusNotFound, fmt.Sprintf("No such File object: %s", req.InputFileID)
		}
		if f.Purpose != "batch" {
			return nil, http.StatusBadRequest, fmt.Sprintf("File %s has purpose '%s'; a batch input file must have purpose 'batch'.", f.ID, f.Purpose)
		}
		raw := splitLines(f.content)
		if n := st.cfg.maxLines(); len(raw) > n {
			return nil, http.StatusBadRequest, fmt.Sprintf("The input file has %d requests; a batch may have at most %d.", len(raw), n)
		}
		b := &batch{id: randomID("batch_", 32), dialect: DialectAlpha, key: x.key,
			alpha: &alphaBatchInfo{endpoint: req.Endpoint, inputFileID: f.ID, window: req.CompletionWindow, metadata: req.Metadata}}
		seen, model := map[string]bool{}, ""
		for i, line := range raw {
			if n := st.cfg.maxLineBytes(); len(line) > n {
				return nil, http.StatusBadRequest, fmt.Sprintf("Line %d of the input file is %d bytes; a request may be at most %d bytes.", i+1, len(line), n)
			}
			if l, e := parseAlphaLine(line, i+1, req.Endpoint, seen, &model); e != nil {
				b.failure = append(b.failure, *e)
			} else if l != nil {
				b.lines = append(b.lines, l)
			}
		}
		if len(b.lines) == 0 && len(b.failure) == 0 {
			b.failure = append(b.failure, batchError{Code: "empty_file", Message: "The input file has no requests."})
		}
		if !x.s.addBatchLocked(b) {
			return nil, http.StatusTooManyRequests, "Too many open batches; wait for one to end."
		}
		return alphaBatchJSON(b), 0, ""
	}()
	if status != 0 {
		x.fail(status, msg)
		return
	}
	x.writeJSON(v)
}

// parseAlphaLine validates one input line (n from 1): nil, nil for a blank line. seen holds the custom ids
// of the lines before it and model their model ("" before the first valid line).
func parseAlphaLine(raw []byte, n int, endpoint string, seen map[string]bool, model *string) (*batchLine, *batchError) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	fail := func(code, param, msg string) *batchError {
		e := batchError{Code: code, Line: &n, Message: msg}
		if param != "" {
			e.Param = &param
		}
		return &e
	}
	var l alphaBatchLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fail("invalid_json_line", "", fmt.Sprintf("This line is not parseable as valid JSON: %v", err))
	}
	var body struct {
		Model string `json:"model"`
	}
	switch {
	case l.CustomID == "":
		return nil, fail("missing_required_parameter", "custom_id", "Missing required parameter: 'custom_id'.")
	case l.Method != http.MethodPost:
		return nil, fail("invalid_method", "method", fmt.Sprintf("Invalid method %q; only POST is supported.", l.Method))
	case l.URL != endpoint:
		return nil, fail("invalid_url", "url", fmt.Sprintf("The URL provided for this request does not match the batch endpoint %s.", endpoint))
	case len(l.Body) == 0 || json.Unmarshal(l.Body, &body) != nil:
		return nil, fail("missing_required_parameter", "body", "Missing required parameter: 'body' (a JSON object).")
	case body.Model == "":
		return nil, fail("missing_required_parameter", "body.model", "Missing required parameter: 'body.model'.")
	}
	switch {
	case seen[l.CustomID]:
		return nil, fail("duplicate_custom_id", "custom_id", fmt.Sprintf("The custom_id %q is used by more than one request.", l.CustomID))
	case *model != "" && *model != body.Model:
		return nil, fail("mismatched_model", "body.model", "All requests in a batch must use the same model.")
	}
	seen[l.CustomID], *model = true, body.Model
	return &batchLine{customID: l.CustomID, path: l.URL, body: l.Body, model: body.Model}, nil
}

func (x *exchange) alphaBatchList() {
	limit, err := listLimit(x.r, "limit", 20, 100)
	if err != nil {
		x.fail(http.StatusBadRequest, err.Error())
		return
	}
	st := x.s.batches
	st.mu.Lock()
	defer st.mu.Unlock()
	page, more, ok := pageOf(x.s.listLocked(DialectAlpha), batchID, x.r.URL.Query().Get("after"), "", limit)
	if !ok {
		x.fail(http.StatusNotFound, fmt.Sprintf("No batch found with id '%s'.", x.r.URL.Query().Get("after")))
		return
	}
	data := make([]any, 0, len(page))
	for _, b := range page {
		data = append(data, alphaBatchJSON(b))
	}
	out := map[string]any{"object": "list", "data": data, "first_id": nil, "last_id": nil, "has_more": more}
	if len(page) > 0 {
		out["first_id"], out["last_id"] = page[0].id, page[len(page)-1].id
	}
	x.writeJSON(out)
}

// alphaStatus is the alpha status of b.
func alphaStatus(b *batch) string {
	switch {
	case b.phase == phaseEnded:
		return b.ending
	case b.cancelling:
		return "cancelling"
	case b.phase == phaseValidating:
		return "validating"
	case b.phase == phaseRunning:
		return "in_progress"
	}
	return "finalizing"
}

func unixOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Unix()
}

func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// alphaBatchJSON is b as alpha's batch object.
func alphaBatchJSON(b *batch) fields {
	c := b.counts()
	var errs any
	if len(b.failure) > 0 {
		errs = map[string]any{"object": "list", "data": b.failure}
	}
	var meta any
	if b.alpha.metadata != nil {
		meta = b.alpha.metadata
	}
	at := func(ending string) any {
		if b.ending == ending {
			return b.endedAt.Unix()
		}
		return nil
	}
	return fields{"id", b.id, "object", "batch", "endpoint", b.alpha.endpoint, "errors", errs,
		"input_file_id", b.alpha.inputFileID, "completion_window", b.alpha.window, "status", alphaStatus(b),
		"output_file_id", strOrNil(b.alpha.outputFileID), "error_file_id", strOrNil(b.alpha.errorFileID),
		"created_at", b.created.Unix(), "in_progress_at", unixOrNil(b.inProgressAt),
		"expires_at", b.created.Add(24 * time.Hour).Unix(), "finalizing_at", unixOrNil(b.finalizingAt),
		"completed_at", at(endCompleted), "failed_at", at(endFailed), "expired_at", at(endExpired),
		"cancelling_at", unixOrNil(b.cancelAt), "cancelled_at", at(endCancelled),
		"request_counts", map[string]int{"total": len(b.lines), "completed": c.succeeded, "failed": c.errored},
		"metadata", meta}
}

// alphaResultFilesLocked writes b's output file (answered lines with a 2xx status) and error file (the
// others), each only when it has lines.
func (s *Server) alphaResultFilesLocked(b *batch, at time.Time) {
	var out, errs []byte
	for _, l := range b.lines {
		line := fields{"id", randomID("batch_req_", 32), "custom_id", l.customID}
		switch l.outcome {
		case lineSucceeded, lineErrored:
			line = append(line, "response", fields{"status_code", l.status, "request_id", l.requestID,
				"body", json.RawMessage(l.answer)}, "error", nil)
		case lineExpired:
			line = append(line, "response", nil, "error", map[string]string{"code": "batch_expired",
				"message": "This request could not be executed before the completion window expired."})
		default:
			line = append(line, "response", nil, "error", map[string]string{"code": "batch_cancelled",
				"message": "This request was not executed because the batch was cancelled."})
		}
		if l.outcome == lineSucceeded {
			out = append(out, jsonLine(line)...)
		} else {
			errs = append(errs, jsonLine(line)...)
		}
	}
	if out != nil {
		f := newAlphaFile("batch_"+strings.TrimPrefix(b.id, "batch_")+"_output.jsonl", "batch_output", out, at)
		s.addFileLocked(f)
		b.alpha.outputFileID = f.ID
	}
	if errs != nil {
		f := newAlphaFile("batch_"+strings.TrimPrefix(b.id, "batch_")+"_error.jsonl", "batch_output", errs, at)
		s.addFileLocked(f)
		b.alpha.errorFileID = f.ID
	}
}
