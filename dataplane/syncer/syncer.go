// Package syncer keeps a data plane's snapshot: it holds a SnapshotService.Watch stream to one of the
// control-plane endpoints (rotating to the next on failure, reconnecting with capped, jittered
// exponential backoff), compiles every snapshot it receives with shared/snapshot.Compile, applies every
// delta with shared/snapshot.ApplyDelta, and swaps the new compiled form in whole behind an
// atomic.Pointer. A snapshot or delta that fails to compile, or a snapshot older than the one held, is
// dropped and the last good one stays; so does everything while no control plane answers. A delta whose
// base is not the held version reopens the stream from the held version; a refused delta reopens it
// asking for a full snapshot.
package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/tollgate/tollgate/dataplane/cpclient"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// Options configure a Syncer.
type Options struct {
	// ControlPlane is the control-plane client's configuration: endpoints (tried in order, rotating on
	// failure), token, TLS. Its back-off bounds the reconnect delay (defaults 200ms and 10s): the delay
	// doubles per consecutive failure up to BackoffMax, with jitter in [d/2, d]; a stream that was
	// established resets it.
	ControlPlane cpclient.Options
	// NodeID names this data plane to the control plane.
	NodeID string
	// MaxSnapshotBytes bounds one received snapshot message (default 256 MiB).
	MaxSnapshotBytes int
	// Compile validates and indexes a snapshot (default snapshot.Compile).
	Compile func(*snapshotv1.Snapshot) (*snapshot.Compiled, error)
	// ApplyDelta applies a delta to the held compiled form (default snapshot.ApplyDelta).
	ApplyDelta func(*snapshot.Compiled, *snapshotv1.SnapshotDelta) (*snapshot.Compiled, error)
}

// Syncer receives snapshots and serves the latest good one. Create it with New, run it with Run.
type Syncer struct {
	opts Options
	log  *slog.Logger
	cp   *cpclient.Client

	current atomic.Pointer[snapshot.Compiled]
	// changed is closed and replaced at every swap, waking Wait callers.
	mu      sync.Mutex
	changed chan struct{}

	endpoint  atomic.Value // string: the endpoint of the open stream, "" when none
	connected prometheus.Gauge
	rejects   prometheus.Counter
	swaps     prometheus.Counter
	streams   *prometheus.CounterVec
	// received is the unix-nano time the last snapshot arrived (0: none yet); lost the unix-nano time the
	// last Watch stream closed (or the Syncer was built), 0 while a stream is established.
	received, lost atomic.Int64
	// swapped counts swaps (for Run: did a stream make progress).
	swapped atomic.Int64
	// wantFull is set when a delta was refused: the next stream asks for a full snapshot; the next full
	// snapshot received clears it.
	wantFull atomic.Bool
}

// New builds a Syncer and its client connections (which dial lazily), registering its metrics on reg:
// tollgate_snapshot_version, tollgate_snapshot_received_timestamp_seconds,
// tollgate_snapshot_config_changed_timestamp_seconds, tollgate_snapshot_disconnected_seconds,
// tollgate_snapshot_rejects_total, tollgate_snapshot_swaps_total, tollgate_snapshot_connected and
// tollgate_snapshot_streams_total (docs/observability.md).
func New(opts Options, log *slog.Logger, reg prometheus.Registerer) (*Syncer, error) {
	if opts.ControlPlane.BackoffBase <= 0 {
		opts.ControlPlane.BackoffBase = 200 * time.Millisecond
	}
	if opts.ControlPlane.BackoffMax <= 0 {
		opts.ControlPlane.BackoffMax = 10 * time.Second
	}
	if opts.MaxSnapshotBytes <= 0 {
		opts.MaxSnapshotBytes = 256 << 20
	}
	if opts.Compile == nil {
		opts.Compile = snapshot.Compile
	}
	if opts.ApplyDelta == nil {
		opts.ApplyDelta = snapshot.ApplyDelta
	}
	cp, err := cpclient.New(opts.ControlPlane,
		// Ping an idle connection every 20 s and drop it when a ping goes unanswered for 10 s, so a
		// control plane that vanished without closing the stream (host down, network partition) is
		// noticed and the syncer moves on. The server permits pings every 10 s.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxSnapshotBytes)),
	)
	if err != nil {
		return nil, fmt.Errorf("syncer: %w", err)
	}
	s := &Syncer{opts: opts, log: log, cp: cp, changed: make(chan struct{})}
	s.endpoint.Store("")
	s.lost.Store(time.Now().UnixNano())
	f := promauto.With(reg)
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_snapshot_version", Help: "Version of the snapshot being served (0: none yet)."}, func() float64 {
		if c := s.current.Load(); c != nil {
			return float64(c.Version)
		}
		return 0
	})
	// The configuration's age is a timestamp, not a rising "age" gauge: a configuration nobody changed
	// for a week is not a fault. Staleness is tollgate_snapshot_disconnected_seconds.
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_snapshot_config_changed_timestamp_seconds",
		Help: "Unix time the control plane built the snapshot being served, i.e. when the configuration last changed (0: none yet)."}, func() float64 {
		if c := s.current.Load(); c != nil && !c.BuiltAt.IsZero() {
			return float64(c.BuiltAt.UnixNano()) / 1e9
		}
		return 0
	})
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_snapshot_received_timestamp_seconds",
		Help: "Unix time the last snapshot arrived from a control plane (0: none yet)."}, func() float64 {
		return float64(s.received.Load()) / 1e9
	})
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_snapshot_disconnected_seconds",
		Help: "Seconds since the data plane last had a Watch stream open, during which configuration changes cannot reach it (0 while connected: the control plane pushes every change). Alert when it grows."}, func() float64 {
		if at := s.lost.Load(); at != 0 {
			return max(0, time.Since(time.Unix(0, at)).Seconds())
		}
		return 0
	})
	s.rejects = f.NewCounter(prometheus.CounterOpts{Name: "tollgate_snapshot_rejects_total", Help: "Received snapshots and deltas dropped because they failed to compile; the previous one stays."})
	s.swaps = f.NewCounter(prometheus.CounterOpts{Name: "tollgate_snapshot_swaps_total", Help: "Snapshots and deltas compiled and swapped in."})
	s.connected = f.NewGauge(prometheus.GaugeOpts{Name: "tollgate_snapshot_connected", Help: "1 while a Watch stream to a control plane is open."})
	s.streams = f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_snapshot_streams_total", Help: "Watch streams ended, by endpoint."}, []string{"endpoint"})
	return s, nil
}

// Current returns the snapshot being served, or nil until the first arrives. It never blocks; the result
// is immutable.
func (s *Syncer) Current() *snapshot.Compiled { return s.current.Load() }

// Version returns the version being served; ok is false until the first snapshot arrives.
func (s *Syncer) Version() (version int64, ok bool) {
	if c := s.current.Load(); c != nil {
		return c.Version, true
	}
	return 0, false
}

// Endpoint returns the control-plane address of the open Watch stream, or "" when none is open.
func (s *Syncer) Endpoint() string { return s.endpoint.Load().(string) }

// Wait blocks until the snapshot being served has a version of at least min, and returns it.
func (s *Syncer) Wait(ctx context.Context, min int64) (*snapshot.Compiled, error) {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if c := s.current.Load(); c != nil && c.Version >= min {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for snapshot version %d: %w", min, ctx.Err())
		case <-ch:
		}
	}
}

// Close releases the client connections. Call it after Run has returned.
func (s *Syncer) Close() { _ = s.cp.Close() }

// Run watches until ctx ends, then returns nil. It does not return on control-plane failures: it keeps
// the last good snapshot and reconnects.
func (s *Syncer) Run(ctx context.Context) error {
	failures, reopens := 0, 0
	for {
		cc, ep := s.cp.Current()
		swapped := s.swapped.Load()
		established, err := s.watch(ctx, cc, ep)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errReopen) {
			// The stream is sound but must restart from what is held: same endpoint, at once unless the
			// previous stream also ended so without swapping anything in (a control plane that keeps
			// sending unusable deltas is retried with the back-off).
			if s.swapped.Load() != swapped {
				reopens = 0
			}
			reopens++
			s.log.Info("snapshot watch reopened", "endpoint", ep, "err", err, "held_version", s.held(), "want_full", s.wantFull.Load())
			if reopens > 1 && !sleep(ctx, s.cp.Backoff(reopens-1)) {
				return nil
			}
			continue
		}
		reopens = 0
		if established {
			failures = 0
		}
		failures++
		delay := s.cp.Backoff(failures)
		level := slog.LevelWarn
		if established {
			level = slog.LevelInfo // a stream that worked and ended: usually a control plane restarting
		}
		next := s.cp.Rotate()
		s.log.Log(ctx, level, "snapshot watch ended; reconnecting", "endpoint", ep, "err", err,
			"next_endpoint", next, "retry_in", delay.String(), "held_version", s.held())
		if !sleep(ctx, delay) {
			return nil
		}
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// errReopen ends a stream that must be reopened from the held version (a delta of another base, or a
// refused delta: then with want_full).
var errReopen = errors.New("reopen the watch")

func (s *Syncer) held() int64 {
	v, _ := s.Version()
	return v
}

// HeaderVersion is the response header a control plane sends when a Watch stream is established, before
// any snapshot; it carries the version the control plane holds.
const HeaderVersion = "tollgate-snapshot-version"

// watch holds one Watch stream on endpoint ep (connection cc) until it fails; established reports
// whether the control plane accepted the stream (it sends its header at once, before any snapshot, which
// may never come when the versions already agree).
func (s *Syncer) watch(ctx context.Context, cc *grpc.ClientConn, ep string) (established bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.streams.WithLabelValues(ep).Inc()
	stream, err := snapshotv1.NewSnapshotServiceClient(cc).Watch(ctx,
		&snapshotv1.WatchRequest{NodeId: s.opts.NodeID, KnownVersion: s.held(), AcceptDeltas: true, WantFull: s.wantFull.Load()})
	if err != nil {
		return false, fmt.Errorf("open watch on %s: %w", ep, err)
	}
	md, err := stream.Header()
	if err != nil {
		return false, fmt.Errorf("watch on %s: %w", ep, err)
	}
	// The control plane sends its header at once, so the stream counts as established before any
	// snapshot (none comes while the versions agree). Without the header (trailers only: refused, e.g. a
	// wrong token; or a server that does not send it), the first snapshot establishes it.
	if len(md.Get(HeaderVersion)) > 0 {
		established = true
		s.established(ep)
	}
	defer func() {
		s.endpoint.Store("")
		s.connected.Set(0)
		s.lost.Store(time.Now().UnixNano())
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return established, fmt.Errorf("watch on %s: %w", ep, err)
		}
		if !established {
			established = true
			s.established(ep)
		}
		if d := resp.GetDelta(); d != nil {
			if err := s.applyDelta(d, ep); err != nil {
				return established, err
			}
			continue
		}
		s.wantFull.Store(false)
		s.apply(resp.GetSnapshot(), ep)
	}
}

func (s *Syncer) established(ep string) {
	s.endpoint.Store(ep)
	s.connected.Set(1)
	s.lost.Store(0)
}

// apply compiles snap and swaps it in, unless it fails to compile or is older than the one held.
func (s *Syncer) apply(snap *snapshotv1.Snapshot, ep string) {
	s.received.Store(time.Now().UnixNano())
	held := s.current.Load()
	if held != nil && snap.GetVersion() < held.Version {
		// A lagging replica answered a reconnect with what it has; the newer one arrives from it shortly.
		s.log.Info("ignoring older snapshot", "endpoint", ep, "version", snap.GetVersion(), "held_version", held.Version)
		return
	}
	compiled, err := s.opts.Compile(snap)
	if err != nil {
		s.rejects.Inc()
		s.log.Error("snapshot rejected: it does not compile; serving the previous one", "endpoint", ep,
			"version", snap.GetVersion(), "held_version", s.held(), "err", err)
		return
	}
	s.swap(compiled, ep)
}

// applyDelta applies d to the held compiled form and swaps the result in. A delta of another base ends
// the stream to reopen it from the held version; one that fails to apply is counted as a reject, the held
// form stays, and the stream is reopened asking for a full snapshot.
func (s *Syncer) applyDelta(d *snapshotv1.SnapshotDelta, ep string) error {
	s.received.Store(time.Now().UnixNano())
	held := s.current.Load()
	if held == nil || d.GetBaseVersion() != held.Version {
		return fmt.Errorf("delta %d→%d does not apply to the held version %d: %w", d.GetBaseVersion(), d.GetVersion(), s.held(), errReopen)
	}
	compiled, err := s.opts.ApplyDelta(held, d)
	if err != nil {
		s.rejects.Inc()
		s.wantFull.Store(true)
		s.log.Error("snapshot delta rejected: it does not compile; serving the previous snapshot", "endpoint", ep,
			"base_version", d.GetBaseVersion(), "version", d.GetVersion(), "held_version", held.Version, "err", err)
		return fmt.Errorf("delta %d→%d refused: %w", d.GetBaseVersion(), d.GetVersion(), errReopen)
	}
	s.swap(compiled, ep)
	return nil
}

// swap makes compiled the snapshot served and wakes Wait callers. The swap is counted before it is
// published, so whoever sees the new version also sees it counted.
func (s *Syncer) swap(compiled *snapshot.Compiled, ep string) {
	s.swaps.Inc()
	s.swapped.Add(1)
	s.mu.Lock()
	s.current.Store(compiled)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.log.Info("snapshot swapped in", "endpoint", ep, "version", compiled.Version)
}
