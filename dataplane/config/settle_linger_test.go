package config

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestSettleLinger(t *testing.T) {
	base := map[string]string{"TOLLGATE_DP_TOKEN": "t"}
	c, err := Load(nil, envOf(base), io.Discard)
	if err != nil || c.SettleLinger != 100*time.Millisecond {
		t.Fatalf("default SettleLinger = %v, %v; want 100ms", c.SettleLinger, err)
	}
	if c, err = Load([]string{"-settle-linger", "0"}, envOf(base), io.Discard); err != nil || c.SettleLinger != 0 {
		t.Fatalf("-settle-linger 0 = %v, %v; want 0 (off)", c.SettleLinger, err)
	}
	base["TOLLGATE_SETTLE_LINGER"] = "-1s"
	if _, err = Load(nil, envOf(base), io.Discard); err == nil || !strings.Contains(err.Error(), "TOLLGATE_SETTLE_LINGER") {
		t.Fatalf("negative linger: %v, want an error naming TOLLGATE_SETTLE_LINGER", err)
	}
}
