package watch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/watch"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/testkit"
)

// countingCodec is the proto codec, counting the WatchResponses it marshals: on the server it sees every
// encoding of a snapshot, however the watch server arranges it.
type countingCodec struct {
	encoding.CodecV2
	watchResponses atomic.Int64
}

func (c *countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	if _, ok := v.(*snapshotv1.WatchResponse); ok {
		c.watchResponses.Add(1)
	}
	return c.CodecV2.Marshal(v)
}

// rawMessage receives a message's bytes as they came off the wire, undecoded.
type rawMessage struct{ b []byte }

// sizeOnly receives only a message's size: a watcher that costs nothing beyond the transport.
type sizeOnly struct{ n int }

// rawCodec marshals proto messages as usual and hands received messages over undecoded (*rawMessage,
// *sizeOnly), so a client can compare the bytes each stream received.
type rawCodec struct{ encoding.CodecV2 }

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch r := v.(type) {
	case *rawMessage:
		r.b = data.Materialize()
		return nil
	case *sizeOnly:
		r.n = data.Len()
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// fanout is a watch.Server on a real gRPC server on loopback, with its codec counting encodings.
type fanout struct {
	srv   *watch.Server
	reg   *prometheus.Registry
	codec *countingCodec
	addr  string
}

func newFanout(tb testing.TB) *fanout {
	tb.Helper()
	f := &fanout{reg: prometheus.NewRegistry(), codec: &countingCodec{CodecV2: encoding.GetCodecV2("proto")}}
	f.srv = watch.New(slog.New(slog.DiscardHandler), f.reg)
	g := grpc.NewServer(append(watch.AuthOptions(token), grpc.ForceServerCodecV2(f.codec), grpc.MaxSendMsgSize(256<<20))...)
	watch.Register(g, f.srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	tb.Cleanup(func() { f.srv.Shutdown(); g.Stop() })
	f.addr = ln.Addr().String()
	return f
}

// rawWatch opens a Watch stream on its own connection whose messages arrive as raw bytes.
func (f *fanout) rawWatch(tb testing.TB, ctx context.Context, node string, opts ...grpc.CallOption) grpc.ClientStream {
	tb.Helper()
	cc, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(append(opts, grpc.ForceCodecV2(rawCodec{encoding.GetCodecV2("proto")}),
			grpc.MaxCallRecvMsgSize(256<<20))...))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	st, err := cc.NewStream(authed(ctx), &snapshotv1.SnapshotService_ServiceDesc.Streams[0],
		"/"+snapshotv1.SnapshotService_ServiceDesc.ServiceName+"/Watch")
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.SendMsg(&snapshotv1.WatchRequest{NodeId: node}); err != nil {
		tb.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		tb.Fatal(err)
	}
	return st
}

// recvRaw receives one message and decodes it to check its version.
func recvRaw(tb testing.TB, st grpc.ClientStream, want int64) []byte {
	tb.Helper()
	var m rawMessage
	if err := st.RecvMsg(&m); err != nil {
		tb.Fatalf("Recv: %v", err)
	}
	var resp snapshotv1.WatchResponse
	if err := proto.Unmarshal(m.b, &resp); err != nil {
		tb.Fatalf("received bytes do not decode: %v", err)
	}
	if got := resp.GetSnapshot().GetVersion(); got != want {
		tb.Fatalf("received version %d, want %d", got, want)
	}
	return m.b
}

// keySnapshot is a snapshot of n API keys shaped like the control plane's (hash, prefix, owner, limits,
// a quarter with allowed models).
func keySnapshot(version int64, n int) *snapshotv1.Snapshot {
	s := &snapshotv1.Snapshot{Version: version, BuiltAt: timestamppb.Now()}
	team := int64(7)
	for i := range n {
		h := sha256.Sum256([]byte("key-" + strconv.Itoa(i)))
		k := &configv1.ApiKey{Id: int64(i + 1), UserId: int64(1 + i%1000), OrgId: int64(1 + i%10), TeamId: &team,
			Name: "key-" + strconv.Itoa(i), Prefix: fmt.Sprintf("tg-%08x", i), KeyHash: h[:], RpmLimit: 600,
			TpmLimit: 100000, Enabled: true, CreatedAt: timestamppb.Now()}
		if i%4 == 0 {
			k.AllowedModels = []string{"route-1", "route-2"}
		}
		s.ApiKeys = append(s.ApiKeys, k)
	}
	return s
}

// TestWatchEncodesOncePerVersion: a published version is marshalled once, however many streams send it,
// and every stream receives the same bytes. A stream that asked for gzip gets its own encoding (a
// different wire format) and still decodes.
func TestWatchEncodesOncePerVersion(t *testing.T) {
	t.Parallel()
	f := newFanout(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const watchers = 5
	streams := make([]grpc.ClientStream, watchers)
	for i := range streams {
		streams[i] = f.rawWatch(t, ctx, fmt.Sprintf("dp-%d", i))
	}
	testkit.WaitFor(t, "every watcher connected", func() bool { return f.srv.Watchers() == watchers })
	var first []byte
	for v := int64(1); v <= 2; v++ {
		if !f.srv.Publish(keySnapshot(v, 1000)) {
			t.Fatalf("Publish(%d) = false", v)
		}
		for i, st := range streams {
			b := recvRaw(t, st, v)
			if i == 0 {
				first = b
			} else if !bytes.Equal(b, first) {
				t.Fatalf("version %d: stream %d received %d bytes differing from stream 0's %d", v, i, len(b), len(first))
			}
		}
		if got := f.codec.watchResponses.Load(); got != v {
			t.Fatalf("after %d versions sent to %d streams the codec marshalled %d WatchResponses, want %d", v, watchers, got, v)
		}
		if got := counter(t, f.reg, "tollgate_snapshot_encodes_total"); got != float64(v) {
			t.Errorf("tollgate_snapshot_encodes_total = %v, want %d", got, v)
		}
	}
	if got := counter(t, f.reg, "tollgate_snapshot_sends_total"); got != 2*watchers {
		t.Errorf("tollgate_snapshot_sends_total = %v, want %d", got, 2*watchers)
	}

	// A stream in another wire format (gzip) is encoded for separately, once, and decodes to the same
	// message bytes; a plain stream joining later gets the shared encoding.
	gz := f.rawWatch(t, ctx, "dp-gzip", grpc.UseCompressor(gzip.Name))
	if b := recvRaw(t, gz, 2); !bytes.Equal(b, first) {
		t.Errorf("gzip stream received %d bytes (decompressed) differing from the plain streams' %d", len(b), len(first))
	}
	late := f.rawWatch(t, ctx, "dp-late")
	if b := recvRaw(t, late, 2); !bytes.Equal(b, first) {
		t.Errorf("late stream received %d bytes differing from the others' %d", len(b), len(first))
	}
	if got := f.codec.watchResponses.Load(); got != 3 {
		t.Errorf("after a gzip stream and a plain one joined, the codec marshalled %d WatchResponses, want 3", got)
	}
}

// counter reads the counter named name from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64 // over every label value
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// fanoutKeys is the number of API keys of BenchmarkWatchFanout's snapshot.
var fanoutKeys = flag.Int("fanout-keys", 100000, "API keys in BenchmarkWatchFanout's snapshot")

// BenchmarkWatchFanout publishes one new version of a 100,000-key (-fanout-keys) snapshot per op to N
// watchers on one real gRPC server over loopback and waits until every watcher has received it. The
// watchers take only the size, undecoded, so what is measured is the control plane's side plus the
// transport: bytes allocated (B/op, allocs/op), the heap's peak above the state before the first op
// (peak-heap-MiB, sampled every millisecond) and CPU of this process (cpu-ms/op), with encodes/op from the
// server's codec.
//
//	go test -run '^$' -bench BenchmarkWatchFanout -benchmem -benchtime 5x ./controlplane/watch/
//	go test -run '^$' -bench BenchmarkWatchFanout -benchmem -benchtime 3x ./controlplane/watch/ -fanout-keys 1000000
func BenchmarkWatchFanout(b *testing.B) {
	for _, watchers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("keys=%d/watchers=%d", *fanoutKeys, watchers), func(b *testing.B) {
			f := newFanout(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			streams := make([]grpc.ClientStream, watchers)
			for i := range streams {
				streams[i] = f.rawWatch(b, ctx, fmt.Sprintf("dp-%d", i))
			}
			for f.srv.Watchers() != watchers {
				time.Sleep(time.Millisecond)
			}
			// One set of keys, republished under a new version per op (a new Snapshot sharing the key
			// messages, which are only read): building it is not what is measured.
			keys := keySnapshot(0, *fanoutKeys).GetApiKeys()
			var size atomic.Int64
			runtime.GC()
			base := heapObjects()
			peak := watchPeakHeap(ctx)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				f.srv.Publish(&snapshotv1.Snapshot{Version: int64(i + 1), ApiKeys: keys})
				var wg sync.WaitGroup
				for _, st := range streams {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var m sizeOnly
						if err := st.RecvMsg(&m); err != nil {
							b.Error(err)
						}
						size.Store(int64(m.n))
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(f.codec.watchResponses.Load())/float64(b.N), "encodes/op")
			b.ReportMetric(float64(size.Load())/(1<<20), "msg-MiB")
			b.ReportMetric(float64(peak()-base)/(1<<20), "peak-heap-MiB")
		})
	}
}

// heapObjects is the heap occupied by objects, live or not yet swept (cheap to read: no stop-the-world).
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchPeakHeap samples heapObjects every millisecond until ctx ends; the returned function reports
// the highest value seen so far.
func watchPeakHeap(ctx context.Context) func() uint64 {
	var peak atomic.Uint64
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if h := heapObjects(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return peak.Load
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
