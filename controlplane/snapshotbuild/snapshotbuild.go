// Package snapshotbuild keeps a control plane's published snapshot in step with Postgres. A dedicated
// connection LISTENs on store.NotifyChannel; each notification schedules a debounced rebuild, and a
// periodic revision check catches anything the listener missed (it reconnects with backoff when it
// drops, and rebuilds on every reconnect). The first rebuild reads one consistent state whole
// (store.ReadSnapshot) and compiles it with shared/snapshot.Compile; later ones read only the changes since
// the published version (store.ReadSnapshotChanges), turn them into a delta and the next whole snapshot
// (makeDelta) and pass the delta through snapshot.ApplyDelta, the data planes' own apply. A version is published
// (with its delta when there is one) only when it compiles and is newer than the last one published. Because the version is Postgres's config_revision, every replica
// publishes the same version for the same state.
package snapshotbuild

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/backoff"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// ListenerApplicationName is the application_name of the LISTEN connection (visible in pg_stat_activity).
const ListenerApplicationName = "tollgate-snapshot-listener"

// Publisher receives compiled-and-validated snapshots; *watch.Server satisfies it. Publish reports whether
// the snapshot became the latest.
type Publisher interface {
	Publish(*snapshotv1.Snapshot) bool
}

// DeltaPublisher is a Publisher that can also serve deltas; *watch.Server satisfies it. PublishDelta
// publishes snap (the whole snapshot of d.Version) together with d, the delta from the version published
// before it.
type DeltaPublisher interface {
	Publisher
	PublishDelta(snap *snapshotv1.Snapshot, d *snapshotv1.SnapshotDelta) bool
}

// Options tune a Builder. Zero values take the defaults noted.
type Options struct {
	// Debounce is the shortest time between two notification-triggered rebuilds. A notification that
	// comes at least Debounce after the previous rebuild started rebuilds at once (an isolated admin
	// change lands in milliseconds); one that comes sooner waits for the window to end, and every
	// notification arriving meanwhile shares that one rebuild. Later notifications never push it back, so
	// a steady stream of commits cannot starve rebuilds. 0 rebuilds on every notification.
	Debounce time.Duration
	// Interval is the safety-net period of the revision check (default 5s).
	Interval time.Duration
	// ListenRetryMax caps the listener's reconnect backoff (default 5s).
	ListenRetryMax time.Duration
	// Compile validates and indexes a snapshot before it is published (default snapshot.Compile).
	Compile func(*snapshotv1.Snapshot) (*snapshot.Compiled, error)
	// Now stamps built_at (default time.Now).
	Now func() time.Time
	// Bounds are the settlement bounds shipped in every snapshot (zero: pricing.DefaultBounds).
	Bounds pricing.Bounds
	// QuotaRefresh is how often a delta build reads the quotas when none was written, refreshing the
	// cost_used and period they carry (default 1m). Reading them at every change would make each change
	// cost as much as the number of quotas.
	QuotaRefresh time.Duration
	// DeletionRetention is how long deleted keys are remembered for deltas (default 24h); a data plane
	// holding a version older than that gets a whole snapshot. Pruned at each safety-net check.
	DeletionRetention time.Duration
}

// Builder rebuilds and publishes snapshots. Create it with New and run it with Run.
type Builder struct {
	pool    *pgxpool.Pool
	secrets store.SecretOpener
	pub     Publisher
	log     *slog.Logger
	opts    Options

	trigger   chan struct{}
	published atomic.Int64
	rejected  int64 // version whose data failed to build or compile; only the Run goroutine touches it
	held      *held // the published version's whole snapshot and compiled form; only the Run goroutine touches it
	listening atomic.Bool
	running   sync.Mutex

	statusMu  sync.Mutex
	rejection *Rejection // the latest rejection while the configuration is failing; nil once a newer version publishes

	builds      *prometheus.CounterVec
	buildKinds  *prometheus.CounterVec
	buildTime   prometheus.Histogram
	listenUp    prometheus.Gauge
	reconnects  prometheus.Counter
	rejectedVer prometheus.Gauge
	failing     prometheus.Gauge
}

// Rejection describes a configuration revision that was not published.
type Rejection struct {
	Version int64 `json:"version"`
	// Stage is "build" (the data could not be read into a snapshot) or "compile".
	Stage string    `json:"stage"`
	At    time.Time `json:"at"`
	Error string    `json:"error"`
	// Problems name the offending rows (empty when the failure names none, e.g. a build failure).
	Problems []*snapshot.ElementError `json:"problems"`
}

// Status is what an operator needs to know about publication.
type Status struct {
	// PublishedVersion is the version data planes are being served.
	PublishedVersion int64 `json:"published_version"`
	// Failing is true while the latest configuration revision fails to build or compile: admin changes
	// made since do not reach the data planes until the offending rows are fixed.
	Failing bool `json:"failing"`
	// Rejected is the latest rejection while Failing.
	Rejected *Rejection `json:"rejected,omitempty"`
}

// Status reports the published version and the current rejection, if any.
func (b *Builder) Status() Status {
	b.statusMu.Lock()
	defer b.statusMu.Unlock()
	st := Status{PublishedVersion: b.published.Load(), Failing: b.rejection != nil}
	if b.rejection != nil {
		r := *b.rejection
		st.Rejected = &r
	}
	return st
}

// New returns a Builder reading from pool, decrypting credentials with secrets and publishing to pub. It
// registers its metrics on reg.
func New(pool *pgxpool.Pool, secrets store.SecretOpener, pub Publisher, log *slog.Logger, reg prometheus.Registerer, opts Options) *Builder {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.ListenRetryMax <= 0 {
		opts.ListenRetryMax = 5 * time.Second
	}
	if opts.Compile == nil {
		opts.Compile = snapshot.Compile
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.QuotaRefresh <= 0 {
		opts.QuotaRefresh = time.Minute
	}
	if opts.DeletionRetention <= 0 {
		opts.DeletionRetention = 24 * time.Hour
	}
	f := promauto.With(reg)
	return &Builder{
		pool: pool, secrets: secrets, pub: pub, log: log, opts: opts,
		trigger: make(chan struct{}, 1),
		builds: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_snapshot_builds_total",
			Help: "Snapshot rebuilds by result: published, unchanged, rejected (data or compile failure; not published), error (database)."},
			[]string{"result"}),
		buildKinds: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_snapshot_build_reads_total",
			Help: "Snapshot rebuilds by how the database was read: full (every row) or delta (the changes since the published version)."},
			[]string{"kind"}),
		buildTime: f.NewHistogram(prometheus.HistogramOpts{Name: "tollgate_snapshot_build_seconds",
			Help: "Time to read and compile a snapshot.", Buckets: prometheus.DefBuckets}),
		listenUp: f.NewGauge(prometheus.GaugeOpts{Name: "tollgate_snapshot_listener_up",
			Help: "1 while the LISTEN connection for configuration changes is established."}),
		reconnects: f.NewCounter(prometheus.CounterOpts{Name: "tollgate_snapshot_listener_reconnects_total",
			Help: "LISTEN connection losses and failed connection attempts (each followed by a reconnect)."}),
		rejectedVer: f.NewGauge(prometheus.GaugeOpts{Name: "tollgate_snapshot_rejected_version",
			Help: "Latest configuration revision that was not published because it failed to build or compile (0: none)."}),
		failing: f.NewGauge(prometheus.GaugeOpts{Name: "tollgate_snapshot_compile_failing",
			Help: "1 while the latest configuration revision fails to build or compile, so admin changes do not reach data planes; alert on it."}),
	}
}

// Published returns the version of the last snapshot this builder published (0 before the first).
func (b *Builder) Published() int64 { return b.published.Load() }

// Listening reports whether the LISTEN connection is established.
func (b *Builder) Listening() bool { return b.listening.Load() }

// Trigger schedules a debounced rebuild, as a notification does. It never blocks.
func (b *Builder) Trigger() {
	select {
	case b.trigger <- struct{}{}:
	default:
	}
}

// Run builds and publishes the current state, then keeps rebuilding on notifications and periodic
// checks until ctx ends. It returns nil when ctx ends; it must not be called twice at once.
func (b *Builder) Run(ctx context.Context) error {
	if !b.running.TryLock() {
		return errors.New("snapshotbuild: Run called twice")
	}
	defer b.running.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.listen(ctx) }()
	defer wg.Wait()

	last := time.Now()
	b.rebuild(ctx)
	ticker := time.NewTicker(b.opts.Interval)
	defer ticker.Stop()
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-b.trigger:
			if fire != nil {
				continue // a rebuild is already scheduled; this notification shares it
			}
			if wait := b.opts.Debounce - time.Since(last); wait > 0 {
				timer = time.NewTimer(wait)
				fire = timer.C
				continue
			}
			last = time.Now()
			b.rebuild(ctx)
		case <-fire:
			timer, fire = nil, nil
			last = time.Now()
			b.rebuild(ctx)
		case <-ticker.C:
			b.prune(ctx)
			b.rebuild(ctx)
		}
	}
}

// rebuild publishes the current state when its revision is neither published nor known to be rejected.
func (b *Builder) rebuild(ctx context.Context) {
	rev, err := store.Revision(ctx, b.pool)
	if err != nil {
		if ctx.Err() == nil {
			b.builds.WithLabelValues("error").Inc()
			b.log.Warn("snapshot revision check failed", "err", err)
		}
		return
	}
	if rev <= b.published.Load() || rev == b.rejected {
		return
	}
	start := time.Now()
	if b.held != nil && b.rebuildDelta(ctx, rev, start) {
		return
	}
	snap, err := store.ReadSnapshot(ctx, b.pool, b.secrets)
	if err != nil {
		b.readFailed(ctx, rev, err)
		return
	}
	b.buildKinds.WithLabelValues("full").Inc()
	if snap.GetVersion() <= b.published.Load() {
		b.builds.WithLabelValues("unchanged").Inc()
		return
	}
	snap.BuiltAt = timestamppb.New(b.opts.Now())
	snap.SettlementBounds = b.bounds()
	compiled, err := b.opts.Compile(snap)
	if err != nil {
		b.reject(snap.GetVersion(), "compile", err)
		return
	}
	b.buildTime.Observe(time.Since(start).Seconds())
	if !b.pub.Publish(snap) {
		b.builds.WithLabelValues("unchanged").Inc()
		return
	}
	b.held = &held{snap: snap, compiled: compiled, deadlines: newDeadlines(snap.GetApiKeys()), quotasRead: start}
	b.markPublished(snap, start)
}

// rebuildDelta builds the next version from the changes since the held one, publishing the delta with
// the whole snapshot. It returns false when the database cannot name those changes (the caller reads a
// whole snapshot), true when it handled the rebuild, successfully or not.
func (b *Builder) rebuildDelta(ctx context.Context, rev int64, start time.Time) bool {
	h := b.held
	due := h.deadlines.due(b.opts.Now())

	now := b.opts.Now()
	refresh := now.Sub(h.quotasRead) >= b.opts.QuotaRefresh
	ch, err := store.ReadSnapshotChanges(ctx, b.pool, b.secrets, store.Since{Base: h.snap.GetVersion(), Recheck: due, Quotas: refresh})
	if errors.Is(err, store.ErrDeltaUnavailable) {
		b.log.Info("snapshot delta unavailable; reading a whole snapshot", "base", h.snap.GetVersion(), "err", err)
		return false
	}
	if err != nil {
		h.readd(due)
		b.readFailed(ctx, rev, err)
		return true
	}
	b.buildKinds.WithLabelValues("delta").Inc()
	if ch.Version <= b.published.Load() {
		h.readd(due)
		b.builds.WithLabelValues("unchanged").Inc()
		return true
	}
	d, next := makeDelta(h.snap, ch, timestamppb.New(b.opts.Now()), b.bounds())
	compiled, err := snapshot.ApplyDelta(h.compiled, d) // the data planes' own apply: the consistency gate
	if err != nil {
		h.readd(due)
		b.reject(ch.Version, "compile", err)
		return true
	}
	b.buildTime.Observe(time.Since(start).Seconds())
	var ok bool
	if dp, isDP := b.pub.(DeltaPublisher); isDP {
		ok = dp.PublishDelta(next, d)
	} else {
		ok = b.pub.Publish(next)
	}
	if !ok {
		h.readd(due)
		b.builds.WithLabelValues("unchanged").Inc()
		return true
	}
	b.held = &held{snap: next, compiled: compiled, deadlines: h.deadlines, quotasRead: h.quotasRead}
	if ch.Read.Quotas {
		b.held.quotasRead = now
	}
	b.held.deadlines.add(d.GetUpsertApiKeys())
	b.held.readd(due) // keys read again but unchanged (the database's clock had not reached the deadline)
	b.markPublished(next, start)
	return true
}

// readFailed handles a failed read of revision rev: a data failure rejects its version, a database
// failure is retried at the next change or check.
func (b *Builder) readFailed(ctx context.Context, rev int64, err error) {
	if ctx.Err() != nil {
		return
	}
	var dataErr *store.SnapshotDataError
	if errors.As(err, &dataErr) {
		b.reject(dataErr.Version, "build", err)
		return
	}
	b.builds.WithLabelValues("error").Inc()
	b.log.Warn("snapshot build failed; retrying at the next change or check", "revision", rev, "err", err)
}

func (b *Builder) bounds() *snapshotv1.SettlementBounds {
	bounds := b.opts.Bounds.OrDefault()
	return &snapshotv1.SettlementBounds{MaxRequestTokens: bounds.MaxRequestTokens,
		MaxRequestCost: pricing.FormatMicros(bounds.MaxRequestCostMicros)}
}

// published records snap as published.
func (b *Builder) markPublished(snap *snapshotv1.Snapshot, start time.Time) {
	b.published.Store(snap.GetVersion())
	b.statusMu.Lock()
	if b.rejection != nil && b.rejection.Version < snap.GetVersion() {
		b.rejection = nil
		b.failing.Set(0)
	}
	b.statusMu.Unlock()
	b.builds.WithLabelValues("published").Inc()
	b.log.Info("snapshot published", "version", snap.GetVersion(), "price_rules", len(snap.GetPriceRules()),
		"providers", len(snap.GetProviders()), "routes", len(snap.GetRoutes()), "api_keys", len(snap.GetApiKeys()),
		"build_ms", time.Since(start).Milliseconds())
}

// prune forgets the key deletions older than the retention (every replica does; it is idempotent).
func (b *Builder) prune(ctx context.Context) {
	if _, err := store.PruneConfigDeletions(ctx, b.pool, b.opts.DeletionRetention); err != nil && ctx.Err() == nil {
		b.log.Warn("pruning configuration deletions failed; retrying at the next check", "err", err)
	}
}

func (b *Builder) reject(version int64, stage string, err error) {
	b.rejected = version
	b.builds.WithLabelValues("rejected").Inc()
	b.rejectedVer.Set(float64(version))
	problems := snapshot.Problems(err)
	if problems == nil {
		problems = []*snapshot.ElementError{}
	}
	b.statusMu.Lock()
	b.rejection = &Rejection{Version: version, Stage: stage, At: b.opts.Now(), Error: err.Error(), Problems: problems}
	b.statusMu.Unlock()
	b.failing.Set(1)
	b.log.Error("snapshot not published: configuration does not "+stage+"; data planes keep the previous version",
		"version", version, "published_version", b.published.Load(), "err", err)
}

// listen holds the LISTEN connection, triggering a rebuild on every notification newer than the
// published version and on every (re)connect, since notifications sent while it was away are lost.
func (b *Builder) listen(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		err := b.listenOnce(ctx)
		b.listening.Store(false)
		b.listenUp.Set(0)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errListenerLost) {
			failures = 1 // it was up: retry soon
		} else {
			failures++ // cannot connect: back off further each time
		}
		b.reconnects.Inc()
		delay := backoff.Delay(failures, 100*time.Millisecond, b.opts.ListenRetryMax)
		b.log.Warn("snapshot change listener down; relying on the periodic check until it reconnects",
			"err", err, "retry_in", delay.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

var errListenerLost = errors.New("listener connection lost")

func (b *Builder) listenOnce(ctx context.Context) error {
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{store.NotifyChannel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	b.listening.Store(true)
	b.listenUp.Set(1)
	b.Trigger()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", errListenerLost, err)
		}
		if rev, err := strconv.ParseInt(n.Payload, 10, 64); err == nil && rev <= b.published.Load() {
			continue
		}
		b.Trigger()
	}
}
