package e2e

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/controlplane/store"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// BenchmarkSnapshotPropagation measures, per committed price change, the time from the commit returning
// to all 3 data planes serving the new version: 2 control planes, dp1 watching cp1, dp2 and dp3
// watching cp2; every change is committed on cp1's pool. Changes are sequential (each waits for the
// previous one to land), so none is coalesced with another. "back-to-back" commits the next change as
// soon as the previous one has landed, which puts every change inside the debounce window of the
// previous rebuild (the worst case for latency); "spaced" waits 100 ms between changes, as isolated admin
// changes are. Run with -benchtime=200x; it reports p50, p99 and max in milliseconds.
//
//	go test -run '^$' -bench BenchmarkSnapshotPropagation -benchtime 200x ./deploy/e2e/
func BenchmarkSnapshotPropagation(b *testing.B) {
	for _, tc := range []struct {
		debounce string
		gap      time.Duration
	}{{"50ms", 100 * time.Millisecond}, {"50ms", 0}, {"0s", 0}} {
		name := "debounce=" + tc.debounce + "/spaced"
		if tc.gap == 0 {
			name = "debounce=" + tc.debounce + "/back-to-back"
		}
		debounce := tc.debounce
		b.Run(name, func(b *testing.B) {
			c := newCluster(b)
			c.seed()
			env := []string{"TOLLGATE_REBUILD_DEBOUNCE", debounce, "TOLLGATE_LOG_LEVEL", "warn"}
			cp1 := c.startCP("cp1", "", env...)
			cp2 := c.startCP("cp2", "", env...)
			dpEnv := []string{"TOLLGATE_LOG_LEVEL", "warn"}
			dps := []*dp{
				c.startDP("dp1", []string{cp1.srv.GRPCAddr()}, dpEnv...),
				c.startDP("dp2", []string{cp2.srv.GRPCAddr()}, dpEnv...),
				c.startDP("dp3", []string{cp2.srv.GRPCAddr()}, dpEnv...),
			}
			for _, d := range dps {
				d.wait(b, 1)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				time.Sleep(tc.gap)
				rev, committed := commit(b, cp1, `UPDATE price_rules SET input_price = $1 WHERE id = 1`, fmt.Sprintf("1.%04d", i+1))
				lat = append(lat, waitAll(b, dps, rev, committed))
			}
			b.StopTimer()
			reportLatencies(b, lat)
		})
	}
}

// commit runs one autocommitted statement on the control plane's pool and returns the revision it
// produced and the moment the commit returned (taken before the revision is read back).
func commit(tb testing.TB, p *cp, sql string, args ...any) (int64, time.Time) {
	tb.Helper()
	ctx := context.Background()
	if _, err := p.srv.Pool.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("exec %q: %v", sql, err)
	}
	committed := time.Now()
	rev, err := store.Revision(ctx, p.srv.Pool)
	if err != nil {
		tb.Fatal(err)
	}
	return rev, committed
}

// waitAll waits for every data plane to serve version v and returns the time from start to the last.
func waitAll(tb testing.TB, dps []*dp, v int64, start time.Time) time.Duration {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last time.Duration
	for _, d := range dps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := d.srv.Syncer.Wait(ctx, v); err != nil {
				tb.Error(err)
				return
			}
			el := time.Since(start)
			mu.Lock()
			last = max(last, el)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	return last
}

func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := int(p*float64(len(lat))+0.5) - 1
		i = min(max(i, 0), len(lat)-1)
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
	b.ReportMetric(0, "ns/op") // the loop time is dominated by waiting; the quantiles are the result
}

// largeKeys is the number of API keys seedLarge writes: 100,000 by default, 1,000,000 for the scale
// figures (-large-keys 1000000; benchmarks only, never in make test).
var largeKeys = flag.Int("large-keys", 100000, "API keys seedLarge writes (BenchmarkSnapshotLarge)")

// keyChunk is the number of API keys one seeding statement inserts.
const keyChunk = 100000

// seedLarge writes 10,000 price rules (a fifth with tiers), 1,000 providers (one credential and 5 routing
// cells each), 1,000 routes (an alias and 2 members each), 10 orgs, 100 teams, 1,000 users, -large-keys
// API keys (in statements of 100,000, through every trigger a real bulk load meets: the hash check,
// audit, revision bump) and 1,110 quotas, in one transaction. The database must be fresh (ids start at
// 1). It logs how long the keys took, per statement and in all.
func seedLarge(tb testing.TB, c *cluster) int64 {
	tb.Helper()
	sealed, err := c.box.Seal([]byte("sk-large-benchmark-secret-0123456789"))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	tx, err := c.db.Pool.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{
		`INSERT INTO providers (name, channel_type, base_url)
		 SELECT 'prov-' || i, (ARRAY['alpha','beta','gamma','custom','router'])[1 + i % 5], 'http://127.0.0.1:9/p' || i
		   FROM generate_series(1, 1000) i`,
		`INSERT INTO credentials (provider_id, secret_ciphertext) SELECT id, $1 FROM providers`, // $1: the sealed secret
		`INSERT INTO routing_rules (provider_id, operation, kind, implementation, sort_order)
		 SELECT p.id, c.op, c.kind, c.impl, c.ord FROM providers p CROSS JOIN (VALUES
		   ('generate_content', 'alpha_chat_completions', 'passthrough', 0),
		   ('stream_generate_content', 'alpha_chat_completions', 'passthrough', 1),
		   ('list_models', 'alpha', 'local', 2),
		   ('get_model', 'alpha', 'local', 3),
		   ('create_embedding', 'alpha', 'passthrough', 4)) AS c(op, kind, impl, ord)`,
		`INSERT INTO routes (name) SELECT 'route-' || i FROM generate_series(1, 1000) i`,
		`INSERT INTO route_aliases (alias, route_id) SELECT 'alias-' || id, id FROM routes`,
		`INSERT INTO route_members (route_id, provider_id, upstream_model_id, priority)
		 SELECT r.id, 1 + (r.id + k * 37) % 1000, 'model-' || r.id, k FROM routes r, generate_series(0, 1) k`,
		`INSERT INTO price_rules (provider_id, match_type, model_match, input_price, output_price, cache_read_price,
		   cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price, pricing_tiers_json)
		 SELECT CASE WHEN i % 2 = 0 THEN 1 + i % 1000 END, CASE WHEN i % 10 = 0 THEN 'contains' ELSE 'exact' END,
		        'model-' || i, round((i % 97) / 10.0, 4), round((i % 89) / 5.0, 4), 0.1, 0.375, 0.5, 0.75, 30,
		        (CASE WHEN i % 5 = 0
		         THEN '[{"min_prompt_tokens": 200000, "multiplier": "2"}, {"service_tier": "priority", "multiplier": "1.5"}]'
		         ELSE '[]' END)::jsonb
		   FROM generate_series(1, 10000) i`,
		`INSERT INTO orgs (name) SELECT 'org-' || i FROM generate_series(1, 10) i`,
		`INSERT INTO teams (org_id, name) SELECT 1 + i % 10, 'team-' || i FROM generate_series(1, 100) i`,
		`INSERT INTO users (org_id, team_id, name) SELECT 1 + (1 + i % 100) % 10, 1 + i % 100, 'user-' || i
		   FROM generate_series(1, 1000) i`,
		`INSERT INTO quotas (scope, scope_id, cost_limit, cost_used)
		 SELECT 'user', i, 100, 1.5 FROM generate_series(1, 1000) i
		 UNION ALL SELECT 'team', i, 1000, 15 FROM generate_series(1, 100) i
		 UNION ALL SELECT 'org', i, 10000, 150 FROM generate_series(1, 10) i`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{sealed}
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			tb.Fatalf("seed large: %v\n%s", err, q)
		}
	}
	keysStart := time.Now()
	for first := 1; first <= *largeKeys; first += keyChunk {
		last := min(first+keyChunk-1, *largeKeys)
		start := time.Now()
		if _, err := tx.Exec(ctx, `INSERT INTO api_keys (user_id, name, key_hash, prefix, allowed_models, rpm_limit, tpm_limit)
		 SELECT 1 + i % 1000, 'key-' || i, sha256(('key-' || i)::bytea), 'tg-' || substr(md5(i::text), 1, 8),
		        CASE WHEN i % 4 = 0 THEN ARRAY['route-1', 'route-2'] ELSE '{}' END, 600, 100000
		   FROM generate_series($1::int, $2::int) i`, first, last); err != nil {
			tb.Fatalf("seed large: api keys %d-%d: %v", first, last, err)
		}
		tb.Logf("seed large: api keys %d-%d in %.1f s", first, last, time.Since(start).Seconds())
	}
	commitStart := time.Now()
	if err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("seed large: %d api keys in %.1f s, commit %.1f s", *largeKeys, time.Since(keysStart).Seconds(),
		time.Since(commitStart).Seconds())
	rev, err := store.Revision(ctx, c.db.Pool)
	if err != nil {
		tb.Fatal(err)
	}
	return rev
}

// BenchmarkSnapshotLarge measures a snapshot of 10,000 price rules, 1,000 providers and 100,000 API keys
// (-large-keys N for another count; the propagation part then holds 3 data planes of that size):
// the control plane's read (one repeatable-read transaction) and compile per op, the encoded size, and
// the heap a data plane keeps for the compiled form (and its peak while decoding and compiling). Then,
// with that state loaded, 1 control plane and 3 data planes measure commit → all 3 serving, per change.
//
//	go test -run '^$' -bench BenchmarkSnapshotLarge -benchtime 5x ./deploy/e2e/
//	go test -run '^$' -bench 'BenchmarkSnapshotLarge/(build|dataplane-heap)' -benchtime 3x -timeout 60m ./deploy/e2e/ -large-keys 1000000
func BenchmarkSnapshotLarge(b *testing.B) {
	c := newCluster(b)
	rev := seedLarge(b, c)
	ctx := context.Background()

	b.Run("build", func(b *testing.B) {
		var read, compile, readCPU, compileCPU time.Duration
		var size int
		for range b.N {
			t0, c0 := time.Now(), cpuTime()
			snap, err := store.ReadSnapshot(ctx, c.db.Pool, c.box)
			if err != nil {
				b.Fatal(err)
			}
			t1, c1 := time.Now(), cpuTime()
			if _, err := snapshot.Compile(snap); err != nil {
				b.Fatal(err)
			}
			read += t1.Sub(t0)
			compile += time.Since(t1)
			readCPU += c1 - c0
			compileCPU += cpuTime() - c1
			size = proto.Size(snap)
			if snap.GetVersion() != rev || len(snap.GetApiKeys()) != *largeKeys || len(snap.GetPriceRules()) != 10000 ||
				len(snap.GetProviders()) != 1000 {
				b.Fatalf("snapshot %d: %d keys, %d rules, %d providers", snap.GetVersion(), len(snap.GetApiKeys()),
					len(snap.GetPriceRules()), len(snap.GetProviders()))
			}
		}
		b.ReportMetric(float64(read.Milliseconds())/float64(b.N), "read-ms/op")
		b.ReportMetric(float64(compile.Milliseconds())/float64(b.N), "compile-ms/op")
		b.ReportMetric(float64(readCPU.Milliseconds())/float64(b.N), "read-cpu-ms/op")
		b.ReportMetric(float64(compileCPU.Milliseconds())/float64(b.N), "compile-cpu-ms/op")
		b.ReportMetric(float64(size)/(1<<20), "proto-MiB")
	})

	b.Run("dataplane-heap", func(b *testing.B) {
		snap, err := store.ReadSnapshot(ctx, c.db.Pool, c.box)
		if err != nil {
			b.Fatal(err)
		}
		wire, err := proto.Marshal(&snapshotv1.WatchResponse{Snapshot: snap})
		if err != nil {
			b.Fatal(err)
		}
		snap = nil
		var retained, peak uint64
		for range b.N {
			before := heapAlloc()
			// What the syncer does with a received message: decode, compile, keep only the compiled form.
			msg := &snapshotv1.WatchResponse{}
			if err := proto.Unmarshal(wire, msg); err != nil {
				b.Fatal(err)
			}
			compiled, err := snapshot.Compile(msg.GetSnapshot())
			if err != nil {
				b.Fatal(err)
			}
			p := heapAlloc()
			runtime.KeepAlive(msg)
			msg = nil
			r := heapAlloc()
			runtime.KeepAlive(compiled)
			retained, peak = r-before, p-before
		}
		b.ReportMetric(float64(retained)/(1<<20), "retained-MiB")
		b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
		b.ReportMetric(float64(len(wire))/(1<<20), "wire-MiB")
	})

	// The processes live until the parent benchmark ends; start them once, although the sub-benchmark
	// body runs once per b.N tried.
	var cp1 *cp
	var dps []*dp
	var first time.Duration
	b.Run("propagation", func(b *testing.B) {
		if cp1 == nil {
			start := time.Now()
			cp1 = c.startCP("cp1", "", "TOLLGATE_LOG_LEVEL", "warn")
			for _, n := range []string{"dp1", "dp2", "dp3"} {
				dps = append(dps, c.startDP(n, []string{cp1.srv.GRPCAddr()}, "TOLLGATE_LOG_LEVEL", "warn"))
			}
			first = waitAll(b, dps, rev, start)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			v, committed := commit(b, cp1, `UPDATE price_rules SET input_price = $1 WHERE id = 1`, fmt.Sprintf("2.%04d", i+1))
			lat = append(lat, waitAll(b, dps, v, committed))
		}
		b.StopTimer()
		reportLatencies(b, lat)
		b.ReportMetric(float64(first.Milliseconds()), "start-to-3-synced-ms")
	})
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
