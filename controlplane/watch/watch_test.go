package watch_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/watch"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/testkit"
)

const token = "dp-token-0123456789abcdef"

type bundle struct {
	srv    *watch.Server
	reg    *prometheus.Registry
	client snapshotv1.SnapshotServiceClient
	conn   *grpc.ClientConn
}

// setup serves a watch.Server (with the token interceptors and, beside it, the standard health service)
// on a loopback TCP listener.
func setup(t *testing.T) *bundle {
	t.Helper()
	reg := prometheus.NewRegistry()
	ws := watch.New(slog.New(slog.DiscardHandler), reg)
	g := grpc.NewServer(watch.AuthOptions(token)...)
	watch.Register(g, ws)
	healthpb.RegisterHealthServer(g, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(func() { ws.Shutdown(); g.Stop() })
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &bundle{srv: ws, reg: reg, client: snapshotv1.NewSnapshotServiceClient(cc), conn: cc}
}

func authed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func snap(v int64) *snapshotv1.Snapshot { return &snapshotv1.Snapshot{Version: v} }

// recv reads one snapshot version from the stream in the background, so tests can bound the wait.
func recv(t *testing.T, st grpc.ServerStreamingClient[snapshotv1.WatchResponse]) <-chan int64 {
	t.Helper()
	ch := make(chan int64, 1)
	go func() {
		resp, err := st.Recv()
		if err != nil {
			close(ch)
			return
		}
		ch <- resp.GetSnapshot().GetVersion()
	}()
	return ch
}

func wantVersion(t *testing.T, ch <-chan int64, want int64) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("stream ended, want version %d", want)
		}
		if v != want {
			t.Fatalf("received version %d, want %d", v, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no snapshot within 10s, want version %d", want)
	}
}

func TestWatchRequiresToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Publish(snap(3))
	tests := []struct {
		name string
		md   []string
		want codes.Code
	}{
		{name: "no token", want: codes.Unauthenticated},
		{name: "wrong token", md: []string{"authorization", "Bearer nope"}, want: codes.Unauthenticated},
		{name: "token prefix", md: []string{"authorization", "Bearer " + token[:10]}, want: codes.Unauthenticated},
		{name: "no scheme", md: []string{"authorization", token}, want: codes.Unauthenticated},
		{name: "right token", md: []string{"authorization", "Bearer " + token}, want: codes.OK},
		{name: "scheme is case-insensitive", md: []string{"authorization", "bearer " + token}, want: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tt.md != nil {
				ctx = metadata.AppendToOutgoingContext(ctx, tt.md...)
			}
			st, err := b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "n"})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := st.Recv()
			if got := status.Code(err); got != tt.want {
				t.Fatalf("Watch with %v: code %v (%v), want %v", tt.md, got, err, tt.want)
			}
			if tt.want == codes.OK && resp.GetSnapshot().GetVersion() != 3 {
				t.Fatalf("Watch: version %d, want 3", resp.GetSnapshot().GetVersion())
			}
		})
	}
	// Other services on the same server keep their own rules: health needs no data-plane token.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(b.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health check without the data-plane token: %v, want OK", err)
	}
}

func TestWatchAnswersWhenVersionDiffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()

	// Opened before any snapshot: waits, then gets the first one.
	early, err := b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "early"})
	if err != nil {
		t.Fatal(err)
	}
	earlyCh := recv(t, early)
	if md, err := early.Header(); err != nil || len(md.Get(watch.HeaderVersion)) != 1 {
		t.Fatalf("Header() = %v, %v; want the %s header at once", md, err, watch.HeaderVersion)
	}
	if !b.srv.Publish(snap(5)) {
		t.Fatal("Publish(5) = false")
	}
	wantVersion(t, earlyCh, 5)

	// known_version differs (older, or even newer): answered at once.
	for _, known := range []int64{0, 4, 9} {
		sctx, scancel := context.WithCancel(ctx)
		st, err := b.client.Watch(sctx, &snapshotv1.WatchRequest{NodeId: "n", KnownVersion: known})
		if err != nil {
			t.Fatal(err)
		}
		wantVersion(t, recv(t, st), 5)
		scancel()
	}

	// known_version equal: nothing until a newer one is published.
	same, err := b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "same", KnownVersion: 5})
	if err != nil {
		t.Fatal(err)
	}
	sameCh := recv(t, same)
	testkit.WaitFor(t, "2 watchers", func() bool { return b.srv.Watchers() == 2 }) // early + same
	select {
	case v := <-sameCh:
		t.Fatalf("watch with the current version received %d before any publish", v)
	case <-time.After(100 * time.Millisecond):
	}
	if b.srv.Publish(snap(5)) || b.srv.Publish(snap(4)) {
		t.Fatal("Publish of a version not newer than the latest returned true")
	}
	if !b.srv.Publish(snap(6)) {
		t.Fatal("Publish(6) = false")
	}
	wantVersion(t, sameCh, 6)
	wantVersion(t, recv(t, early), 6)
	if got := b.srv.Latest().GetVersion(); got != 6 {
		t.Errorf("Latest() = %d, want 6", got)
	}
}

// TestStuckWatcherDoesNotDelayOthers keeps one stream from reading while large snapshots are published:
// publishes do not block, the healthy watcher gets every latest version, and the stuck one, once it
// reads again, gets the newest version having skipped intermediate ones.
func TestStuckWatcherDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()
	big := func(v int64) *snapshotv1.Snapshot {
		s := snap(v)
		// 1 MiB per snapshot: far beyond the HTTP/2 flow-control windows, so sends to a reader that does
		// not read block in the transport.
		s.Quotas = append(s.Quotas, &configv1.Quota{Scope: strings.Repeat("x", 1<<20)})
		return s
	}
	b.srv.Publish(big(1))
	stuck, err := b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	healthy, err := b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "healthy"})
	if err != nil {
		t.Fatal(err)
	}
	wantVersion(t, recv(t, healthy), 1)
	testkit.WaitFor(t, "2 watchers", func() bool { return b.srv.Watchers() == 2 })

	const last = 12
	for v := int64(2); v <= last; v++ {
		done := make(chan bool)
		go func() { done <- b.srv.Publish(big(v)) }()
		select {
		case ok := <-done:
			if !ok {
				t.Fatalf("Publish(%d) = false", v)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Publish(%d) blocked behind a stuck watcher", v)
		}
		// The healthy watcher keeps up (it may skip versions too; it must reach the latest).
		for {
			resp, err := healthy.Recv()
			if err != nil {
				t.Fatalf("healthy watcher: %v", err)
			}
			if resp.GetSnapshot().GetVersion() == v {
				break
			}
		}
	}

	// Now the stuck watcher reads: it gets what was in flight, then the latest, skipping the rest.
	var got []int64
	for len(got) == 0 || got[len(got)-1] != last {
		resp, err := stuck.Recv()
		if err != nil {
			t.Fatalf("stuck watcher after %v: %v", got, err)
		}
		got = append(got, resp.GetSnapshot().GetVersion())
	}
	if len(got) >= last-1 {
		t.Errorf("stuck watcher received %v: every intermediate version, want the latest to win", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Errorf("stuck watcher received %v: not increasing", got)
		}
	}
}

func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Publish(snap(1))
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()
	st, err := b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "n", KnownVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "1 watchers", func() bool { return b.srv.Watchers() == 1 })
	b.srv.Shutdown()
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("Recv after Shutdown = %v, want UNAVAILABLE", err)
	}
	st, err = b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("Watch after Shutdown = %v, want UNAVAILABLE", err)
	}
	testkit.WaitFor(t, "0 watchers", func() bool { return b.srv.Watchers() == 0 })
}

func TestWatchEndsWithClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Publish(snap(1))
	ctx, cancel := context.WithCancel(authed(context.Background()))
	st, err := b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := st.Recv(); err == nil || err == io.EOF {
		t.Errorf("Recv after cancel = %v, want an error", err)
	}
	testkit.WaitFor(t, "0 watchers", func() bool { return b.srv.Watchers() == 0 })
}

func TestServiceName(t *testing.T) {
	t.Parallel()
	if watch.ServiceName != snapshotv1.SnapshotService_ServiceDesc.ServiceName {
		t.Errorf("ServiceName = %q, want %q", watch.ServiceName, snapshotv1.SnapshotService_ServiceDesc.ServiceName)
	}
}

// DataPlanes names each watching data plane with the version it holds: the one it reported on opening,
// then each one sent, with when it was sent; a closed stream leaves the list.
func TestDataPlanesReportFreshness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Publish(snap(7))
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()
	// dp-b already holds 7: nothing is sent to it; dp-a holds 3 and gets 7.
	stB, err := b.client.Watch(ctx, &snapshotv1.WatchRequest{NodeId: "dp-b", KnownVersion: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stB.Header(); err != nil {
		t.Fatal(err)
	}
	ctxA, cancelA := context.WithCancel(authed(context.Background()))
	defer cancelA()
	stA, err := b.client.Watch(ctxA, &snapshotv1.WatchRequest{NodeId: "dp-a", KnownVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantVersion(t, recv(t, stA), 7)
	waitDataPlanes := func(what string, ok func([]watch.DataPlane) bool) []watch.DataPlane {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := b.srv.DataPlanes()
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: DataPlanes() = %+v", what, got)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	got := waitDataPlanes("both watching at 7", func(d []watch.DataPlane) bool {
		return len(d) == 2 && d[0].NodeID == "dp-a" && d[0].Version == 7 && d[1].NodeID == "dp-b" && d[1].Version == 7
	})
	if got[0].LastSentAt == nil || got[1].LastSentAt != nil {
		t.Errorf("last sent: dp-a %v (want a time), dp-b %v (want none: it already held 7)", got[0].LastSentAt, got[1].LastSentAt)
	}
	if got[0].ConnectedSince.IsZero() || got[0].Peer == "" {
		t.Errorf("dp-a connection %+v lacks its start or peer", got[0])
	}
	b.srv.Publish(snap(8))
	waitDataPlanes("both at 8", func(d []watch.DataPlane) bool {
		return len(d) == 2 && d[0].Version == 8 && d[1].Version == 8 && d[1].LastSentAt != nil
	})
	cancelA()
	waitDataPlanes("dp-a gone", func(d []watch.DataPlane) bool { return len(d) == 1 && d[0].NodeID == "dp-b" })
}
