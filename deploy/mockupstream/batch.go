package mockupstream

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The batch APIs of the three dialects (docs/mockupstream.md, "Batch APIs"): alpha files + batches
// (batch_alpha.go), beta message batches (batch_beta.go), gamma batchGenerateContent (batch_gamma.go). They
// share this lifecycle: a batch is created in its first state and moves one state per step — after
// BatchConfig.StepMS each, or only when POST /_mock/batches/{id} advances it (StepMS 0) — and every line is
// answered by the mock's own endpoint for it (the same body and usage a plain request with that body gets),
// billed at tier "batch" when it is answered. State is in memory, bounded by BatchConfig.

// Batch phases. Alpha passes through all of them; beta starts running and ends from there; gamma's pending
// is BATCH_STATE_PENDING and it ends from running.
const (
	phaseValidating = iota
	phaseRunning
	phaseFinalizing
	phaseEnded
)

// Batch endings.
const (
	endCompleted = "completed"
	endFailed    = "failed"
	endExpired   = "expired"
	endCancelled = "cancelled"
)

// Line outcomes.
const (
	lineSucceeded = "succeeded"
	lineErrored   = "errored"
	lineExpired   = "expired"
	lineCanceled  = "canceled"
)

// BatchTier is the tier the mock's bills record for batch lines.
const BatchTier = "batch"

// BatchConfig steers every batch (PUT /_mock/batches). The zero value of a field means its default.
type BatchConfig struct {
	// StepMS is how long each state lasts before the batch moves to the next one; 0 = manual: a batch moves
	// only when POST /_mock/batches/{id} advances it. Default DefaultBatchStepMS.
	StepMS *int `json:"step_ms,omitempty"`
	// MaxBatches caps the batches kept (all dialects); creating one more forgets the oldest ended one, or is
	// refused when none has ended. Default 1000.
	MaxBatches int `json:"max_batches,omitempty"`
	// MaxLines caps a batch's lines (requests). Default 10000.
	MaxLines int `json:"max_lines,omitempty"`
	// MaxLineBytes caps one line (an alpha JSONL line, a beta request's params, a gamma request). Default 1 MiB.
	MaxLineBytes int `json:"max_line_bytes,omitempty"`
	// MaxStoredBytes caps the bytes all kept batches hold (their lines' bodies and answers); a new batch
	// forgets the oldest ended batches to fit, or is refused. Default 512 MiB.
	MaxStoredBytes int `json:"max_stored_bytes,omitempty"`
	// MaxFiles caps the alpha files kept (uploads and outputs). Default 1000.
	MaxFiles int `json:"max_files,omitempty"`
	// FlushLines flushes a results download (alpha file content, beta results) every this many lines.
	// Default 1.
	FlushLines int `json:"flush_lines,omitempty"`
	// LineDelayMS pauses a results download this long after each flush.
	LineDelayMS int `json:"line_delay_ms,omitempty"`
	// CutResults cuts the next CutResults results downloads after CutAfterLines lines: the connection is
	// closed mid-body (a reader that restarts must not count the lines it read twice).
	CutResults    int `json:"cut_results,omitempty"`
	CutAfterLines int `json:"cut_after_lines,omitempty"`
}

// DefaultBatchStepMS is BatchConfig.StepMS when unset: a batch ends about three steps after it was created.
const DefaultBatchStepMS = 100

func (c BatchConfig) step() time.Duration {
	ms := DefaultBatchStepMS
	if c.StepMS != nil {
		ms = max(*c.StepMS, 0)
	}
	return time.Duration(ms) * time.Millisecond
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func (c BatchConfig) maxBatches() int   { return orDefault(c.MaxBatches, 1000) }
func (c BatchConfig) maxLines() int     { return orDefault(c.MaxLines, 10000) }
func (c BatchConfig) maxLineBytes() int { return orDefault(c.MaxLineBytes, 1<<20) }
func (c BatchConfig) maxStoredBytes() int {
	return orDefault(c.MaxStoredBytes, 512<<20)
}
func (c BatchConfig) maxFiles() int   { return orDefault(c.MaxFiles, 1000) }
func (c BatchConfig) flushLines() int { return orDefault(c.FlushLines, 1) }

// batchLine is one request of a batch and, once answered, its result.
type batchLine struct {
	customID string          // alpha custom_id, beta custom_id, gamma metadata.key ("" when absent)
	meta     json.RawMessage // gamma: the request's metadata, echoed in its response
	path     string          // the plain endpoint that answers it
	body     []byte          // the request body that endpoint receives
	model    string

	failStatus int  // POST /_mock/batches/{id} fail_lines: answer with this status
	expire     bool // expire_lines: never answered; the batch ends expired
	done       bool

	outcome   string // line* constants
	status    int
	answer    []byte // the endpoint's answer body (an error body when status is not 2xx)
	requestID string
}

// batch is one batch of any dialect.
type batch struct {
	id, dialect, key string
	created          time.Time
	phase            int
	ending           string // end* when phase == phaseEnded
	cancelling       bool
	next             time.Time // the next automatic step; zero until stepping is on
	inProgressAt     time.Time
	finalizingAt     time.Time
	cancelAt         time.Time
	endedAt          time.Time
	failure          []batchError // why validation (or an admin fail) failed the batch
	lines            []*batchLine
	byID             map[string]*batchLine
	bytes            int // the lines' bodies and answers: what the batch holds in memory

	alpha *alphaBatchInfo
	gamma *gammaBatchInfo
}

// batchError is one reason a batch failed.
type batchError struct {
	Code    string  `json:"code"`
	Line    *int    `json:"line"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// counts tallies the lines by outcome (pending = not answered yet).
type lineCounts struct{ pending, succeeded, errored, expired, canceled int }

func (b *batch) counts() lineCounts {
	var c lineCounts
	for _, l := range b.lines {
		switch l.outcome {
		case lineSucceeded:
			c.succeeded++
		case lineErrored:
			c.errored++
		case lineExpired:
			c.expired++
		case lineCanceled:
			c.canceled++
		default:
			c.pending++
		}
	}
	return c
}

// batchStore holds every batch and alpha file. Its lock is taken before the server's (never after).
type batchStore struct {
	mu      sync.Mutex
	cfg     BatchConfig
	batches []*batch // creation order
	byID    map[string]*batch
	files   []*alphaFile
	fileIDs map[string]*alphaFile
	cuts    int // downloads cut so far under cfg.CutResults
	stored  int // the bytes every kept batch holds (batch.bytes)
}

func newBatchStore() *batchStore {
	return &batchStore{byID: map[string]*batch{}, fileIDs: map[string]*alphaFile{}}
}

func (st *batchStore) reset() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.cfg, st.batches, st.files, st.cuts, st.stored = BatchConfig{}, nil, nil, 0, 0
	clear(st.byID)
	clear(st.fileIDs)
}

// BatchConfig returns the batch configuration in force.
func (s *Server) BatchConfig() BatchConfig {
	s.batches.mu.Lock()
	defer s.batches.mu.Unlock()
	return s.batches.cfg
}

// SetBatchConfig replaces the batch configuration (Reset restores the defaults).
func (s *Server) SetBatchConfig(c BatchConfig) {
	s.batches.mu.Lock()
	defer s.batches.mu.Unlock()
	s.batches.cfg, s.batches.cuts = c, 0
}

// randomID is prefix + n random lowercase hex digits: ids stay unique across mock restarts, so a gateway
// that keeps batch ids in its database never meets an old one again.
func randomID(prefix string, n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)[:n]
}

// addBatchLocked stores b, forgetting the oldest ended batches while the store is full (MaxBatches, or
// MaxStoredBytes). It reports false, storing nothing, when it would still be full.
func (s *Server) addBatchLocked(b *batch) bool {
	st := s.batches
	for _, l := range b.lines {
		b.bytes += len(l.body)
	}
	full := func() bool {
		return len(st.batches) >= st.cfg.maxBatches() || st.stored+b.bytes > st.cfg.maxStoredBytes()
	}
	for full() {
		i := slices.IndexFunc(st.batches, func(old *batch) bool { return old.phase == phaseEnded })
		if i < 0 {
			return false
		}
		s.dropBatchLocked(st.batches[i])
	}
	b.created = time.Now()
	b.byID = make(map[string]*batchLine, len(b.lines))
	for _, l := range b.lines {
		if l.customID != "" {
			b.byID[l.customID] = l
		}
	}
	if step := st.cfg.step(); step > 0 {
		b.next = b.created.Add(step)
	}
	st.batches = append(st.batches, b)
	st.byID[b.id] = b
	st.stored += b.bytes
	return true
}

// dropBatchLocked forgets b.
func (s *Server) dropBatchLocked(b *batch) {
	st := s.batches
	delete(st.byID, b.id)
	st.batches = slices.DeleteFunc(st.batches, func(o *batch) bool { return o == b })
	st.stored -= b.bytes
}

// batchLocked returns the batch id of dialect, brought up to date.
func (s *Server) batchLocked(dialect, id string) *batch {
	b := s.batches.byID[id]
	if b == nil || b.dialect != dialect {
		return nil
	}
	s.tickLocked(b, time.Now())
	return b
}

// listLocked returns dialect's batches newest first, brought up to date.
func (s *Server) listLocked(dialect string) []*batch {
	now := time.Now()
	var out []*batch
	for i := len(s.batches.batches) - 1; i >= 0; i-- {
		if b := s.batches.batches[i]; b.dialect == dialect {
			s.tickLocked(b, now)
			out = append(out, b)
		}
	}
	return out
}

// tickLocked takes the automatic steps that are due.
func (s *Server) tickLocked(b *batch, now time.Time) {
	step := s.batches.cfg.step()
	if step <= 0 {
		return
	}
	if b.next.IsZero() {
		b.next = now.Add(step)
	}
	for b.phase != phaseEnded && !now.Before(b.next) {
		s.advanceLocked(b, b.next)
		b.next = b.next.Add(step)
	}
}

// advanceLocked moves b one state on.
func (s *Server) advanceLocked(b *batch, at time.Time) {
	if b.phase == phaseEnded {
		return
	}
	if b.cancelling {
		s.endLocked(b, endCancelled, at)
		return
	}
	switch b.phase {
	case phaseValidating:
		if len(b.failure) > 0 {
			s.endLocked(b, endFailed, at)
			return
		}
		b.phase, b.inProgressAt = phaseRunning, at
	case phaseRunning:
		s.processLocked(b, -1)
		switch {
		case b.counts().pending > 0: // lines set to expire
			s.endLocked(b, endExpired, at)
		case b.dialect == DialectAlpha:
			b.phase, b.finalizingAt = phaseFinalizing, at
		default:
			s.endLocked(b, endCompleted, at)
		}
	case phaseFinalizing:
		s.endLocked(b, endCompleted, at)
	}
}

// endLocked ends b: the lines not answered are canceled or expired, and alpha's result files are written.
func (s *Server) endLocked(b *batch, ending string, at time.Time) {
	outcome := lineCanceled
	if ending == endExpired {
		outcome = lineExpired
	}
	for _, l := range b.lines {
		if !l.done {
			l.done, l.outcome = true, outcome
		}
	}
	b.phase, b.ending, b.endedAt = phaseEnded, ending, at
	if b.dialect == DialectAlpha && ending != endFailed {
		s.alphaResultFilesLocked(b, at)
	}
}

// processLocked answers up to n pending lines (n < 0: all) that are not set to expire, and bills them.
func (s *Server) processLocked(b *batch, n int) {
	var bills []Bill
	for _, l := range b.lines {
		if n == 0 {
			break
		}
		if l.done || l.expire {
			continue
		}
		if bill := s.answerLine(b, l); bill != nil {
			bills = append(bills, *bill)
		}
		n--
	}
	if len(bills) == 0 || s.opts.MaxRecords < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bill := range bills {
		s.billSeq++
		bill.Seq = s.billSeq
		s.bills = append(s.bills, bill)
	}
}

// answerLine answers l with the mock's own endpoint for it, as a plain request with l's body would be
// answered (the same controls-free answer, usage and bill), and returns the bill (nil when it errored).
func (s *Server) answerLine(b *batch, l *batchLine) *Bill {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if l.failStatus != 0 {
		h.Set("x-mock-status", strconv.Itoa(l.failStatus))
	}
	r := httptest.NewRequest(http.MethodPost, "http://mock.invalid"+l.path, bytes.NewReader(l.body))
	r.Header = h
	rec := httptest.NewRecorder()
	x := &exchange{s: s, w: rec, r: r, body: l.body, dialect: b.dialect, key: b.key, ctl: parseControls(h)}
	hs := fnv.New64a()
	_, _ = hs.Write([]byte(l.path))
	_, _ = hs.Write(l.body)
	x.hash = hs.Sum64()
	switch {
	case x.ctl.status >= 300:
		x.fail(x.ctl.status, "mock failure requested by fail_lines")
	case streamRequested(l.body):
		x.fail(http.StatusBadRequest, "stream is not supported for batch requests")
	default:
		s.route(x, l.path)
	}
	x.settleBill()
	l.done, l.status, l.answer, l.requestID = true, x.status, rec.Body.Bytes(), x.requestID()
	if len(l.answer) == 0 {
		l.answer = []byte("null")
	}
	b.bytes += len(l.answer)
	s.batches.stored += len(l.answer)
	l.outcome = lineErrored
	if x.status >= 200 && x.status <= 299 {
		l.outcome = lineSucceeded
	}
	if x.bill == nil || l.outcome != lineSucceeded {
		return nil
	}
	bill := *x.bill
	bill.Tier = BatchTier
	bill.Batch = b.id
	return &bill
}

func streamRequested(body []byte) bool {
	var v struct {
		Stream bool `json:"stream"`
	}
	return json.Unmarshal(body, &v) == nil && v.Stream
}

// writeResultLines writes a results download (JSONL) under the download controls: a flush every FlushLines
// lines, LineDelayMS after each, and a cut after CutAfterLines lines while CutResults lasts.
func (x *exchange) writeResultLines(contentType string, lines [][]byte) {
	st := x.s.batches
	st.mu.Lock()
	cfg := st.cfg
	cut := st.cuts < cfg.CutResults
	if cut {
		st.cuts++
	}
	st.mu.Unlock()
	x.w.Header().Set("Content-Type", contentType)
	x.w.WriteHeader(http.StatusOK)
	x.status = http.StatusOK
	rc := http.NewResponseController(x.w)
	delay := time.Duration(cfg.LineDelayMS) * time.Millisecond
	for i, line := range lines {
		if cut && i == cfg.CutAfterLines {
			_ = rc.Flush()
			x.abort()
			return
		}
		if _, err := x.w.Write(line); err != nil {
			x.cancelled = true
			return
		}
		if (i+1)%cfg.flushLines() == 0 || i == len(lines)-1 {
			_ = rc.Flush()
			if !x.sleep(delay) {
				return
			}
		}
	}
	x.completed = true
}

// jsonLine is v as one JSONL line.
func jsonLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	return append(b, '\n')
}

// pageOf cuts a list at a cursor: the items after the one whose id is after (or before the one whose id is
// before), at most limit. hasMore says whether items remain beyond the page in its direction; ok is false
// when the cursor names no item.
func pageOf[T any](list []T, id func(T) string, after, before string, limit int) (page []T, hasMore bool, ok bool) {
	idx := func(want string) int {
		return slices.IndexFunc(list, func(v T) bool { return id(v) == want })
	}
	switch {
	case before != "":
		i := idx(before)
		if i < 0 {
			return nil, false, false
		}
		from := max(i-limit, 0)
		return list[from:i], from > 0, true
	case after != "":
		i := idx(after)
		if i < 0 {
			return nil, false, false
		}
		list = list[i+1:]
	}
	if len(list) > limit {
		return list[:limit], true, true
	}
	return list, false, true
}

func batchID(b *batch) string { return b.id }

// listLimit reads a list's limit query parameter: def when absent, an error outside 1..maxLimit.
func listLimit(r *http.Request, name string, def, maxLimit int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, fmt.Errorf("%s must be an integer between 1 and %d, got %q", name, maxLimit, v)
	}
	return n, nil
}
