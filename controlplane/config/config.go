// Package config loads the control plane's configuration from flags with environment fallbacks
// (docs/operations.md lists every setting), applies defaults and validates it, naming the setting at fault.
package config

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/process"
	"github.com/tollgate/tollgate/shared/servertls"
)

// Config is the control plane's configuration.
type Config struct {
	DatabaseURL string
	AdminToken  string
	SecretKey   []byte // 32 bytes (AES-256-GCM)
	HTTPAddr    string
	GRPCAddr    string
	// DPToken is the optional bootstrap data-plane token (both scopes, not revocable); production data
	// planes use per-data-plane tokens from the admin API (controlplane/dptoken).
	DPToken string
	// GRPCTLS is the gRPC listener's TLS (TOLLGATE_CP_TLS_CERT/KEY, with TOLLGATE_CP_TLS_CLIENT_CA requiring
	// data planes' client certificates); HTTPTLS the admin REST and console listener's
	// (TOLLGATE_CP_HTTP_TLS_CERT/KEY/CLIENT_CA). Certificates are reloaded when their files change.
	GRPCTLS         servertls.Files
	HTTPTLS         servertls.Files
	LogLevel        string
	ShutdownTimeout time.Duration
	// DrainDelay is how long /readyz answers 503 before the listeners close at shutdown, so a load
	// balancer's health check takes this process out of rotation first (shared/process.Drain).
	DrainDelay time.Duration
	NoMigrate  bool
	// RebuildDebounce is the leading-edge coalescing window: a change arriving more than this after the
	// last rebuild is built at once; changes inside the window share one rebuild.
	RebuildDebounce time.Duration
	// RebuildInterval is the safety-net period at which the revision is re-checked without a notification.
	RebuildInterval time.Duration
	// SettleBounds are the per-request settlement bounds: enforced by Settle and shipped to the data
	// planes in every snapshot (docs/settlement.md, "Bounds").
	SettleBounds pricing.Bounds
	// MetricsAddr, when set, serves /metrics on its own listener instead of the admin HTTP port
	// (docs/observability.md).
	MetricsAddr string
	// UsageRetentionMonths keeps usage rows for this many whole months before the current one and drops
	// older month partitions of usages; 0 keeps them forever (docs/operations.md, "Usages partitions and
	// retention").
	UsageRetentionMonths int
}

// Load parses args (without the program and subcommand names) with getenv as the fallback for every
// setting, then validates. Output for -h goes to out.
func Load(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	var c Config
	var secret string
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	fs.SetOutput(out)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("TOLLGATE_METRICS_ADDR", ""), "serve /metrics on this address instead of the admin HTTP port (TOLLGATE_METRICS_ADDR)")
	fs.StringVar(&c.DatabaseURL, "database-url", env("TOLLGATE_DATABASE_URL", "postgres://localhost:5432/tollgate"), "Postgres URL (TOLLGATE_DATABASE_URL)")
	fs.StringVar(&c.AdminToken, "admin-token", env("TOLLGATE_ADMIN_TOKEN", ""), "bootstrap admin bearer token (TOLLGATE_ADMIN_TOKEN)")
	fs.StringVar(&secret, "secret-key", env("TOLLGATE_SECRET_KEY", ""), "32-byte key, hex or base64, encrypting credentials at rest (TOLLGATE_SECRET_KEY)")
	fs.StringVar(&c.HTTPAddr, "http-addr", env("TOLLGATE_CP_HTTP_ADDR", ":8081"), "admin REST, console and health listen address (TOLLGATE_CP_HTTP_ADDR)")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", env("TOLLGATE_CP_GRPC_ADDR", ":9090"), "gRPC listen address (TOLLGATE_CP_GRPC_ADDR)")
	fs.StringVar(&c.DPToken, "dp-token", env("TOLLGATE_DP_TOKEN", ""), "optional bootstrap data-plane token with both scopes, not revocable; prefer per-data-plane tokens from the admin API (TOLLGATE_DP_TOKEN)")
	fs.StringVar(&c.GRPCTLS.Cert, "tls-cert", env("TOLLGATE_CP_TLS_CERT", ""), "gRPC TLS certificate file, reloaded on change (TOLLGATE_CP_TLS_CERT)")
	fs.StringVar(&c.GRPCTLS.Key, "tls-key", env("TOLLGATE_CP_TLS_KEY", ""), "gRPC TLS key file (TOLLGATE_CP_TLS_KEY)")
	fs.StringVar(&c.GRPCTLS.ClientCA, "tls-client-ca", env("TOLLGATE_CP_TLS_CLIENT_CA", ""), "CA bundle; when set, gRPC callers must present a client certificate it signed (TOLLGATE_CP_TLS_CLIENT_CA)")
	fs.StringVar(&c.HTTPTLS.Cert, "http-tls-cert", env("TOLLGATE_CP_HTTP_TLS_CERT", ""), "admin REST and console TLS certificate file, reloaded on change (TOLLGATE_CP_HTTP_TLS_CERT)")
	fs.StringVar(&c.HTTPTLS.Key, "http-tls-key", env("TOLLGATE_CP_HTTP_TLS_KEY", ""), "admin REST and console TLS key file (TOLLGATE_CP_HTTP_TLS_KEY)")
	fs.StringVar(&c.HTTPTLS.ClientCA, "http-tls-client-ca", env("TOLLGATE_CP_HTTP_TLS_CLIENT_CA", ""), "CA bundle; when set, admin REST and console clients must present a client certificate it signed (TOLLGATE_CP_HTTP_TLS_CLIENT_CA)")
	fs.StringVar(&c.LogLevel, "log-level", env("TOLLGATE_LOG_LEVEL", "info"), "debug, info, warn or error (TOLLGATE_LOG_LEVEL)")
	process.DurationFlag(fs, &c.ShutdownTimeout, "shutdown-timeout", env("TOLLGATE_SHUTDOWN_TIMEOUT", "20s"), "graceful shutdown limit (TOLLGATE_SHUTDOWN_TIMEOUT)")
	process.DurationFlag(fs, &c.DrainDelay, "drain-delay", env("TOLLGATE_DRAIN_DELAY", "5s"), "at shutdown, answer /readyz 503 this long before closing the listeners, 0 for none (TOLLGATE_DRAIN_DELAY)")
	process.DurationFlag(fs, &c.RebuildDebounce, "rebuild-debounce", env("TOLLGATE_REBUILD_DEBOUNCE", "50ms"), "window in which changes share one snapshot rebuild (TOLLGATE_REBUILD_DEBOUNCE)")
	process.DurationFlag(fs, &c.RebuildInterval, "rebuild-interval", env("TOLLGATE_REBUILD_INTERVAL", "5s"), "periodic revision check (TOLLGATE_REBUILD_INTERVAL)")
	var maxTokens, maxCost string
	fs.StringVar(&maxTokens, "settle-max-request-tokens", env("TOLLGATE_SETTLE_MAX_REQUEST_TOKENS", strconv.FormatInt(pricing.DefaultBounds.MaxRequestTokens, 10)),
		"largest plausible total of tokens of one request; a report beyond it is stored flagged and uncharged (TOLLGATE_SETTLE_MAX_REQUEST_TOKENS)")
	fs.StringVar(&maxCost, "settle-max-request-cost", env("TOLLGATE_SETTLE_MAX_REQUEST_COST", pricing.FormatMicros(pricing.DefaultBounds.MaxRequestCostMicros)),
		"largest plausible cost of one request, decimal dollars; a cost beyond it is stored flagged and uncharged (TOLLGATE_SETTLE_MAX_REQUEST_COST)")
	var retention string
	fs.StringVar(&retention, "usage-retention-months", env("TOLLGATE_USAGE_RETENTION_MONTHS", "0"),
		"keep usage rows this many whole months before the current one, dropping older month partitions; 0 keeps them forever (TOLLGATE_USAGE_RETENTION_MONTHS)")
	fs.BoolVar(&c.NoMigrate, "no-migrate", env("TOLLGATE_NO_MIGRATE", "") == "true", "do not apply migrations at start (TOLLGATE_NO_MIGRATE=true)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	tokens, err := strconv.ParseInt(maxTokens, 10, 64)
	if err != nil {
		return Config{}, fmt.Errorf("TOLLGATE_SETTLE_MAX_REQUEST_TOKENS (-settle-max-request-tokens): want an integer, got %q", maxTokens)
	}
	b, err := pricing.ParseBounds(tokens, maxCost)
	if err != nil {
		return Config{}, fmt.Errorf("TOLLGATE_SETTLE_MAX_REQUEST_TOKENS / TOLLGATE_SETTLE_MAX_REQUEST_COST: %w", err)
	}
	c.SettleBounds = b
	if c.UsageRetentionMonths, err = strconv.Atoi(retention); err != nil {
		return Config{}, fmt.Errorf("TOLLGATE_USAGE_RETENTION_MONTHS (-usage-retention-months): want an integer, got %q", retention)
	}
	if secret != "" {
		key, err := ParseSecretKey(secret)
		if err != nil {
			return Config{}, fmt.Errorf("TOLLGATE_SECRET_KEY (-secret-key): %w", err)
		}
		c.SecretKey = key
	}
	return c, c.Validate()
}

// ParseSecretKey decodes a 32-byte key given as 64 hex characters or base64.
func ParseSecretKey(s string) ([]byte, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == 32 {
			return b, nil
		}
	}
	return nil, errors.New("want 32 bytes as 64 hex characters or base64")
}

// Validate checks every setting and names the one at fault.
func (c Config) Validate() error {
	var errs []error
	if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		errs = append(errs, fmt.Errorf("TOLLGATE_DATABASE_URL (-database-url): want a postgres:// URL, got %q", c.DatabaseURL))
	}
	if c.UsageRetentionMonths < 0 {
		errs = append(errs, fmt.Errorf("TOLLGATE_USAGE_RETENTION_MONTHS (-usage-retention-months): want 0 (keep forever) or more months, got %d", c.UsageRetentionMonths))
	}
	if c.AdminToken == "" {
		errs = append(errs, errors.New("TOLLGATE_ADMIN_TOKEN (-admin-token): required"))
	} else if len(c.AdminToken) < 16 {
		errs = append(errs, errors.New("TOLLGATE_ADMIN_TOKEN (-admin-token): must be at least 16 characters"))
	}
	if len(c.SecretKey) != 32 {
		errs = append(errs, errors.New("TOLLGATE_SECRET_KEY (-secret-key): required, 32 bytes as 64 hex characters or base64"))
	}
	if c.DPToken != "" && len(c.DPToken) < 16 {
		errs = append(errs, errors.New("TOLLGATE_DP_TOKEN (-dp-token): must be at least 16 characters"))
	}
	for name, addr := range map[string]string{"TOLLGATE_CP_HTTP_ADDR (-http-addr)": c.HTTPAddr, "TOLLGATE_CP_GRPC_ADDR (-grpc-addr)": c.GRPCAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("TOLLGATE_METRICS_ADDR (-metrics-addr): %w", err))
		}
	}
	if err := c.GRPCTLS.Check("TOLLGATE_CP_TLS_CERT", "TOLLGATE_CP_TLS_KEY", "TOLLGATE_CP_TLS_CLIENT_CA"); err != nil {
		errs = append(errs, err)
	}
	if err := c.HTTPTLS.Check("TOLLGATE_CP_HTTP_TLS_CERT", "TOLLGATE_CP_HTTP_TLS_KEY", "TOLLGATE_CP_HTTP_TLS_CLIENT_CA"); err != nil {
		errs = append(errs, err)
	}
	if err := process.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("TOLLGATE_LOG_LEVEL (-log-level): %w", err))
	}
	if c.DrainDelay < 0 {
		errs = append(errs, errors.New("TOLLGATE_DRAIN_DELAY (-drain-delay): must not be negative"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("TOLLGATE_SHUTDOWN_TIMEOUT (-shutdown-timeout): must be positive"))
	}
	if err := c.SettleBounds.OrDefault().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("TOLLGATE_SETTLE_MAX_REQUEST_TOKENS / TOLLGATE_SETTLE_MAX_REQUEST_COST: %w", err))
	}
	if c.RebuildDebounce < 0 || c.RebuildInterval <= 0 {
		errs = append(errs, errors.New("TOLLGATE_REBUILD_DEBOUNCE / TOLLGATE_REBUILD_INTERVAL: debounce must be >= 0, interval > 0"))
	}
	return errors.Join(errs...)
}
