package config

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestRedisTimeoutAndFailurePolicy(t *testing.T) {
	base := map[string]string{"TOLLGATE_DP_TOKEN": "t"}
	c, err := Load(nil, envOf(base), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.RedisTimeout != time.Second || c.AdmissionOnRedisFailure != "open" {
		t.Fatalf("defaults: timeout %v policy %q, want 1s and open", c.RedisTimeout, c.AdmissionOnRedisFailure)
	}
	c, err = Load([]string{"-redis-timeout", "250ms"}, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t",
		"TOLLGATE_ADMISSION_ON_REDIS_FAILURE": "closed"}), io.Discard)
	if err != nil || c.RedisTimeout != 250*time.Millisecond || c.AdmissionOnRedisFailure != "closed" {
		t.Fatalf("Load = %+v, %v; want 250ms and closed", c, err)
	}
	for env, want := range map[string]string{
		"TOLLGATE_ADMISSION_ON_REDIS_FAILURE": "ajar",
		"TOLLGATE_REDIS_TIMEOUT":              "0s",
	} {
		_, err := Load(nil, envOf(map[string]string{"TOLLGATE_DP_TOKEN": "t", env: want}), io.Discard)
		if err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: Load = %v, want an error naming the setting", env, want, err)
		}
	}
}
