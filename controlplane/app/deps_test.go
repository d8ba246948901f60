package app

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryImportsNoRedis keeps go-redis out of the control plane: only data planes talk to Redis.
func TestBinaryImportsNoRedis(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/tollgate/tollgate/controlplane/cmd/controlplane").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps returned %d packages; the guard is not looking at the binary", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/redis/go-redis") {
			t.Errorf("controlplane imports %s; the control plane must not talk to Redis", d)
		}
	}
}
