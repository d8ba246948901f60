package reqcost_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/reqcost"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// settlement answers GetRequestCost from rows keyed by (key, request id); the token it saw is kept.
type settlement struct {
	settlementv1.UnimplementedSettlementServiceServer
	rows map[[2]string]*settlementv1.RequestCost
}

func (s *settlement) GetRequestCost(_ context.Context, r *settlementv1.GetRequestCostRequest) (*settlementv1.GetRequestCostResponse, error) {
	rc, ok := s.rows[[2]string{itoa(r.GetApiKeyId()), r.GetRequestId()}]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such request")
	}
	return &settlementv1.GetRequestCostResponse{Cost: rc}, nil
}

func itoa(n int64) string { return string(rune('0' + n)) }

func serve(t *testing.T, srv settlementv1.SettlementServiceServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	settlementv1.RegisterSettlementServiceServer(g, srv)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

func TestSettledAndMarkers(t *testing.T) {
	rdb, prefix := admissiontest.Redis(t)
	addr := serve(t, &settlement{rows: map[[2]string]*settlementv1.RequestCost{{"4", "req_done"}: {RequestId: "req_done", Cost: "0.0012345"}}})
	cp, err := cpclient.New(cpclient.Options{Endpoints: []string{addr}, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	s := reqcost.New(reqcost.Options{ControlPlane: cp, Redis: rdb, Prefix: prefix, Shards: 4, Timeout: 5 * time.Second})
	ctx := context.Background()

	rc, found, err := s.Settled(ctx, 4, "req_done")
	if err != nil || !found || rc.GetCost() != "0.0012345" {
		t.Fatalf("Settled = %v %v %v", rc, found, err)
	}
	for _, k := range []int64{5, 4} { // another key's request, an unknown one: not found alike
		id := "req_done"
		if k == 4 {
			id = "req_other"
		}
		if _, found, err := s.Settled(ctx, k, id); err != nil || found {
			t.Fatalf("Settled(%d, %s) found=%v err=%v, want not found", k, id, found, err)
		}
	}

	// The marker is read in the shard of the key's organisation, where admission writes it.
	if err := s.Mark(ctx, 7, 4, "req_fly"); err != nil {
		t.Fatal(err)
	}
	key := admission.Keys{Prefix: prefix, Tag: admission.NewShards(4).Tag(7)}.RequestCost("req_fly")
	if v := rdb.Get(ctx, key).Val(); v != "4" {
		t.Fatalf("marker %s = %q, want 4", key, v)
	}
	for _, tc := range []struct {
		org, key int64
		id       string
		want     bool
	}{{7, 4, "req_fly", true}, {7, 5, "req_fly", false}, {8, 4, "req_fly", false}, {7, 4, "req_none", false}, {7, 4, "not an id", false}} {
		if got, err := s.Made(ctx, tc.org, tc.key, tc.id); err != nil || got != tc.want {
			t.Errorf("Made(org %d, key %d, %s) = %v %v, want %v", tc.org, tc.key, tc.id, got, err, tc.want)
		}
	}

	// The control plane unreachable: an error, never "not found".
	down, err := cpclient.New(cpclient.Options{Endpoints: []string{"127.0.0.1:1"}, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	s = reqcost.New(reqcost.Options{ControlPlane: down, Redis: rdb, Prefix: prefix, Timeout: time.Second})
	if _, found, err := s.Settled(ctx, 4, "req_done"); err == nil || found {
		t.Fatalf("Settled with the control plane down = found %v err %v, want an error", found, err)
	}
}
