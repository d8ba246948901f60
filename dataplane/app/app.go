// Package app wires a data plane together: configuration, Redis, the snapshot syncer, the client-facing
// HTTP API (every dialect), health and metrics, and graceful shutdown that finishes in-flight requests and
// flushes settlements. Main is the whole program, so tests drive it exactly as the binary does.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/proxy"
	"github.com/tollgate/tollgate/dataplane/redisbatch"
	"github.com/tollgate/tollgate/dataplane/reqcost"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/dataplane/syncer"
	dptelemetry "github.com/tollgate/tollgate/dataplane/telemetry"
	"github.com/tollgate/tollgate/dataplane/upstream"
	"github.com/tollgate/tollgate/shared/process"
	"github.com/tollgate/tollgate/shared/servertls"
	"github.com/tollgate/tollgate/shared/telemetry"
)

const usage = `usage: dataplane serve [flags]

Run "dataplane serve -h" for the flags.
`

// Main runs the data plane with args (without the program name).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing command")
	}
	switch args[0] {
	case "serve":
		cfg, err := config.Load(args[1:], getenv, stderr)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		log, err := process.NewLogger(stderr, cfg.LogLevel)
		if err != nil {
			return err
		}
		applyGC(defaultGC(getenv, cgroupMemoryLimit), log)
		tracing, err := telemetry.TracingFromEnv(ctx, getenv, "tollgate-dataplane")
		if err != nil {
			return err
		}
		defer func() { _ = tracing.Shutdown(context.WithoutCancel(ctx)) }() // flush the batched spans
		srv, err := New(ctx, cfg, log, WithTracerProvider(tracing.Provider), WithPprof(getenv("TOLLGATE_PPROF_ADDR")))
		if err != nil {
			return err
		}
		return srv.Run(ctx)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// Server is a data plane with its listener bound, ready to Run.
type Server struct {
	Config config.Config
	Log    *slog.Logger
	// Redis is a single-node or, with TOLLGATE_REDIS_CLUSTER, a cluster client.
	Redis   redis.UniversalClient
	Metrics *prometheus.Registry
	Mux     *http.ServeMux
	// Telemetry instruments the request path (metrics, spans, request log) around the proxy.
	Telemetry *dptelemetry.Telemetry
	// MetricsServer serves /metrics on TOLLGATE_METRICS_ADDR; nil when /metrics is on the client port.
	MetricsServer *telemetry.MetricsServer

	// reclaim returns a burst's memory to the OS once requests stop (TOLLGATE_IDLE_RECLAIM).
	reclaim *reclaimer

	// Proxy serves every client path; Upstream is its pooled provider transport.
	Proxy    *proxy.Handler
	Upstream *upstream.Client

	// Syncer holds the live snapshot (Syncer.Current) and keeps it in step with the control plane.
	Syncer *syncer.Syncer

	// Admitter reserves quota and checks rate limits; Recorder appends settlement records to the Redis
	// outbox; Forwarder drains the outbox to the control plane and refunds holds (runs in Run, flushed
	// at shutdown).
	Admitter  *admission.Admitter
	Recorder  *settle.Recorder
	Forwarder *settle.Forwarder
	// costCP is the control-plane client of the cost lookup (dataplane/reqcost; docs/cost.md).
	costCP *cpclient.Client

	ln net.Listener
	// pprof serves net/http/pprof on TOLLGATE_PPROF_ADDR (WithPprof); nil when off.
	pprof   *http.Server
	pprofLn net.Listener
	// drain drops readiness at shutdown before the listener closes (TOLLGATE_DRAIN_DELAY).
	drain *process.Drain
	// snapshotVersion reports the held snapshot's version; ok is false until the first one arrives.
	snapshotVersion func() (version int64, ok bool)
}

// Option adjusts New.
type Option func(*options)

type options struct {
	tracer    trace.TracerProvider
	pprofAddr string
}

// WithTracerProvider turns tracing on with tp (nil: off, the default).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tracer = tp } }

// WithPprof serves the Go runtime profiles (net/http/pprof, /debug/pprof/) on addr, a listener of its own
// that is never the client port (TOLLGATE_PPROF_ADDR; "": off, the default). For profiling a data plane
// under a benchmark (docs/benchmarks.md, "Request path"); bind it to loopback.
func WithPprof(addr string) Option { return func(o *options) { o.pprofAddr = addr } }

// New connects Redis, binds the listener and registers every handler. Nothing is served until Run.
func New(ctx context.Context, cfg config.Config, log *slog.Logger, opts ...Option) (*Server, error) {
	if cfg.RedisCluster {
		if err := checkClusterSlots(cfg.RedisKeyPrefix, cfg.RedisShards); err != nil {
			return nil, err
		}
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	rdb, err := newRedis(cfg)
	if err != nil {
		return nil, err
	}
	linger := cfg.SettleLinger
	if linger == 0 {
		linger = -1 // configured off (ForwarderOptions: 0 is the default, negative none)
	}
	s := &Server{Config: cfg, Log: log, Redis: rdb, Metrics: telemetry.NewRegistry(), Mux: http.NewServeMux(),
		snapshotVersion: func() (int64, bool) { return 0, false }}
	// One control-plane client configuration for both calls to the control plane (Watch and Settle): TLS,
	// and mTLS with a client certificate; the token in the calls' metadata carries the data plane's scopes.
	cp := cpclient.Options{Endpoints: cfg.CPEndpoints, Token: cfg.DPToken, CAFile: cfg.CPCAFile,
		ClientCert: cfg.CPClientCert, ClientKey: cfg.CPClientKey}
	if s.Syncer, err = syncer.New(syncer.Options{ControlPlane: cp, NodeID: cfg.NodeID}, log, s.Metrics); err != nil {
		rdb.Close()
		return nil, err
	}
	s.snapshotVersion = s.Syncer.Version
	settle.RegisterRecordMetrics(s.Metrics) // tollgate_settle_usage_out_of_bounds_total (docs/settlement.md, "Bounds")
	s.Admitter = admission.New(rdb, admission.Options{Prefix: cfg.RedisKeyPrefix, Shards: cfg.RedisShards, Timeout: cfg.RedisTimeout,
		OnRedisFailure: admission.FailurePolicy(cfg.AdmissionOnRedisFailure), Snapshot: s.Syncer.Current})
	promauto.With(s.Metrics).NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_admission_abandoned_reservations",
		Help: "Admission calls whose reply never came (Redis failed or hung), waiting to be released once Redis answers."},
		func() float64 { return float64(s.Admitter.Abandoned()) })
	// Records Redis refuses are held in memory and delivered straight to the control plane (docs/settlement.md).
	spill := settle.NewSpill(0)
	s.Recorder = settle.NewRecorder(rdb, cfg.RedisKeyPrefix).Sharded(cfg.RedisShards).SpillTo(spill)
	if s.Forwarder, err = settle.NewForwarder(rdb, settle.ForwarderOptions{Prefix: cfg.RedisKeyPrefix, Shards: cfg.RedisShards, NodeID: cfg.NodeID, Spill: spill,
		ControlPlane: cp, Linger: linger, Log: log, Metrics: s.Metrics, RedisTimeout: cfg.RedisTimeout}); err != nil {
		rdb.Close()
		s.Syncer.Close()
		return nil, err
	}
	// The cost lookup asks the control plane for settled rows over a client of its own (dialed on first use).
	if s.costCP, err = cpclient.New(cp); err != nil {
		rdb.Close()
		s.Syncer.Close()
		return nil, err
	}
	costs := reqcost.New(reqcost.Options{ControlPlane: s.costCP, Redis: rdb, Prefix: cfg.RedisKeyPrefix, Shards: cfg.RedisShards,
		Timeout: cfg.RedisTimeout})
	s.Upstream = upstream.New(upstream.Options{ConnectTimeout: cfg.UpstreamConnectTimeout, IdleTimeout: cfg.UpstreamIdleTimeout,
		ResponseHeaderTimeout: cfg.UpstreamResponseTimeout, CredentialCooldown: cfg.CredentialCooldown})
	// Request-path telemetry wraps the proxy's seams: its admitter, its recorder, its upstream transport
	// and its handler (docs/observability.md).
	s.Telemetry = dptelemetry.New(dptelemetry.Options{Registerer: s.Metrics, Tracer: o.tracer, Snapshot: s.Syncer.Current,
		RequestLog: log.Handler(), LogSample: cfg.RequestLogSample})
	s.Upstream.Wrap(s.Telemetry.Transport)
	s.Proxy = proxy.New(proxy.Options{
		Snapshot:     s.Syncer.Current,
		Upstream:     s.Upstream,
		Admitter:     s.Telemetry.Admitter(s.Admitter),
		Recorder:     s.Telemetry.Recorder(s.Recorder),
		Transformer:  &proxy.Translator{KeepaliveInterval: cfg.KeepaliveInterval},
		Costs:        costs,
		LocalUsage:   proxy.CountLocally,
		MaxBodyBytes: cfg.MaxBodyBytes,
		// A plain answer is held whole up to this before its headers leave (docs/dataplane.md step 12).
		HoldAnswerBytes: cfg.HoldAnswerBytes,
		Log:             log,
		Metrics:         s.Metrics,
		// Every request's body must arrive within this (docs/dataplane.md "Memory bounded by what was received").
		BodyReadTimeout: cfg.BodyReadTimeout,
	})
	s.reclaim = newReclaimer()
	s.Mux.Handle("/", s.reclaim.wrap(s.Telemetry.Handler(s.Proxy))) // every client path; health and metrics patterns are more specific
	s.drain = process.NewDrain(cfg.DrainDelay)
	process.HealthHandlers(s.Mux, s.drain.Ready(s.ready))
	if cfg.MetricsAddr == "" {
		s.Mux.Handle("GET /metrics", telemetry.Handler(s.Metrics))
	} else if s.MetricsServer, err = telemetry.NewMetricsServer(cfg.MetricsAddr, s.Metrics); err != nil {
		rdb.Close()
		s.Syncer.Close()
		return nil, err
	}
	var listenTLS *tls.Config
	if cfg.TLS.Enabled() {
		if listenTLS, err = servertls.Config(cfg.TLS, "h2", "http/1.1"); err != nil {
			rdb.Close()
			s.Syncer.Close()
			if s.MetricsServer != nil {
				s.MetricsServer.Listener.Close()
			}
			return nil, fmt.Errorf("TOLLGATE_DP_TLS_CERT/KEY/CLIENT_CA: %w", err)
		}
	}
	if s.ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		rdb.Close()
		s.Syncer.Close()
		if s.MetricsServer != nil {
			s.MetricsServer.Listener.Close()
		}
		return nil, fmt.Errorf("listen %s (TOLLGATE_DP_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	if listenTLS != nil {
		s.ln = tls.NewListener(s.ln, listenTLS)
	}
	if o.pprofAddr != "" {
		if s.pprofLn, err = net.Listen("tcp", o.pprofAddr); err != nil {
			rdb.Close()
			s.Syncer.Close()
			s.ln.Close()
			if s.MetricsServer != nil {
				s.MetricsServer.Listener.Close()
			}
			return nil, fmt.Errorf("listen %s (TOLLGATE_PPROF_ADDR): %w", o.pprofAddr, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		s.pprof = &http.Server{Handler: mux, ReadHeaderTimeout: s.Config.ReadHeaderTimeout,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	}
	return s, nil
}

// newRedis is the data plane's Redis client: every call bounded by its context's deadline and, failing
// that, by RedisTimeout (dial, read, write, pool wait), so a Redis that hangs holds no caller longer;
// concurrent requests' admission scripts and outbox appends share pipelines (docs/dataplane.md). With
// RedisCluster it is a cluster client (TOLLGATE_REDIS_URL in go-redis's cluster form), whose pipelines send
// each command to its slot's node; with RedisSentinelMaster a failover client that follows the master the
// sentinels name. Its pool (per node) has room, beyond go-redis's default, for the
// settlement forwarder's blocking read of every outbox stream.
func newRedis(cfg config.Config) (redis.UniversalClient, error) {
	t := cfg.RedisTimeout
	pool := 10*runtime.GOMAXPROCS(0) + admission.NewShards(cfg.RedisShards).N() + 1
	var rdb redis.UniversalClient
	if cfg.RedisSentinelMaster != "" {
		// The sentinels, in the cluster URL's multi-address form; the URL's credentials and TLS are the
		// master's (and its replicas').
		u, err := redis.ParseClusterURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("TOLLGATE_REDIS_URL (sentinels): %w", err)
		}
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: cfg.RedisSentinelMaster, SentinelAddrs: u.Addrs,
			Username: u.Username, Password: u.Password, TLSConfig: u.TLSConfig, ContextTimeoutEnabled: true,
			DialTimeout: t, ReadTimeout: t, WriteTimeout: t, PoolTimeout: t, PoolSize: pool})
	} else if cfg.RedisCluster {
		opts, err := redis.ParseClusterURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("TOLLGATE_REDIS_URL (cluster): %w", err)
		}
		opts.ContextTimeoutEnabled = true
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = t, t, t, t
		opts.PoolSize = max(opts.PoolSize, pool)
		rdb = redis.NewClusterClient(opts)
	} else {
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("TOLLGATE_REDIS_URL: %w", err)
		}
		opts.ContextTimeoutEnabled = true
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = t, t, t, t
		opts.PoolSize = max(opts.PoolSize, pool)
		rdb = redis.NewClient(opts)
	}
	redisbatch.Install(rdb, "evalsha", "eval", "xadd")
	return rdb, nil
}

// ready reports readiness: a snapshot is held and, under the closed admission policy, Redis answers a
// PING within RedisTimeout. Under the open policy a failing Redis leaves the data plane ready, degraded
// (docs/dataplane.md, "Redis outage").
func (s *Server) ready(ctx context.Context) (map[string]any, error) {
	v, ok := s.snapshotVersion()
	if !ok {
		return nil, errors.New("no snapshot received yet")
	}
	policy := admission.FailurePolicy(s.Config.AdmissionOnRedisFailure)
	if policy == "" {
		policy = admission.FailOpen
	}
	detail := map[string]any{"snapshot_version": fmt.Sprint(v), "redis": "ok", "admission_on_redis_failure": string(policy)}
	timeout := s.Config.RedisTimeout
	if timeout <= 0 {
		timeout = admission.DefaultTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.Redis.Ping(pctx).Err(); err != nil {
		detail["redis"] = "unavailable: " + err.Error()
		if policy == admission.FailClosed {
			// Closed: every request that needs admission is refused with 503 until Redis answers, so this
			// data plane cannot serve; out of rotation, traffic goes to data planes that can.
			return detail, fmt.Errorf("redis unavailable and admission fails closed: %w", err)
		}
		// Open: still ready. Without Redis the data plane admits without reservations and spills
		// settlement records to the control plane, so taking it out of rotation would turn a Redis
		// outage into a gateway outage. The detail says it is degraded.
	}
	return detail, nil
}

// Addr is the bound client API address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// PprofAddr is the bound profiling address (WithPprof), "" when profiling is off.
func (s *Server) PprofAddr() string {
	if s.pprofLn == nil {
		return ""
	}
	return s.pprofLn.Addr().String()
}

// Run serves until ctx ends, then stops accepting, finishes in-flight requests and closes Redis.
func (s *Server) Run(ctx context.Context) error {
	// No ReadTimeout or WriteTimeout: net/http cancels a request's context when the connection's read
	// deadline passes, and a write timeout would cut long streams. The body's deadline is the handler's
	// (proxy BodyReadTimeout); headers and idle keep-alives have the server's.
	httpSrv := &http.Server{Handler: s.Mux, ReadHeaderTimeout: s.Config.ReadHeaderTimeout, IdleTimeout: s.Config.IdleTimeout,
		ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn)}
	syncCtx, stopSync := context.WithCancel(ctx)
	defer stopSync()
	snapshots := process.Server{
		Name:  "syncer",
		Serve: func() error { return s.Syncer.Run(syncCtx) },
		Stop:  func(context.Context) error { stopSync(); return nil },
	}
	// The forwarder outlives the servers: it stops only in the shutdown hook, which then flushes.
	fwdCtx, stopForward := context.WithCancel(context.WithoutCancel(ctx))
	defer stopForward()
	forwarded := make(chan struct{})
	go func() { defer close(forwarded); _ = s.Forwarder.Run(fwdCtx) }()
	if d := s.Config.IdleReclaim; d > 0 {
		go s.reclaim.run(syncCtx, d)
	}
	servers := []process.Server{s.drain.Server(httpSrv), process.HTTPServer("http", httpSrv, s.ln), snapshots}
	if m := s.MetricsServer; m != nil {
		servers = append(servers, process.HTTPServer("metrics", m.Server, m.Listener))
		s.Log.Info("metrics listening", "addr", m.Addr())
	}
	if s.pprof != nil {
		servers = append(servers, process.HTTPServer("pprof", s.pprof, s.pprofLn))
		s.Log.Info("pprof listening", "addr", s.pprofLn.Addr().String())
	}
	s.Log.Info("data plane listening", "http", s.Addr(), "node", s.Config.NodeID)
	return process.Run(ctx, s.Log, s.Config.ShutdownTimeout,
		servers,
		func(context.Context) error { s.Syncer.Close(); _ = s.costCP.Close(); return nil },
		func(ctx context.Context) error { // every in-flight request has recorded; deliver what we can
			stopForward()
			<-forwarded
			defer s.Forwarder.Close()
			return s.Forwarder.Flush(ctx)
		},
		func(context.Context) error { return s.Redis.Close() })
}
