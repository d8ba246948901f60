package config

import (
	"io"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaultsAndEndpoints(t *testing.T) {
	c, err := Load([]string{"-node-id", "dp-1"}, envOf(map[string]string{
		"TOLLGATE_DP_TOKEN":       "tok",
		"TOLLGATE_CP_ENDPOINTS":   "127.0.0.1:9090, 127.0.0.1:9091",
		"TOLLGATE_DP_HTTP_ADDR":   "127.0.0.1:0",
		"TOLLGATE_MAX_BODY_BYTES": "1024",
	}), io.Discard)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if len(c.CPEndpoints) != 2 || c.CPEndpoints[1] != "127.0.0.1:9091" || c.MaxBodyBytes != 1024 || c.NodeID != "dp-1" {
		t.Fatalf("Load = %+v", c)
	}
	if c.HoldAnswerBytes != 4<<20 {
		t.Fatalf("HoldAnswerBytes = %d, want the 4 MiB default", c.HoldAnswerBytes)
	}
	c, err = Load([]string{"-node-id", "dp-1"}, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "tok", "TOLLGATE_HOLD_ANSWER_BYTES": "4096"}), io.Discard)
	if err != nil || c.HoldAnswerBytes != 4096 {
		t.Fatalf("Load = %v, HoldAnswerBytes %d, want 4096", err, c.HoldAnswerBytes)
	}
}

func TestLoadRejectsBadSettingsByName(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no token", map[string]string{}, "TOLLGATE_DP_TOKEN"},
		{"bad redis", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_REDIS_URL": "http://x"}, "TOLLGATE_REDIS_URL"},
		{"bad endpoint", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_CP_ENDPOINTS": "nohost"}, "TOLLGATE_CP_ENDPOINTS"},
		{"bad body limit", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_MAX_BODY_BYTES": "lots"}, "TOLLGATE_MAX_BODY_BYTES"},
		{"bad answer hold", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_HOLD_ANSWER_BYTES": "lots"}, "TOLLGATE_HOLD_ANSWER_BYTES"},
		{"answer hold zero", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_HOLD_ANSWER_BYTES": "0"}, "TOLLGATE_HOLD_ANSWER_BYTES"},
		{"bad keepalive", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_KEEPALIVE_INTERVAL": "0s"}, "TOLLGATE_KEEPALIVE_INTERVAL"},
		{"cluster URL without cluster mode", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_REDIS_URL": "redis://127.0.0.1:7000?addr=127.0.0.1:7001"}, "TOLLGATE_REDIS_CLUSTER=true"},
		{"bad cluster URL", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_REDIS_CLUSTER": "true", "TOLLGATE_REDIS_URL": "redis://127.0.0.1:7000?bogus=1"}, "TOLLGATE_REDIS_CLUSTER"},
		{"tls cert without key", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_DP_TLS_CERT": "c.pem"}, "TOLLGATE_DP_TLS_KEY"},
		{"tls client CA without cert", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_DP_TLS_CLIENT_CA": "ca.pem"}, "TOLLGATE_DP_TLS_CLIENT_CA"},
		{"client cert without key", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_CP_CA_FILE": "ca.pem", "TOLLGATE_CP_CLIENT_CERT": "c.pem"}, "TOLLGATE_CP_CLIENT_KEY"},
		{"client cert without TLS", map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_CP_CLIENT_CERT": "c.pem", "TOLLGATE_CP_CLIENT_KEY": "k.pem"}, "TOLLGATE_CP_CA_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(nil, envOf(tt.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestClientTimeouts: the client connection timeouts have defaults and read their settings.
func TestClientTimeouts(t *testing.T) {
	c, err := Load(nil, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.ReadHeaderTimeout != 10*time.Second || c.BodyReadTimeout != time.Minute || c.IdleTimeout != 2*time.Minute {
		t.Fatalf("defaults %v %v %v", c.ReadHeaderTimeout, c.BodyReadTimeout, c.IdleTimeout)
	}
	c, err = Load([]string{"-idle-timeout", "5s"}, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t",
		"TOLLGATE_READ_HEADER_TIMEOUT": "2s", "TOLLGATE_BODY_READ_TIMEOUT": "3s"}), io.Discard)
	if err != nil || c.ReadHeaderTimeout != 2*time.Second || c.BodyReadTimeout != 3*time.Second || c.IdleTimeout != 5*time.Second {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	for _, name := range []string{"TOLLGATE_READ_HEADER_TIMEOUT", "TOLLGATE_BODY_READ_TIMEOUT", "TOLLGATE_IDLE_TIMEOUT"} {
		if _, err := Load(nil, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t", name: "0s"}), io.Discard); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=0s: %v, want an error naming it", name, err)
		}
	}
}

// TestDrainDelaySetting: TOLLGATE_DRAIN_DELAY defaults to 5s, a flag overrides it, 0 turns it off and a
// negative value is refused by name.
func TestDrainDelaySetting(t *testing.T) {
	base := map[string]string{"TOLLGATE_DP_TOKEN": "t"}
	c, err := Load(nil, envOf(base), io.Discard)
	if err != nil || c.DrainDelay != 5*time.Second {
		t.Fatalf("default DrainDelay = %v, %v; want 5s", c.DrainDelay, err)
	}
	if c, err = Load([]string{"-drain-delay", "0s"}, envOf(base), io.Discard); err != nil || c.DrainDelay != 0 {
		t.Fatalf("-drain-delay 0s = %v, %v", c.DrainDelay, err)
	}
	base["TOLLGATE_DRAIN_DELAY"] = "-1s"
	if _, err := Load(nil, envOf(base), io.Discard); err == nil || !strings.Contains(err.Error(), "TOLLGATE_DRAIN_DELAY") {
		t.Fatalf("negative drain delay: %v, want an error naming TOLLGATE_DRAIN_DELAY", err)
	}
}

// TestRedisClusterSetting: TOLLGATE_REDIS_CLUSTER=true accepts go-redis's cluster URL; the TLS settings of
// the client listener and the client certificate for the control plane load.
func TestRedisClusterSetting(t *testing.T) {
	c, err := Load(nil, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_REDIS_CLUSTER": "true",
		"TOLLGATE_REDIS_URL": "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", "TOLLGATE_DP_TLS_CERT": "c.pem",
		"TOLLGATE_DP_TLS_KEY": "k.pem", "TOLLGATE_DP_TLS_CLIENT_CA": "ca.pem", "TOLLGATE_CP_CA_FILE": "cp-ca.pem",
		"TOLLGATE_CP_CLIENT_CERT": "cc.pem", "TOLLGATE_CP_CLIENT_KEY": "ck.pem"}), io.Discard)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if !c.RedisCluster || c.TLS.Cert != "c.pem" || c.TLS.Key != "k.pem" || c.TLS.ClientCA != "ca.pem" || c.CPClientCert != "cc.pem" || c.CPClientKey != "ck.pem" {
		t.Fatalf("Load = %+v", c)
	}
}

// TestRedisShardsSetting: TOLLGATE_REDIS_SHARDS defaults to 16 in cluster mode and 1 (untagged key names)
// otherwise, takes an explicit number, and refuses one outside 1..admission.MaxShards by name.
func TestRedisShardsSetting(t *testing.T) {
	cluster := map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_REDIS_CLUSTER": "true",
		"TOLLGATE_REDIS_URL": "redis://127.0.0.1:7000?addr=127.0.0.1:7001"}
	if c, err := Load(nil, envOf(cluster), io.Discard); err != nil || c.RedisShards != DefaultClusterShards {
		t.Fatalf("cluster mode: shards %d, %v; want %d", c.RedisShards, err, DefaultClusterShards)
	}
	if c, err := Load(nil, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t"}), io.Discard); err != nil || c.RedisShards != 1 {
		t.Fatalf("single Redis: shards %d, %v; want 1", c.RedisShards, err)
	}
	if c, err := Load(nil, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_REDIS_SHARDS": "4"}), io.Discard); err != nil || c.RedisShards != 4 {
		t.Fatalf("explicit: shards %d, %v; want 4", c.RedisShards, err)
	}
	for _, bad := range []string{"0", "-3", "1025", "many"} {
		_, err := Load(nil, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_REDIS_SHARDS": bad}), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "TOLLGATE_REDIS_SHARDS") {
			t.Errorf("TOLLGATE_REDIS_SHARDS=%s: %v, want a refusal naming the setting", bad, err)
		}
	}
}

// TestRedisSentinelSetting: TOLLGATE_REDIS_SENTINEL_MASTER takes the sentinels' multi-address URL, keeps
// one shard, and is refused together with TOLLGATE_REDIS_CLUSTER.
func TestRedisSentinelSetting(t *testing.T) {
	env := map[string]string{"TOLLGATE_DP_TOKEN": "t", "TOLLGATE_REDIS_SENTINEL_MASTER": "tollgate",
		"TOLLGATE_REDIS_URL": "redis://127.0.0.1:26379?addr=127.0.0.1:26380"}
	c, err := Load(nil, envOf(env), io.Discard)
	if err != nil || c.RedisSentinelMaster != "tollgate" || c.RedisShards != 1 {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	env["TOLLGATE_REDIS_CLUSTER"] = "true"
	if _, err := Load(nil, envOf(env), io.Discard); err == nil || !strings.Contains(err.Error(), "TOLLGATE_REDIS_SENTINEL_MASTER") {
		t.Fatalf("cluster and sentinel: %v, want a refusal naming both", err)
	}
}
