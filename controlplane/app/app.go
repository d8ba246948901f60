// Package app wires the control plane together: configuration, Postgres, the admin REST API and console
// on HTTP, the gRPC services (admin, snapshot watch, settlement) with reflection, and graceful shutdown.
// Main is the whole program, so tests drive it exactly as the binary does.
package app

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/alert"
	"github.com/tollgate/tollgate/controlplane/batch"
	"github.com/tollgate/tollgate/controlplane/config"
	"github.com/tollgate/tollgate/controlplane/console"
	"github.com/tollgate/tollgate/controlplane/dptoken"
	"github.com/tollgate/tollgate/controlplane/partition"
	"github.com/tollgate/tollgate/controlplane/pricesched"
	"github.com/tollgate/tollgate/controlplane/reconcile"
	"github.com/tollgate/tollgate/controlplane/rollupfold"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/snapshotbuild"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/watch"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/process"
	"github.com/tollgate/tollgate/shared/servertls"
	"github.com/tollgate/tollgate/shared/telemetry"
)

const usage = `usage: controlplane <command> [flags]

commands:
  migrate   apply database migrations and exit
  serve     migrate (unless -no-migrate) and serve admin REST, console and gRPC
  catalog   plan or apply a price catalog import through the admin API (GitOps)

Run "controlplane <command> -h" for the command's flags.
`

// Main runs the control plane with args (without the program name).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing command")
	}
	switch args[0] {
	case "migrate":
		return migrate(ctx, args[1:], stderr, getenv)
	case "serve":
		cfg, err := config.Load(args[1:], getenv, stderr)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		log, err := process.NewLogger(stderr, cfg.LogLevel)
		if err != nil {
			return err
		}
		srv, err := New(ctx, cfg, log)
		if err != nil {
			return err
		}
		return srv.Run(ctx)
	case "catalog":
		return catalogCmd(ctx, args[1:], stdout, stderr, getenv)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func migrate(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := getenv("TOLLGATE_DATABASE_URL")
	if def == "" {
		def = "postgres://localhost:5432/tollgate"
	}
	dbURL := fs.String("database-url", def, "Postgres URL (TOLLGATE_DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, _ := process.NewLogger(stderr, "info")
	pool, err := store.Open(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := store.Migrate(ctx, pool)
	if err != nil {
		return err
	}
	log.Info("migrations applied", "applied", applied, "count", len(applied))
	return nil
}

// Server is a control plane with its listeners bound, ready to Run.
type Server struct {
	Config  config.Config
	Log     *slog.Logger
	Pool    *pgxpool.Pool
	Metrics *prometheus.Registry
	// MetricsServer serves /metrics on TOLLGATE_METRICS_ADDR; nil when /metrics is on the HTTP port.
	MetricsServer *telemetry.MetricsServer
	// Mux serves admin REST, the console and health on the HTTP listener.
	Mux *http.ServeMux
	// GRPC serves the admin, snapshot and settlement services with reflection.
	GRPC *grpc.Server
	// Watch serves SnapshotService and holds the latest published snapshot; Snapshots builds and
	// publishes it (run by Run).
	Watch     *watch.Server
	Snapshots *snapshotbuild.Builder
	// PriceSchedule writes scheduled price rule versions when they come due (run by Run).
	PriceSchedule *pricesched.Applier
	// Alerts evaluates budget thresholds and delivers their webhooks (run by Run).
	Alerts *alert.Runner
	// Reconcile imports the providers' usage and cost reports and reconciles the ledger daily (run by Run;
	// docs/reconciliation.md); on-demand runs through the admin API use it too.
	Reconcile *reconcile.Runner
	// Partitions creates the usages month partitions ahead and applies the usage retention (run by Run).
	Partitions *partition.Maintainer
	// SpendFold folds the spend deltas into the rollups every few minutes (run by Run).
	SpendFold *rollupfold.Folder
	// Batches watches the providers' batches and settles their result lines (run by Run; docs/batches.md).
	Batches *batch.Watcher
	// DataPlanes checks data-plane tokens on Watch and Settle; its revocation listener (run by Run)
	// closes the Watch streams of revoked tokens.
	DataPlanes *dptoken.Checker

	httpLn, grpcLn net.Listener
	health         *health.Server
	// drain drops readiness (HTTP /readyz and gRPC health) at shutdown before the listeners close.
	drain *process.Drain
	// authorizers maps a gRPC service's method prefix ("/pkg.Service/") to its credential check.
	authorizers map[string]Authorizer
}

// Authorizer checks the credentials of one gRPC call (from its incoming metadata). It returns a gRPC
// status error (codes.Unauthenticated / PermissionDenied) to refuse.
type Authorizer func(ctx context.Context, fullMethod string) error

// AuthorizeService installs the credential check for every method of a gRPC service, named by its full
// name (e.g. "tollgate.admin.v1.AdminService"). Each service registers its own check here when it is
// registered in New; services without one (reflection, health) are open. Call before Run.
func (s *Server) AuthorizeService(service string, a Authorizer) {
	s.authorizers["/"+service+"/"] = a
}

// tapAuthorizeTimeout bounds a credential check run in the transport's connection goroutine (an admin
// token lookup is one indexed Postgres query).
const tapAuthorizeTimeout = 5 * time.Second

// tapAuthorize runs the service's authorizer on the headers of a new call, before the server reads the
// request message (grpc.InTapHandle). A refused call ends with the authorizer's status and its message
// is never read into memory.
func (s *Server) tapAuthorize(ctx context.Context, info *tap.Info) (context.Context, error) {
	actx, cancel := context.WithTimeout(metadata.NewIncomingContext(ctx, info.Header), tapAuthorizeTimeout)
	defer cancel()
	if err := s.authorize(actx, info.FullMethodName); err != nil {
		if _, ok := status.FromError(err); !ok {
			err = status.Error(codes.Unauthenticated, err.Error())
		}
		return ctx, err
	}
	return ctx, nil
}

func (s *Server) authorize(ctx context.Context, fullMethod string) error {
	for prefix, a := range s.authorizers {
		if strings.HasPrefix(fullMethod, prefix) {
			return a(ctx, fullMethod)
		}
	}
	return nil
}

// New opens the database, applies migrations unless told not to, binds both listeners and registers
// every service. Nothing is served until Run.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	pool, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if !cfg.NoMigrate {
		applied, err := store.Migrate(ctx, pool)
		if err != nil {
			pool.Close()
			return nil, err
		}
		log.Info("migrations applied", "count", len(applied))
	}
	s := &Server{Config: cfg, Log: log, Pool: pool, Metrics: telemetry.NewRegistry(), Mux: http.NewServeMux(),
		authorizers: map[string]Authorizer{}}
	// The admin service, created below, names each call's caller for the audit log (ActorInterceptor).
	var adminActor grpc.UnaryServerInterceptor
	grpcOpts := []grpc.ServerOption{
		// Credentials are checked from the call's headers, before the transport reads its message: an
		// unauthenticated caller cannot make the server buffer and decode up to MaxRecvMsgSize.
		grpc.InTapHandle(s.tapAuthorize),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return adminActor(ctx, req, info, h)
		}),
		// Data planes hold Watch streams open for hours: ping idle connections so dead peers are noticed
		// and load balancers keep the connection, and allow clients to ping every 10 s.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(64 << 20),
		grpc.MaxSendMsgSize(256 << 20),
	}
	if cfg.GRPCTLS.Enabled() {
		tc, err := servertls.Config(cfg.GRPCTLS, "h2")
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("TOLLGATE_CP_TLS_CERT/KEY/CLIENT_CA: %w", err)
		}
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(tc)))
	}
	s.GRPC = grpc.NewServer(grpcOpts...)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.GRPC, s.health)
	reflection.Register(s.GRPC)
	// Services register here, each with its authorizer (s.AuthorizeService):
	adminBox, err := secret.New(cfg.SecretKey)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("TOLLGATE_SECRET_KEY: %w", err)
	}
	adminSvc := admin.NewService(pool, adminBox, cfg.AdminToken, log)
	adminActor = adminSvc.ActorInterceptor
	admin.RegisterHTTP(s.Mux, adminSvc)
	console.Register(s.Mux)
	adminv1.RegisterAdminServiceServer(s.GRPC, admin.NewGRPC(adminSvc))
	s.AuthorizeService(admin.ServiceName, adminSvc.AuthorizeGRPC)
	// Data planes' credentials: Settle needs settlement:write, Watch snapshot:read (docs/security.md).
	s.DataPlanes = dptoken.New(pool, cfg.DPToken)
	settlementv1.RegisterSettlementServiceServer(s.GRPC, settlement.New(pool, log, s.Metrics).WithBounds(cfg.SettleBounds))
	s.AuthorizeService(settlement.ServiceName, s.DataPlanes.Authorize(dptoken.ScopeSettlementWrite))
	if err := s.registerSnapshots(pool, cfg, log); err != nil {
		pool.Close()
		return nil, err
	}

	adminSvc.SetSnapshotStatus(s.Snapshots.Status)
	adminSvc.SetDataPlanes(s.Watch.DataPlanes) // data-plane freshness in GET /admin/snapshot-status
	s.PriceSchedule = &pricesched.Applier{DB: pool, Q: pool, Log: log}
	s.Alerts = alert.New(pool, adminBox, log, alert.Options{})
	s.Reconcile = reconcile.NewRunner(pool, adminBox, log, reconcile.Options{})
	adminSvc.SetReconciler(s.Reconcile)
	s.Partitions = &partition.Maintainer{DB: pool, Log: log, RetentionMonths: cfg.UsageRetentionMonths}
	s.SpendFold = &rollupfold.Folder{DB: pool, Log: log}
	s.Batches = batch.New(pool, adminBox, log, s.Metrics, batch.Options{Owner: replicaName(), Bounds: cfg.SettleBounds})
	s.drain = process.NewDrain(cfg.DrainDelay)
	process.HealthHandlers(s.Mux, s.drain.Ready(func(ctx context.Context) (map[string]any, error) {
		if err := pool.Ping(ctx); err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
		// A configuration that does not compile leaves the replica ready but degraded: every replica
		// compiles the same database, so "not ready" would take the whole control plane (and the admin
		// API needed to fix the row) out of its load balancer while data planes serve the last good
		// snapshot. docs/snapshots.md, "Compile failures".
		if st := s.Snapshots.Status(); st.Failing {
			return map[string]any{"status": "degraded", "snapshot": st}, nil
		}
		return nil, nil
	}))
	s.Metrics.MustRegister(newQuotaCollector(pool, log))
	if cfg.MetricsAddr == "" {
		s.Mux.Handle("GET /metrics", telemetry.Handler(s.Metrics))
	} else if s.MetricsServer, err = telemetry.NewMetricsServer(cfg.MetricsAddr, s.Metrics); err != nil {
		pool.Close()
		return nil, err
	}

	var httpTLS *tls.Config
	if cfg.HTTPTLS.Enabled() {
		if httpTLS, err = servertls.Config(cfg.HTTPTLS, "h2", "http/1.1"); err != nil {
			pool.Close()
			return nil, fmt.Errorf("TOLLGATE_CP_HTTP_TLS_CERT/KEY/CLIENT_CA: %w", err)
		}
	}
	if s.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		s.closeMetrics()
		pool.Close()
		return nil, fmt.Errorf("listen %s (TOLLGATE_CP_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	if httpTLS != nil {
		s.httpLn = tls.NewListener(s.httpLn, httpTLS)
	}
	if s.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		s.httpLn.Close()
		s.closeMetrics()
		pool.Close()
		return nil, fmt.Errorf("listen %s (TOLLGATE_CP_GRPC_ADDR): %w", cfg.GRPCAddr, err)
	}
	return s, nil
}

// replicaName names this process in the leases it takes (batch watcher): host, pid and a random part, so two
// replicas, or a restarted one, never share a name.
func replicaName() string {
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s-%d-%x", host, os.Getpid(), r)
}

func (s *Server) closeMetrics() {
	if s.MetricsServer != nil {
		s.MetricsServer.Listener.Close()
	}
}

// registerSnapshots registers SnapshotService with its token check and creates the snapshot builder.
func (s *Server) registerSnapshots(pool *pgxpool.Pool, cfg config.Config, log *slog.Logger) error {
	box, err := secret.New(cfg.SecretKey)
	if err != nil {
		return fmt.Errorf("TOLLGATE_SECRET_KEY: %w", err)
	}
	s.Watch = watch.New(log, s.Metrics)
	s.Watch.SetIdentify(func(ctx context.Context) (int64, error) {
		cred, err := s.DataPlanes.Identify(ctx)
		return cred.ID, err
	})
	watch.Register(s.GRPC, s.Watch)
	s.AuthorizeService(watch.ServiceName, s.DataPlanes.Authorize(dptoken.ScopeSnapshotRead))
	s.Snapshots = snapshotbuild.New(pool, box, s.Watch, log, s.Metrics,
		snapshotbuild.Options{Debounce: cfg.RebuildDebounce, Interval: cfg.RebuildInterval, Bounds: cfg.SettleBounds})
	return nil
}

// revocationCheckInterval is how often open Watch streams' tokens are re-checked against the database,
// in case a revocation's notification was missed (the LISTEN connection was down).
const revocationCheckInterval = 5 * time.Second

// HTTPAddr is the bound admin/console address.
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

// GRPCAddr is the bound gRPC address.
func (s *Server) GRPCAddr() string { return s.grpcLn.Addr().String() }

// Run serves until ctx ends, then stops gracefully: HTTP finishes in-flight requests, gRPC drains
// (streams are closed so data planes reconnect elsewhere), then the pool closes.
func (s *Server) Run(ctx context.Context) error {
	httpSrv := &http.Server{Handler: s.Mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn)}
	grpcSrv := process.Server{
		Name:  "grpc",
		Serve: func() error { return s.GRPC.Serve(s.grpcLn) },
		Drain: func(context.Context) { s.health.Shutdown() }, // gRPC health answers NOT_SERVING
		Stop: func(ctx context.Context) error {
			s.health.Shutdown()
			s.Watch.Shutdown() // Watch streams never end on their own; end them so GracefulStop can
			done := make(chan struct{})
			go func() { s.GRPC.GracefulStop(); close(done) }()
			select {
			case <-done:
				return nil
			case <-ctx.Done():
				s.GRPC.Stop()
				return ctx.Err()
			}
		},
	}
	buildCtx, stopBuild := context.WithCancel(ctx)
	defer stopBuild()
	snapshots := process.Server{
		Name:  "snapshots",
		Serve: func() error { return s.Snapshots.Run(buildCtx) },
		Stop:  func(context.Context) error { stopBuild(); return nil },
	}
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	priceSchedule := process.Server{
		Name:  "price-schedule",
		Serve: func() error { return s.PriceSchedule.Run(schedCtx) },
		Stop:  func(context.Context) error { stopSched(); return nil },
	}
	alertCtx, stopAlerts := context.WithCancel(ctx)
	defer stopAlerts()
	alerts := process.Server{
		Name:  "alerts",
		Serve: func() error { return s.Alerts.Run(alertCtx) },
		Stop:  func(context.Context) error { stopAlerts(); return nil },
	}
	reconCtx, stopRecon := context.WithCancel(ctx)
	defer stopRecon()
	reconciliation := process.Server{
		Name:  "reconciliation",
		Serve: func() error { return s.Reconcile.Run(reconCtx) },
		Stop:  func(context.Context) error { stopRecon(); return nil },
	}
	partCtx, stopPart := context.WithCancel(ctx)
	defer stopPart()
	partitions := process.Server{
		Name:  "usages-partitions",
		Serve: func() error { return s.Partitions.Run(partCtx) },
		Stop:  func(context.Context) error { stopPart(); return nil },
	}
	foldCtx, stopFold := context.WithCancel(ctx)
	defer stopFold()
	spendFold := process.Server{
		Name:  "spend-fold",
		Serve: func() error { return s.SpendFold.Run(foldCtx) },
		Stop:  func(context.Context) error { stopFold(); return nil },
	}
	batchCtx, stopBatches := context.WithCancel(ctx)
	defer stopBatches()
	batches := process.Server{
		Name:  "batches",
		Serve: func() error { return s.Batches.Run(batchCtx) },
		Stop:  func(context.Context) error { stopBatches(); return nil },
	}
	revokeCtx, stopRevoke := context.WithCancel(ctx)
	defer stopRevoke()
	revocations := process.Server{
		Name:  "dataplane-token-revocations",
		Serve: func() error { return s.DataPlanes.Revocations(revokeCtx, s.Watch, revocationCheckInterval, s.Log) },
		Stop:  func(context.Context) error { stopRevoke(); return nil },
	}
	// grpc first: its Drain (health NOT_SERVING) runs before the drain's wait, its Stop ends Watch streams.
	servers := []process.Server{grpcSrv, s.drain.Server(httpSrv), process.HTTPServer("http", httpSrv, s.httpLn),
		snapshots, priceSchedule, alerts, reconciliation, partitions, spendFold, batches, revocations}
	if m := s.MetricsServer; m != nil {
		servers = append(servers, process.HTTPServer("metrics", m.Server, m.Listener))
		s.Log.Info("metrics listening", "addr", m.Addr())
	}
	s.Log.Info("control plane listening", "http", s.HTTPAddr(), "grpc", s.GRPCAddr())
	return process.Run(ctx, s.Log, s.Config.ShutdownTimeout, servers,
		func(context.Context) error { s.Pool.Close(); return nil })
}
