package settlement_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/app"
	"github.com/tollgate/tollgate/controlplane/config"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// TestServedByControlPlane drives the real control-plane server: SettlementService is registered, guarded
// by the data-plane token, and stores into the server's database.
func TestServedByControlPlane(t *testing.T) {
	t.Parallel()
	_, client, db := startControlPlane(t)
	req := &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{record("app1", 1, 0, 3, "0.25")}}

	callCtx, callCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer callCancel()
	if _, err := client.Settle(callCtx, req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Settle without token = %v, want Unauthenticated", err)
	}
	resp, err := client.Settle(metadata.AppendToOutgoingContext(callCtx, "authorization", "Bearer "+token), req)
	if err != nil {
		t.Fatalf("Settle = %v", err)
	}
	if !resp.GetResults()[0].GetInserted() {
		t.Errorf("Settle results = %v, want inserted", resp.GetResults())
	}
	var cost string
	if err := db.Pool.QueryRow(context.Background(), `SELECT cost::text FROM usages WHERE request_id = 'app1'`).Scan(&cost); err != nil || cost != "0.25" {
		t.Errorf("stored cost = %q, %v; want 0.25", cost, err)
	}
}

// startControlPlane runs the real control-plane server on a fresh database and returns it with a
// SettlementService client (no credentials attached).
func startControlPlane(t *testing.T) (*app.Server, settlementv1.SettlementServiceClient, *storetest.DB) {
	t.Helper()
	db := storetest.New(t)
	env := map[string]string{
		"TOLLGATE_DATABASE_URL": db.URL, "TOLLGATE_ADMIN_TOKEN": "admin-token-0123456789", "TOLLGATE_DP_TOKEN": token,
		"TOLLGATE_SECRET_KEY": strings.Repeat("ab", 32), "TOLLGATE_CP_HTTP_ADDR": "127.0.0.1:0", "TOLLGATE_CP_GRPC_ADDR": "127.0.0.1:0",
	}
	cfg, err := config.Load(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	})
	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	client := settlementv1.NewSettlementServiceClient(cc)
	return srv, client, db
}
