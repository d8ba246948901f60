// Package settle owns the data plane's half of settlement: building the one settlement record of a
// dispatched request (cost from the compiled rule at the reported tier, the usage source), appending it
// durably to a Redis stream outbox before the request's handler returns (Recorder), and forwarding the outbox in
// batches to the control plane's SettlementService (Forwarder), which then refunds each request's exact
// pending hold — once, atomically with the stream acknowledgement — and refreshes the Redis mirror of
// quotas.cost_used that admission reads. See docs/settlement.md.
package settle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/shared/backoff"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// Outbox entry fields.
const (
	fieldRecord = "r" // the SettlementRecord, protobuf wire bytes
	fieldHold   = "h" // admission.EncodeHold of the request's hold
)

// group is the consumer group every forwarder of every data plane reads the outbox with.
const group = "tollgate-forwarders"

// maxRecordBytes bounds a decoded record (a record is a few hundred bytes; this rejects garbage).
const maxRecordBytes = 64 << 10

// Streams names the outbox and dead-letter streams under a key prefix.
type Streams struct{ Prefix string }

// Outbox is the stream of records of one shard waiting for the control plane: settle:outbox:{<tag>},
// in the hash slot of every key its records' holds name (admission.Keys with that tag). With tag ""
// (one shard) it is settle:outbox, the stream of the releases before sharding.
func (s Streams) Outbox(tag string) string {
	if tag == "" {
		return s.Prefix + "settle:outbox"
	}
	return s.Prefix + "settle:outbox:{" + tag + "}"
}

// Dead is the stream of records the control plane refused as invalid (kept for an operator).
func (s Streams) Dead() string { return s.Prefix + "settle:dead" }

// Recorder appends settlement records to the outbox. It is safe for concurrent use.
type Recorder struct {
	rdb     redis.Cmdable
	streams Streams
	shards  admission.Shards
	timeout time.Duration
	spill   *Spill
}

// recordBudget bounds Append's retries; spillBudget replaces it when a Spill takes the
// records Redis refuses (a request then waits at most that long for an unreachable Redis).
const (
	recordBudget = 5 * time.Second
	spillBudget  = time.Second
)

// NewRecorder returns a Recorder writing under prefix (config.RedisKeyPrefix).
func NewRecorder(rdb redis.Cmdable, prefix string) *Recorder {
	return &Recorder{rdb: rdb, streams: Streams{Prefix: prefix}, timeout: recordBudget}
}

// Sharded makes Append spread records without a hold over n shards (config.RedisShards, the admitter's
// number) by their organisation, as admission does the holds. It returns r.
func (r *Recorder) Sharded(n int) *Recorder {
	r.shards = admission.NewShards(n)
	return r
}

// SpillTo makes Append keep a record it cannot append within a second in s (for the forwarder to
// deliver directly) instead of failing, and — for a second after such a failure — spill without trying
// Redis at all, so requests do not each wait for an unreachable server. It returns r.
func (r *Recorder) SpillTo(s *Spill) *Recorder {
	r.spill, r.timeout = s, spillBudget
	return r
}

// Record settles the outcome of one dispatched request: it builds the request's settlement record from
// the facts (BuildRecord) and appends it with the hold admission gave the request (a zero Hold when
// nothing was reserved; Append). Call it exactly once per dispatched request, before the handler returns;
// the request's context may already be cancelled (client gone). It returns the record as appended (for
// the request's observations), also when the append failed.
func (r *Recorder) Record(ctx context.Context, o Outcome, hold admission.Hold) (*settlementv1.SettlementRecord, error) {
	rec := BuildRecord(o)
	return rec, r.Append(ctx, rec, hold)
}

// Append durably appends a built record rec with its request's hold to the outbox. It sets
// rec.PendingMicros to hold.Micros. It detaches from ctx's cancellation and bounds itself to a few
// seconds, retrying transient errors. With a Spill (SpillTo), a record Redis does not take goes to the
// spill instead, and Append fails only when the spill is full.
func (r *Recorder) Append(ctx context.Context, rec *settlementv1.SettlementRecord, hold admission.Hold) error {
	if rec.GetRequestId() == "" {
		return errors.New("settle: record without request_id")
	}
	rec.PendingMicros = hold.Micros
	if !hold.At.IsZero() { // the admission time decides the budget period (docs/budgets.md, "Periods")
		rec.AdmittedAt = timestamppb.New(hold.At)
	}
	sanitize(rec)
	// The entry goes to the stream of its hold's shard, in the slot of every key the hold names; a
	// hold that names none (nothing was admitted) takes its organisation's shard.
	if hold.Tag == "" && hold.Micros == 0 && hold.Tokens == 0 && hold.RequestID == "" && len(hold.RateScopes) == 0 {
		hold.Tag = r.shards.Tag(rec.GetOrgId())
	}
	if r.spill != nil && r.spill.paused() {
		return r.spillRecord(rec, hold, false, errors.New("an append failed less than a second ago"))
	}
	b, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("settle: encode record %s: %w", rec.GetRequestId(), err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	args := &redis.XAddArgs{Stream: r.streams.Outbox(hold.Tag), Values: []any{fieldRecord, b, fieldHold, admission.EncodeHold(hold)}}
	for attempt := 1; ; attempt++ {
		err = r.rdb.XAdd(ctx, args).Err()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if r.spill != nil {
				return r.spillRecord(rec, hold, true, err)
			}
			return fmt.Errorf("settle: append record %s to outbox: %w", rec.GetRequestId(), err)
		case <-time.After(backoff.Delay(attempt, 20*time.Millisecond, time.Second)):
		}
	}
}

func (r *Recorder) spillRecord(rec *settlementv1.SettlementRecord, hold admission.Hold, failed bool, cause error) error {
	if r.spill.push(rec, hold, failed) {
		return nil
	}
	return fmt.Errorf("settle: outbox unreachable (%v) and spill full: record %s lost", cause, rec.GetRequestId())
}

// sanitize makes the record's text fields storable: protobuf strings must be valid UTF-8 and Postgres
// text cannot hold NUL, and a model name comes from client input. Invalid bytes become U+FFFD, NUL is
// dropped, and each field is capped at maxTextField bytes.
func sanitize(rec *settlementv1.SettlementRecord) {
	for _, f := range []*string{&rec.RequestId, &rec.LogicalModel, &rec.UpstreamModel, &rec.Operation, &rec.InboundKind,
		&rec.Implementation, &rec.DestKind, &rec.RequestedTier, &rec.ReportedTier, &rec.Cost, &rec.Source, &rec.EndState} {
		*f = cleanText(*f)
	}
}

const maxTextField = 512

func cleanText(s string) string {
	if len(s) <= maxTextField && utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) > maxTextField {
		cut := maxTextField
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// DecodeEntry decodes one outbox entry's fields into its record and hold. It rejects entries whose
// fields are missing or malformed, or whose record disagrees with its hold.
func DecodeEntry(values map[string]any) (*settlementv1.SettlementRecord, admission.Hold, error) {
	rawRec, ok := values[fieldRecord].(string)
	if !ok {
		return nil, admission.Hold{}, errors.New("outbox entry: record field missing")
	}
	rawHold, ok := values[fieldHold].(string)
	if !ok {
		return nil, admission.Hold{}, errors.New("outbox entry: hold field missing")
	}
	if len(rawRec) > maxRecordBytes {
		return nil, admission.Hold{}, fmt.Errorf("outbox entry: record of %d bytes exceeds %d", len(rawRec), maxRecordBytes)
	}
	rec := &settlementv1.SettlementRecord{}
	if err := proto.Unmarshal([]byte(rawRec), rec); err != nil {
		return nil, admission.Hold{}, fmt.Errorf("outbox entry: record: %w", err)
	}
	if rec.GetRequestId() == "" {
		return nil, admission.Hold{}, errors.New("outbox entry: record without request_id")
	}
	hold, err := admission.DecodeHold(rawHold)
	if err != nil {
		return nil, admission.Hold{}, fmt.Errorf("outbox entry %s: %w", rec.GetRequestId(), err)
	}
	if hold.RequestID != "" && hold.RequestID != rec.GetRequestId() {
		return nil, admission.Hold{}, fmt.Errorf("outbox entry %s: hold marked for request %s", rec.GetRequestId(), hold.RequestID)
	}
	if hold.Micros != rec.GetPendingMicros() {
		return nil, admission.Hold{}, fmt.Errorf("outbox entry %s: hold %d micros but record pending_micros %d",
			rec.GetRequestId(), hold.Micros, rec.GetPendingMicros())
	}
	return rec, hold, nil
}
