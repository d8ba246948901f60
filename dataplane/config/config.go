// Package config loads the data plane's configuration from flags with environment fallbacks
// (docs/operations.md lists every setting), applies defaults and validates it, naming the setting at fault.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/shared/process"
	"github.com/tollgate/tollgate/shared/servertls"
)

// Config is the data plane's configuration.
type Config struct {
	RedisURL string
	// RedisCluster selects Redis Cluster mode: RedisURL is then go-redis's cluster form,
	// redis://host1:port1?addr=host2:port2&addr=host3:port3 (any nodes; the rest are discovered).
	RedisCluster bool
	// RedisSentinelMaster selects Redis Sentinel: RedisURL then names the sentinels in the same
	// multi-address form (redis://sentinel1:26379?addr=sentinel2:26379; its password is the master's), and
	// the client follows the master of this name through failovers.
	RedisSentinelMaster string
	// RedisKeyPrefix namespaces every Redis key this process writes (empty in production; tests set a
	// unique prefix so parallel tests share one server safely).
	RedisKeyPrefix string
	// RedisShards is the number of shards the organisations' Redis keys and outbox streams are spread
	// over, each under its own hash tag (admission.Shards; docs/operations.md, "Redis Cluster"): default
	// 16 with RedisCluster, 1 (untagged key names) otherwise. Every data plane must use the same number.
	RedisShards int
	HTTPAddr    string
	CPEndpoints []string
	DPToken     string
	NodeID      string
	// CPCAFile enables TLS to the control plane, trusting this CA bundle.
	CPCAFile string
	// CPClientCert and CPClientKey are the client certificate presented to a control plane that requires
	// one (TOLLGATE_CP_TLS_CLIENT_CA there); they need CPCAFile.
	CPClientCert, CPClientKey string
	// TLS is the client listener's TLS (TOLLGATE_DP_TLS_CERT/KEY, reloaded when the files change), with
	// TOLLGATE_DP_TLS_CLIENT_CA requiring client certificates.
	TLS             servertls.Files
	LogLevel        string
	ShutdownTimeout time.Duration
	// DrainDelay is how long /readyz answers 503 before the listeners close at shutdown, so a load
	// balancer's health check takes this process out of rotation first (shared/process.Drain).
	DrainDelay time.Duration
	// IdleReclaim: after this long without a request, the memory the last burst left is returned to the
	// operating system (app's reclaimer); 0 never.
	IdleReclaim time.Duration
	// MaxBodyBytes bounds inbound request bodies (413 beyond).
	MaxBodyBytes int64
	// HoldAnswerBytes is how much of a plain (non-stream) upstream answer is held until it is whole
	// before its headers reach the client; an upstream that cuts it within the bound is a failed attempt.
	HoldAnswerBytes int64
	// KeepaliveInterval is the keepalive period of streams synthesised from a buffered upstream.
	KeepaliveInterval time.Duration
	// UpstreamConnectTimeout bounds dialing an upstream; UpstreamIdleTimeout closes idle pooled connections.
	UpstreamConnectTimeout time.Duration
	UpstreamIdleTimeout    time.Duration
	// UpstreamResponseTimeout bounds waiting for an upstream's response headers (504 beyond).
	UpstreamResponseTimeout time.Duration
	// CredentialCooldown is how long a failing credential is skipped.
	CredentialCooldown time.Duration
	// SettleLinger is how long the settlement forwarder holds a short batch waiting for more records
	// before the Settle call (0: settle at once). It adds at most this much settlement delay.
	SettleLinger time.Duration
	// ReadHeaderTimeout bounds reading a client request's headers; BodyReadTimeout reading its body (the
	// whole body, so a trickle is cut with a 408); IdleTimeout closes a keep-alive connection idle that
	// long. No write timeout: a long streamed answer is never cut.
	ReadHeaderTimeout time.Duration
	BodyReadTimeout   time.Duration
	IdleTimeout       time.Duration
	// RedisTimeout bounds every Redis call the data plane makes — admission, refunds, outbox appends,
	// the forwarder's reads, claims and acknowledgements, mirror refreshes, the readiness ping — and the
	// client's dial, read, write and pool waits: a Redis that hangs holds nothing longer than this.
	RedisTimeout time.Duration
	// AdmissionOnRedisFailure is what admission does when Redis fails or does not answer within
	// RedisTimeout: "open" admits without a reservation (the default), "closed" refuses with 503.
	AdmissionOnRedisFailure string
	// MetricsAddr, when set, serves /metrics on its own listener instead of the client port
	// (docs/observability.md).
	MetricsAddr string
	// RequestLogSample is the fraction of successful requests given a request log line (0 to 1; a request
	// that failed or was refused is always logged).
	RequestLogSample float64
}

// Load parses args with getenv as the fallback for every setting, then validates.
func Load(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	var c Config
	var endpoints, maxBody, holdAnswer, sample, shards string
	fs := flag.NewFlagSet("dataplane", flag.ContinueOnError)
	fs.SetOutput(out)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	host, _ := os.Hostname()
	fs.StringVar(&c.RedisURL, "redis-url", env("TOLLGATE_REDIS_URL", "redis://localhost:6379/0"), "Redis URL (TOLLGATE_REDIS_URL)")
	fs.BoolVar(&c.RedisCluster, "redis-cluster", env("TOLLGATE_REDIS_CLUSTER", "") == "true", "TOLLGATE_REDIS_URL names Redis Cluster nodes: redis://host1:port1?addr=host2:port2 (TOLLGATE_REDIS_CLUSTER=true)")
	fs.StringVar(&c.RedisSentinelMaster, "redis-sentinel-master", env("TOLLGATE_REDIS_SENTINEL_MASTER", ""),
		"master name: TOLLGATE_REDIS_URL names Redis Sentinels, redis://host1:port1?addr=host2:port2 (TOLLGATE_REDIS_SENTINEL_MASTER)")
	fs.StringVar(&c.RedisKeyPrefix, "redis-key-prefix", env("TOLLGATE_REDIS_KEY_PREFIX", ""), "prefix of every Redis key (TOLLGATE_REDIS_KEY_PREFIX)")
	fs.StringVar(&shards, "redis-shards", env("TOLLGATE_REDIS_SHARDS", ""),
		"shards of the Redis keys, each under its own hash tag; default 16 in cluster mode, else 1 (TOLLGATE_REDIS_SHARDS)")
	fs.StringVar(&c.HTTPAddr, "http-addr", env("TOLLGATE_DP_HTTP_ADDR", ":8080"), "client API listen address (TOLLGATE_DP_HTTP_ADDR)")
	fs.StringVar(&endpoints, "cp-endpoints", env("TOLLGATE_CP_ENDPOINTS", "localhost:9090"), "comma-separated control-plane gRPC addresses (TOLLGATE_CP_ENDPOINTS)")
	fs.StringVar(&c.DPToken, "dp-token", env("TOLLGATE_DP_TOKEN", ""), "token presented to the control plane (TOLLGATE_DP_TOKEN)")
	fs.StringVar(&c.NodeID, "node-id", env("TOLLGATE_NODE_ID", host), "this data plane's name in logs and metrics (TOLLGATE_NODE_ID)")
	fs.StringVar(&c.CPCAFile, "cp-ca-file", env("TOLLGATE_CP_CA_FILE", ""), "CA bundle enabling TLS to the control plane (TOLLGATE_CP_CA_FILE)")
	fs.StringVar(&c.CPClientCert, "cp-client-cert", env("TOLLGATE_CP_CLIENT_CERT", ""), "client certificate file presented to the control plane, for mTLS (TOLLGATE_CP_CLIENT_CERT)")
	fs.StringVar(&c.CPClientKey, "cp-client-key", env("TOLLGATE_CP_CLIENT_KEY", ""), "client key file presented to the control plane (TOLLGATE_CP_CLIENT_KEY)")
	fs.StringVar(&c.TLS.Cert, "tls-cert", env("TOLLGATE_DP_TLS_CERT", ""), "client API TLS certificate file, reloaded on change (TOLLGATE_DP_TLS_CERT)")
	fs.StringVar(&c.TLS.Key, "tls-key", env("TOLLGATE_DP_TLS_KEY", ""), "client API TLS key file (TOLLGATE_DP_TLS_KEY)")
	fs.StringVar(&c.TLS.ClientCA, "tls-client-ca", env("TOLLGATE_DP_TLS_CLIENT_CA", ""), "CA bundle; when set, API clients must present a client certificate it signed (TOLLGATE_DP_TLS_CLIENT_CA)")
	fs.StringVar(&c.LogLevel, "log-level", env("TOLLGATE_LOG_LEVEL", "info"), "debug, info, warn or error (TOLLGATE_LOG_LEVEL)")
	fs.StringVar(&maxBody, "max-body-bytes", env("TOLLGATE_MAX_BODY_BYTES", "33554432"), "largest accepted request body (TOLLGATE_MAX_BODY_BYTES)")
	fs.StringVar(&holdAnswer, "hold-answer-bytes", env("TOLLGATE_HOLD_ANSWER_BYTES", "4194304"),
		"a plain upstream answer is held until whole up to this many bytes before the client gets its headers (TOLLGATE_HOLD_ANSWER_BYTES)")
	process.DurationFlag(fs, &c.ShutdownTimeout, "shutdown-timeout", env("TOLLGATE_SHUTDOWN_TIMEOUT", "30s"), "graceful shutdown limit (TOLLGATE_SHUTDOWN_TIMEOUT)")
	process.DurationFlag(fs, &c.DrainDelay, "drain-delay", env("TOLLGATE_DRAIN_DELAY", "5s"), "at shutdown, answer /readyz 503 this long before closing the listeners, 0 for none (TOLLGATE_DRAIN_DELAY)")
	process.DurationFlag(fs, &c.KeepaliveInterval, "keepalive-interval", env("TOLLGATE_KEEPALIVE_INTERVAL", "15s"), "synthesised-stream keepalive period (TOLLGATE_KEEPALIVE_INTERVAL)")
	process.DurationFlag(fs, &c.UpstreamConnectTimeout, "upstream-connect-timeout", env("TOLLGATE_UPSTREAM_CONNECT_TIMEOUT", "10s"), "upstream dial timeout (TOLLGATE_UPSTREAM_CONNECT_TIMEOUT)")
	process.DurationFlag(fs, &c.UpstreamIdleTimeout, "upstream-idle-timeout", env("TOLLGATE_UPSTREAM_IDLE_TIMEOUT", "90s"), "idle pooled upstream connection lifetime (TOLLGATE_UPSTREAM_IDLE_TIMEOUT)")
	process.DurationFlag(fs, &c.UpstreamResponseTimeout, "upstream-response-timeout", env("TOLLGATE_UPSTREAM_RESPONSE_TIMEOUT", "10m"), "wait for upstream response headers (TOLLGATE_UPSTREAM_RESPONSE_TIMEOUT)")
	process.DurationFlag(fs, &c.CredentialCooldown, "credential-cooldown", env("TOLLGATE_CREDENTIAL_COOLDOWN", "30s"), "skip a failing credential for this long (TOLLGATE_CREDENTIAL_COOLDOWN)")
	process.DurationFlag(fs, &c.SettleLinger, "settle-linger", env("TOLLGATE_SETTLE_LINGER", "100ms"), "forwarder wait for a fuller Settle batch, 0 for none (TOLLGATE_SETTLE_LINGER)")
	process.DurationFlag(fs, &c.ReadHeaderTimeout, "read-header-timeout", env("TOLLGATE_READ_HEADER_TIMEOUT", "10s"), "client request header read limit (TOLLGATE_READ_HEADER_TIMEOUT)")
	process.DurationFlag(fs, &c.BodyReadTimeout, "body-read-timeout", env("TOLLGATE_BODY_READ_TIMEOUT", "60s"), "client request body read limit, whole body (TOLLGATE_BODY_READ_TIMEOUT)")
	process.DurationFlag(fs, &c.IdleReclaim, "idle-reclaim", env("TOLLGATE_IDLE_RECLAIM", "10s"), "after this long without a request, return the memory the last burst left to the OS, 0 never (TOLLGATE_IDLE_RECLAIM)")
	process.DurationFlag(fs, &c.IdleTimeout, "idle-timeout", env("TOLLGATE_IDLE_TIMEOUT", "120s"), "idle keep-alive client connection lifetime (TOLLGATE_IDLE_TIMEOUT)")

	process.DurationFlag(fs, &c.RedisTimeout, "redis-timeout", env("TOLLGATE_REDIS_TIMEOUT", "1s"), "deadline of every Redis call (TOLLGATE_REDIS_TIMEOUT)")
	fs.StringVar(&c.AdmissionOnRedisFailure, "admission-on-redis-failure", env("TOLLGATE_ADMISSION_ON_REDIS_FAILURE", "open"),
		"open admits without a reservation, closed refuses with 503, when Redis fails (TOLLGATE_ADMISSION_ON_REDIS_FAILURE)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("TOLLGATE_METRICS_ADDR", ""), "serve /metrics on this address instead of the client port (TOLLGATE_METRICS_ADDR)")
	fs.StringVar(&sample, "request-log-sample", env("TOLLGATE_REQUEST_LOG_SAMPLE", "1"), "fraction of successful requests logged, 0 to 1; failures always are (TOLLGATE_REQUEST_LOG_SAMPLE)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.CPEndpoints = append(c.CPEndpoints, e)
		}
	}
	n, err := strconv.ParseInt(maxBody, 10, 64)
	if err != nil {
		return Config{}, fmt.Errorf("TOLLGATE_MAX_BODY_BYTES (-max-body-bytes): %w", err)
	}
	c.MaxBodyBytes = n
	if c.HoldAnswerBytes, err = strconv.ParseInt(holdAnswer, 10, 64); err != nil {
		return Config{}, fmt.Errorf("TOLLGATE_HOLD_ANSWER_BYTES (-hold-answer-bytes): %w", err)
	}
	switch {
	case shards != "":
		if c.RedisShards, err = strconv.Atoi(shards); err != nil {
			return Config{}, fmt.Errorf("TOLLGATE_REDIS_SHARDS (-redis-shards): %w", err)
		}
	case c.RedisCluster:
		c.RedisShards = DefaultClusterShards
	default:
		c.RedisShards = 1
	}
	if c.RequestLogSample, err = strconv.ParseFloat(sample, 64); err != nil {
		return Config{}, fmt.Errorf("TOLLGATE_REQUEST_LOG_SAMPLE (-request-log-sample): %w", err)
	}
	return c, c.Validate()
}

// DefaultClusterShards is RedisShards' default in cluster mode: enough to spread the load of many
// organisations over up to 16 masters.
const DefaultClusterShards = 16

// Validate checks every setting and names the one at fault.
func (c Config) Validate() error {
	var errs []error
	if c.RedisShards < 1 || c.RedisShards > admission.MaxShards {
		errs = append(errs, fmt.Errorf("TOLLGATE_REDIS_SHARDS (-redis-shards): want 1 to %d, got %d", admission.MaxShards, c.RedisShards))
	}
	if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		errs = append(errs, fmt.Errorf("TOLLGATE_REDIS_URL (-redis-url): want a redis:// URL, got %q", c.RedisURL))
	} else if c.RedisCluster && c.RedisSentinelMaster != "" {
		errs = append(errs, errors.New("TOLLGATE_REDIS_CLUSTER and TOLLGATE_REDIS_SENTINEL_MASTER: set one or neither"))
	} else if c.RedisSentinelMaster != "" {
		if _, err := redis.ParseClusterURL(c.RedisURL); err != nil {
			errs = append(errs, fmt.Errorf("TOLLGATE_REDIS_URL (-redis-url) with TOLLGATE_REDIS_SENTINEL_MASTER: want redis://sentinel1:port1?addr=sentinel2:port2: %w", err))
		}
	} else if c.RedisCluster {
		if _, err := redis.ParseClusterURL(c.RedisURL); err != nil {
			errs = append(errs, fmt.Errorf("TOLLGATE_REDIS_URL (-redis-url) with TOLLGATE_REDIS_CLUSTER: want redis://host1:port1?addr=host2:port2: %w", err))
		}
	} else if _, err := redis.ParseURL(c.RedisURL); err != nil {
		hint := ""
		if u.Query().Has("addr") {
			hint = " (several addr= name Redis Cluster nodes: set TOLLGATE_REDIS_CLUSTER=true)"
		}
		errs = append(errs, fmt.Errorf("TOLLGATE_REDIS_URL (-redis-url): %w%s", err, hint))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("TOLLGATE_DP_HTTP_ADDR (-http-addr): %w", err))
	}
	if len(c.CPEndpoints) == 0 {
		errs = append(errs, errors.New("TOLLGATE_CP_ENDPOINTS (-cp-endpoints): at least one address required"))
	}
	for _, e := range c.CPEndpoints {
		if _, _, err := net.SplitHostPort(e); err != nil {
			errs = append(errs, fmt.Errorf("TOLLGATE_CP_ENDPOINTS (-cp-endpoints): %q: %w", e, err))
		}
	}
	if c.DPToken == "" {
		errs = append(errs, errors.New("TOLLGATE_DP_TOKEN (-dp-token): required (a data-plane token from the admin API, docs/security.md)"))
	}
	if err := c.TLS.Check("TOLLGATE_DP_TLS_CERT", "TOLLGATE_DP_TLS_KEY", "TOLLGATE_DP_TLS_CLIENT_CA"); err != nil {
		errs = append(errs, err)
	}
	if (c.CPClientCert == "") != (c.CPClientKey == "") {
		errs = append(errs, errors.New("TOLLGATE_CP_CLIENT_CERT and TOLLGATE_CP_CLIENT_KEY: set both or neither"))
	} else if c.CPClientCert != "" && c.CPCAFile == "" {
		errs = append(errs, errors.New("TOLLGATE_CP_CLIENT_CERT needs TOLLGATE_CP_CA_FILE (client certificates need TLS)"))
	}
	if c.NodeID == "" {
		errs = append(errs, errors.New("TOLLGATE_NODE_ID (-node-id): required"))
	}
	if err := process.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("TOLLGATE_LOG_LEVEL (-log-level): %w", err))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, errors.New("TOLLGATE_MAX_BODY_BYTES (-max-body-bytes): must be positive"))
	}
	if c.HoldAnswerBytes <= 0 {
		errs = append(errs, errors.New("TOLLGATE_HOLD_ANSWER_BYTES (-hold-answer-bytes): must be positive"))
	}
	if c.IdleReclaim < 0 {
		errs = append(errs, errors.New("TOLLGATE_IDLE_RECLAIM (-idle-reclaim): must not be negative"))
	}
	if c.DrainDelay < 0 {
		errs = append(errs, errors.New("TOLLGATE_DRAIN_DELAY (-drain-delay): must not be negative"))
	}
	if c.SettleLinger < 0 {
		errs = append(errs, errors.New("TOLLGATE_SETTLE_LINGER (-settle-linger): must not be negative"))
	}
	if _, err := admission.ParseFailurePolicy(c.AdmissionOnRedisFailure); err != nil {
		errs = append(errs, fmt.Errorf("TOLLGATE_ADMISSION_ON_REDIS_FAILURE (-admission-on-redis-failure): %w", err))
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("TOLLGATE_METRICS_ADDR (-metrics-addr): %w", err))
		}
	}
	if !(c.RequestLogSample >= 0 && c.RequestLogSample <= 1) {
		errs = append(errs, errors.New("TOLLGATE_REQUEST_LOG_SAMPLE (-request-log-sample): must be between 0 and 1"))
	}
	if c.RedisTimeout <= 0 {
		errs = append(errs, errors.New("TOLLGATE_REDIS_TIMEOUT (-redis-timeout): must be a positive duration"))
	}
	for name, d := range map[string]time.Duration{
		"TOLLGATE_SHUTDOWN_TIMEOUT (-shutdown-timeout)":                   c.ShutdownTimeout,
		"TOLLGATE_KEEPALIVE_INTERVAL (-keepalive-interval)":               c.KeepaliveInterval,
		"TOLLGATE_UPSTREAM_CONNECT_TIMEOUT (-upstream-connect-timeout)":   c.UpstreamConnectTimeout,
		"TOLLGATE_UPSTREAM_IDLE_TIMEOUT (-upstream-idle-timeout)":         c.UpstreamIdleTimeout,
		"TOLLGATE_UPSTREAM_RESPONSE_TIMEOUT (-upstream-response-timeout)": c.UpstreamResponseTimeout,
		"TOLLGATE_CREDENTIAL_COOLDOWN (-credential-cooldown)":             c.CredentialCooldown,
		"TOLLGATE_READ_HEADER_TIMEOUT (-read-header-timeout)":             c.ReadHeaderTimeout,
		"TOLLGATE_BODY_READ_TIMEOUT (-body-read-timeout)":                 c.BodyReadTimeout,
		"TOLLGATE_IDLE_TIMEOUT (-idle-timeout)":                           c.IdleTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be a positive duration", name))
		}
	}
	return errors.Join(errs...)
}
