package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The batch controls (docs/mockupstream.md, "Batch controls"): GET/PUT /_mock/batches (the batches and the
// BatchConfig), GET /_mock/batches/{id} and POST /_mock/batches/{id} (a BatchAction).

// BatchAction drives one batch. Its parts apply in field order; each is optional.
type BatchAction struct {
	// FailLines answers these lines with an error of the given HTTP status, in the dialect's error shape,
	// when they are answered. A line is named by its custom_id (gamma: its metadata.key) or "#i" (index from 0).
	FailLines map[string]int `json:"fail_lines,omitempty"`
	// ExpireLines are never answered: when the rest are, the batch ends expired and these lines expire.
	ExpireLines []string `json:"expire_lines,omitempty"`
	// Process answers this many more pending lines now (the batch must be running): partial progress.
	Process int `json:"process,omitempty"`
	// Cancel cancels the batch as its cancel endpoint does.
	Cancel bool `json:"cancel,omitempty"`
	// Advance moves the batch this many states on.
	Advance int `json:"advance,omitempty"`
	// Expire ends the batch expired now: the lines answered keep their results, the others expire.
	Expire bool `json:"expire,omitempty"`
	// Fail ends the batch failed now with this message (alpha and gamma; beta batches cannot fail).
	Fail string `json:"fail,omitempty"`
}

// BatchView is a batch as the controls show it.
type BatchView struct {
	ID        string `json:"id"`
	Dialect   string `json:"dialect"`
	State     string `json:"state"` // the dialect's status / processing_status / state
	APIKey    string `json:"api_key"`
	Lines     int    `json:"lines"`
	Pending   int    `json:"pending"`
	Succeeded int    `json:"succeeded"`
	Errored   int    `json:"errored"`
	Expired   int    `json:"expired"`
	Canceled  int    `json:"canceled"`
}

func viewOf(b *batch) BatchView {
	c := b.counts()
	v := BatchView{ID: b.id, Dialect: b.dialect, APIKey: b.key, Lines: len(b.lines), Pending: c.pending,
		Succeeded: c.succeeded, Errored: c.errored, Expired: c.expired, Canceled: c.canceled}
	switch b.dialect {
	case DialectAlpha:
		v.State = alphaStatus(b)
	case DialectBeta:
		v.State = map[bool]string{true: "ended", false: "in_progress"}[b.phase == phaseEnded]
		if b.cancelling && b.phase != phaseEnded {
			v.State = "canceling"
		}
	default:
		v.State = gammaState(b)
	}
	return v
}

// Batches returns every batch kept, oldest first, brought up to date.
func (s *Server) Batches() []BatchView {
	st := s.batches
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	out := make([]BatchView, 0, len(st.batches))
	for _, b := range st.batches {
		s.tickLocked(b, now)
		out = append(out, viewOf(b))
	}
	return out
}

// errNoBatch is DriveBatch's error for an unknown id.
var errNoBatch = errors.New("no such batch")

// DriveBatch applies a to the batch id (any dialect; gamma ids are "batches/…").
func (s *Server) DriveBatch(id string, a BatchAction) (BatchView, error) {
	st := s.batches
	st.mu.Lock()
	defer st.mu.Unlock()
	b := st.byID[id]
	if b == nil {
		return BatchView{}, fmt.Errorf("%w: %s", errNoBatch, id)
	}
	now := time.Now()
	s.tickLocked(b, now)
	if err := s.driveLocked(b, a, now); err != nil {
		return viewOf(b), err
	}
	return viewOf(b), nil
}

func (s *Server) driveLocked(b *batch, a BatchAction, now time.Time) error {
	if err := checkAction(b, a); err != nil {
		return err
	}
	for name, status := range a.FailLines {
		b.line(name).failStatus = status
	}
	for _, name := range a.ExpireLines {
		b.line(name).expire = true
	}
	if a.Process > 0 {
		s.processLocked(b, a.Process)
	}
	if a.Cancel && b.phase != phaseEnded && !b.cancelling {
		b.cancelling, b.cancelAt = true, now
	}
	for range a.Advance {
		s.advanceLocked(b, now)
	}
	switch {
	case a.Expire && b.phase != phaseEnded:
		s.endLocked(b, endExpired, now)
	case a.Fail != "" && b.phase != phaseEnded:
		b.failure = append(b.failure, batchError{Code: "mock_failure", Message: a.Fail})
		s.endLocked(b, endFailed, now)
	}
	return nil
}

// checkAction refuses an action that names no line, a status that is no error, lines to process in a batch
// that is not running, or a beta failure — before anything changes.
func checkAction(b *batch, a BatchAction) error {
	for name, status := range a.FailLines {
		if b.line(name) == nil {
			return fmt.Errorf("fail_lines: no line %q", name)
		}
		if status < 400 || status > 599 {
			return fmt.Errorf("fail_lines: status %d for %q is not an error status", status, name)
		}
	}
	for _, name := range a.ExpireLines {
		if b.line(name) == nil {
			return fmt.Errorf("expire_lines: no line %q", name)
		}
	}
	if a.Process < 0 || a.Advance < 0 {
		return errors.New("process and advance must not be negative")
	}
	if a.Process > 0 && (b.phase != phaseRunning || b.cancelling) {
		return fmt.Errorf("process: batch %s is not running", b.id)
	}
	if a.Fail != "" && b.dialect == DialectBeta {
		return errors.New("fail: beta batches cannot fail (they end; their requests error)")
	}
	return nil
}

// line finds a line by custom_id (gamma metadata.key) or "#index".
func (b *batch) line(name string) *batchLine {
	if i, err := strconv.Atoi(strings.TrimPrefix(name, "#")); err == nil && strings.HasPrefix(name, "#") {
		if i >= 0 && i < len(b.lines) {
			return b.lines[i]
		}
		return nil
	}
	return b.byID[name]
}

// serveBatchControl answers /_mock/batches and /_mock/batches/{id}.
func (s *Server) serveBatchControl(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/_mock/batches"), "/")
	decode := func(v any) bool {
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			reply(http.StatusBadRequest, map[string]string{"error": "batch control: " + err.Error()})
			return false
		}
		return true
	}
	switch {
	case id == "" && r.Method == http.MethodGet:
		reply(http.StatusOK, map[string]any{"config": s.BatchConfig(), "batches": s.Batches()})
	case id == "" && r.Method == http.MethodPut:
		var c BatchConfig
		if !decode(&c) {
			return
		}
		s.SetBatchConfig(c)
		reply(http.StatusOK, c)
	case id != "" && (r.Method == http.MethodGet || r.Method == http.MethodPost):
		var a BatchAction
		if r.Method == http.MethodPost && !decode(&a) {
			return
		}
		v, err := s.DriveBatch(id, a)
		switch {
		case errors.Is(err, errNoBatch):
			reply(http.StatusNotFound, map[string]string{"error": err.Error()})
		case err != nil:
			reply(http.StatusConflict, map[string]any{"error": err.Error(), "batch": v})
		default:
			reply(http.StatusOK, v)
		}
	default:
		reply(http.StatusNotFound, map[string]string{"error": "unknown batch control endpoint"})
	}
}
