package mockupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// beta's message batches: POST /v1/messages/batches, GET /v1/messages/batches, GET/DELETE
// /v1/messages/batches/{id}, POST /v1/messages/batches/{id}/cancel, GET /v1/messages/batches/{id}/results
// (JSONL). Each request's params are answered as POST /v1/messages with that body. As the provider does,
// request_counts keep every request "processing" until the batch has ended.

var betaCustomID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func (x *exchange) betaBatches(rest string) {
	m := x.r.Method
	id, sub, _ := strings.Cut(rest, "/")
	st := x.s.batches
	switch {
	case rest == "" && m == http.MethodPost:
		x.betaBatchCreate()
	case rest == "" && m == http.MethodGet:
		x.betaBatchList()
	case id != "" && (sub == "" || sub == "cancel" || sub == "results"):
		st.mu.Lock()
		b := x.s.batchLocked(DialectBeta, id)
		if b == nil {
			st.mu.Unlock()
			x.fail(http.StatusNotFound, fmt.Sprintf("Message Batch not found: %s", id))
			return
		}
		switch {
		case sub == "" && m == http.MethodGet:
			v := x.betaBatchJSON(b)
			st.mu.Unlock()
			x.writeJSON(v)
		case sub == "" && m == http.MethodDelete:
			if b.phase != phaseEnded {
				st.mu.Unlock()
				x.fail(http.StatusBadRequest, fmt.Sprintf("Message Batch %s cannot be deleted while it is in progress; cancel it first.", id))
				return
			}
			x.s.dropBatchLocked(b)
			st.mu.Unlock()
			x.writeJSON(fields{"id", id, "type", "message_batch_deleted"})
		case sub == "cancel" && m == http.MethodPost:
			if b.phase != phaseEnded && !b.cancelling {
				b.cancelling, b.cancelAt = true, time.Now()
			}
			v := x.betaBatchJSON(b)
			st.mu.Unlock()
			x.writeJSON(v)
		case sub == "results" && m == http.MethodGet:
			if b.phase != phaseEnded {
				st.mu.Unlock()
				x.fail(http.StatusBadRequest, fmt.Sprintf("Message Batch %s has not ended yet; its results are not available.", id))
				return
			}
			lines := betaResultLines(b)
			st.mu.Unlock()
			x.writeResultLines("application/x-jsonl", lines)
		default:
			st.mu.Unlock()
			x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s /v1/messages/batches/%s", m, rest))
		}
	default:
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s /v1/messages/batches/%s", m, rest))
	}
}

func (x *exchange) betaBatchCreate() {
	var req struct {
		Requests []struct {
			CustomID string          `json:"custom_id"`
			Params   json.RawMessage `json:"params"`
		} `json:"requests"`
	}
	if !x.decode(&req) {
		return
	}
	st := x.s.batches
	v, status, msg := func() (fields, int, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(req.Requests) == 0 {
			return nil, http.StatusBadRequest, "requests: List should have at least 1 item after validation, not 0"
		}
		if n := st.cfg.maxLines(); len(req.Requests) > n {
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("requests: a Message Batch may have at most %d requests, got %d", n, len(req.Requests))
		}
		b := &batch{id: randomID("msgbatch_", 24), dialect: DialectBeta, key: x.key}
		seen := make(map[string]bool, len(req.Requests))
		for i, r := range req.Requests {
			var p struct {
				Model string `json:"model"`
			}
			switch {
			case !betaCustomID.MatchString(r.CustomID):
				return nil, http.StatusBadRequest, fmt.Sprintf("requests.%d.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
			case seen[r.CustomID]:
				return nil, http.StatusBadRequest, fmt.Sprintf("requests.%d.custom_id: custom_id %q is not unique in this batch", i, r.CustomID)
			case len(r.Params) == 0 || json.Unmarshal(r.Params, &p) != nil:
				return nil, http.StatusBadRequest, fmt.Sprintf("requests.%d.params: Field required", i)
			case len(r.Params) > st.cfg.maxLineBytes():
				return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("requests.%d.params: a request may be at most %d bytes, got %d", i,
					st.cfg.maxLineBytes(), len(r.Params))
			}
			seen[r.CustomID] = true
			b.lines = append(b.lines, &batchLine{customID: r.CustomID, path: "/v1/messages", body: r.Params, model: p.Model})
		}
		if !x.s.addBatchLocked(b) {
			return nil, http.StatusTooManyRequests, "Too many Message Batches in progress; wait for one to end."
		}
		b.phase, b.inProgressAt = phaseRunning, b.created
		return x.betaBatchJSON(b), 0, ""
	}()
	if status != 0 {
		x.fail(status, msg)
		return
	}
	x.writeJSON(v)
}

func (x *exchange) betaBatchList() {
	limit, err := listLimit(x.r, "limit", 20, 1000)
	if err != nil {
		x.fail(http.StatusBadRequest, err.Error())
		return
	}
	q := x.r.URL.Query()
	st := x.s.batches
	st.mu.Lock()
	page, more, ok := pageOf(x.s.listLocked(DialectBeta), batchID, q.Get("after_id"), q.Get("before_id"), limit)
	data := make([]any, 0, len(page))
	for _, b := range page {
		data = append(data, x.betaBatchJSON(b))
	}
	st.mu.Unlock()
	if !ok {
		x.fail(http.StatusNotFound, "Message Batch not found: the list cursor names no batch")
		return
	}
	out := fields{"data", data, "has_more", more, "first_id", nil, "last_id", nil}
	if len(page) > 0 {
		out[5], out[7] = page[0].id, page[len(page)-1].id
	}
	x.writeJSON(out)
}

func rfc3339OrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// betaBatchJSON is b as beta's message_batch object.
func (x *exchange) betaBatchJSON(b *batch) fields {
	status := "in_progress"
	counts := map[string]int{"processing": len(b.lines), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
	var results any
	switch {
	case b.phase == phaseEnded:
		status = "ended"
		c := b.counts()
		counts = map[string]int{"processing": 0, "succeeded": c.succeeded, "errored": c.errored, "canceled": c.canceled,
			"expired": c.expired}
		scheme := "http"
		if x.r.TLS != nil {
			scheme = "https"
		}
		results = fmt.Sprintf("%s://%s/v1/messages/batches/%s/results", scheme, x.r.Host, b.id)
	case b.cancelling:
		status = "canceling"
	}
	var ended time.Time
	if b.phase == phaseEnded {
		ended = b.endedAt
	}
	return fields{"id", b.id, "type", "message_batch", "processing_status", status, "request_counts", counts,
		"ended_at", rfc3339OrNil(ended), "created_at", rfc3339OrNil(b.created),
		"expires_at", rfc3339OrNil(b.created.Add(24 * time.Hour)), "archived_at", nil,
		"cancel_initiated_at", rfc3339OrNil(b.cancelAt), "results_url", results}
}

// betaResultLines are b's results, one JSONL line per request in request order.
func betaResultLines(b *batch) [][]byte {
	out := make([][]byte, 0, len(b.lines))
	for _, l := range b.lines {
		var result fields
		switch l.outcome {
		case lineSucceeded:
			result = fields{"type", "succeeded", "message", json.RawMessage(l.answer)}
		case lineErrored:
			result = fields{"type", "errored", "error", json.RawMessage(l.answer)}
		default:
			result = fields{"type", l.outcome}
		}
		out = append(out, jsonLine(fields{"custom_id", l.customID, "result", result}))
	}
	return out
}
