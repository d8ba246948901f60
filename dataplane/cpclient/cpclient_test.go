package cpclient_test

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/shared/servertls"
	"github.com/tollgate/tollgate/shared/tlstest"
)

// server is a real gRPC server on loopback (the health service) that keeps the authorization metadata
// of every call.
type server struct {
	addr string
	mu   sync.Mutex
	auth []string
}

func serve(t *testing.T, opts ...grpc.ServerOption) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: ln.Addr().String()}
	opts = append(opts, grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		s.mu.Lock()
		s.auth = append(s.auth, md.Get("authorization")...)
		s.mu.Unlock()
		return h(ctx, req)
	}))
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return s
}

func call(c *cpclient.Client) (string, error) {
	cc, ep := c.Current()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return ep, err
}

func newClient(t *testing.T, opts cpclient.Options) *cpclient.Client {
	t.Helper()
	c, err := cpclient.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestTokenAndRotation: every call carries the token; Rotate moves through the endpoints in order and
// wraps around.
func TestTokenAndRotation(t *testing.T) {
	t.Parallel()
	a, b := serve(t), serve(t)
	c := newClient(t, cpclient.Options{Endpoints: []string{a.addr, b.addr}, Token: "tok"})
	for _, want := range []*server{a, b, a} {
		ep, err := call(c)
		if err != nil || ep != want.addr {
			t.Fatalf("call went to %s (%v), want %s", ep, err, want.addr)
		}
		c.Rotate()
	}
	for _, s := range []*server{a, b} {
		s.mu.Lock()
		for _, got := range s.auth {
			if got != "Bearer tok" {
				t.Errorf("authorization = %q, want %q", got, "Bearer tok")
			}
		}
		if len(s.auth) == 0 {
			t.Errorf("server %s saw no authorization", s.addr)
		}
		s.mu.Unlock()
	}
}

// TestServerName: a server whose certificate names only cp.internal, dialed at its loopback address,
// is verified with ServerName cp.internal and refused without it.
func TestServerName(t *testing.T) {
	t.Parallel()
	certFile, keyFile := tlstest.SelfSignedFor(t, "cp.internal")
	creds, err := credentials.NewServerTLSFromFile(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, grpc.Creds(creds))
	named := newClient(t, cpclient.Options{Endpoints: []string{s.addr}, CAFile: certFile, ServerName: "cp.internal"})
	if _, err := call(named); err != nil {
		t.Errorf("with ServerName cp.internal: %v", err)
	}
	unnamed := newClient(t, cpclient.Options{Endpoints: []string{s.addr}, CAFile: certFile})
	if _, err := call(unnamed); err == nil {
		t.Error("without ServerName the certificate for cp.internal was accepted for 127.0.0.1")
	}
}

// TestMutualTLS: a control plane requiring a client certificate accepts the client that presents one
// signed by its CA, and refuses one that presents none.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "cp-ca")
	serverCert, serverKey := ca.Server(t, "cp")
	clientCert, clientKey := ca.Client(t, "dp")
	cfg, err := servertls.Config(servertls.Files{Cert: serverCert, Key: serverKey, ClientCA: ca.File}, "h2")
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, grpc.Creds(credentials.NewTLS(cfg)))
	with := newClient(t, cpclient.Options{Endpoints: []string{s.addr}, CAFile: ca.File, ClientCert: clientCert, ClientKey: clientKey})
	if _, err := call(with); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
	without := newClient(t, cpclient.Options{Endpoints: []string{s.addr}, CAFile: ca.File})
	if _, err := call(without); err == nil {
		t.Error("a client without a certificate was accepted")
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]cpclient.Options{
		"no endpoints":           {},
		"missing CA file":        {Endpoints: []string{"127.0.0.1:1"}, CAFile: filepath.Join(t.TempDir(), "missing.pem")},
		"client cert without CA": {Endpoints: []string{"127.0.0.1:1"}, ClientCert: "c.pem", ClientKey: "k.pem"},
	} {
		if c, err := cpclient.New(opts); err == nil {
			_ = c.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestBackoff: the delay follows shared/backoff between the configured bounds.
func TestBackoff(t *testing.T) {
	t.Parallel()
	c := newClient(t, cpclient.Options{Endpoints: []string{"127.0.0.1:1"}, BackoffBase: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond})
	for n, want := range map[int][2]time.Duration{1: {5 * time.Millisecond, 10 * time.Millisecond}, 2: {10 * time.Millisecond, 20 * time.Millisecond},
		9: {20 * time.Millisecond, 40 * time.Millisecond}} {
		if d := c.Backoff(n); d < want[0] || d > want[1] {
			t.Errorf("Backoff(%d) = %v, want within %v", n, d, want)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}
