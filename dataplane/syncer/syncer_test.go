package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/watch"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/syncer"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/telemetry"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/tlstest"
)

const token = "dp-token-0123456789abcdef"

// controlPlane is a real gRPC server with the real SnapshotService on a loopback port.
type controlPlane struct {
	addr string
	ws   *watch.Server
	g    *grpc.Server
}

func startCP(t *testing.T, addr string, opts ...grpc.ServerOption) *controlPlane {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ws := watch.New(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	g := grpc.NewServer(append(opts, watch.AuthOptions(token)...)...)
	watch.Register(g, ws)
	go func() { _ = g.Serve(ln) }()
	cp := &controlPlane{addr: ln.Addr().String(), ws: ws, g: g}
	t.Cleanup(cp.stop)
	return cp
}

func (c *controlPlane) stop() { c.ws.Shutdown(); c.g.Stop() }

func snap(v int64) *snapshotv1.Snapshot {
	return &snapshotv1.Snapshot{Version: v, BuiltAt: timestamppb.Now()}
}

type running struct {
	s   *syncer.Syncer
	reg *prometheus.Registry
}

func startSyncer(t *testing.T, opts syncer.Options) *running {
	t.Helper()
	if opts.ControlPlane.Token == "" {
		opts.ControlPlane.Token = token
	}
	opts.NodeID = t.Name()
	if opts.ControlPlane.BackoffBase == 0 {
		opts.ControlPlane.BackoffBase, opts.ControlPlane.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	}
	reg := prometheus.NewRegistry()
	s, err := syncer.New(opts, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
		s.Close()
	})
	return &running{s: s, reg: reg}
}

func waitVersion(t *testing.T, s *syncer.Syncer, v int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := s.Wait(ctx, v)
	if err != nil {
		got, _ := s.Version()
		t.Fatalf("Wait(%d): %v (holding %d)", v, err, got)
	}
	if c.Version != v {
		t.Fatalf("Wait(%d) = version %d, want exactly %d", v, c.Version, v)
	}
}

func scrape(reg *prometheus.Registry) string {
	s, err := telemetry.Text(reg)
	if err != nil {
		panic(err)
	}
	return s
}

func TestSyncerFollowsPublishes(t *testing.T) {
	t.Parallel()
	cp := startCP(t, "127.0.0.1:0")
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}}})
	if r.s.Current() != nil {
		t.Fatal("Current() before any snapshot is not nil")
	}
	if _, ok := r.s.Version(); ok {
		t.Fatal("Version() ok before any snapshot")
	}
	cp.ws.Publish(snap(3))
	waitVersion(t, r.s, 3)
	for v := int64(4); v <= 10; v++ {
		cp.ws.Publish(snap(v))
	}
	waitVersion(t, r.s, 10)
	if got := r.s.Endpoint(); got != cp.addr {
		t.Errorf("Endpoint() = %q, want %q", got, cp.addr)
	}
	out := scrape(r.reg)
	for _, want := range []string{"tollgate_snapshot_version 10\n", "tollgate_snapshot_connected 1\n",
		"tollgate_snapshot_rejects_total 0\n", "tollgate_snapshot_disconnected_seconds 0\n",
		"tollgate_snapshot_config_changed_timestamp_seconds ", "tollgate_snapshot_received_timestamp_seconds "} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
}

// A configuration nobody changed for a day is not stale: while the Watch stream is open the staleness
// gauge stays 0 and the configuration's age is a timestamp (the old tollgate_snapshot_age_seconds rose
// without bound here). Once the stream is lost, the staleness gauge counts.
func TestSyncerStalenessIsDisconnectionNotConfigAge(t *testing.T) {
	t.Parallel()
	cp := startCP(t, "127.0.0.1:0")
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}}})
	day := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	cp.ws.Publish(&snapshotv1.Snapshot{Version: 7, BuiltAt: timestamppb.New(day)})
	waitVersion(t, r.s, 7)
	out := scrape(r.reg)
	for _, want := range []string{"tollgate_snapshot_disconnected_seconds 0\n",
		fmt.Sprintf("tollgate_snapshot_config_changed_timestamp_seconds %s\n", strconv.FormatFloat(float64(day.Unix()), 'e', -1, 64))} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tollgate_snapshot_age_seconds") {
		t.Errorf("the rising age gauge is still exported:\n%s", out)
	}
	cp.stop()
	testkit.WaitFor(t, "disconnected gauge counting", func() bool {
		return !strings.Contains(scrape(r.reg), "tollgate_snapshot_disconnected_seconds 0\n") &&
			strings.Contains(scrape(r.reg), "tollgate_snapshot_connected 0\n")
	})
}

func TestSyncerKeepsLastGoodOnCompileFailure(t *testing.T) {
	t.Parallel()
	cp := startCP(t, "127.0.0.1:0")
	bad := errors.New("bad snapshot")
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}},
		Compile: func(s *snapshotv1.Snapshot) (*snapshot.Compiled, error) {
			if s.GetVersion() == 2 {
				return nil, bad
			}
			return snapshot.Compile(s)
		}})
	cp.ws.Publish(snap(1))
	waitVersion(t, r.s, 1)
	held := r.s.Current()
	cp.ws.Publish(snap(2))
	testkit.WaitFor(t, "reject counted", func() bool {
		return strings.Contains(scrape(r.reg), "tollgate_snapshot_rejects_total 1\n")
	})
	if r.s.Current() != held {
		t.Fatalf("after a snapshot that fails to compile, Current() = version %d, want the held version 1", r.s.Current().Version)
	}
	cp.ws.Publish(snap(3))
	waitVersion(t, r.s, 3)
}

func TestSyncerRotatesEndpointsAndCatchesUp(t *testing.T) {
	t.Parallel()
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	cp1 := startCP(t, "127.0.0.1:0")
	cp2 := startCP(t, "127.0.0.1:0")
	cp1.ws.Publish(snap(5))
	cp2.ws.Publish(snap(5))
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{dead, cp1.addr, cp2.addr}}})
	waitVersion(t, r.s, 5)
	if got := r.s.Endpoint(); got != cp1.addr {
		t.Fatalf("Endpoint() = %q, want the first live one %q", got, cp1.addr)
	}

	// cp1 goes away: the syncer keeps version 5, moves to cp2 and follows it.
	cp1.stop()
	testkit.WaitFor(t, "watching cp2", func() bool { return r.s.Endpoint() == cp2.addr })
	if v, ok := r.s.Version(); !ok || v != 5 {
		t.Fatalf("after losing cp1, Version() = %d, %v; want 5, true", v, ok)
	}
	cp2.ws.Publish(snap(6))
	waitVersion(t, r.s, 6)

	// Every control plane gone: the last version stays. One comes back (same address, newer state):
	// the syncer catches up.
	cp2.stop()
	testkit.WaitFor(t, "disconnected", func() bool { return r.s.Endpoint() == "" })
	time.Sleep(100 * time.Millisecond) // a few failed reconnects
	if v, _ := r.s.Version(); v != 6 {
		t.Fatalf("with no control plane, Version() = %d, want 6", v)
	}
	cp1b := startCP(t, cp1.addr)
	cp1b.ws.Publish(snap(9))
	waitVersion(t, r.s, 9)
}

func TestSyncerIgnoresOlderVersion(t *testing.T) {
	t.Parallel()
	ahead := startCP(t, "127.0.0.1:0")
	behind := startCP(t, "127.0.0.1:0")
	ahead.ws.Publish(snap(8))
	behind.ws.Publish(snap(7))
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{ahead.addr, behind.addr}}})
	waitVersion(t, r.s, 8)
	ahead.stop()
	testkit.WaitFor(t, "watching the lagging replica", func() bool { return r.s.Endpoint() == behind.addr })
	time.Sleep(50 * time.Millisecond)
	if v, _ := r.s.Version(); v != 8 {
		t.Fatalf("a lagging replica moved the version back to %d", v)
	}
	behind.ws.Publish(snap(9))
	waitVersion(t, r.s, 9)
}

func TestSyncerWrongToken(t *testing.T) {
	t.Parallel()
	cp := startCP(t, "127.0.0.1:0")
	cp.ws.Publish(snap(1))
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}, Token: "not-the-token-at-all"}})
	testkit.WaitFor(t, "a refused stream", func() bool {
		return strings.Contains(scrape(r.reg), `tollgate_snapshot_streams_total{endpoint="`+cp.addr+`"} 2`)
	})
	if r.s.Current() != nil {
		t.Fatal("a syncer with the wrong token received a snapshot")
	}
}

// TestSyncerTLS serves Watch over TLS with a freshly generated self-signed certificate.
func TestSyncerTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile := tlstest.SelfSigned(t)
	creds, err := credentials.NewServerTLSFromFile(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cp := startCP(t, "127.0.0.1:0", grpc.Creds(creds))
	cp.ws.Publish(snap(4))
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}, CAFile: certFile}})
	waitVersion(t, r.s, 4)

	// Plaintext to a TLS server gets nothing.
	plain := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}}})
	time.Sleep(200 * time.Millisecond)
	if plain.s.Current() != nil {
		t.Fatal("a plaintext syncer received a snapshot from a TLS server")
	}
	// A CA that did not sign the server's certificate is refused.
	other, _ := tlstest.SelfSigned(t)
	wrong := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}, CAFile: other}})
	time.Sleep(200 * time.Millisecond)
	if wrong.s.Current() != nil {
		t.Fatal("a syncer trusting another CA received a snapshot")
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	if _, err := syncer.New(syncer.Options{}, slog.New(slog.DiscardHandler), prometheus.NewRegistry()); err == nil {
		t.Error("New without endpoints succeeded")
	}
	if _, err := syncer.New(syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{"127.0.0.1:1"}, CAFile: filepath.Join(t.TempDir(), "missing.pem")}},
		slog.New(slog.DiscardHandler), prometheus.NewRegistry()); err == nil {
		t.Error("New with a missing CA file succeeded")
	}
}

// TestSyncerTLSServerName: a control plane whose certificate names only cp.internal, dialed at its
// loopback address, is verified with ServerName cp.internal and refused without it.
func TestSyncerTLSServerName(t *testing.T) {
	t.Parallel()
	certFile, keyFile := tlstest.SelfSignedFor(t, "cp.internal")
	creds, err := credentials.NewServerTLSFromFile(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cp := startCP(t, "127.0.0.1:0", grpc.Creds(creds))
	cp.ws.Publish(snap(3))
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}, CAFile: certFile, ServerName: "cp.internal"}})
	waitVersion(t, r.s, 3)
	unnamed := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}, CAFile: certFile}})
	time.Sleep(200 * time.Millisecond)
	if unnamed.s.Current() != nil {
		t.Fatal("a syncer received a snapshot from a server whose certificate does not name the address dialed")
	}
}
