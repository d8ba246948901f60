package e2e

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, when the test binary is re-executed by BenchmarkSnapshotScale with
// TOLLGATE_SCALE_ROLE set, one process of that benchmark (a control plane or a data-plane syncer), so
// each is measured as a process of its own.
func TestMain(m *testing.M) {
	if role := os.Getenv(scaleRoleEnv); role != "" {
		os.Exit(runScaleRole(role))
	}
	os.Exit(m.Run())
}
