package snapshot

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// keyHeapBudget is the heap a compiled snapshot may keep per API key: the data plane's goal is a million
// keys in under 250 MB of heap, with the rest of the snapshot (providers, routes, price rules) in it too.
// A key with a map entry per hash and per id and its own allocations kept 366 bytes.
const keyHeapBudget = 200

// manyKeysWire is the encoded snapshot validSnapshot plus n keys shaped like deploy/e2e's large seed:
// unique names, hashes and prefixes, one key in four restricted to the same two routes.
func manyKeysWire(tb testing.TB, n int) []byte {
	tb.Helper()
	s := validSnapshot()
	for i := 1; i <= n; i++ {
		h := sha256.Sum256(fmt.Appendf(nil, "key-%d", i))
		k := &configv1.ApiKey{Id: int64(100 + i), UserId: int64(1 + i%1000), OrgId: 7, Name: fmt.Sprintf("key-%d", i),
			KeyHash: h[:], Prefix: fmt.Sprintf("tg-%x", h[:4]), RpmLimit: 600, TpmLimit: 100000, Enabled: true}
		if i%4 == 0 {
			k.AllowedModels = []string{"route-1", "route-2"}
		}
		s.ApiKeys = append(s.ApiKeys, k)
	}
	b, err := proto.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// keptHeapPerKey decodes and compiles wire as the data plane's syncer does, drops the decoded message,
// and returns the heap the compiled form keeps, per key.
func keptHeapPerKey(tb testing.TB, wire []byte, n int) float64 {
	return float64(keptHeap(tb, wire, n)) / float64(n)
}

// keptHeap is keptHeapPerKey's figure for the whole compiled form.
func keptHeap(tb testing.TB, wire []byte, n int) uint64 {
	tb.Helper()
	before := heapAlloc()
	msg := &snapshotv1.Snapshot{}
	if err := proto.Unmarshal(wire, msg); err != nil {
		tb.Fatal(err)
	}
	c, err := Compile(msg)
	if err != nil {
		tb.Fatal(err)
	}
	msg = nil
	kept := heapAlloc() - before
	if c.KeyByID(int64(100+n)) == nil {
		tb.Fatal("last key missing")
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(wire) // held before and after: not counted
	return kept
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The budget is per key: the heap 50,000 more keys add (a compiled form also keeps about 700 KiB whatever
// its keys, the shard tables).
func TestCompiledKeysHeapPerKey(t *testing.T) {
	const n = 50000
	perKey := (float64(keptHeap(t, manyKeysWire(t, 2*n), 2*n)) - float64(keptHeap(t, manyKeysWire(t, n), n))) / n
	t.Logf("from %d to %d keys: %.0f bytes of heap kept per key", n, 2*n, perKey)
	if perKey > keyHeapBudget {
		t.Fatalf("%.0f bytes of heap kept per key, want at most %d", perKey, keyHeapBudget)
	}
}

// BenchmarkCompiledKeysHeap reports the heap kept per key by a compiled snapshot of -benchtime keys:
//
//	go test -run '^$' -bench CompiledKeysHeap -benchtime 100000x ./shared/snapshot/
func BenchmarkCompiledKeysHeap(b *testing.B) {
	wire := manyKeysWire(b, b.N)
	b.ResetTimer()
	b.ReportMetric(keptHeapPerKey(b, wire, b.N), "heap-B/key")
}

// BenchmarkLookupKeyAmongMany looks up keys of a snapshot of 100,000 keys by their secret.
func BenchmarkLookupKeyAmongMany(b *testing.B) {
	const n = 100000
	msg := &snapshotv1.Snapshot{}
	if err := proto.Unmarshal(manyKeysWire(b, n), msg); err != nil {
		b.Fatal(err)
	}
	c, err := Compile(msg)
	if err != nil {
		b.Fatal(err)
	}
	secrets := make([]string, 1024)
	for i := range secrets {
		secrets[i] = fmt.Sprintf("key-%d", 1+i*97)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if c.LookupKey(secrets[i%len(secrets)]) == nil {
			b.Fatal("nil")
		}
		i++
	}
}
