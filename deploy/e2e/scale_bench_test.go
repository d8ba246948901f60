package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	osexec "os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/testkit"
)

var (
	scaleDB         = flag.String("scale-db", "", "BenchmarkSnapshotScale: keep the seeded database under this name and reuse it (\"\": a fresh one, dropped)")
	scaleWatchers   = flag.Int("scale-watchers", 60, "BenchmarkSnapshotScale: data-plane watchers in all")
	scaleSyncers    = flag.Int("scale-syncers", 2, "BenchmarkSnapshotScale: of them, real syncer processes")
	scaleDuration   = flag.Duration("scale-duration", 3*time.Minute, "BenchmarkSnapshotScale: length of the steady load")
	scaleKeyRate    = flag.Int("scale-key-changes", 1000, "BenchmarkSnapshotScale: key creations + revocations per minute")
	scalePriceRate  = flag.Int("scale-price-edits", 10, "BenchmarkSnapshotScale: price edits per minute")
	scaleCPUProfile = flag.String("scale-cp-cpuprofile", "", "BenchmarkSnapshotScale: write the control plane's CPU profile to this file")
	scaleTrace      = flag.String("scale-trace", "", "BenchmarkSnapshotScale: write each commit's latency to this file")
)

// BenchmarkSnapshotScale measures configuration deltas at scale (docs/benchmarks.md, "Deltas at scale"):
// the configuration of seedLarge (-large-keys API keys), one control plane in a process of its own (the
// test binary re-executed, TestMain), -scale-syncers data planes' syncers in processes of their own
// (dataplane/syncer as the data plane runs it: applying every delta to its own compiled form), and the
// rest of -scale-watchers as watchers in this process: a real gRPC Watch stream each, on its own
// connection, accepting deltas, decoding every message and checking that each delta's base is the
// version it holds (they hold no configuration). Then a steady load through the store's admin functions
// (-scale-key-changes key creations and revocations, -scale-price-edits price edits a minute, one
// transaction each) for -scale-duration; halfway through, one watcher's stream and one more syncer's
// connection (through a proxy) are cut for 5 s, and a new syncer process joins. It reports, per commit,
// the time to every steady watcher serving it (p50, p99, max), the control plane's and the syncers' CPU
// per commit, the bytes each watcher received per commit, the syncers' heap, and what the reconnecting
// watchers and the joining syncer were sent and how long they took.
// It runs once whatever b.N (-benchtime 1x).
//
//	go test -run '^$' -bench BenchmarkSnapshotScale -benchtime 1x -timeout 60m ./deploy/e2e/ -large-keys 1000000 -scale-db tg_scale_1m
//	go test -run '^$' -bench BenchmarkSnapshotScale -benchtime 1x ./deploy/e2e/ -large-keys 20000 -scale-watchers 8 -scale-duration 20s
func BenchmarkSnapshotScale(b *testing.B) {
	if *scaleSyncers < 1 || *scaleWatchers < *scaleSyncers+3 {
		b.Fatalf("-scale-watchers %d must exceed -scale-syncers %d by 3 or more", *scaleWatchers, *scaleSyncers)
	}
	ctx := context.Background()
	c, seeded := openScaleCluster(b)
	rev, err := store.Revision(ctx, c.db.Pool)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("database %s: %d keys seeded, revision %d (%s)", c.db.Name, *largeKeys, rev, seeded)

	cpHTTP, cpGRPC := freeAddr(b), freeAddr(b)
	cpProc := startScaleProc(b, c, "cp", "cp", map[string]string{
		"TOLLGATE_DATABASE_URL": c.db.URL, "TOLLGATE_ADMIN_TOKEN": c.adminTok, "TOLLGATE_SECRET_KEY": c.secret,
		"TOLLGATE_DP_TOKEN": c.dpToken, "TOLLGATE_CP_HTTP_ADDR": cpHTTP, "TOLLGATE_CP_GRPC_ADDR": cpGRPC,
		"TOLLGATE_LOG_LEVEL": "warn", "TOLLGATE_SHUTDOWN_TIMEOUT": "5s",
		"TOLLGATE_SCALE_CPUPROFILE": *scaleCPUProfile,
	})
	startSyncer := func(name string) *scaleProc {
		return startScaleProc(b, c, "syncer", name, map[string]string{"TOLLGATE_CP_ENDPOINTS": cpGRPC,
			"TOLLGATE_DP_TOKEN": c.dpToken, "TOLLGATE_NODE_ID": name})
	}

	// Start the watchers one at a time (each receives and decodes the whole snapshot first).
	var syncers []*scaleProc
	var lights []*lightWatcher
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	for i := range *scaleSyncers {
		start := time.Now()
		p := startSyncer(fmt.Sprintf("dp%d", i+1))
		if _, err := p.waitVersion(rev, 15*time.Minute); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s serving %d after %.1f s", p.name, rev, time.Since(start).Seconds())
		syncers = append(syncers, p)
	}
	// One more syncer reaches the control plane through a proxy that can cut its connection: the data
	// plane that reconnects halfway through.
	proxy := newCutProxy(b, cpGRPC)
	cutSyncer := startScaleProc(b, c, "syncer", "dp-cut", map[string]string{"TOLLGATE_CP_ENDPOINTS": proxy.addr,
		"TOLLGATE_DP_TOKEN": c.dpToken, "TOLLGATE_NODE_ID": "dp-cut"})
	if _, err := cutSyncer.waitVersion(rev, 15*time.Minute); err != nil {
		b.Fatal(err)
	}
	for i := range *scaleWatchers - *scaleSyncers - 1 {
		w := newLightWatcher(b, fmt.Sprintf("w%d", i+1), cpGRPC, c.dpToken)
		go w.run(wctx)
		if _, err := w.waitVersion(rev, 5*time.Minute); err != nil {
			b.Fatal(err)
		}
		lights = append(lights, w)
	}
	b.Logf("%d watchers serving %d", *scaleWatchers, rev)

	// Idle: the control plane's CPU without changes, and the syncers' held heap.
	cpu0 := cpProc.cpuTime(b)
	syncCPU0 := make([]time.Duration, len(syncers))
	for i, p := range syncers {
		syncCPU0[i] = p.cpuTime(b)
	}
	time.Sleep(10 * time.Second)
	idleCPU := (cpProc.cpuTime(b) - cpu0) / 10 // per second
	syncIdle := make([]time.Duration, len(syncers))
	for i, p := range syncers {
		syncIdle[i] = (p.cpuTime(b) - syncCPU0[i]) / 10
	}
	held := make([]scaleMem, len(syncers))
	for i, p := range syncers {
		held[i] = p.mem(b)
	}
	sends0 := scrapeSends(b, cpHTTP)
	bytes0 := make([]int64, len(lights))
	for i, w := range lights {
		bytes0[i] = w.bytes.Load()
	}

	// The steady load.
	load := newScaleLoad(b, c, rev)
	loadStart, cpuStart := time.Now(), cpProc.cpuTime(b)
	for i, p := range syncers {
		syncCPU0[i] = p.cpuTime(b)
	}
	var cpuMid time.Duration
	var commitsMid int
	var cut *lightWatcher = lights[0]
	var cutAt time.Time
	var cutHeld, cutSyncerHeld int64
	var join *scaleProc
	var joinAt time.Time
	midDone := false
	keyEvery := time.Minute / time.Duration(*scaleKeyRate)
	priceEvery := time.Minute / time.Duration(max(*scalePriceRate, 1))
	nextKey, nextPrice := loadStart, loadStart.Add(priceEvery/2)
	for time.Since(loadStart) < *scaleDuration {
		if !midDone && time.Since(loadStart) >= *scaleDuration/2 {
			midDone = true
			cpuMid, commitsMid = cpProc.cpuTime(b), len(load.commits)
			cutHeld, cutAt = cut.version(), time.Now()
			cut.cut(5 * time.Second)
			cutSyncerHeld = cutSyncer.version()
			proxy.cut(5 * time.Second)
			joinAt = time.Now()
			join = startSyncer("dp-join")
		}
		now := time.Now()
		switch {
		case *scalePriceRate > 0 && !now.Before(nextPrice):
			load.priceEdit(ctx)
			nextPrice = nextPrice.Add(priceEvery)
		case !now.Before(nextKey):
			load.keyChange(ctx)
			nextKey = nextKey.Add(keyEvery)
		default:
			time.Sleep(min(time.Until(nextKey), time.Until(nextPrice)))
		}
	}
	loadWall := time.Since(loadStart)
	cpuEnd := cpProc.cpuTime(b)
	syncCPU := make([]time.Duration, len(syncers))
	for i, p := range syncers {
		syncCPU[i] = p.cpuTime(b) - syncCPU0[i] - time.Duration(float64(syncIdle[i])*loadWall.Seconds())
	}
	last := load.commits[len(load.commits)-1].rev
	steady := make([]versionSource, 0, *scaleWatchers)
	for _, p := range syncers {
		steady = append(steady, p)
	}
	for _, w := range lights[1:] {
		steady = append(steady, w)
	}
	for _, s := range append(slices.Clone(steady), cut, cutSyncer, join) {
		if _, err := s.waitVersion(last, 10*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	sends1 := scrapeSends(b, cpHTTP)
	peaks := make([]scaleMem, len(syncers))
	for i, p := range syncers {
		peaks[i] = p.mem(b)
	}
	joinMem := join.mem(b)

	// Latency of each commit: until the last steady watcher serves a version at least its own.
	var all, real, light, keyLat, priceLat []time.Duration
	var trace strings.Builder
	for _, cm := range load.commits {
		var worstReal, worstLight, worst time.Duration
		slowest := ""
		for i, s := range steady {
			at, ok := s.servedAt(cm.rev)
			if !ok {
				b.Fatalf("%s never served %d", s.label(), cm.rev)
			}
			d := at.Sub(cm.at)
			if d > worst {
				worst, slowest = d, s.label()
			}
			if i < len(syncers) {
				worstReal = max(worstReal, d)
			} else {
				worstLight = max(worstLight, d)
			}
		}
		all = append(all, max(worstReal, worstLight))
		fmt.Fprintf(&trace, "%.3f %d %v %.1f %s\n", cm.at.Sub(loadStart).Seconds(), cm.rev, cm.price, ms(worst), slowest)
		if cm.price {
			priceLat = append(priceLat, max(worstReal, worstLight))
		} else {
			keyLat = append(keyLat, max(worstReal, worstLight))
		}
		real = append(real, worstReal)
		light = append(light, worstLight)
	}
	if *scaleTrace != "" {
		if err := os.WriteFile(*scaleTrace, []byte(trace.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
	n := len(load.commits)
	q := func(l []time.Duration, p float64) float64 {
		if len(l) == 0 {
			return 0
		}
		l = slices.Clone(l)
		slices.Sort(l)
		i := min(max(int(p*float64(len(l))+0.5)-1, 0), len(l)-1)
		return float64(l[i].Microseconds()) / 1000
	}
	var bytesSum int64
	var fulls int64
	for i, w := range lights[1:] {
		bytesSum += w.bytes.Load() - bytes0[i+1]
		fulls += w.fullsAfter(loadStart)
	}
	perWatcherPerCommit := float64(bytesSum) / float64(len(lights)-1) / float64(n)
	cpuPerCommit := (cpuEnd - cpuStart - time.Duration(float64(idleCPU)*loadWall.Seconds())) / time.Duration(n)
	cpuPerCommitFirstHalf := (cpuMid - cpuStart - time.Duration(float64(idleCPU)*(loadWall/2).Seconds())) / time.Duration(commitsMid)

	cutServe, cutOK := cut.servedAt(load.revAt(cutAt.Add(5 * time.Second)))
	joinServe, joinOK := join.firstServed()
	b.Logf("load: %d commits (%d key changes, %d price edits) in %.1f s: %.0f a minute; revisions %d..%d",
		n, load.keys, load.prices, loadWall.Seconds(), float64(n)/loadWall.Minutes(), load.commits[0].rev, last)
	b.Logf("commit → all %d steady watchers serving: p50 %.1f ms, p99 %.1f ms, max %.1f ms; real syncers p50 %.1f p99 %.1f max %.1f; in-process watchers p50 %.1f p99 %.1f max %.1f",
		len(steady), q(all, .5), q(all, .99), q(all, 1), q(real, .5), q(real, .99), q(real, 1), q(light, .5), q(light, .99), q(light, 1))
	b.Logf("by change: key changes p50 %.1f ms, p99 %.1f ms, max %.1f ms; price edits p50 %.1f ms, max %.1f ms",
		q(keyLat, .5), q(keyLat, .99), q(keyLat, 1), q(priceLat, .5), q(priceLat, 1))
	b.Logf("versions served by %s during the load: %d for %d commits", syncers[0].name, syncers[0].countAfter(loadStart), n)
	b.Logf("control plane CPU: idle %.1f ms/s; per commit %.2f ms (first half, before the join: %.2f ms)",
		ms(idleCPU), ms(cpuPerCommit), ms(cpuPerCommitFirstHalf))
	b.Logf("bytes received per commit per watcher: %.0f (message bytes on the wire); whole snapshots to steady in-process watchers during the load: %d",
		perWatcherPerCommit, fulls)
	b.Logf("control plane: RSS %.1f MiB, peak %.1f MiB", float64(cpProc.statusKB(b, "VmRSS"))/1024, float64(cpProc.statusKB(b, "VmHWM"))/1024)
	b.Logf("control plane sends during the load: full %d, delta %d", int64(sends1.full-sends0.full), int64(sends1.delta-sends0.delta))
	for i := range syncers {
		b.Logf("%s CPU: idle %.1f ms/s, per commit %.2f ms", syncers[i].name, ms(syncIdle[i]), ms(syncCPU[i]/time.Duration(n)))
		b.Logf("%s heap: held %.1f MiB (RSS %.1f MiB); during the load: peak live heap at a collection %.1f MiB, peak heap objects %.1f MiB, peak RSS %.1f MiB; after it %.1f MiB",
			syncers[i].name, mib(held[i].live), kib(held[i].rss), mib(peaks[i].peakLive), mib(peaks[i].peak), kib(peaks[i].hwm), mib(peaks[i].live))
	}
	if cutOK {
		b.Logf("reconnect: %s held %d, cut for 5 s; serving the latest commit of the cut %.1f ms after reopening; first message %s",
			cut.name, cutHeld, ms(cutServe.Sub(cutAt.Add(5*time.Second))), cut.firstAfter(cutAt))
	}
	if at, ok := cutSyncer.servedAt(load.revAt(cutAt.Add(5 * time.Second))); ok {
		b.Logf("reconnect: %s (a real syncer) held %d, connection cut for 5 s; serving the latest commit of the cut %.1f ms after the proxy reopened; control plane → it during the cut and after: %d bytes until it served that commit",
			cutSyncer.name, cutSyncerHeld, ms(at.Sub(cutAt.Add(5*time.Second))), proxy.bytesUntil(at))
	}
	if joinOK {
		b.Logf("join: %s serving %.1f s after its start (a whole snapshot); heap after the load %.1f MiB, peak live heap at a collection %.1f MiB, peak heap objects %.1f MiB, peak RSS %.1f MiB",
			join.name, joinServe.Sub(joinAt).Seconds(), mib(joinMem.live), mib(joinMem.peakLive), mib(joinMem.peak), kib(joinMem.hwm))
	}
	b.ReportMetric(q(all, .5), "p50-ms")
	b.ReportMetric(q(all, .99), "p99-ms")
	b.ReportMetric(q(all, 1), "max-ms")
	b.ReportMetric(ms(cpuPerCommit), "cp-cpu-ms/commit")
	b.ReportMetric(perWatcherPerCommit, "B/commit/watcher")
	b.ReportMetric(float64(fulls), "full-fallbacks")
	b.ReportMetric(0, "ns/op")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func mib(n uint64) float64       { return float64(n) / (1 << 20) }
func kib(n uint64) float64       { return float64(n) / 1024 }

// openScaleCluster returns a cluster on the seeded database: -scale-db's, seeded the first time (its
// comment records the seed), or a fresh one.
func openScaleCluster(b *testing.B) (*cluster, string) {
	b.Helper()
	if *scaleDB == "" {
		c := newCluster(b)
		seedLarge(b, c)
		return c, "fresh"
	}
	ctx := context.Background()
	// A fixed secret key, so the credentials sealed at seeding open in later runs (benchmark data only).
	sum := sha256.Sum256([]byte("tollgate scale benchmark"))
	box, err := secret.New(sum[:])
	if err != nil {
		b.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, storetest.AdminURL())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, *scaleDB).Scan(&exists); err != nil {
		b.Fatal(err)
	}
	if !exists {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{*scaleDB}.Sanitize()); err != nil {
			b.Fatal(err)
		}
	}
	u, err := url.Parse(storetest.AdminURL())
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + *scaleDB
	pool, err := store.Open(ctx, u.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := store.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	c := &cluster{t: b, db: &storetest.DB{Pool: pool, URL: u.String(), Name: *scaleDB}, box: box,
		secret: hex.EncodeToString(sum[:]), dpToken: "dp-" + randomHex(16), adminTok: "admin-" + randomHex(16),
		logs: &testkit.Buffer{}}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("process logs:\n%s", c.logs.String())
		}
	})
	mark := fmt.Sprintf("tollgate-scale keys=%d", *largeKeys)
	var comment string
	if err := admin.QueryRow(ctx, `SELECT coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database WHERE datname = $1`,
		*scaleDB).Scan(&comment); err != nil {
		b.Fatal(err)
	}
	if comment == mark {
		return c, "reused"
	}
	var rules int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM price_rules`).Scan(&rules); err != nil {
		b.Fatal(err)
	}
	if rules != 0 {
		b.Fatalf("database %s holds another seed (%q); drop it or name another", *scaleDB, comment)
	}
	seedLarge(b, c)
	if _, err := admin.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{*scaleDB}.Sanitize()+" IS '"+mark+"'"); err != nil {
		b.Fatal(err)
	}
	return c, "seeded now"
}

// cutProxy forwards TCP connections to target; cut closes them and refuses new ones for a while.
type cutProxy struct {
	addr    string
	target  string
	mu      sync.Mutex
	conns   []net.Conn
	until   time.Time
	reopen  time.Time
	down    atomic.Int64 // bytes target → client since the last cut
	samples []byteAt     // (time, down) after the reopening, to find what was sent until a moment
}

type byteAt struct {
	at time.Time
	n  int64
}

func newCutProxy(tb testing.TB, target string) *cutProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	p := &cutProxy{addr: ln.Addr().String(), target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			refused := time.Now().Before(p.until)
			if !refused {
				p.conns = append(p.conns, c)
			}
			p.mu.Unlock()
			if refused {
				_ = c.Close()
				continue
			}
			go p.forward(c)
		}
	}()
	return p
}

func (p *cutProxy) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, u)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			total := p.down.Add(int64(n))
			p.mu.Lock()
			if !p.reopen.IsZero() {
				p.samples = append(p.samples, byteAt{time.Now(), total})
			}
			p.mu.Unlock()
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = c.Close()
}

func (p *cutProxy) cut(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.until = time.Now().Add(d)
	p.reopen = p.until
	p.down.Store(0)
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// bytesUntil is what the proxy carried from the control plane since the cut until t.
func (p *cutProxy) bytesUntil(t time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, s := range p.samples {
		if s.at.After(t) {
			break
		}
		n = s.n
	}
	return n
}

// versionSource is a watcher whose served versions were recorded.
type versionSource interface {
	label() string
	waitVersion(v int64, timeout time.Duration) (time.Time, error)
	servedAt(v int64) (time.Time, bool)
}

// served records the versions a watcher served, in order, with when it began serving each.
type served struct {
	mu   sync.Mutex
	recs []servedRec
	cond chan struct{} // closed and replaced at every record
}

type servedRec struct {
	v  int64
	at time.Time
}

func (s *served) add(v int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, servedRec{v, at})
	if s.cond != nil {
		close(s.cond)
	}
	s.cond = make(chan struct{})
}

func (s *served) version() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recs) == 0 {
		return 0
	}
	return s.recs[len(s.recs)-1].v
}

// servedAt is when the watcher first served a version ≥ v.
func (s *served) servedAt(v int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.recs, v, func(r servedRec, v int64) int { return int(r.v - v) })
	if i == len(s.recs) {
		return time.Time{}, false
	}
	return s.recs[i].at, true
}

func (s *served) countAfter(t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.recs {
		if r.at.After(t) {
			n++
		}
	}
	return n
}

func (s *served) firstServed() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recs) == 0 {
		return time.Time{}, false
	}
	return s.recs[0].at, true
}

func (s *served) waitVersion(v int64, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		if s.cond == nil {
			s.cond = make(chan struct{})
		}
		ch := s.cond
		s.mu.Unlock()
		if at, ok := s.servedAt(v); ok {
			return at, nil
		}
		select {
		case <-ch:
		case <-deadline:
			return time.Time{}, fmt.Errorf("version %d not served within %v (holding %d)", v, timeout, s.version())
		}
	}
}

// scaleProc is a re-executed test binary in one of the roles of runScaleRole.
type scaleProc struct {
	served
	name  string
	cmd   *osexec.Cmd
	stdin io.WriteCloser
	mems  chan scaleMem
}

type scaleMem struct{ live, peak, peakLive, hwm, rss uint64 }

func (p *scaleProc) label() string { return p.name }

func startScaleProc(tb testing.TB, c *cluster, role, name string, env map[string]string) *scaleProc {
	tb.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), scaleRoleEnv+"="+role)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = prefixWriter{name, c.logs}
	p := &scaleProc{name: name, cmd: cmd, mems: make(chan scaleMem, 1)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	go func() {
		in := bufio.NewScanner(stdout)
		for in.Scan() {
			f := strings.Fields(in.Text())
			switch {
			case len(f) == 3 && f[0] == "v":
				v, _ := strconv.ParseInt(f[1], 10, 64)
				t, _ := strconv.ParseInt(f[2], 10, 64)
				p.add(v, time.Unix(0, t))
			case len(f) == 6 && f[0] == "mem":
				var m scaleMem
				for i, dst := range []*uint64{&m.live, &m.peak, &m.peakLive, &m.hwm, &m.rss} {
					*dst, _ = strconv.ParseUint(f[i+1], 10, 64)
				}
				p.mems <- m
			}
		}
	}()
	return p
}

// mem asks a syncer process for its heap figures (and resets its peaks).
func (p *scaleProc) mem(tb testing.TB) scaleMem {
	tb.Helper()
	if _, err := io.WriteString(p.stdin, "mem\n"); err != nil {
		tb.Fatal(err)
	}
	select {
	case m := <-p.mems:
		return m
	case <-time.After(time.Minute):
		tb.Fatalf("%s: no memory report", p.name)
		return scaleMem{}
	}
}

// cpuTime is the process's user + system CPU time (/proc/<pid>/stat, clock ticks of 10 ms).
func (p *scaleProc) cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// statusKB reads a kB field of the process's /proc/<pid>/status.
func (p *scaleProc) statusKB(tb testing.TB, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

type sends struct{ full, delta float64 }

// scrapeSends reads the control plane's tollgate_snapshot_sends_total.
func scrapeSends(tb testing.TB, httpAddr string) sends {
	tb.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var s sends
	in := bufio.NewScanner(resp.Body)
	for in.Scan() {
		line := in.Text()
		if !strings.HasPrefix(line, "tollgate_snapshot_sends_total{") {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		switch {
		case strings.Contains(line, `kind="full"`):
			s.full += v
		case strings.Contains(line, `kind="delta"`):
			s.delta += v
		}
	}
	return s
}

// lightWatcher is a data plane's Watch stream without the data plane: it decodes every message, checks
// that a delta applies to the version it holds (else reopens, as the syncer does) and records the
// versions; it holds no configuration.
type lightWatcher struct {
	served
	name   string
	client snapshotv1.SnapshotServiceClient
	bytes  atomic.Int64 // message bytes received (gRPC wire length)

	mu    sync.Mutex
	kinds []kindRec // every message received: full or delta, when
	stop  context.CancelFunc
	pause time.Duration
}

type kindRec struct {
	full          bool
	at            time.Time
	base, version int64
	bytes         int64 // wire length
}

func newLightWatcher(tb testing.TB, name, addr, token string) *lightWatcher {
	w := &lightWatcher{name: name}
	cl, err := cpclient.New(cpclient.Options{Endpoints: []string{addr}, Token: token},
		grpc.WithStatsHandler(wireBytes{&w.bytes}), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cl.Close() })
	cc, _ := cl.Current()
	w.client = snapshotv1.NewSnapshotServiceClient(cc)
	return w
}

func (w *lightWatcher) label() string { return w.name }

func (w *lightWatcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		w.mu.Lock()
		w.stop = cancel
		w.mu.Unlock()
		err := w.stream(sctx)
		cancel()
		w.mu.Lock()
		pause := w.pause
		w.pause = 0
		w.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if pause == 0 && !errors.Is(err, errRebase) {
			pause = 100 * time.Millisecond
		}
		time.Sleep(pause)
	}
}

var errRebase = errors.New("delta of another base")

func (w *lightWatcher) stream(ctx context.Context) error {
	st, err := w.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: w.name, KnownVersion: w.version(), AcceptDeltas: true})
	if err != nil {
		return err
	}
	seen := w.bytes.Load()
	for {
		m, err := st.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		total := w.bytes.Load()
		rec := kindRec{full: m.GetSnapshot() != nil, at: now, bytes: total - seen}
		seen = total
		var v int64
		if rec.full {
			v = m.GetSnapshot().GetVersion()
		} else {
			d := m.GetDelta()
			if d.GetBaseVersion() != w.version() {
				return errRebase
			}
			v = d.GetVersion()
			rec.base = d.GetBaseVersion()
		}
		rec.version = v
		w.mu.Lock()
		w.kinds = append(w.kinds, rec)
		w.mu.Unlock()
		if v > w.version() {
			w.add(v, now)
		}
	}
}

// cut ends the stream and reopens it after d, with the version held.
func (w *lightWatcher) cut(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pause = d
	if w.stop != nil {
		w.stop()
	}
}

func (w *lightWatcher) fullsAfter(t time.Time) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, k := range w.kinds {
		if k.full && k.at.After(t) {
			n++
		}
	}
	return n
}

// firstAfter describes the first message received after t.
func (w *lightWatcher) firstAfter(t time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range w.kinds {
		if !k.at.After(t) {
			continue
		}
		if k.full {
			return fmt.Sprintf("a whole snapshot of %d, %d bytes", k.version, k.bytes)
		}
		return fmt.Sprintf("a delta %d→%d, %d bytes", k.base, k.version, k.bytes)
	}
	return "nothing"
}

// wireBytes counts the wire length of the messages a connection receives.
type wireBytes struct{ n *atomic.Int64 }

func (h wireBytes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h wireBytes) HandleRPC(_ context.Context, s stats.RPCStats) {
	if p, ok := s.(*stats.InPayload); ok {
		h.n.Add(int64(p.WireLength))
	}
}
func (h wireBytes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (h wireBytes) HandleConn(context.Context, stats.ConnStats)                       {}

// scaleLoad commits the steady load through the store's admin functions, one transaction per change,
// and records each commit's revision and the moment its commit returned.
type scaleLoad struct {
	tb      testing.TB
	c       *cluster
	commits []scaleCommit
	revoke  []int64 // enabled seeded keys, revoked in turn
	created int
	keys    int
	prices  int
}

type scaleCommit struct {
	rev   int64
	at    time.Time
	price bool // a price edit (else a key change)
}

func newScaleLoad(tb testing.TB, c *cluster, base int64) *scaleLoad {
	tb.Helper()
	l := &scaleLoad{tb: tb, c: c}
	rows, err := c.db.Pool.Query(context.Background(),
		`SELECT id FROM api_keys WHERE enabled ORDER BY id DESC LIMIT 100000`)
	if err != nil {
		tb.Fatal(err)
	}
	if l.revoke, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		tb.Fatal(err)
	}
	return l
}

// revAt is the revision of the last commit at or before t (of the first commit when none was).
func (l *scaleLoad) revAt(t time.Time) int64 {
	r := l.commits[0].rev
	for _, cm := range l.commits {
		if cm.at.After(t) {
			break
		}
		r = cm.rev
	}
	return r
}

// keyChange creates a key or revokes one (alternately), as the admin API does.
func (l *scaleLoad) keyChange(ctx context.Context) {
	l.keys++
	l.tx(ctx, false, func(tx pgx.Tx) error {
		if l.keys%2 == 1 || len(l.revoke) == 0 {
			l.created++
			name := fmt.Sprintf("scale-%s-%d", randomHex(4), l.created)
			hash := sha256.Sum256([]byte(name))
			_, err := store.InsertAPIKey(ctx, tx, store.APIKey{UserID: int64(1 + l.created%1000), Name: name,
				Prefix: "tg-" + randomHex(4), Enabled: true, RPMLimit: 600, TPMLimit: 100000}, hash[:])
			return err
		}
		id := l.revoke[0]
		l.revoke = l.revoke[1:]
		k, err := store.GetAPIKey(ctx, tx, id)
		if err != nil {
			return err
		}
		k.Enabled = false
		_, err = store.UpdateAPIKey(ctx, tx, k)
		return err
	})
}

// priceEdit changes one price rule's input price.
func (l *scaleLoad) priceEdit(ctx context.Context) {
	l.prices++
	l.tx(ctx, true, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE price_rules SET input_price = $2 WHERE id = $1`,
			1+l.prices%10000, fmt.Sprintf("3.%04d", l.prices%10000))
		return err
	})
}

func (l *scaleLoad) tx(ctx context.Context, price bool, f func(pgx.Tx) error) {
	tx, err := l.c.db.Pool.Begin(ctx)
	if err != nil {
		l.tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := f(tx); err != nil {
		l.tb.Fatal(err)
	}
	var rev int64
	if err := tx.QueryRow(ctx, `SELECT revision FROM config_revision`).Scan(&rev); err != nil {
		l.tb.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		l.tb.Fatal(err)
	}
	l.commits = append(l.commits, scaleCommit{rev, time.Now(), price})
}
