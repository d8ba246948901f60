package settle

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ForwarderOptions configure a Forwarder. Zero values take the defaults noted.
type ForwarderOptions struct {
	// Prefix namespaces every key (config.RedisKeyPrefix).
	Prefix string
	// Shards is the number of shards (config.RedisShards; 0 or 1: one, untagged): the forwarder reads
	// every shard's outbox stream, and the untagged stream of the releases before sharding.
	Shards int
	// NodeID names this data plane's consumer in the group; it must be unique among data planes and
	// stable across restarts (a restarted node resumes its own unacknowledged entries).
	NodeID string
	// ControlPlane is the control-plane client's configuration (endpoints, a failing one left for the
	// next; token; TLS). Its back-off bounds the retry delay after a failed call (defaults 100 ms, 5 s):
	// it doubles from BackoffBase per failed attempt up to BackoffMax, drawn from [d/2, d].
	ControlPlane cpclient.Options
	// BatchSize bounds the records per Settle call (default 100).
	BatchSize int
	// Block is how long one read waits for new entries (default 1 s).
	Block time.Duration
	// Linger is how long Run holds a short batch of new entries (fewer than BatchSize) waiting for more
	// before the Settle call, polling the outbox every Linger/4 (at most every 25 ms) and stopping as
	// soon as the batch is full (default DefaultLinger; negative: no linger). At low request rates it
	// replaces one Settle call per record with a few reads and one call per Linger, at the price of up
	// to Linger more settlement delay. Flush never lingers.
	Linger time.Duration
	// ClaimMinIdle is how long an entry may sit unacknowledged with another consumer before this one
	// claims it (the other data plane is presumed dead; default 30 s).
	ClaimMinIdle time.Duration
	// RPCTimeout bounds one Settle call (default 10 s).
	RPCTimeout time.Duration
	// RedisTimeout bounds every Redis call (a blocking read: Block longer), so a hung Redis cannot stall
	// the loop, Flush or a shutdown (default admission.DefaultTimeout; config.RedisTimeout).
	RedisTimeout time.Duration
	// MirrorTTL is the lifetime of a qu: mirror value, refreshed by every answer (default 1 h).
	MirrorTTL time.Duration
	Log       *slog.Logger
	// Metrics registers the forwarder's families when set.
	Metrics prometheus.Registerer
	// OnRefunded, when set, is called after a batch's holds were refunded with the request ids the
	// batch acknowledged (tests use it to observe settlement order).
	OnRefunded func(requestIDs []string)
	// Spill, when set, is the Recorder's spill (Recorder.SpillTo): Run and Flush deliver its records
	// straight to the control plane, then refund their holds once Redis answers.
	Spill *Spill
}

// DefaultLinger is ForwarderOptions.Linger's default: at about 1,000 requests/s per data plane it fills
// one default batch (100 records), and it keeps the added settlement delay (and the time a hold stays
// pending, which only makes admission stricter) far below anything a quota or a dashboard can observe.
const DefaultLinger = 100 * time.Millisecond

// Forwarder drains the outbox to SettlementService. Run it in the background; call Flush at shutdown.
type Forwarder struct {
	rdb     redis.UniversalClient
	opts    ForwarderOptions
	cp      *cpclient.Client
	streams Streams
	shards  admission.Shards
	// outboxes are the streams read: every shard's, then the untagged one when there are several shards.
	outboxes []outbox
	log      *slog.Logger

	settled, duplicates, deadLettered, failures prometheus.Counter
}

//go:embed settle.lua
var settleLua string

var settleScript = redis.NewScript(settleLua)

// NewForwarder returns a Forwarder. It dials lazily: construction never blocks or fails on the network.
func NewForwarder(rdb redis.UniversalClient, opts ForwarderOptions) (*Forwarder, error) {
	if opts.NodeID == "" {
		return nil, errors.New("settle: forwarder needs a NodeID")
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.Block <= 0 {
		opts.Block = time.Second
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	if opts.ClaimMinIdle <= 0 {
		opts.ClaimMinIdle = 30 * time.Second
	}
	if opts.RPCTimeout <= 0 {
		opts.RPCTimeout = 10 * time.Second
	}
	if opts.RedisTimeout <= 0 {
		opts.RedisTimeout = admission.DefaultTimeout
	}
	if opts.ControlPlane.BackoffBase <= 0 {
		opts.ControlPlane.BackoffBase = 100 * time.Millisecond
	}
	if opts.ControlPlane.BackoffMax <= 0 {
		opts.ControlPlane.BackoffMax = 5 * time.Second
	}
	if opts.MirrorTTL <= 0 {
		opts.MirrorTTL = admission.DefaultMirrorTTL
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if len(opts.ControlPlane.Endpoints) == 0 {
		return nil, errors.New("settle: forwarder needs at least one control-plane endpoint")
	}
	cp, err := cpclient.New(opts.ControlPlane)
	if err != nil {
		return nil, fmt.Errorf("settle: forwarder: %w", err)
	}
	f := &Forwarder{rdb: rdb, opts: opts, cp: cp, streams: Streams{Prefix: opts.Prefix}, shards: admission.NewShards(opts.Shards),
		log: opts.Log}
	for _, tag := range f.shards.Tags() {
		f.outboxes = append(f.outboxes, outbox{tag: tag, name: f.streams.Outbox(tag)})
	}
	if f.shards.N() > 1 {
		// Records appended before sharding, or by data planes of an older release during a rolling
		// upgrade: delivered as before (docs/operations.md, "Redis Cluster").
		f.outboxes = append(f.outboxes, outbox{name: f.streams.Outbox("")})
	}
	reg := promauto.With(opts.Metrics) // nil registers nowhere
	f.settled = reg.NewCounter(prometheus.CounterOpts{Name: "tollgate_settle_records_forwarded_total", Help: "Settlement records the control plane stored."})
	f.duplicates = reg.NewCounter(prometheus.CounterOpts{Name: "tollgate_settle_records_duplicate_total", Help: "Settlement records the control plane already had (redelivery)."})
	f.deadLettered = reg.NewCounter(prometheus.CounterOpts{Name: "tollgate_settle_records_dead_total", Help: "Outbox entries moved to the dead-letter stream."})
	f.failures = reg.NewCounter(prometheus.CounterOpts{Name: "tollgate_settle_call_failures_total", Help: "Failed Settle calls (retried)."})
	if opts.Spill != nil {
		reg.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_settle_spill_length", Help: "Settlement records held in memory because Redis refused them, waiting for the control plane."},
			func() float64 { return float64(opts.Spill.Len()) })
	}
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(outboxCollector{f})
	}
	return f, nil
}

// outboxCollector reports the outbox at scrape time, in one Redis round trip: its length and the age of
// its oldest entry (settled entries are deleted, so the oldest one left is the delivery lag; an entry id
// is its append time in milliseconds). A Redis that does not answer within RedisTimeout reports -1.
type outboxCollector struct{ f *Forwarder }

var (
	outboxLenDesc = prometheus.NewDesc("tollgate_settle_outbox_length", "Entries in the settlement outbox stream (-1: Redis did not answer).", nil, nil)
	outboxLagDesc = prometheus.NewDesc("tollgate_settle_outbox_lag_seconds",
		"Age of the oldest settlement record not yet delivered to the control plane (0: the outbox is empty; -1: Redis did not answer).", nil, nil)
)

func (c outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxLenDesc
	ch <- outboxLagDesc
}

func (c outboxCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.f
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.RedisTimeout)
	defer cancel()
	// Every shard's stream: the total length, and the age of the oldest entry of any.
	pipe := f.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(f.outboxes))
	firsts := make([]*redis.XMessageSliceCmd, len(f.outboxes))
	for i, o := range f.outboxes {
		lens[i] = pipe.XLen(ctx, o.name)
		firsts[i] = pipe.XRangeN(ctx, o.name, "-", "+", 1)
	}
	length, lag := -1.0, -1.0
	if _, err := pipe.Exec(ctx); err == nil {
		length, lag = 0, 0
		for i := range f.outboxes {
			length += float64(lens[i].Val())
			if msgs := firsts[i].Val(); len(msgs) > 0 {
				if ms, _, ok := strings.Cut(msgs[0].ID, "-"); ok {
					if v, err := strconv.ParseInt(ms, 10, 64); err == nil {
						lag = max(lag, time.Since(time.UnixMilli(v)).Seconds())
					}
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(outboxLenDesc, prometheus.GaugeValue, length)
	ch <- prometheus.MustNewConstMetric(outboxLagDesc, prometheus.GaugeValue, lag)
}

// redisCtx bounds one Redis call: RedisTimeout, plus extra (a blocking read's block time).
func (f *Forwarder) redisCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.opts.RedisTimeout+max(extra, 0))
}

// Close closes the control-plane connections.
func (f *Forwarder) Close() error { return f.cp.Close() }

// outbox is one outbox stream: a shard's (tag) or the untagged one (tag "").
type outbox struct{ tag, name string }

// Run forwards until ctx ends, every outbox stream on its own (a cluster cannot read streams of several
// slots in one call; one slow stream holds no other): first the entries this node had read but not
// acknowledged before a restart, then, in a loop, stale entries of other (dead) consumers and new entries.
// A short batch of new entries lingers (ForwarderOptions.Linger) for more before it is settled. A batch
// the control plane cannot take is retried with capped, jittered backoff, so records survive a
// control-plane outage in the stream. Spilled records are delivered as soon as they are spilled. Run
// returns nil when ctx ends; entries it had read but not settled stay pending for this node (Flush, or
// Run after a restart, delivers them first).
func (f *Forwarder) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if f.opts.Spill != nil {
		wg.Go(func() { f.runSpill(ctx) })
	}
	for _, o := range f.outboxes {
		wg.Go(func() { f.runOutbox(ctx, o) })
	}
	wg.Wait()
	return nil
}

// runSpill delivers spilled records whenever one is spilled, and at least every Block (holds owed
// refunds are refunded once Redis answers).
func (f *Forwarder) runSpill(ctx context.Context) {
	for ctx.Err() == nil {
		if err := f.drainSpill(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("deliver spilled settlement records", "err", err)
		}
		t := time.NewTimer(f.opts.Block)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-f.opts.Spill.pushed:
		}
		t.Stop()
	}
}

// runOutbox forwards one outbox stream until ctx ends.
func (f *Forwarder) runOutbox(ctx context.Context, o outbox) {
	if err := f.ensureGroup(ctx, o); err != nil && ctx.Err() == nil {
		f.log.Warn("settlement outbox group", "stream", o.name, "err", err)
	}
	lastClaim := time.Time{}
	// ownPending says this node's pending list may hold entries it read but did not settle: at start (a
	// restart), after any failure, after a batch of own or claimed entries, and at every claim check.
	// After a batch of new entries settled completely it is empty, so the loop skips that read.
	ownPending := true
	for ctx.Err() == nil {
		if time.Since(lastClaim) >= f.opts.ClaimMinIdle/4 {
			ownPending = true
		}
		msgs, fresh, err := f.read(ctx, o, &lastClaim, f.opts.Block, ownPending)
		if err != nil {
			ownPending = true
			if ctx.Err() != nil {
				break
			}
			f.log.Warn("read settlement outbox", "stream", o.name, "err", err)
			sleep(ctx, f.opts.ControlPlane.BackoffMax)
			continue
		}
		if len(msgs) == 0 {
			ownPending = false
			continue
		}
		if fresh && len(msgs) < f.opts.BatchSize && f.opts.Linger > 0 {
			if msgs, err = f.linger(ctx, o, msgs); err != nil {
				ownPending = true
				if ctx.Err() != nil {
					break // what was read stays pending for this node
				}
				f.log.Warn("read settlement outbox", "stream", o.name, "err", err)
			}
		}
		if err := f.forward(ctx, o, msgs); err != nil {
			ownPending = true
			if ctx.Err() == nil {
				f.log.Warn("forward settlement batch", "stream", o.name, "err", err)
			}
			continue
		}
		// Own or claimed entries come BatchSize at a time: look again until none are left.
		ownPending = !fresh
	}
}

// lingerPoll is the longest pause between two outbox reads while a batch lingers.
const lingerPoll = 25 * time.Millisecond

// linger tops up a short batch of new entries: it polls the outbox for more every Linger/4 (at most
// every lingerPoll) until the batch is full or Linger has passed. An error (or the end of ctx) returns what was read so far with it;
// entries read by a failed poll are at worst left pending for this node.
func (f *Forwarder) linger(ctx context.Context, o outbox, msgs []redis.XMessage) ([]redis.XMessage, error) {
	deadline := time.Now().Add(f.opts.Linger)
	step := min(max(f.opts.Linger/4, time.Millisecond), lingerPoll)
	for len(msgs) < f.opts.BatchSize {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if !sleep(ctx, min(step, left)) {
			return msgs, ctx.Err()
		}
		more, err := f.readGroup(ctx, o, ">", int64(f.opts.BatchSize-len(msgs)), -1)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, more...)
	}
	return msgs, nil
}

// Flush drains what it can within ctx: the spilled records, then of every outbox stream this node's
// unacknowledged entries, stale ones of dead consumers, then the entries appended up to the moment its
// flush started (so busy peers cannot keep it going forever). It returns an error when ctx ended first;
// the rest stays in the streams for another data plane. Call it after Run has returned.
func (f *Forwarder) Flush(ctx context.Context) error {
	if err := f.drainSpill(ctx); err != nil {
		n := f.opts.Spill.Len()
		f.log.Error("settlement records held in memory could not be delivered; lost", "records", n, "err", err)
		return fmt.Errorf("settle: flush: %d spilled records undelivered: %w", n, err)
	}
	var errs []error
	for _, o := range f.outboxes {
		if err := f.flush(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("settle: flush %s: %w", o.name, err))
		}
	}
	return errors.Join(errs...)
}

// flush drains one outbox stream (Flush).
func (f *Forwarder) flush(ctx context.Context, o outbox) error {
	if err := f.ensureGroup(ctx, o); err != nil {
		return err
	}
	ictx, cancel := f.redisCtx(ctx, 0)
	info, err := f.rdb.XInfoStream(ictx, o.name).Result()
	cancel()
	if err != nil {
		return err
	}
	mark := info.LastGeneratedID
	lastClaim := time.Time{}
	for {
		msgs, fresh, err := f.read(ctx, o, &lastClaim, -1, true)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		if err := f.forward(ctx, o, msgs); err != nil {
			return err
		}
		if fresh && compareIDs(msgs[len(msgs)-1].ID, mark) >= 0 {
			return nil
		}
	}
}

// compareIDs orders two stream ids ("<ms>-<seq>").
func compareIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	for _, p := range [][2]string{{am, bm}, {as, bs}} {
		x, _ := strconv.ParseUint(p[0], 10, 64)
		y, _ := strconv.ParseUint(p[1], 10, 64)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func (f *Forwarder) ensureGroup(ctx context.Context, o outbox) error {
	ctx, cancel := f.redisCtx(ctx, 0)
	defer cancel()
	err := f.rdb.XGroupCreateMkStream(ctx, o.name, group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group: %w", err)
	}
	return nil
}

// read returns the next batch: own pending entries first (when ownPending says there may be some), then
// (at most every ClaimMinIdle/4) stale entries claimed from other consumers, then new entries (blocking
// up to block; -1: not at all). fresh reports that the batch holds new entries.
func (f *Forwarder) read(ctx context.Context, o outbox, lastClaim *time.Time, block time.Duration, ownPending bool) (msgs []redis.XMessage, fresh bool, err error) {
	count := int64(f.opts.BatchSize)
	if ownPending {
		own, err := f.readGroup(ctx, o, "0", count, -1)
		if err != nil {
			return nil, false, err
		}
		if len(own) > 0 {
			return own, false, nil
		}
	}
	if time.Since(*lastClaim) >= f.opts.ClaimMinIdle/4 {
		*lastClaim = time.Now()
		cctx, cancel := f.redisCtx(ctx, 0)
		claimed, _, err := f.rdb.XAutoClaim(cctx, &redis.XAutoClaimArgs{Stream: o.name, Group: group,
			MinIdle: f.opts.ClaimMinIdle, Start: "0-0", Count: count, Consumer: f.opts.NodeID}).Result()
		cancel()
		if err != nil {
			return nil, false, fmt.Errorf("claim stale outbox entries: %w", err)
		}
		if len(claimed) > 0 {
			f.log.Info("claimed stale settlement entries", "stream", o.name, "count", len(claimed))
			return claimed, false, nil
		}
	}
	msgs, err = f.readGroup(ctx, o, ">", count, block)
	return msgs, true, err
}

func (f *Forwarder) readGroup(ctx context.Context, o outbox, id string, count int64, block time.Duration) ([]redis.XMessage, error) {
	rctx, cancel := f.redisCtx(ctx, block)
	res, err := f.rdb.XReadGroup(rctx, &redis.XReadGroupArgs{Group: group, Consumer: f.opts.NodeID,
		Streams: []string{o.name, id}, Count: count, Block: block}).Result()
	cancel()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOGROUP") {
			if gerr := f.ensureGroup(ctx, o); gerr != nil {
				return nil, gerr
			}
			return nil, nil
		}
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	var out []redis.XMessage
	for _, s := range res {
		out = append(out, s.Messages...)
	}
	return out, nil
}

// entry is a decoded outbox entry.
type entry struct {
	id   string
	rec  *settlementv1.SettlementRecord
	hold admission.Hold
}

// drainSpill delivers every spilled record straight to the control plane, retrying until it answers or
// ctx ends (what is left stays spilled), then refunds the delivered records' holds; holds Redis cannot
// refund yet stay owed for the next call. Only a delivery failure is returned; a refund failure is logged.
func (f *Forwarder) drainSpill(ctx context.Context) error {
	sp := f.opts.Spill
	if sp == nil {
		return nil
	}
	for {
		batch := sp.take(f.opts.BatchSize)
		if len(batch) == 0 {
			break
		}
		f.log.Warn("delivering settlement records Redis did not take straight to the control plane", "records", len(batch))
		n, err := f.deliver(ctx, batch,
			func(es []entry, resp *settlementv1.SettleResponse) error {
				o := make([]owed, len(es))
				for i, e := range es {
					o[i] = owed{e: e, resp: resp}
				}
				sp.owe(o)
				return nil
			},
			func(e entry, reason error) error {
				// It cannot go to the dead-letter stream (Redis refused it already): logged whole, dropped.
				b, _ := marshalRecord(e.rec)
				f.log.Error("control plane refused spilled settlement record; dropped", "request_id", e.rec.GetRequestId(),
					"record_base64", b, "err", reason)
				f.deadLettered.Inc()
				sp.owe([]owed{{e: e}}) // its hold is refunded all the same
				return nil
			})
		if err != nil {
			sp.putBack(batch[n:])
			return err
		}
	}
	if err := f.refundOwed(ctx); err != nil {
		f.log.Warn("refund holds of delivered spilled records; retrying later", "owed", sp.Owed(), "err", err)
	}
	return nil
}

// refundOwed runs the settle script for delivered spilled records (no stream entry: refund only), one
// call per control-plane answer and shard, so the answer still refreshes the cost_used mirror.
func (f *Forwarder) refundOwed(ctx context.Context) error {
	sp := f.opts.Spill
	for {
		o := sp.takeOwed(f.opts.BatchSize)
		if len(o) == 0 {
			return nil
		}
		for i := 0; i < len(o); {
			j := i + 1
			for j < len(o) && o[j].resp == o[i].resp && o[j].e.hold.Tag == o[i].e.hold.Tag {
				j++
			}
			es := make([]entry, j-i)
			for k := range es {
				es[k] = o[i+k].e
			}
			if err := f.finish(ctx, es, o[i].resp); err != nil {
				sp.oweFront(o[i:])
				return err
			}
			i = j
		}
	}
}

// forward settles one batch of entries of outbox o, retrying until the control plane answers or ctx ends.
// Every entry's hold names keys of the stream's shard (the Recorder appended it there).
func (f *Forwarder) forward(ctx context.Context, o outbox, msgs []redis.XMessage) error {
	entries := make([]entry, 0, len(msgs))
	for _, m := range msgs {
		if m.Values == nil { // deleted from the stream while pending: nothing left to settle
			if err := f.finish(ctx, []entry{{id: m.ID, hold: admission.Hold{Tag: o.tag}}}, nil); err != nil {
				return err
			}
			continue
		}
		rec, hold, err := DecodeEntry(m.Values)
		if err != nil {
			f.log.Error("undecodable settlement outbox entry; dead-lettered", "stream", o.name, "id", m.ID, "err", err)
			if err := f.deadLetter(ctx, entry{id: m.ID, hold: admission.Hold{Tag: o.tag}}, m.Values, err); err != nil {
				return err
			}
			continue
		}
		hold.Tag = o.tag
		entries = append(entries, entry{id: m.ID, rec: rec, hold: hold})
	}
	if len(entries) == 0 {
		return nil
	}
	_, err := f.deliver(ctx, entries,
		func(es []entry, resp *settlementv1.SettleResponse) error { return f.finish(ctx, es, resp) },
		func(e entry, reason error) error { return f.deadLetterEntry(ctx, e, reason) })
	return err
}

// deliver settles entries with the control plane: as one batch or, when the control plane refuses the
// batch as invalid, one record at a time, so one bad record does not block the rest. answered gets every
// settled batch with its answer; refused gets each record refused on its own. It returns how many entries
// were dealt with before an error (the rest are untouched).
func (f *Forwarder) deliver(ctx context.Context, entries []entry, answered func([]entry, *settlementv1.SettleResponse) error,
	refused func(entry, error) error) (int, error) {
	resp, err := f.settle(ctx, entries)
	switch {
	case err == nil:
		if err := answered(entries, resp); err != nil {
			return 0, err
		}
		return len(entries), nil
	case status.Code(err) != codes.InvalidArgument:
		return 0, err
	case len(entries) == 1:
		if err := refused(entries[0], err); err != nil {
			return 0, err
		}
		return 1, nil
	}
	for i := range entries {
		if _, err := f.deliver(ctx, entries[i:i+1], answered, refused); err != nil {
			return i, err
		}
	}
	return len(entries), nil
}

// settle calls Settle until it answers, ctx ends, or the control plane refuses the batch as invalid.
func (f *Forwarder) settle(ctx context.Context, entries []entry) (*settlementv1.SettleResponse, error) {
	req := &settlementv1.SettleRequest{NodeId: f.opts.NodeID, Records: make([]*settlementv1.SettlementRecord, len(entries))}
	for i, e := range entries {
		req.Records[i] = e.rec
	}
	for attempt := 1; ; attempt++ {
		cc, endpoint := f.cp.Current()
		callCtx, cancel := context.WithTimeout(ctx, f.opts.RPCTimeout)
		resp, err := settlementv1.NewSettlementServiceClient(cc).Settle(callCtx, req)
		cancel()
		if err == nil {
			return resp, nil
		}
		if status.Code(err) == codes.InvalidArgument {
			return nil, err
		}
		f.failures.Inc()
		f.cp.Rotate()
		if attempt == 1 || attempt%20 == 0 {
			f.log.Warn("settle call failed; retrying", "endpoint", endpoint, "records", len(entries), "attempt", attempt, "err", err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("settle %d records: %w (last error: %v)", len(entries), ctx.Err(), err)
		}
		if !sleep(ctx, f.cp.Backoff(attempt)) {
			return nil, fmt.Errorf("settle %d records: %w (last error: %v)", len(entries), ctx.Err(), err)
		}
	}
}

// finish runs the settle script for answered entries, all of one shard (their holds' tag): mirror
// refresh, then ack + refund + delete. resp may be nil (entries that need only acknowledging, or that were
// dead-lettered: their holds are refunded all the same, since they will never settle).
//
// A quota's mirror lives in its organisation's current shard: the mirrors of the entries' shard are
// refreshed in the same script, the others (the answer names scopes of records of another shard only for
// records appended before a change of shards) each by a script of their own, whose failure is only
// logged (a mirror is a cache; the snapshot's cost_used is its floor).
func (f *Forwarder) finish(ctx context.Context, entries []entry, resp *settlementv1.SettleResponse) error {
	var tag string
	if len(entries) > 0 {
		tag = entries[0].hold.Tag
	}
	mirrors := f.mirrors(entries, resp)
	keys := []string{f.streams.Outbox(tag)}
	args := []any{group, int64(f.opts.MirrorTTL / time.Second)}
	own := mirrors[tag]
	delete(mirrors, tag)
	keys = append(keys, own.keys...)
	args = append(args, len(own.keys))
	args = append(args, own.vals...)
	args = append(args, len(entries))
	var ids []string
	inserted := map[string]bool{}
	for _, r := range resp.GetResults() {
		if r.GetInserted() {
			inserted[r.GetRequestId()] = true
		}
	}
	k := admission.Keys{Prefix: f.opts.Prefix, Tag: tag}
	for _, e := range entries {
		var tpmDelta int64
		if e.rec != nil {
			ids = append(ids, e.rec.GetRequestId())
			if e.hold.Tokens > 0 {
				tpmDelta = totalTokens(e.rec.GetTokens()) - e.hold.Tokens
			}
		}
		for _, s := range e.hold.Scopes {
			keys = append(keys, k.PendingIn(s.Scope, s.ID, s.Period))
		}
		mode := admission.HoldMode(e.hold)
		if mode == 2 {
			for _, s := range e.hold.Scopes {
				keys = append(keys, k.Holds(s.Scope, s.ID, s.Period))
			}
		}
		// The key's token window, then the scopes' (team, org, user TPM limits).
		keys = append(keys, k.TPM(e.hold.KeyID, e.hold.Window))
		for _, s := range e.hold.RateScopes {
			keys = append(keys, k.ScopeTPM(s.Scope, s.ID, e.hold.Window))
		}
		keys = append(keys, k.Hold(e.hold.RequestID))
		args = append(args, e.id, e.hold.Micros, len(e.hold.Scopes), 1+len(e.hold.RateScopes), tpmDelta, mode, e.hold.Member())
	}
	if err := f.runSettle(ctx, keys, args); err != nil {
		// The entries stay pending and are settled again (as duplicates) later; the refund happens then.
		return fmt.Errorf("acknowledge and refund %d entries: %w", len(entries), err)
	}
	for t, m := range mirrors {
		keys := append([]string{f.streams.Outbox(t)}, m.keys...)
		args := append([]any{group, int64(f.opts.MirrorTTL / time.Second), len(m.keys)}, m.vals...)
		if err := f.runSettle(ctx, keys, append(args, 0)); err != nil {
			f.log.Warn("refresh cost_used mirrors of another shard", "tag", t, "mirrors", len(m.keys), "err", err)
		}
	}
	if resp != nil {
		var n uint64
		for _, id := range ids {
			if inserted[id] {
				n++
			}
		}
		f.settled.Add(float64(n))
		f.duplicates.Add(float64(uint64(len(ids)) - n))
	}
	if f.opts.OnRefunded != nil && len(ids) > 0 {
		f.opts.OnRefunded(ids)
	}
	return nil
}

// runSettle runs settle.lua, trying up to five times.
func (f *Forwarder) runSettle(ctx context.Context, keys []string, args []any) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		sctx, cancel := f.redisCtx(ctx, 0)
		err = settleScript.Run(sctx, f.rdb, keys, args...).Err()
		cancel()
		if err == nil {
			return nil
		}
		if !sleep(ctx, time.Duration(attempt+1)*100*time.Millisecond) {
			break
		}
	}
	return err
}

// shardMirrors are the cost_used mirror keys of one shard with their values (settle.lua's ARGV pairs).
type shardMirrors struct {
	keys []string
	vals []any
}

// mirrors sorts the answer's cost_used values by the shard of their quota's organisation. The answer
// names the scopes of the batch's records; a scope's organisation is its record's (a scope no record
// names — not in a well-formed answer — is skipped when there are several shards).
func (f *Forwarder) mirrors(entries []entry, resp *settlementv1.SettleResponse) map[string]shardMirrors {
	out := map[string]shardMirrors{}
	quotas := resp.GetQuotas()
	if len(quotas) == 0 {
		return out
	}
	type scopeID struct {
		scope vocab.Scope
		id    int64
	}
	var orgOf map[scopeID]int64
	if f.shards.N() > 1 {
		orgOf = map[scopeID]int64{}
		for _, e := range entries {
			r := e.rec
			if r == nil {
				continue
			}
			orgOf[scopeID{vocab.ScopeOrg, r.GetOrgId()}] = r.GetOrgId()
			orgOf[scopeID{vocab.ScopeUser, r.GetUserId()}] = r.GetOrgId()
			orgOf[scopeID{vocab.ScopeKey, r.GetApiKeyId()}] = r.GetOrgId()
			if r.TeamId != nil {
				orgOf[scopeID{vocab.ScopeTeam, r.GetTeamId()}] = r.GetOrgId()
			}
		}
	}
	for _, q := range quotas {
		micros, err := costUsedMicros(q.GetCostUsed())
		if err != nil {
			f.log.Warn("unreadable cost_used in Settle answer", "scope", q.GetScope(), "id", q.GetScopeId(), "err", err)
			continue
		}
		sc := scopeOf(q.GetScope())
		tag := ""
		if orgOf != nil {
			org, ok := orgOf[scopeID{sc, q.GetScopeId()}]
			if !ok {
				f.log.Warn("Settle answer names a quota of no record in the batch; mirror not refreshed", "scope", sc, "id", q.GetScopeId())
				continue
			}
			tag = f.shards.Tag(org)
		}
		m := out[tag]
		// A periodic quota's answer names its period: the mirror is per period (docs/budgets.md).
		m.keys = append(m.keys, admission.Keys{Prefix: f.opts.Prefix, Tag: tag}.UsedIn(sc, q.GetScopeId(), q.GetPeriodId()))
		// With its adjustment epoch: settle.lua lets a newer epoch replace the mirror (a credit) and
		// ignores an older one (docs/settlement.md, "Adjustment epochs").
		m.vals = append(m.vals, max(micros, 0), max(q.GetAdjustEpoch(), 0))
		out[tag] = m
	}
	return out
}

// deadLetter copies an entry to the dead-letter stream with the reason, then acknowledges it (refunding
// its hold if it could be decoded).
func (f *Forwarder) deadLetter(ctx context.Context, e entry, values map[string]any, reason error) error {
	dv := []any{"reason", reason.Error(), "id", e.id, "tag", e.hold.Tag, "node", f.opts.NodeID}
	for k, v := range values {
		dv = append(dv, "f_"+k, v)
	}
	if err := f.deadXAdd(ctx, dv); err != nil {
		return fmt.Errorf("dead-letter outbox entry %s: %w", e.id, err)
	}
	f.deadLettered.Inc()
	e.rec = nil
	return f.finish(ctx, []entry{e}, nil)
}

func (f *Forwarder) deadLetterEntry(ctx context.Context, e entry, reason error) error {
	f.log.Error("control plane refused settlement record; dead-lettered", "request_id", e.rec.GetRequestId(), "err", reason)
	b, err := marshalRecord(e.rec)
	if err != nil {
		return err
	}
	dv := []any{"reason", reason.Error(), "id", e.id, "tag", e.hold.Tag, "node", f.opts.NodeID, "f_" + fieldRecord, b, "f_" + fieldHold, admission.EncodeHold(e.hold)}
	if err := f.deadXAdd(ctx, dv); err != nil {
		return fmt.Errorf("dead-letter outbox entry %s: %w", e.id, err)
	}
	f.deadLettered.Inc()
	return f.finish(ctx, []entry{e}, nil)
}

// deadXAdd appends values to the dead-letter stream.
func (f *Forwarder) deadXAdd(ctx context.Context, values []any) error {
	ctx, cancel := f.redisCtx(ctx, 0)
	defer cancel()
	return f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.streams.Dead(), Values: values}).Err()
}

func marshalRecord(rec *settlementv1.SettlementRecord) ([]byte, error) {
	b, err := proto.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record %s: %w", rec.GetRequestId(), err)
	}
	return b, nil
}

func scopeOf(s string) vocab.Scope { return vocab.Scope(s) }

func totalTokens(t *settlementv1.TokenCounts) int64 {
	return t.GetInput() + t.GetOutput() + t.GetCacheRead() + t.GetCacheCreation_5M() + t.GetCacheCreation_30M() +
		t.GetCacheCreation_1H() + t.GetImageOutput()
}

// sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// costUsedMicros reads a quota's cost_used from a Settle answer (Postgres numeric text, as many
// fraction digits as the sums of costs have) as integer micro-dollars with the one money parser
// (shared/pricing), rounding half up and saturating at the int64 maximum; a negative amount is refused.
func costUsedMicros(s string) (int64, error) {
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("cost_used %.40q: negative", s)
	}
	d, err := pricing.ParseStoredDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("cost_used: %w", err)
	}
	m, err := pricing.ToMicros(d)
	if errors.Is(err, pricing.ErrMicrosOverflow) {
		return math.MaxInt64, nil
	}
	return m, err
}
