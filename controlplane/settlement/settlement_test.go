package settlement_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

const token = "test-dp-token-0123456789"

// recordTime is every test record's created_at: a data plane sends a record, and redelivers it, with the
// created_at of the request's arrival, so a test building the "same" record twice must give it the same one.
var recordTime = time.Now()

func record(id string, org, team, user int64, cost string) *settlementv1.SettlementRecord {
	r := &settlementv1.SettlementRecord{
		RequestId: id, ApiKeyId: 1, UserId: user, OrgId: org, ProviderId: 1, LogicalModel: "m", UpstreamModel: "m-1",
		Operation: "generate_content", InboundKind: "alpha_chat_completions", Implementation: "passthrough",
		Tokens: &settlementv1.TokenCounts{Input: 10, Output: 5}, Cost: cost, Source: "upstream", EndState: "completed",
		HttpStatus: 200, CreatedAt: timestamppb.New(recordTime),
	}
	if team != 0 {
		r.TeamId = &team
	}
	return r
}

type bundle struct {
	db  *storetest.DB
	svc *settlement.Service
}

func setup(t testing.TB) *bundle {
	t.Helper()
	db := storetest.New(t)
	ctx := context.Background()
	// org 1 limited, team 2 unlimited (NULL limit), user 3 without a quota row.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 10), ('team', 2, NULL)`); err != nil {
		t.Fatal(err)
	}
	return &bundle{db: db, svc: settlement.New(db.Pool, nil, nil)}
}

func (b *bundle) used(t testing.TB, scope string, id int64) string {
	t.Helper()
	var v string
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT cost_used::text FROM quotas WHERE scope=$1 AND scope_id=$2`, scope, id).Scan(&v); err != nil {
		t.Fatalf("read quota %s %d: %v", scope, id, err)
	}
	return v
}

func (b *bundle) count(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := b.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSettleBatchTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	batch := &settlementv1.SettleRequest{NodeId: "dp1", Records: []*settlementv1.SettlementRecord{
		record("r1", 1, 2, 3, "0.000123456789012345678901234567"),
		record("r2", 1, 0, 3, "1.5"),
		record("r3", 1, 2, 3, "0"),
		record("r1", 1, 2, 3, "0.000123456789012345678901234567"), // repeated within the batch
	}}
	resp, err := b.svc.Settle(ctx, batch)
	if err != nil {
		t.Fatalf("Settle = %v", err)
	}
	wantInserted := []bool{true, true, true, false}
	for i, r := range resp.GetResults() {
		if r.GetInserted() != wantInserted[i] {
			t.Errorf("first Settle result %d (%s) inserted = %v, want %v", i, r.GetRequestId(), r.GetInserted(), wantInserted[i])
		}
	}
	const wantOrg, wantTeam = "1.500123456789012345678901234567", "0.000123456789012345678901234567"
	if got := b.used(t, "org", 1); got != wantOrg {
		t.Errorf("org cost_used = %s, want %s", got, wantOrg)
	}
	if got := b.used(t, "team", 2); got != wantTeam {
		t.Errorf("team cost_used = %s, want %s", got, wantTeam)
	}
	if n := b.count(t, `SELECT count(*) FROM quotas WHERE scope='user'`); n != 0 {
		t.Errorf("settlement created %d user quota rows, want 0 (a scope without a row is not quota-bearing)", n)
	}
	if len(resp.GetQuotas()) != 2 {
		t.Fatalf("Settle answered %d quotas, want 2: %v", len(resp.GetQuotas()), resp.GetQuotas())
	}
	for _, q := range resp.GetQuotas() {
		switch q.GetScope() {
		case "org":
			if q.GetCostUsed() != wantOrg || q.GetCostLimit() != "10" {
				t.Errorf("answered org quota = %v, want used %s limit 10", q, wantOrg)
			}
		case "team":
			if q.GetCostUsed() != wantTeam || q.CostLimit != nil {
				t.Errorf("answered team quota = %v, want used %s, no limit", q, wantTeam)
			}
		}
	}
	rev := b.count(t, `SELECT revision FROM config_revision`)

	again, err := b.svc.Settle(ctx, batch)
	if err != nil {
		t.Fatalf("second Settle = %v", err)
	}
	for _, r := range again.GetResults() {
		if r.GetInserted() {
			t.Errorf("second Settle inserted %s again", r.GetRequestId())
		}
	}
	if got := b.used(t, "org", 1); got != wantOrg {
		t.Errorf("after redelivery org cost_used = %s, want %s", got, wantOrg)
	}
	if got := b.used(t, "team", 2); got != wantTeam {
		t.Errorf("after redelivery team cost_used = %s, want %s", got, wantTeam)
	}
	if n := b.count(t, `SELECT count(*) FROM usages`); n != 3 {
		t.Errorf("usages has %d rows, want 3", n)
	}
	if len(again.GetQuotas()) != 2 {
		t.Errorf("redelivery answered %d quotas, want the 2 current totals", len(again.GetQuotas()))
	}
	if got := b.count(t, `SELECT revision FROM config_revision`); got != rev {
		t.Errorf("settlement bumped the config revision %d → %d", rev, got)
	}

	// A batch mixing stored and new records adds only the new one.
	mixed, err := b.svc.Settle(ctx, &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{
		record("r2", 1, 0, 3, "1.5"), record("r4", 1, 0, 3, "2")}})
	if err != nil {
		t.Fatal(err)
	}
	if mixed.GetResults()[0].GetInserted() || !mixed.GetResults()[1].GetInserted() {
		t.Errorf("mixed batch results = %v, want [false true]", mixed.GetResults())
	}
	if got, want := b.used(t, "org", 1), "3.500123456789012345678901234567"; got != want {
		t.Errorf("org cost_used = %s, want %s", got, want)
	}
}

func TestSettleConcurrentDuplicateBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var recs []*settlementv1.SettlementRecord
	for i := range 200 {
		recs = append(recs, record(fmt.Sprintf("c%03d", i), 1, 2, 3, "0.01"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker sends the same records in a different order.
			mine := append([]*settlementv1.SettlementRecord(nil), recs...)
			for i := range mine {
				j := (i*7 + w*13) % len(mine)
				mine[i], mine[j] = mine[j], mine[i]
			}
			for off := 0; off < len(mine); off += 50 {
				if _, err := b.svc.Settle(ctx, &settlementv1.SettleRequest{Records: mine[off : off+50]}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Settle = %v", err)
	}
	if got := b.used(t, "org", 1); got != "2.00" {
		t.Errorf("org cost_used = %s, want 2.00 (200 × 0.01, each once)", got)
	}
	if n := b.count(t, `SELECT count(*) FROM usages`); n != 200 {
		t.Errorf("usages has %d rows, want 200", n)
	}
}

func TestSettleRejectsInvalidRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name string
		mod  func(r *settlementv1.SettlementRecord)
	}{
		{"empty request id", func(r *settlementv1.SettlementRecord) { r.RequestId = "" }},
		{"negative cost", func(r *settlementv1.SettlementRecord) { r.Cost = "-1" }},
		{"float cost", func(r *settlementv1.SettlementRecord) { r.Cost = "1e-3" }},
		{"unknown source", func(r *settlementv1.SettlementRecord) { r.Source = "guess" }},
		{"unknown end state", func(r *settlementv1.SettlementRecord) { r.EndState = "done" }},
		{"unknown operation", func(r *settlementv1.SettlementRecord) { r.Operation = "chat" }},
		{"negative tokens", func(r *settlementv1.SettlementRecord) { r.Tokens.Output = -1 }},
		{"negative price rule version", func(r *settlementv1.SettlementRecord) { r.PriceRuleId, r.PriceRuleVersion = 1, -1 }},
		{"price rule version beyond integer", func(r *settlementv1.SettlementRecord) { r.PriceRuleId, r.PriceRuleVersion = 1, 1<<31 }},
		{"price rule version without a rule", func(r *settlementv1.SettlementRecord) { r.PriceRuleVersion = 1 }},
		{"NUL in model", func(r *settlementv1.SettlementRecord) { r.LogicalModel = "m\x00" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := record("bad", 1, 0, 3, "1")
			tt.mod(r)
			_, err := b.svc.Settle(context.Background(), &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{record("good", 1, 0, 3, "1"), r}})
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("Settle(%s) = %v, want InvalidArgument", tt.name, err)
			}
		})
	}
	if n := b.count(t, `SELECT count(*) FROM usages`); n != 0 {
		t.Errorf("a refused batch stored %d rows", n)
	}
}

// TestAuthInterceptorOnlyGuardsSettlement runs the service on a real gRPC server on loopback.
func TestAuthInterceptorOnlyGuardsSettlement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(settlement.UnaryInterceptor(token)))
	settlementv1.RegisterSettlementServiceServer(srv, b.svc)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	client := settlementv1.NewSettlementServiceClient(cc)
	req := &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{record("auth1", 1, 0, 3, "1")}}
	tests := []struct {
		name string
		md   []string
		want codes.Code
	}{
		{"no token", nil, codes.Unauthenticated},
		{"wrong token", []string{"authorization", "Bearer nope"}, codes.Unauthenticated},
		{"not bearer", []string{"authorization", token}, codes.Unauthenticated},
		{"right token", []string{"authorization", "Bearer " + token}, codes.OK},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if tt.md != nil {
			ctx = metadata.AppendToOutgoingContext(ctx, tt.md...)
		}
		_, err := client.Settle(ctx, req)
		cancel()
		if status.Code(err) != tt.want {
			t.Errorf("Settle with %s = %v, want %v", tt.name, err, tt.want)
		}
	}
	// Other services on the same server are not affected.
	if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without token = %v, want OK", err)
	}
}

func BenchmarkSettleIngest(b *testing.B) {
	for _, size := range []int{1, 10, 100, 1000} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			bb := setup(b)
			ctx := context.Background()
			n := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				recs := make([]*settlementv1.SettlementRecord, size)
				for i := range recs {
					n++
					recs[i] = record("b"+strconv.Itoa(n), 1, 2, 3, "0.000123")
				}
				if _, err := bb.svc.Settle(ctx, &settlementv1.SettleRequest{Records: recs}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
