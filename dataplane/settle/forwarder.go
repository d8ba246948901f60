package settle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/cpclient"
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

// redisCtx bounds one Redis call: RedisTimeout, plus extra (a blocking read's block time).
func (f *Forwarder) redisCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.opts.RedisTimeout+max(extra, 0))
}

// Close closes the control-plane connections.
func (f *Forwarder) Close() error { return f.cp.Close() }

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
