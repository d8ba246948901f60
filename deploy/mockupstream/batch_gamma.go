package mockupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// gamma's batch mode: POST /v1beta/models/{model}:batchGenerateContent with inlined requests, GET
// /v1beta/batches/{id}, GET /v1beta/batches, POST /v1beta/batches/{id}:cancel, DELETE /v1beta/batches/{id}.
// Batches are long-running operations named batches/{id}: the batch resource is the operation's metadata,
// and when it ends its output (inlinedResponses, each with the response's usageMetadata) is there and, for
// a succeeded batch, in the operation's response. Each request is answered as
// POST /v1beta/models/{model}:generateContent with that body.

const gammaBatchType = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"

// gammaBatchInfo is what a gamma batch has beyond the shared lifecycle.
type gammaBatchInfo struct {
	model, displayName string
}

// pick returns the first of names present in m (the API takes proto field names in both casings).
func pick(m map[string]json.RawMessage, names ...string) json.RawMessage {
	for _, n := range names {
		if v, ok := m[n]; ok {
			return v
		}
	}
	return nil
}

// object decodes raw as a JSON object (nil when raw is absent or not an object).
func object(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func (x *exchange) gammaBatchCreate(model string) {
	var req map[string]json.RawMessage
	if !x.decode(&req) {
		return
	}
	spec := object(pick(req, "batch"))
	if spec == nil {
		x.fail(http.StatusBadRequest, "* batch: field is required")
		return
	}
	var display string
	_ = json.Unmarshal(pick(spec, "displayName", "display_name"), &display)
	input := object(pick(spec, "inputConfig", "input_config"))
	if input == nil {
		x.fail(http.StatusBadRequest, "* batch.input_config: field is required")
		return
	}
	if pick(input, "fileName", "file_name") != nil {
		x.fail(http.StatusBadRequest, "* batch.input_config.file_name: the mock serves inlined requests only")
		return
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(pick(object(pick(input, "requests")), "requests"), &items); err != nil || len(items) == 0 {
		x.fail(http.StatusBadRequest, "* batch.input_config.requests.requests: at least one request is required")
		return
	}
	st := x.s.batches
	v, status, msg := func() (fields, int, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if n := st.cfg.maxLines(); len(items) > n {
			return nil, http.StatusBadRequest, fmt.Sprintf("* batch.input_config.requests.requests: at most %d requests are allowed, got %d", n, len(items))
		}
		b := &batch{id: "batches/" + randomID("", 24), dialect: DialectGamma, key: x.key,
			gamma: &gammaBatchInfo{model: model, displayName: display}}
		for i, it := range items {
			body := pick(it, "request")
			var r struct {
				Model string `json:"model"`
			}
			switch {
			case len(body) == 0 || json.Unmarshal(body, &r) != nil:
				return nil, http.StatusBadRequest, fmt.Sprintf("* batch.input_config.requests.requests[%d].request: field is required", i)
			case len(body) > st.cfg.maxLineBytes():
				return nil, http.StatusBadRequest, fmt.Sprintf("* batch.input_config.requests.requests[%d].request: a request may be at most %d bytes, got %d",
					i, st.cfg.maxLineBytes(), len(body))
			}
			m := strings.TrimPrefix(r.Model, "models/")
			if m == "" {
				m = model
			}
			l := &batchLine{path: "/v1beta/models/" + m + ":generateContent", body: body, model: m, meta: pick(it, "metadata")}
			var key struct {
				Key string `json:"key"`
			}
			if json.Unmarshal(l.meta, &key) == nil {
				l.customID = key.Key
			}
			b.lines = append(b.lines, l)
		}
		if !x.s.addBatchLocked(b) {
			return nil, http.StatusTooManyRequests, "Too many batches in progress; wait for one to end."
		}
		return gammaBatchJSON(b), 0, ""
	}()
	if status != 0 {
		x.fail(status, msg)
		return
	}
	x.writeJSON(v)
}

// gammaBatches answers /v1beta/batches and /v1beta/batches/{id}[:cancel].
func (x *exchange) gammaBatches(rest string) {
	m := x.r.Method
	id, method, _ := strings.Cut(rest, ":")
	if rest == "" && m == http.MethodGet {
		x.gammaBatchList()
		return
	}
	name := "batches/" + id
	st := x.s.batches
	st.mu.Lock()
	b := x.s.batchLocked(DialectGamma, name)
	if b == nil || id == "" {
		st.mu.Unlock()
		x.fail(http.StatusNotFound, fmt.Sprintf("Batch %s not found.", name))
		return
	}
	switch {
	case method == "" && m == http.MethodGet:
		v := gammaBatchJSON(b)
		st.mu.Unlock()
		x.writeJSON(v)
	case method == "" && m == http.MethodDelete:
		x.s.dropBatchLocked(b)
		st.mu.Unlock()
		x.writeJSON(struct{}{})
	case method == "cancel" && m == http.MethodPost:
		if b.phase == phaseEnded {
			st.mu.Unlock()
			x.gammaFailStatus(http.StatusBadRequest, "FAILED_PRECONDITION", fmt.Sprintf("Batch %s has already ended.", name))
			return
		}
		if !b.cancelling {
			b.cancelling, b.cancelAt = true, time.Now()
		}
		st.mu.Unlock()
		x.writeJSON(struct{}{})
	default:
		st.mu.Unlock()
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s /v1beta/batches/%s", m, rest))
	}
}

// gammaFailStatus answers a gamma error whose status differs from the HTTP code's usual one.
func (x *exchange) gammaFailStatus(code int, status, msg string) {
	x.w.Header().Set("Content-Type", "application/json")
	x.w.WriteHeader(code)
	x.status = code
	_, _ = x.w.Write(jsonLine(gammaError{Error: gammaErrorPayload{Code: code, Message: msg, Status: status}}))
	x.completed = true
}

func (x *exchange) gammaBatchList() {
	q := x.r.URL.Query()
	size := 50
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			x.fail(http.StatusBadRequest, fmt.Sprintf("Invalid pageSize %q", v))
			return
		}
		if n > 0 {
			size = min(n, 1000)
		}
	}
	after := ""
	if t := q.Get("pageToken"); t != "" {
		after = "batches/" + t
	}
	st := x.s.batches
	st.mu.Lock()
	page, more, ok := pageOf(x.s.listLocked(DialectGamma), batchID, after, "", size)
	ops := make([]any, 0, len(page))
	for _, b := range page {
		ops = append(ops, gammaBatchJSON(b))
	}
	st.mu.Unlock()
	if !ok {
		x.fail(http.StatusBadRequest, fmt.Sprintf("Invalid pageToken %q", q.Get("pageToken")))
		return
	}
	out := map[string]any{"operations": ops}
	if more {
		out["nextPageToken"] = strings.TrimPrefix(page[len(page)-1].id, "batches/")
	}
	x.writeJSON(out)
}

// gammaState is the gamma state of b.
func gammaState(b *batch) string {
	switch {
	case b.phase == phaseValidating:
		return "BATCH_STATE_PENDING"
	case b.phase != phaseEnded:
		return "BATCH_STATE_RUNNING"
	}
	switch b.ending {
	case endCompleted:
		return "BATCH_STATE_SUCCEEDED"
	case endFailed:
		return "BATCH_STATE_FAILED"
	case endCancelled:
		return "BATCH_STATE_CANCELLED"
	}
	return "BATCH_STATE_EXPIRED"
}

// rpcCodes are the google.rpc.Code numbers of the statuses a gamma error names.
var rpcCodes = map[string]int{"CANCELLED": 1, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
	"PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10, "UNIMPLEMENTED": 12,
	"INTERNAL": 13, "UNAVAILABLE": 14, "UNAUTHENTICATED": 16}

// gammaBatchJSON is b as the operation gamma answers for a batch.
func gammaBatchJSON(b *batch) fields {
	c := b.counts()
	stats := fields{}
	for _, kv := range []struct {
		name string
		n    int
	}{{"requestCount", len(b.lines)}, {"successfulRequestCount", c.succeeded}, {"failedRequestCount", c.errored},
		{"pendingRequestCount", c.pending}} {
		if kv.n != 0 { // proto3 JSON: int64 as a string, zero omitted
			stats = append(stats, kv.name, strconv.Itoa(kv.n))
		}
	}
	updated := b.created
	for _, t := range []time.Time{b.inProgressAt, b.cancelAt, b.endedAt} {
		if t.After(updated) {
			updated = t
		}
	}
	meta := fields{"@type", gammaBatchType, "model", "models/" + b.gamma.model, "displayName", b.gamma.displayName,
		"createTime", rfc3339OrNil(b.created), "updateTime", rfc3339OrNil(updated)}
	if b.phase == phaseEnded {
		meta = append(meta, "endTime", rfc3339OrNil(b.endedAt))
	}
	meta = append(meta, "batchStats", stats, "state", gammaState(b), "name", b.id)
	op := fields{"name", b.id, "metadata", meta}
	if b.phase != phaseEnded {
		return op
	}
	var output fields
	if b.ending != endFailed {
		output = fields{"inlinedResponses", fields{"inlinedResponses", gammaInlinedResponses(b)}}
		meta = append(meta, "output", output)
		op[3] = meta
	}
	op = append(op, "done", true)
	switch b.ending {
	case endCompleted:
		op = append(op, "response", append(fields{"@type", gammaBatchType + "Output"}, output...))
	case endFailed:
		msg := "Batch failed."
		if len(b.failure) > 0 {
			msg = b.failure[0].Message
		}
		op = append(op, "error", fields{"code", rpcCodes["INTERNAL"], "message", msg})
	case endCancelled:
		op = append(op, "error", fields{"code", rpcCodes["CANCELLED"], "message", "Batch was cancelled."})
	case endExpired:
		op = append(op, "error", fields{"code", rpcCodes["DEADLINE_EXCEEDED"], "message", "Batch expired before all its requests were processed."})
	}
	return op
}

// gammaInlinedResponses are the answered requests' results in request order: the generateContent answer,
// or its error as a google.rpc.Status; each with the request's metadata. Requests not answered (cancelled,
// expired) have no entry.
func gammaInlinedResponses(b *batch) []any {
	out := []any{}
	for _, l := range b.lines {
		var item fields
		switch l.outcome {
		case lineSucceeded:
			item = fields{"response", json.RawMessage(l.answer)}
		case lineErrored:
			var e gammaError
			_ = json.Unmarshal(l.answer, &e)
			code, ok := rpcCodes[e.Error.Status]
			if !ok {
				code = rpcCodes["INTERNAL"]
			}
			item = fields{"error", fields{"code", code, "message", e.Error.Message}}
		default:
			continue
		}
		if len(l.meta) > 0 {
			item = append(item, "metadata", l.meta)
		}
		out = append(out, item)
	}
	return out
}
