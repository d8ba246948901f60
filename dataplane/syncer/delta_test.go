package syncer_test

import (
	"crypto/sha256"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/syncer"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// scriptedCP is a SnapshotService on a real loopback gRPC server that answers its n-th Watch stream with
// the n-th script (then holds the stream open) and records every request.
type scriptedCP struct {
	snapshotv1.UnimplementedSnapshotServiceServer
	mu      sync.Mutex
	scripts [][]*snapshotv1.WatchResponse
	reqs    chan *snapshotv1.WatchRequest
	addr    string
}

func startScripted(t *testing.T, scripts ...[]*snapshotv1.WatchResponse) *scriptedCP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &scriptedCP{scripts: scripts, reqs: make(chan *snapshotv1.WatchRequest, 16), addr: ln.Addr().String()}
	g := grpc.NewServer()
	snapshotv1.RegisterSnapshotServiceServer(g, f)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return f
}

func (f *scriptedCP) Watch(req *snapshotv1.WatchRequest, stream grpc.ServerStreamingServer[snapshotv1.WatchResponse]) error {
	f.reqs <- req
	if err := stream.SendHeader(metadata.Pairs(syncer.HeaderVersion, "0")); err != nil {
		return err
	}
	script := f.nextScript()
	for _, r := range script {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

func (f *scriptedCP) nextScript() []*snapshotv1.WatchResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.scripts) == 0 {
		return nil
	}
	s := f.scripts[0]
	f.scripts = f.scripts[1:]
	return s
}

// request waits for the next Watch request.
func (f *scriptedCP) request(t *testing.T) *snapshotv1.WatchRequest {
	t.Helper()
	select {
	case r := <-f.reqs:
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("no Watch request")
		return nil
	}
}

func keyHash(secret string) []byte { h := sha256.Sum256([]byte(secret)); return h[:] }

func apiKey(id int64, secret string) *configv1.ApiKey {
	return &configv1.ApiKey{Id: id, UserId: 1, OrgId: 1, KeyHash: keyHash(secret), Prefix: secret, Enabled: true}
}

func full(v int64, keys ...*configv1.ApiKey) *snapshotv1.WatchResponse {
	return &snapshotv1.WatchResponse{Snapshot: &snapshotv1.Snapshot{Version: v, BuiltAt: timestamppb.Now(), ApiKeys: keys}}
}

func delta(base, v int64, up []*configv1.ApiKey, remove ...int64) *snapshotv1.WatchResponse {
	return &snapshotv1.WatchResponse{Delta: &snapshotv1.SnapshotDelta{BaseVersion: base, Version: v, BuiltAt: timestamppb.Now(),
		UpsertApiKeys: up, RemoveApiKeyIds: remove}}
}

// The syncer asks for deltas, applies one whose base is the held version, reopens the stream with its
// held version (same endpoint) on a delta of another base, and refuses a delta that does not compile (keeping the held
// form, counting the reject) and reopens asking for a full snapshot.
func TestSyncerAppliesDeltas(t *testing.T) {
	t.Parallel()
	cp := startScripted(t,
		[]*snapshotv1.WatchResponse{full(10, apiKey(1, "one")), delta(10, 11, []*configv1.ApiKey{apiKey(2, "two")}, 1), delta(99, 100, nil)},
		// A key whose hash key 2 already has: the result does not compile.
		[]*snapshotv1.WatchResponse{delta(11, 12, []*configv1.ApiKey{apiKey(3, "two")})},
		[]*snapshotv1.WatchResponse{full(13, apiKey(3, "three")), delta(13, 14, []*configv1.ApiKey{apiKey(4, "four")})},
	)
	// A second endpoint: reopening is not failing over, so it never hears from the syncer.
	other := startScripted(t)
	r := startSyncer(t, syncer.Options{ControlPlane: cpclient.Options{Endpoints: []string{cp.addr, other.addr}}})

	if req := cp.request(t); !req.GetAcceptDeltas() || req.GetWantFull() || req.GetKnownVersion() != 0 {
		t.Fatalf("first request %v: want accept_deltas, no want_full, known_version 0", req)
	}
	waitVersion(t, r.s, 11)
	c := r.s.Current()
	if c.LookupKey("two") == nil || c.LookupKey("one") != nil {
		t.Fatalf("after delta 10→11: key two %v, key one %v; want two only", c.LookupKey("two"), c.LookupKey("one"))
	}
	// The delta based on 99 is not applied: the stream is reopened with the held version.
	if req := cp.request(t); !req.GetAcceptDeltas() || req.GetWantFull() || req.GetKnownVersion() != 11 {
		t.Fatalf("request after a delta of another base %v: want known_version 11, no want_full", req)
	}
	// The bad delta is refused and counted; the stream is reopened asking for a full snapshot.
	if req := cp.request(t); !req.GetAcceptDeltas() || !req.GetWantFull() || req.GetKnownVersion() != 11 {
		t.Fatalf("request after a refused delta %v: want known_version 11 and want_full", req)
	}
	if !strings.Contains(scrape(r.reg), "tollgate_snapshot_rejects_total 1\n") {
		t.Errorf("a refused delta is not counted:\n%s", scrape(r.reg))
	}
	waitVersion(t, r.s, 14)
	c = r.s.Current()
	if c.LookupKey("three") == nil || c.LookupKey("four") == nil || c.LookupKey("two") != nil {
		t.Fatal("after full 13 and delta 13→14: want keys three and four only")
	}
	if len(other.reqs) != 0 {
		t.Errorf("a reopen went to the next endpoint: %v", <-other.reqs)
	}
	out := scrape(r.reg)
	for _, want := range []string{"tollgate_snapshot_rejects_total 1\n", "tollgate_snapshot_swaps_total 4\n", "tollgate_snapshot_version 14\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
}
