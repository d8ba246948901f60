package config

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/pricing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

var goodEnv = map[string]string{
	"TOLLGATE_DATABASE_URL": "postgres://127.0.0.1:5432/tollgate",
	"TOLLGATE_ADMIN_TOKEN":  "admin-token-0123456789",
	"TOLLGATE_SECRET_KEY":   strings.Repeat("ab", 32),
	"TOLLGATE_DP_TOKEN":     "dp-token-0123456789",
}

func TestLoadFromEnvAndFlags(t *testing.T) {
	c, err := Load([]string{"-http-addr", "127.0.0.1:18081"}, envOf(goodEnv), io.Discard)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if c.HTTPAddr != "127.0.0.1:18081" || c.GRPCAddr != ":9090" || c.ShutdownTimeout != 20*time.Second || len(c.SecretKey) != 32 {
		t.Fatalf("Load = %+v", c)
	}
	if c.SettleBounds != pricing.DefaultBounds {
		t.Errorf("default settlement bounds = %+v, want %+v", c.SettleBounds, pricing.DefaultBounds)
	}
	env := map[string]string{"TOLLGATE_SETTLE_MAX_REQUEST_TOKENS": "2000000", "TOLLGATE_SETTLE_MAX_REQUEST_COST": "250.5"}
	for k, v := range goodEnv {
		env[k] = v
	}
	if c, err = Load(nil, envOf(env), io.Discard); err != nil || c.SettleBounds != (pricing.Bounds{MaxRequestTokens: 2_000_000, MaxRequestCostMicros: 250_500_000}) {
		t.Errorf("settlement bounds from env = %+v, %v", c.SettleBounds, err)
	}
}

func TestLoadRejectsBadSettingsByName(t *testing.T) {
	tests := []struct {
		name     string
		override map[string]string
		want     string
	}{
		{"missing admin token", map[string]string{"TOLLGATE_ADMIN_TOKEN": ""}, "TOLLGATE_ADMIN_TOKEN"},
		{"short secret", map[string]string{"TOLLGATE_SECRET_KEY": "abcd"}, "TOLLGATE_SECRET_KEY"},
		{"bad db url", map[string]string{"TOLLGATE_DATABASE_URL": "mysql://x"}, "TOLLGATE_DATABASE_URL"},
		{"bad addr", map[string]string{"TOLLGATE_CP_HTTP_ADDR": "nope"}, "TOLLGATE_CP_HTTP_ADDR"},
		{"short bootstrap dp token", map[string]string{"TOLLGATE_DP_TOKEN": "short"}, "TOLLGATE_DP_TOKEN"},
		{"grpc cert without key", map[string]string{"TOLLGATE_CP_TLS_CERT": "c.pem"}, "TOLLGATE_CP_TLS_KEY"},
		{"grpc client CA without cert", map[string]string{"TOLLGATE_CP_TLS_CLIENT_CA": "ca.pem"}, "TOLLGATE_CP_TLS_CLIENT_CA"},
		{"http key without cert", map[string]string{"TOLLGATE_CP_HTTP_TLS_KEY": "k.pem"}, "TOLLGATE_CP_HTTP_TLS_CERT"},
		{"http client CA without cert", map[string]string{"TOLLGATE_CP_HTTP_TLS_CLIENT_CA": "ca.pem"}, "TOLLGATE_CP_HTTP_TLS_CLIENT_CA"},
		{"bad level", map[string]string{"TOLLGATE_LOG_LEVEL": "loud"}, "TOLLGATE_LOG_LEVEL"},
		{"bad max tokens", map[string]string{"TOLLGATE_SETTLE_MAX_REQUEST_TOKENS": "lots"}, "TOLLGATE_SETTLE_MAX_REQUEST_TOKENS"},
		{"zero max tokens", map[string]string{"TOLLGATE_SETTLE_MAX_REQUEST_TOKENS": "0"}, "TOLLGATE_SETTLE_MAX_REQUEST_TOKENS"},
		{"bad max cost", map[string]string{"TOLLGATE_SETTLE_MAX_REQUEST_COST": "1e3"}, "TOLLGATE_SETTLE_MAX_REQUEST_COST"},
		{"max cost beyond carrying", map[string]string{"TOLLGATE_SETTLE_MAX_REQUEST_COST": "9300000000000"}, "TOLLGATE_SETTLE_MAX_REQUEST_COST"},
		{"bad duration", map[string]string{"TOLLGATE_SHUTDOWN_TIMEOUT": "soon"}, "TOLLGATE_SHUTDOWN_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range goodEnv {
				env[k] = v
			}
			for k, v := range tt.override {
				env[k] = v
			}
			_, err := Load(nil, envOf(env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestBootstrapDataPlaneTokenOptional: without TOLLGATE_DP_TOKEN the control plane starts and accepts
// only per-data-plane tokens from the admin API; the TLS settings of both listeners load.
func TestBootstrapDataPlaneTokenOptional(t *testing.T) {
	env := map[string]string{"TOLLGATE_DP_TOKEN": "", "TOLLGATE_CP_HTTP_TLS_CERT": "h.pem", "TOLLGATE_CP_HTTP_TLS_KEY": "hk.pem",
		"TOLLGATE_CP_HTTP_TLS_CLIENT_CA": "hca.pem", "TOLLGATE_CP_TLS_CERT": "g.pem", "TOLLGATE_CP_TLS_KEY": "gk.pem", "TOLLGATE_CP_TLS_CLIENT_CA": "gca.pem"}
	for k, v := range goodEnv {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	c, err := Load(nil, envOf(env), io.Discard)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if c.DPToken != "" || c.HTTPTLS.Cert != "h.pem" || c.HTTPTLS.Key != "hk.pem" || c.HTTPTLS.ClientCA != "hca.pem" ||
		c.GRPCTLS.Cert != "g.pem" || c.GRPCTLS.Key != "gk.pem" || c.GRPCTLS.ClientCA != "gca.pem" {
		t.Fatalf("Load = %+v", c)
	}
}

// TestDrainDelaySetting: TOLLGATE_DRAIN_DELAY defaults to 5s, a flag overrides it, and a negative value is
// refused by name.
func TestDrainDelaySetting(t *testing.T) {
	c, err := Load(nil, envOf(goodEnv), io.Discard)
	if err != nil || c.DrainDelay != 5*time.Second {
		t.Fatalf("default DrainDelay = %v, %v; want 5s", c.DrainDelay, err)
	}
	if c, err = Load([]string{"-drain-delay", "2s"}, envOf(goodEnv), io.Discard); err != nil || c.DrainDelay != 2*time.Second {
		t.Fatalf("-drain-delay 2s = %v, %v", c.DrainDelay, err)
	}
	if _, err := Load([]string{"-drain-delay", "-1s"}, envOf(goodEnv), io.Discard); err == nil || !strings.Contains(err.Error(), "TOLLGATE_DRAIN_DELAY") {
		t.Fatalf("negative drain delay: %v, want an error naming TOLLGATE_DRAIN_DELAY", err)
	}
}

// TOLLGATE_USAGE_RETENTION_MONTHS: 0 (keep forever) by default, a count of months from the environment or
// the flag, refused by name when negative or not an integer.
func TestUsageRetentionSetting(t *testing.T) {
	c, err := Load(nil, envOf(goodEnv), io.Discard)
	if err != nil || c.UsageRetentionMonths != 0 {
		t.Fatalf("default retention = %d, %v; want 0 (forever)", c.UsageRetentionMonths, err)
	}
	env := map[string]string{"TOLLGATE_USAGE_RETENTION_MONTHS": "13"}
	for k, v := range goodEnv {
		env[k] = v
	}
	if c, err = Load(nil, envOf(env), io.Discard); err != nil || c.UsageRetentionMonths != 13 {
		t.Errorf("retention from env = %d, %v; want 13", c.UsageRetentionMonths, err)
	}
	if c, err = Load([]string{"-usage-retention-months", "2"}, envOf(env), io.Discard); err != nil || c.UsageRetentionMonths != 2 {
		t.Errorf("retention from the flag = %d, %v; want 2", c.UsageRetentionMonths, err)
	}
	for _, bad := range []string{"-1", "six", "1.5"} {
		env["TOLLGATE_USAGE_RETENTION_MONTHS"] = bad
		if _, err := Load(nil, envOf(env), io.Discard); err == nil || !strings.Contains(err.Error(), "TOLLGATE_USAGE_RETENTION_MONTHS") {
			t.Errorf("retention %q: err = %v, want one naming TOLLGATE_USAGE_RETENTION_MONTHS", bad, err)
		}
	}
}
