package settle_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/settle"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ackServer is a SettlementService that stores nothing and acknowledges every record as inserted; it
// remembers the size of every batch it was sent.
type ackServer struct {
	settlementv1.UnimplementedSettlementServiceServer
	mu      sync.Mutex
	batches []int
}

func (s *ackServer) Settle(_ context.Context, req *settlementv1.SettleRequest) (*settlementv1.SettleResponse, error) {
	resp := &settlementv1.SettleResponse{}
	for _, r := range req.GetRecords() {
		resp.Results = append(resp.Results, &settlementv1.RecordResult{RequestId: r.GetRequestId(), Inserted: true})
	}
	s.mu.Lock()
	s.batches = append(s.batches, len(req.GetRecords()))
	s.mu.Unlock()
	return resp, nil
}

func (s *ackServer) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

func startAckServer(t *testing.T) (*ackServer, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	as := &ackServer{}
	settlementv1.RegisterSettlementServiceServer(srv, as)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return as, ln.Addr().String()
}

// TestForwarderLingerFillsBatch: with a linger far longer than the test, a short first read waits for
// more records and the batch is settled as soon as it is full — one Settle call for all of them.
func TestForwarderLingerFillsBatch(t *testing.T) {
	t.Parallel()
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	as, addr := startAckServer(t)
	refunded := make(chan []string, 10)
	f, err := settle.NewForwarder(rdb, settle.ForwarderOptions{Prefix: prefix, NodeID: "dp-l", ControlPlane: cpclient.Options{Endpoints: []string{addr}},
		BatchSize: 5, Linger: time.Hour, Block: 50 * time.Millisecond, OnRefunded: func(ids []string) { refunded <- ids }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := settle.NewRecorder(rdb, prefix)
	record := func(i int) {
		if err := rec.Append(ctx, outcomeRecord(id("l", i), 1, 0, 3, 5, vocab.EndCompleted), admission.Hold{}); err != nil {
			t.Fatal(err)
		}
	}
	record(0)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(runCtx) }()
	defer func() { stop(); <-done }()
	waitPending(t, rdb, prefix, 1) // Run has read the first record and lingers
	for i := 1; i < 5; i++ {
		record(i)
	}
	select {
	case ids := <-refunded:
		if len(ids) != 5 {
			t.Fatalf("first settled batch %v, want all 5 records", ids)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a full batch was not settled while lingering")
	}
	if got := as.sizes(); !slices.Equal(got, []int{5}) {
		t.Errorf("Settle batch sizes %v, want [5]", got)
	}
	waitDrained(t, rdb, prefix, 10*time.Second)
}

// TestForwarderStopWhileLingeringThenFlush: records Run read and held in its linger when it was stopped
// stay pending for this node, and Flush delivers them.
func TestForwarderStopWhileLingeringThenFlush(t *testing.T) {
	t.Parallel()
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	as, addr := startAckServer(t)
	f, err := settle.NewForwarder(rdb, settle.ForwarderOptions{Prefix: prefix, NodeID: "dp-s", ControlPlane: cpclient.Options{Endpoints: []string{addr}},
		Linger: time.Hour, Block: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := settle.NewRecorder(rdb, prefix)
	for i := range 3 {
		if err := rec.Append(ctx, outcomeRecord(id("s", i), 1, 0, 3, 5, vocab.EndCompleted), admission.Hold{}); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(runCtx) }()
	waitPending(t, rdb, prefix, 3)
	stop()
	<-done
	if got := as.sizes(); len(got) != 0 {
		t.Fatalf("Settle called with %v before the linger ended", got)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.Flush(fctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	if got := as.sizes(); !slices.Equal(got, []int{3}) {
		t.Errorf("Settle batch sizes %v, want [3]", got)
	}
	if n := rdb.XLen(ctx, settle.Streams{Prefix: prefix}.Outbox("")).Val(); n != 0 {
		t.Errorf("outbox holds %d entries after flush", n)
	}
}

// waitPending waits until the forwarders' group has read n entries without acknowledging them.
func waitPending(t *testing.T, rdb *redis.Client, prefix string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := rdb.XPending(context.Background(), settle.Streams{Prefix: prefix}.Outbox(""), "tollgate-forwarders").Result()
		if err == nil && p.Count == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending entries: %+v, %v; want %d", p, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
