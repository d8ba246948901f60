// Package upstream owns the data plane's connections to providers: one pooled keep-alive transport
// (HTTP/2 where the provider offers it over TLS) with connect, idle and response-header timeouts, the
// provider's authentication headers per channel type, and credential choice — weighted random among a
// provider's enabled credentials, skipping credentials that failed recently (cooldown). The failover
// loop itself (next credential, then next candidate) lives in the proxy, which alone knows whether a
// byte already reached the client.
package upstream

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// DefaultBetaVersion is the anthropic-version sent to beta providers when the client sent none.
const DefaultBetaVersion = "2023-06-01"

// Options configure a Client.
type Options struct {
	ConnectTimeout        time.Duration
	IdleTimeout           time.Duration
	ResponseHeaderTimeout time.Duration
	// CredentialCooldown is how long a failing credential is skipped.
	CredentialCooldown time.Duration
	// MaxIdleConnsPerHost bounds the idle pool per provider host (default 512).
	MaxIdleConnsPerHost int
	// Now and IntN are the clock and the weighted-choice source (defaults: time.Now, math/rand/v2).
	Now  func() time.Time
	IntN func(n int) int
}

// Client sends requests to providers. It is safe for concurrent use.
type Client struct {
	transport *http.Transport
	rt        http.RoundTripper // transport, or the instrumentation wrapping it (Wrap)
	cooldown  time.Duration
	now       func() time.Time
	intN      func(n int) int
	// until maps a credential id to the unix-nano time its cooldown ends (*atomic.Int64).
	until sync.Map
}

// WriteBufferSize is the write buffer of each pooled HTTP/1 connection to a provider.
const WriteBufferSize = 32 << 10

// New builds a Client with its own pooled transport.
func New(o Options) *Client {
	if o.MaxIdleConnsPerHost <= 0 {
		o.MaxIdleConnsPerHost = 512
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IntN == nil {
		o.IntN = rand.IntN
	}
	d := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // no global bound; per host below
		MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
		IdleConnTimeout:       o.IdleTimeout,
		TLSHandshakeTimeout:   o.ConnectTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		// Bodies are relayed and inspected for usage as they come: ask for identity encoding.
		DisableCompression: true,
		// An HTTP/1 request body is written through the connection's write buffer: one that holds the
		// headers and a request of up to ~32 KiB (a long conversation) goes out in one write. With the
		// default 4 KiB, net/http writes the first 4 KiB, then allocates a copy buffer of up to 32 KiB
		// per request for the rest and writes again (docs/benchmarks.md, "Request path"). HTTP/2
		// connections have their own framing buffers.
		WriteBufferSize: WriteBufferSize,
	}
	return &Client{transport: t, rt: t, cooldown: o.CredentialCooldown, now: o.Now, intN: o.IntN}
}

// Do sends req on the pooled transport (no redirects are followed).
func (c *Client) Do(req *http.Request) (*http.Response, error) { return c.rt.RoundTrip(req) }

// Close closes idle pooled connections.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

// Transport exposes the pooled transport (benchmarks reuse it for a bare reverse proxy floor).
func (c *Client) Transport() *http.Transport { return c.transport }

// Credentials appends p's credentials to dst[:0] in the order to try them: the ones not cooling down in
// weighted random order, then the cooling ones (so a provider whose every credential failed recently is
// still tried rather than refused).
func (c *Client) Credentials(p *snapshot.Provider, dst []snapshot.Credential) []snapshot.Credential {
	dst = dst[:0]
	now := c.now().UnixNano()
	for _, cr := range p.Credentials {
		if !c.cooling(cr.ID, now) {
			dst = append(dst, cr)
		}
	}
	ready := len(dst)
	c.shuffle(dst)
	if ready < len(p.Credentials) {
		for _, cr := range p.Credentials {
			if c.cooling(cr.ID, now) {
				dst = append(dst, cr)
			}
		}
		c.shuffle(dst[ready:])
	}
	return dst
}

func (c *Client) cooling(id int64, now int64) bool {
	v, ok := c.until.Load(id)
	return ok && v.(*atomic.Int64).Load() > now
}

// Fail puts a credential in cooldown.
func (c *Client) Fail(credID int64) {
	until := c.now().Add(c.cooldown).UnixNano()
	v, ok := c.until.Load(credID)
	if !ok {
		v, _ = c.until.LoadOrStore(credID, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(until)
}

// Cooling reports whether a credential is cooling down now.
func (c *Client) Cooling(credID int64) bool { return c.cooling(credID, c.now().UnixNano()) }

// shuffle is a weighted random permutation of cs.
func (c *Client) shuffle(cs []snapshot.Credential) {
	for i := 0; i < len(cs)-1; i++ {
		total := 0
		for _, cr := range cs[i:] {
			total += int(max(cr.Weight, 1))
		}
		r := c.intN(total)
		j := i
		for ; j < len(cs)-1; j++ {
			r -= int(max(cs[j].Weight, 1))
			if r < 0 {
				break
			}
		}
		cs[i], cs[j] = cs[j], cs[i]
	}
}

// clientAuthHeaders are the headers a client may authenticate to the gateway with; they never reach a
// provider.
var clientAuthHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Proxy-Authorization"}

// gatewayRequestHeaders are the gateway's own request headers (docs/cost.md): said to the gateway, never
// passed on to a provider.
var gatewayRequestHeaders = []string{"X-Tollgate-Max-Cost", "X-Tollgate-Include-Cost"}

// hopHeaders are hop-by-hop headers (RFC 9110 §7.6.1) plus those the transport sets itself.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding",
	"Upgrade", "Host", "Content-Length", "Accept-Encoding"}

// OutboundHeader copies the client's header for the upstream request: hop-by-hop and client
// authentication headers are dropped, everything else (vendor scoping headers, anthropic-beta, …) is kept.
func OutboundHeader(in http.Header) http.Header {
	out := make(http.Header, len(in))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range hopHeaders {
		delete(out, k)
	}
	for _, k := range clientAuthHeaders {
		delete(out, k)
	}
	for _, k := range gatewayRequestHeaders {
		delete(out, k)
	}
	return out
}

// SetAuth sets the provider's authentication on h for a channel: alpha, custom and router
// `Authorization: Bearer`; beta `x-api-key` plus `anthropic-version` (the client's, else
// DefaultBetaVersion); gamma `x-goog-api-key`.
func SetAuth(h http.Header, ch vocab.ChannelType, secret string) {
	switch ch {
	case vocab.ChannelBeta:
		h["X-Api-Key"] = []string{secret}
		if len(h["Anthropic-Version"]) == 0 {
			h["Anthropic-Version"] = []string{DefaultBetaVersion}
		}
	case vocab.ChannelGamma:
		h["X-Goog-Api-Key"] = []string{secret}
	default:
		h["Authorization"] = []string{"Bearer " + secret}
	}
}

// Retryable reports whether an upstream status should fail over (before any byte reached the client).
func Retryable(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

// IsTimeout reports whether err is a timeout (dial, TLS or response headers), not a cancellation.
func IsTimeout(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
