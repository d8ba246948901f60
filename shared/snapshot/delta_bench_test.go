package snapshot

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// keyDeltaWire is the encoded delta from manyKeysWire's snapshot of n keys (version 7) to version 8:
// size/2 new keys, size*2/5 changed (renamed) and size/10 removed.
func keyDeltaWire(tb testing.TB, n, size int) []byte {
	tb.Helper()
	d := &snapshotv1.SnapshotDelta{BaseVersion: 7, Version: 8, BuiltAt: timestamppb.New(time.Unix(1760000100, 0))}
	for i := range size / 2 {
		h := sha256.Sum256(fmt.Appendf(nil, "new-%d", i))
		d.UpsertApiKeys = append(d.UpsertApiKeys, &configv1.ApiKey{Id: int64(100 + n + 1 + i), UserId: 3, OrgId: 7, Name: fmt.Sprintf("new-%d", i),
			KeyHash: h[:], Prefix: fmt.Sprintf("tg-%x", h[:4]), RpmLimit: 600, Enabled: true})
	}
	for i := range size * 2 / 5 {
		j := 1 + (i*7919)%n
		h := sha256.Sum256(fmt.Appendf(nil, "key-%d", j))
		d.UpsertApiKeys = append(d.UpsertApiKeys, &configv1.ApiKey{Id: int64(100 + j), UserId: 3, OrgId: 7, Name: fmt.Sprintf("renamed-%d", j),
			KeyHash: h[:], Prefix: fmt.Sprintf("tg-%x", h[:4]), RpmLimit: 60, Enabled: true})
	}
	for i := range size / 10 {
		d.RemoveApiKeyIds = append(d.RemoveApiKeyIds, int64(100+1+(i*104729+13)%n))
	}
	b, err := proto.Marshal(d)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkApplyDeltaHeap holds a compiled snapshot of -benchtime keys (at least 10,000) and applies a 1,000-key delta to
// it as the syncer does (decode, ApplyDelta), reporting in MiB: the heap held before, what the update
// allocates (measured with the collector off: nothing it allocates is freed, so held + this bounds the
// live heap at any instant of the update), the heap with both forms alive, and the new form alone; and
// the update's time:
//
//	go test -run '^$' -bench ApplyDeltaHeap -benchtime 1000000x ./shared/snapshot/
func BenchmarkApplyDeltaHeap(b *testing.B) {
	n := max(b.N, 10000) // the benchmark's first run has b.N 1
	wire, dwire := manyKeysWire(b, n), keyDeltaWire(b, n, 1000)
	before := heapAlloc()
	msg := &snapshotv1.Snapshot{}
	if err := proto.Unmarshal(wire, msg); err != nil {
		b.Fatal(err)
	}
	held, err := Compile(msg)
	if err != nil {
		b.Fatal(err)
	}
	msg = nil
	heldBytes := heapAlloc() - before

	gc := debug.SetGCPercent(-1)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	d := &snapshotv1.SnapshotDelta{}
	if err := proto.Unmarshal(dwire, d); err != nil {
		b.Fatal(err)
	}
	next, err := ApplyDelta(held, d)
	took := time.Since(start)
	runtime.ReadMemStats(&m1)
	debug.SetGCPercent(gc)
	if err != nil {
		b.Fatal(err)
	}
	d = nil
	both := heapAlloc() - before
	if next.KeyByID(int64(100+n+1)) == nil || held.KeyByID(int64(100+n+1)) != nil {
		b.Fatal("the delta's first key is not (only) in the new form")
	}
	runtime.KeepAlive(held)
	held = nil
	alone := heapAlloc() - before
	runtime.KeepAlive(next)
	runtime.KeepAlive(wire)
	runtime.KeepAlive(dwire)
	const mib = 1 << 20
	b.ReportMetric(float64(heldBytes)/mib, "held-MiB")
	b.ReportMetric(float64(heldBytes)/float64(n), "held-B/key")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/mib, "update-alloc-MiB")
	b.ReportMetric(float64(both)/mib, "both-MiB")
	b.ReportMetric(float64(alone)/mib, "new-MiB")
	b.ReportMetric(float64(took.Microseconds())/1000, "update-ms")
}

// BenchmarkCompileHeap decodes and compiles a snapshot of -benchtime keys with the collector off,
// reporting what it allocates (the bound on the peak above what the data plane held) and keeps:
//
//	go test -run '^$' -bench CompileHeap -benchtime 1000000x ./shared/snapshot/
func BenchmarkCompileHeap(b *testing.B) {
	wire := manyKeysWire(b, b.N)
	before := heapAlloc()
	gc := debug.SetGCPercent(-1)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	msg := &snapshotv1.Snapshot{}
	if err := proto.Unmarshal(wire, msg); err != nil {
		b.Fatal(err)
	}
	c, err := Compile(msg)
	runtime.ReadMemStats(&m1)
	debug.SetGCPercent(gc)
	if err != nil {
		b.Fatal(err)
	}
	msg = nil
	kept := heapAlloc() - before
	runtime.KeepAlive(c)
	runtime.KeepAlive(wire)
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20), "alloc-MiB")
	b.ReportMetric(float64(kept)/(1<<20), "kept-MiB")
}

// largeConfig is validSnapshot with 10,000 price rules, 1,000 providers (a credential and two routing
// rules each), 1,000 routes of two members and 10,000 quotas.
func largeConfig() *snapshotv1.Snapshot {
	s := validSnapshot()
	for i := int64(10); i < 1010; i++ {
		s.Providers = append(s.Providers, &configv1.Provider{Id: i, Name: fmt.Sprintf("p-%d", i), ChannelType: "alpha", BaseUrl: "https://p.example",
			Enabled: true, Credentials: []*configv1.Credential{{Id: i, ProviderId: i, Secret: "s", Weight: 1, Enabled: true}}})
		s.RoutingRules = append(s.RoutingRules,
			&configv1.RoutingRule{Id: 2 * i, ProviderId: i, Operation: "generate_content", Kind: "alpha_chat_completions", Implementation: "passthrough", Enabled: true},
			&configv1.RoutingRule{Id: 2*i + 1, ProviderId: i, Operation: "list_models", Kind: "alpha", Implementation: "local", Enabled: true})
		s.Routes = append(s.Routes, &configv1.Route{Id: i, Name: fmt.Sprintf("route-%d", i), Enabled: true, Members: []*configv1.RouteMember{
			{ProviderId: i, UpstreamModelId: "m", Priority: 1, Weight: 1, Enabled: true}, {ProviderId: 1, UpstreamModelId: "m-1", Priority: 2, Enabled: true}}})
	}
	for i := int64(10); i < 10010; i++ {
		pr := &configv1.PriceRule{Id: i, MatchType: "exact", ModelMatch: fmt.Sprintf("model-%d", i), InputPrice: "1.25", OutputPrice: "10",
			CacheReadPrice: "0.125", CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0", ImageOutputPrice: "0", Enabled: true}
		if i%2 == 0 {
			pr.ProviderId = proto.Int64(10 + i%1000)
		}
		s.PriceRules = append(s.PriceRules, pr)
		s.Quotas = append(s.Quotas, &configv1.Quota{Scope: "user", ScopeId: i, CostLimit: proto.String("100"), CostUsed: "1.5"})
	}
	return s
}

// BenchmarkApplyDeltaConfig applies to largeConfig a delta of one price rule (the price index and the
// providers, routing and routes are rebuilt; unchanged rules' parsed forms are reused), of one quota, of
// one provider, and of one key (the configuration is shared):
//
//	go test -run '^$' -bench ApplyDeltaConfig -benchmem ./shared/snapshot/
func BenchmarkApplyDeltaConfig(b *testing.B) {
	held, err := Compile(largeConfig())
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.Sum256([]byte("one more"))
	for name, d := range map[string]*snapshotv1.SnapshotDelta{
		"price-rule": {UpsertPriceRules: []*configv1.PriceRule{{Id: 20, MatchType: "exact", ModelMatch: "model-20", InputPrice: "2", OutputPrice: "10",
			CacheReadPrice: "0", CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0", ImageOutputPrice: "0", Enabled: true}}},
		"quota":    {UpsertQuotas: []*configv1.Quota{{Scope: "user", ScopeId: 20, CostLimit: proto.String("200"), CostUsed: "1.5"}}},
		"provider": {UpsertProviders: []*configv1.Provider{{Id: 20, Name: "p-20", ChannelType: "alpha", BaseUrl: "https://p2.example", Enabled: true}}},
		"key":      {UpsertApiKeys: []*configv1.ApiKey{{Id: 99, KeyHash: h[:], Enabled: true}}},
	} {
		d.BaseVersion, d.Version = held.Version, held.Version+1
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ApplyDelta(held, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
