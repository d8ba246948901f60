package settle_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/settle"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/vocab"
)

const dpToken = "test-dp-token-0123456789"

// controlPlane is the real SettlementService on a real gRPC server on loopback, which a test can stop
// and start again on the same address.
type controlPlane struct {
	t    testing.TB
	db   *storetest.DB
	addr string
	opts []grpc.ServerOption

	mu  sync.Mutex
	srv *grpc.Server
}

func startControlPlane(t testing.TB, db *storetest.DB, opts ...grpc.ServerOption) *controlPlane {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cp := &controlPlane{t: t, db: db, addr: ln.Addr().String(), opts: opts}
	cp.serve(ln)
	t.Cleanup(cp.stop)
	return cp
}

func (cp *controlPlane) serve(ln net.Listener) {
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(settlement.UnaryInterceptor(dpToken))}, cp.opts...)...)
	settlementv1.RegisterSettlementServiceServer(srv, settlement.New(cp.db.Pool, nil, nil))
	cp.mu.Lock()
	cp.srv = srv
	cp.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// stop kills the server abruptly (in-flight calls fail).
func (cp *controlPlane) stop() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.srv != nil {
		cp.srv.Stop()
		cp.srv = nil
	}
}

// restart listens on the same address again.
func (cp *controlPlane) restart() {
	cp.t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", cp.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		cp.t.Fatalf("relisten %s: %v", cp.addr, err)
	}
	cp.serve(ln)
}

// dataPlane is one data plane's admission + outbox + forwarder on a shared Redis prefix.
type dataPlane struct {
	adm *admission.Admitter
	rec *settle.Recorder
	fwd *settle.Forwarder

	cancel context.CancelFunc
	done   chan struct{}
}

func newDataPlane(t testing.TB, rdb redis.UniversalClient, prefix, node string, cp *controlPlane, admOpts admission.Options, fo settle.ForwarderOptions) *dataPlane {
	t.Helper()
	admOpts.Prefix = prefix
	fo.Prefix, fo.NodeID, fo.ControlPlane.Endpoints, fo.ControlPlane.Token, fo.Shards = prefix, node, []string{cp.addr}, dpToken, admOpts.Shards
	// These tests are about settlement, not Redis deadlines: on a loaded machine (-race, hundreds of
	// concurrent calls through one pool) a call can take longer than the production default, which must
	// not turn them into timeout tests. Tests of deadlines set their own.
	if admOpts.Timeout == 0 {
		admOpts.Timeout = 30 * time.Second
	}
	if fo.RedisTimeout == 0 {
		fo.RedisTimeout = 30 * time.Second
	}
	if fo.Block == 0 {
		fo.Block = 50 * time.Millisecond
	}
	if fo.ControlPlane.BackoffBase == 0 {
		fo.ControlPlane.BackoffBase, fo.ControlPlane.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	}
	if fo.RPCTimeout == 0 {
		fo.RPCTimeout = 2 * time.Second
	}
	f, err := settle.NewForwarder(rdb, fo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &dataPlane{adm: admission.New(rdb, admOpts), rec: settle.NewRecorder(rdb, prefix).Sharded(admOpts.Shards), fwd: f}
}

func (dp *dataPlane) start() {
	ctx, cancel := context.WithCancel(context.Background())
	dp.cancel, dp.done = cancel, make(chan struct{})
	go func() { defer close(dp.done); _ = dp.fwd.Run(ctx) }()
}

func (dp *dataPlane) stop() {
	if dp.cancel != nil {
		dp.cancel()
		<-dp.done
		dp.cancel = nil
	}
}

// microsToDecimal renders integer micro-dollars as an exact decimal dollar string.
func microsToDecimal(m int64) string {
	s := fmt.Sprintf("%07d", m)
	return s[:len(s)-6] + "." + s[len(s)-6:]
}

func outcomeRecord(id string, org, team, user int64, costMicros int64, end vocab.EndState) *settlementv1.SettlementRecord {
	r := &settlementv1.SettlementRecord{
		RequestId: id, ApiKeyId: 1, UserId: user, OrgId: org, ProviderId: 1, LogicalModel: "m", UpstreamModel: "m-1",
		Operation: "generate_content", InboundKind: "alpha_chat_completions", Implementation: "passthrough",
		Tokens: &settlementv1.TokenCounts{Input: 10}, Cost: microsToDecimal(costMicros), Source: "upstream",
		EndState: string(end), HttpStatus: 200,
	}
	if team != 0 {
		r.TeamId = &team
	}
	return r
}

// waitDrained waits until the outbox holds nothing (every entry acknowledged and deleted).
func waitDrained(t testing.TB, rdb *redis.Client, prefix string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	stream := settle.Streams{Prefix: prefix}.Outbox("")
	for {
		n, err := rdb.XLen(context.Background(), stream).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox still holds %d entries after %v", n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assertPendingZero checks every qp: counter under prefix is absent or zero.
func assertPendingZero(t testing.TB, rdb *redis.Client, prefix string) {
	t.Helper()
	for _, k := range admissiontest.Keys(t, rdb, prefix+"qp:") {
		v, err := rdb.Get(context.Background(), k).Result()
		if err == nil && v != "0" {
			t.Errorf("pending counter %s = %s after everything settled, want 0", k, v)
		}
	}
}

// assertLedgerConsistent checks cost_used of every quota row equals the sum of usages.cost of its scope.
func assertLedgerConsistent(t testing.TB, db *storetest.DB) {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
		SELECT q.scope, q.scope_id, q.cost_used::text, coalesce((SELECT sum(u.cost) FROM usages u WHERE
		    (q.scope = 'org' AND u.org_id = q.scope_id) OR (q.scope = 'team' AND u.team_id = q.scope_id) OR
		    (q.scope = 'user' AND u.user_id = q.scope_id) OR (q.scope = 'key' AND u.api_key_id = q.scope_id)), 0)::text,
		    q.cost_used = coalesce((SELECT sum(u.cost) FROM usages u WHERE
		    (q.scope = 'org' AND u.org_id = q.scope_id) OR (q.scope = 'team' AND u.team_id = q.scope_id) OR
		    (q.scope = 'user' AND u.user_id = q.scope_id) OR (q.scope = 'key' AND u.api_key_id = q.scope_id)), 0)
		  FROM quotas q`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var scope, used, sum string
		var id int64
		var equal bool
		if err := rows.Scan(&scope, &id, &used, &sum, &equal); err != nil {
			t.Fatal(err)
		}
		if !equal {
			t.Errorf("quota %s %d: cost_used %s != sum(usages.cost) %s", scope, id, used, sum)
		}
	}
}

func id(prefix string, i int) string { return prefix + strconv.Itoa(i) }
