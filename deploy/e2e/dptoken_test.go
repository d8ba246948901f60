package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/dptoken"
	"github.com/tollgate/tollgate/dataplane/settle"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/testkit"
)

// grpcConn dials a control plane's gRPC listener in plaintext.
func grpcConn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func bearerCtx(token string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), cancel
}

// settleCode is the status code of an empty Settle call with token.
func settleCode(t testing.TB, cc *grpc.ClientConn, token string) codes.Code {
	t.Helper()
	ctx, cancel := bearerCtx(token)
	defer cancel()
	_, err := settlementv1.NewSettlementServiceClient(cc).Settle(ctx, &settlementv1.SettleRequest{NodeId: "probe"})
	return status.Code(err)
}

// watchCode is the status code of opening a Watch stream with token (OK once its headers arrive).
func watchCode(t testing.TB, cc *grpc.ClientConn, token string) codes.Code {
	t.Helper()
	ctx, cancel := bearerCtx(token)
	defer cancel()
	st, err := snapshotv1.NewSnapshotServiceClient(cc).Watch(ctx, &snapshotv1.WatchRequest{NodeId: "probe"})
	if err != nil {
		return status.Code(err)
	}
	if _, err := st.Header(); err != nil {
		return status.Code(err)
	}
	if _, err := st.Recv(); err != nil {
		return status.Code(err)
	}
	return codes.OK
}

// TestDataPlaneTokenScopes: tokens made through the admin gRPC API carry separate rights. A
// snapshot-only token opens Watch and is refused PERMISSION_DENIED on Settle (before its message is
// read, by the gRPC tap); a settlement-only token the reverse; a data plane holding the snapshot-only
// token serves traffic but its settlements are refused and stay in its outbox, none stored. The
// control plane runs without a bootstrap data-plane token, so nothing else opens either service.
func TestDataPlaneTokenScopes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	base := c.seed()
	cpA := c.startCP("cp", "", "TOLLGATE_DP_TOKEN", "")
	cc := grpcConn(t, cpA.srv.GRPCAddr())
	adm := adminv1.NewAdminServiceClient(cc)
	create := func(name string, scopes ...string) string {
		ctx, cancel := bearerCtx(c.adminTok)
		defer cancel()
		resp, err := adm.CreateDataPlaneToken(ctx, &adminv1.CreateDataPlaneTokenRequest{Name: name, Scopes: scopes})
		if err != nil {
			t.Fatalf("CreateDataPlaneToken %s: %v", name, err)
		}
		if !strings.HasPrefix(resp.GetToken(), dptoken.TokenPrefix) || resp.GetDataplaneToken().GetRevokedAt() != nil {
			t.Fatalf("CreateDataPlaneToken %s = %v", name, resp)
		}
		return resp.GetToken()
	}
	snapOnly := create("dp-snapshots", dptoken.ScopeSnapshotRead)
	settleOnly := create("dp-settlements", dptoken.ScopeSettlementWrite)
	both := create("dp-full", dptoken.ScopeSettlementWrite, dptoken.ScopeSnapshotRead)

	ctx, cancel := bearerCtx(c.adminTok)
	defer cancel()
	if _, err := adm.CreateDataPlaneToken(ctx, &adminv1.CreateDataPlaneTokenRequest{Name: "x", Scopes: []string{"admin:all"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown scope: %v, want InvalidArgument", err)
	}
	list, err := adm.ListDataPlaneTokens(ctx, &adminv1.ListDataPlaneTokensRequest{})
	if err != nil || len(list.GetItems()) != 3 || fmt.Sprint(list.GetItems()[2].GetScopes()) != "[snapshot:read settlement:write]" {
		t.Fatalf("ListDataPlaneTokens = %v, %v", list, err)
	}

	for _, tc := range []struct {
		name          string
		token         string
		watch, settle codes.Code
	}{
		{"snapshot-only", snapOnly, codes.OK, codes.PermissionDenied},
		{"settlement-only", settleOnly, codes.PermissionDenied, codes.OK},
		{"both scopes", both, codes.OK, codes.OK},
		{"unknown token", dptoken.TokenPrefix + "not-a-token", codes.Unauthenticated, codes.Unauthenticated},
		{"the admin token", c.adminTok, codes.Unauthenticated, codes.Unauthenticated},
		{"the old shared token", c.dpToken, codes.Unauthenticated, codes.Unauthenticated},
	} {
		if got := watchCode(t, cc, tc.token); got != tc.watch {
			t.Errorf("%s: Watch = %v, want %v", tc.name, got, tc.watch)
		}
		if got := settleCode(t, cc, tc.token); got != tc.settle {
			t.Errorf("%s: Settle = %v, want %v", tc.name, got, tc.settle)
		}
	}

	// A data plane with the snapshot-only token: it gets the configuration and serves, but may not bill.
	d := c.startDP("dp-snapshot-only", []string{cpA.srv.GRPCAddr()}, "TOLLGATE_DP_TOKEN", snapOnly)
	d.wait(t, base)
	d.wantReady(t, base)
	req, _ := http.NewRequest("GET", "http://"+d.srv.Addr()+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer tg-e2e-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models = %d", resp.StatusCode)
	}
	testkit.WaitFor(t, "a refused Settle call", func() bool { return metricValue(t, d, "tollgate_settle_call_failures_total") >= 1 })
	var rows int
	if err := c.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM usages`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("usages = %d, %v; want none written with a snapshot-only token", rows, err)
	}
	// Revoked through the admin gRPC API: refused at once, listed with its revocation time.
	ctx2, cancel2 := bearerCtx(c.adminTok)
	defer cancel2()
	if _, err := adm.RevokeDataPlaneToken(ctx2, &adminv1.RevokeDataPlaneTokenRequest{Id: list.GetItems()[1].GetId()}); err != nil {
		t.Fatalf("RevokeDataPlaneToken: %v", err)
	}
	if got := settleCode(t, cc, settleOnly); got != codes.Unauthenticated {
		t.Errorf("revoked settlement-only token: Settle = %v, want Unauthenticated", got)
	}
	if l, err := adm.ListDataPlaneTokens(ctx2, &adminv1.ListDataPlaneTokensRequest{}); err != nil || l.GetItems()[1].GetRevokedAt() == nil || l.GetItems()[0].GetRevokedAt() != nil {
		t.Errorf("after revoking: %v, %v", l, err)
	}
	// Nothing lost: the record waits in the outbox for a token that may settle.
	outbox := settle.Streams{Prefix: d.srv.Config.RedisKeyPrefix}.Outbox("")
	if n, err := d.srv.Redis.XLen(context.Background(), outbox).Result(); err != nil || n != 1 {
		t.Errorf("outbox holds %d records (%v), want the 1 refused", n, err)
	}
}

// metricValue reads one unlabelled metric from the data plane's /metrics (0 when absent).
func metricValue(t testing.TB, d *dp, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + d.srv.Addr() + "/metrics")
	if err != nil {
		t.Fatalf("%s /metrics: %v", d.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return 0
}

// TestRevokedDataPlaneTokenClosesWatch: a data plane watching replica B with its own token; the token is
// revoked through replica A's admin REST API. Replica B closes the open Watch stream (told by Postgres
// NOTIFY), and both replicas refuse the token's next Watch and Settle at once; the data plane keeps
// serving the snapshot it holds. The revoked token stays listed with its revocation time.
func TestRevokedDataPlaneTokenClosesWatch(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	base := c.seed()
	cpA := c.startCP("cp-a", "", "TOLLGATE_DP_TOKEN", "")
	cpB := c.startCP("cp-b", "", "TOLLGATE_DP_TOKEN", "")
	var created struct {
		ID     int64    `json:"id"`
		Scopes []string `json:"scopes"`
		Token  string   `json:"token"`
	}
	if code := c.adminREST(t, cpA, "POST", "/admin/dataplane-tokens", map[string]any{"name": "dp-1",
		"scopes": []string{"snapshot:read", "settlement:write"}}, &created); code != http.StatusCreated || created.Token == "" {
		t.Fatalf("create data-plane token: %d %+v", code, created)
	}
	var other struct {
		Token string `json:"token"`
	}
	c.adminREST(t, cpA, "POST", "/admin/dataplane-tokens", map[string]any{"name": "dp-2", "scopes": []string{"snapshot:read"}}, &other)

	d := c.startDP("dp-1", []string{cpB.srv.GRPCAddr()}, "TOLLGATE_DP_TOKEN", created.Token)
	d.wait(t, base)
	testkit.WaitFor(t, "dp-1's Watch stream on cp-b", func() bool { return cpB.srv.Watch.Watchers() == 1 })
	// Another data plane's stream must survive the revocation.
	ccB := grpcConn(t, cpB.srv.GRPCAddr())
	otherCtx, otherCancel := bearerCtx(other.Token)
	defer otherCancel()
	otherStream, err := snapshotv1.NewSnapshotServiceClient(ccB).Watch(otherCtx, &snapshotv1.WatchRequest{NodeId: "dp-2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherStream.Recv(); err != nil {
		t.Fatalf("dp-2 Watch: %v", err)
	}
	testkit.WaitFor(t, "two streams on cp-b", func() bool { return cpB.srv.Watch.Watchers() == 2 })

	var revoked struct {
		RevokedAt *time.Time `json:"revoked_at"`
	}
	if code := c.adminREST(t, cpA, "DELETE", fmt.Sprintf("/admin/dataplane-tokens/%d", created.ID), nil, &revoked); code != http.StatusOK || revoked.RevokedAt == nil {
		t.Fatalf("revoke: %d %+v", code, revoked)
	}
	// Refused at once on both replicas, for both services.
	for _, p := range []*cp{cpA, cpB} {
		cc := grpcConn(t, p.srv.GRPCAddr())
		if got := watchCode(t, cc, created.Token); got != codes.Unauthenticated {
			t.Errorf("%s: Watch with the revoked token = %v, want Unauthenticated", p.name, got)
		}
		if got := settleCode(t, cc, created.Token); got != codes.Unauthenticated {
			t.Errorf("%s: Settle with the revoked token = %v, want Unauthenticated", p.name, got)
		}
	}
	// The open stream is closed by the replica that did not serve the revocation.
	testkit.WaitFor(t, "dp-1's stream closed on cp-b", func() bool { return cpB.srv.Watch.Watchers() == 1 })
	if ids := cpB.srv.Watch.TokenIDs(); len(ids) != 1 || ids[0] == created.ID {
		t.Fatalf("open streams' tokens on cp-b = %v, want only dp-2's", ids)
	}
	if d.srv.Syncer.Current() == nil || d.version() != base {
		t.Errorf("dp-1 dropped its snapshot after the revocation: version %d", d.version())
	}
	var list struct {
		Items []struct {
			ID        int64      `json:"id"`
			RevokedAt *time.Time `json:"revoked_at"`
		} `json:"items"`
	}
	c.adminREST(t, cpB, "GET", "/admin/dataplane-tokens", nil, &list)
	if len(list.Items) != 2 || list.Items[0].ID != created.ID || list.Items[0].RevokedAt == nil || list.Items[1].RevokedAt != nil {
		t.Errorf("listed tokens = %+v", list.Items)
	}
}
