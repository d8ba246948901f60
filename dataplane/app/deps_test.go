package app

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryImportsNoPostgres keeps pgx out of the data plane: data planes never touch Postgres.
func TestBinaryImportsNoPostgres(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/tollgate/tollgate/dataplane/cmd/dataplane").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps returned %d packages; the guard is not looking at the binary", len(deps))
	}
	var sawRedis bool
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/jackc/") {
			t.Errorf("dataplane imports %s; data planes must not talk to Postgres", d)
		}
		sawRedis = sawRedis || strings.HasPrefix(d, "github.com/redis/go-redis")
	}
	if !sawRedis {
		t.Error("dataplane does not import go-redis; the dependency list looks wrong")
	}
}
