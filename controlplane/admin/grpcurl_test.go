package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/app"
	"github.com/tollgate/tollgate/controlplane/config"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/process"
)

// TestGrpcurlAgainstRunningControlPlane starts the real control plane (app.New + Run, as the binary
// does) and drives AdminService with the real grpcurl (pinned as a go tool), using only server
// reflection: list the services, then create, list and delete a price rule.
func TestGrpcurlAgainstRunningControlPlane(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	env := map[string]string{
		"TOLLGATE_DATABASE_URL": db.URL,
		"TOLLGATE_ADMIN_TOKEN":  bootstrapToken,
		"TOLLGATE_SECRET_KEY":   strings.Repeat("ab", 32),
		"TOLLGATE_DP_TOKEN":     "data-plane-token-0123456789",
		"TOLLGATE_CP_HTTP_ADDR": "127.0.0.1:0",
		"TOLLGATE_CP_GRPC_ADDR": "127.0.0.1:0",
	}
	cfg, err := config.Load(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log, err := process.NewLogger(io.Discard, "error")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("control plane did not stop")
		}
	})
	addr := srv.GRPCAddr()

	grpcurl := func(args ...string) string {
		t.Helper()
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer ccancel()
		full := append([]string{"tool", "grpcurl", "-plaintext", "-H", "authorization: Bearer " + bootstrapToken}, args...)
		out, err := exec.CommandContext(cctx, "go", full...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(full, " "), err, out)
		}
		return string(out)
	}

	// Without the admin token AdminService refuses; reflection stays open.
	out, err := exec.Command("go", "tool", "grpcurl", "-plaintext", addr, "tollgate.admin.v1.AdminService/ListPriceRules").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Unauthenticated") {
		t.Errorf("grpcurl without token: %v %s, want Unauthenticated", err, out)
	}

	services := grpcurl(addr, "list")
	for _, want := range []string{"tollgate.admin.v1.AdminService", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(services, want) {
			t.Errorf("grpcurl list = %q, want %s", services, want)
		}
	}
	if methods := grpcurl(addr, "list", "tollgate.admin.v1.AdminService"); !strings.Contains(methods, "CreatePriceRule") {
		t.Errorf("AdminService methods = %q", methods)
	}

	created := grpcurl("-d", `{"rule": {"match_type": "exact", "model_match": "grpcurl-model", "input_price": "1.25",
		"output_price": "10.00", "cache_read_price": "0.125", "cache_creation_5m_price": "0", "cache_creation_30m_price": "0",
		"cache_creation_1h_price": "0", "image_output_price": "0", "enabled": true,
		"pricing_tiers_json": [{"service_tier": "priority", "multiplier": "2"}]}}`,
		addr, "tollgate.admin.v1.AdminService/CreatePriceRule")
	var resp struct {
		Rule struct {
			ID         string `json:"id"`
			InputPrice string `json:"inputPrice"`
		} `json:"rule"`
	}
	if err := json.Unmarshal([]byte(created), &resp); err != nil || resp.Rule.ID == "" || resp.Rule.InputPrice != "1.25" {
		t.Fatalf("CreatePriceRule answered %s (%v)", created, err)
	}

	if listed := grpcurl(addr, "tollgate.admin.v1.AdminService/ListPriceRules"); !strings.Contains(listed, "grpcurl-model") {
		t.Errorf("ListPriceRules = %s, want the created rule", listed)
	}
	grpcurl("-d", `{"id": "`+resp.Rule.ID+`"}`, addr, "tollgate.admin.v1.AdminService/DeletePriceRule")
	if listed := grpcurl(addr, "tollgate.admin.v1.AdminService/ListPriceRules"); strings.Contains(listed, "grpcurl-model") {
		t.Errorf("ListPriceRules after delete = %s", listed)
	}
}
