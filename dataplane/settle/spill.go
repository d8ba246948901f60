package settle

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/dataplane/admission"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// DefaultSpillCapacity is NewSpill's default bound: at a few hundred bytes a record, about 50 MB.
const DefaultSpillCapacity = 100_000

// spillPause is how long Record sends records straight to the spill after an append failed, instead of
// making each request wait for Redis again; then it tries the outbox again.
const spillPause = time.Second

// Spill keeps the settlement records the outbox could not take — Redis unreachable — in memory until the
// forwarder delivers them straight to the control plane (Settle is idempotent by request id), and then
// the holds of those records until Redis can refund them. It is what keeps "every dispatched request
// ends in one usage row" true through a Redis outage; a process crash during the outage loses what it
// holds. It is bounded (a full spill refuses, and the record is lost, logged); it is safe for concurrent
// use. Share one Spill between a Recorder (SpillTo) and a Forwarder (ForwarderOptions.Spill).
type Spill struct {
	mu       sync.Mutex
	entries  []entry // records waiting for the control plane
	owed     []owed  // delivered records whose holds Redis has not refunded yet
	capacity int
	// pauseUntil (unix nanoseconds) ends the pause after a failed append; read on every Record, so atomic.
	pauseUntil atomic.Int64
	// pushed is signalled (without blocking) when a record is spilled, waking a forwarder that is
	// backing off from a failed outbox read.
	pushed chan struct{}
}

// owed is a delivered spilled record whose hold (and TPM correction) still has to be applied in Redis.
type owed struct {
	e    entry
	resp *settlementv1.SettleResponse // the control plane's answer, applied to the cost_used mirror with the refund
}

// NewSpill returns a spill holding at most capacity records (≤ 0: DefaultSpillCapacity).
func NewSpill(capacity int) *Spill {
	if capacity <= 0 {
		capacity = DefaultSpillCapacity
	}
	return &Spill{capacity: capacity, pushed: make(chan struct{}, 1)}
}

// Len is the number of records waiting for the control plane.
func (s *Spill) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Owed is the number of delivered records whose holds are not refunded yet.
func (s *Spill) Owed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.owed)
}

// push keeps a record; false when the spill is full. failed says the outbox just refused it, which
// starts a pause during which paused reports true.
func (s *Spill) push(rec *settlementv1.SettlementRecord, hold admission.Hold, failed bool) bool {
	if failed {
		s.pauseUntil.Store(time.Now().Add(spillPause).UnixNano())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) >= s.capacity {
		return false
	}
	s.entries = append(s.entries, entry{rec: rec, hold: hold})
	select {
	case s.pushed <- struct{}{}:
	default:
	}
	return true
}

// paused reports whether an append failed less than spillPause ago.
func (s *Spill) paused() bool {
	return time.Now().UnixNano() < s.pauseUntil.Load()
}

// take removes and returns up to n of the oldest records.
func (s *Spill) take(n int) []entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return takeFront(&s.entries, n)
}

// takeFront removes and returns up to n elements from the front of *q.
func takeFront[T any](q *[]T, n int) []T {
	n = min(n, len(*q))
	out := append([]T(nil), (*q)[:n]...)
	*q = append((*q)[:0], (*q)[n:]...)
	return out
}

// putBack returns records take removed (their delivery failed) to the front, oldest first.
func (s *Spill) putBack(es []entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	putFront(&s.entries, es)
}

// putFront puts xs back in front of *q, in order.
func putFront[T any](q *[]T, xs []T) {
	*q = append(append([]T(nil), xs...), *q...)
}

func (s *Spill) owe(o []owed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owed = append(s.owed, o...)
}

func (s *Spill) takeOwed(n int) []owed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return takeFront(&s.owed, n)
}

// oweFront returns owed refunds takeOwed removed (their refund failed) to the front.
func (s *Spill) oweFront(o []owed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	putFront(&s.owed, o)
}
