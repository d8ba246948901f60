// Package cpclient is the data plane's one client of the control plane, used by the syncer (Watch) and
// the settlement forwarder (Settle): it builds the TLS configuration (trusted CA, the server name to
// verify, an optional client certificate reloaded when its files change), sends the data-plane token
// with every call as per-RPC credentials, holds one lazily dialed connection per control-plane endpoint
// and rotates through them on failure, and paces retries with the shared back-off (shared/backoff).
package cpclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/shared/backoff"
	"github.com/tollgate/tollgate/shared/servertls"
)

// Options configure a Client. The data plane builds one from its configuration and hands it to both the
// syncer and the forwarder.
type Options struct {
	// Endpoints are the control planes' gRPC addresses (host:port), tried in order, rotating on failure.
	Endpoints []string
	// Token is the data-plane token, sent with every call as "authorization: Bearer <token>".
	Token string
	// CAFile enables TLS, trusting the CA certificates in this PEM file (TOLLGATE_CP_CA_FILE). Empty means
	// plaintext.
	CAFile string
	// ClientCert and ClientKey are the client certificate presented to a control plane that requires one
	// (mutual TLS; TOLLGATE_CP_CLIENT_CERT/KEY); they need CAFile.
	ClientCert, ClientKey string
	// ServerName is the name verified against the control plane's certificate (default: the host of the
	// endpoint dialed).
	ServerName string
	// BackoffBase and BackoffMax bound the delay between retries (Backoff); each user sets its own
	// defaults.
	BackoffBase, BackoffMax time.Duration
}

// Client holds a connection per endpoint (each dials lazily, on its first call) and the endpoint in
// turn. It is safe for concurrent use.
type Client struct {
	opts  Options
	conns []*grpc.ClientConn

	mu     sync.Mutex
	next   int
	closed bool
}

// New builds the client's credentials and connections; extra dial options are added to every
// connection (keepalive, message size). It never touches the network.
func New(opts Options, extra ...grpc.DialOption) (*Client, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("no control-plane endpoints")
	}
	creds, err := TransportCredentials(opts.CAFile, opts.ClientCert, opts.ClientKey, opts.ServerName)
	if err != nil {
		return nil, err
	}
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithPerRPCCredentials(bearer(opts.Token))}, extra...)
	c := &Client{opts: opts}
	for _, ep := range opts.Endpoints {
		cc, err := grpc.NewClient(ep, dial...)
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("endpoint %q: %w", ep, err)
		}
		c.conns = append(c.conns, cc)
	}
	return c, nil
}

// TransportCredentials are the gRPC credentials of the data plane's calls to the control plane:
// plaintext without caFile; TLS trusting caFile's certificates and verifying serverName (default: the
// host dialed); and, with certFile and keyFile, presenting that client certificate, reloaded when its
// files change.
func TransportCredentials(caFile, certFile, keyFile, serverName string) (credentials.TransportCredentials, error) {
	if caFile == "" {
		if certFile != "" {
			return nil, errors.New("a client certificate (TOLLGATE_CP_CLIENT_CERT) needs TLS (TOLLGATE_CP_CA_FILE)")
		}
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA file (TOLLGATE_CP_CA_FILE): %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s (TOLLGATE_CP_CA_FILE) holds no PEM certificate", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		// Re-read when the files change, so a renewed client certificate is used without a restart.
		get, err := servertls.ClientCertificate(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate (TOLLGATE_CP_CLIENT_CERT/KEY): %w", err)
		}
		cfg.GetClientCertificate = get
	}
	return credentials.NewTLS(cfg), nil
}

// bearer is the data-plane token as per-RPC credentials. It is sent over plaintext too (a development
// control plane without TLS), as the token was before it became a credential.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Current returns the connection to the endpoint in turn and its address.
func (c *Client) Current() (*grpc.ClientConn, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns[c.next], c.opts.Endpoints[c.next]
}

// Rotate moves on to the next endpoint (after a failure of the one in turn) and returns its address.
func (c *Client) Rotate() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next = (c.next + 1) % len(c.conns)
	return c.opts.Endpoints[c.next]
}

// Backoff is the delay before the retry after the n-th consecutive failure (n >= 1): shared/backoff
// between BackoffBase and BackoffMax.
func (c *Client) Backoff(n int) time.Duration {
	return backoff.Delay(n, c.opts.BackoffBase, c.opts.BackoffMax)
}

// Close closes every connection; later calls do nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}
