package watch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/controlplane/watch"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/telemetry"
	"github.com/tollgate/tollgate/shared/testkit"
)

// keysSnap is a snapshot of version v holding keys of ids.
func keysSnap(v int64, ids ...int64) *snapshotv1.Snapshot {
	s := &snapshotv1.Snapshot{Version: v}
	for _, id := range ids {
		s.ApiKeys = append(s.ApiKeys, &configv1.ApiKey{Id: id, Name: strings.Repeat("k", 40), KeyHash: make([]byte, 32)})
	}
	return s
}

func key(id int64, name string) *configv1.ApiKey {
	return &configv1.ApiKey{Id: id, Name: name, KeyHash: make([]byte, 32)}
}

// respCh reads whole responses in the background.
func respCh(t *testing.T, st grpc.ServerStreamingClient[snapshotv1.WatchResponse]) <-chan *snapshotv1.WatchResponse {
	t.Helper()
	ch := make(chan *snapshotv1.WatchResponse, 16)
	go func() {
		defer close(ch)
		for {
			resp, err := st.Recv()
			if err != nil {
				return
			}
			ch <- resp
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan *snapshotv1.WatchResponse) *snapshotv1.WatchResponse {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return nil
}

func quiet(t *testing.T, ch <-chan *snapshotv1.WatchResponse) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("unexpected message %v", r)
	case <-time.After(150 * time.Millisecond):
	}
}

func open(t *testing.T, b *bundle, ctx context.Context, req *snapshotv1.WatchRequest) <-chan *snapshotv1.WatchResponse {
	t.Helper()
	st, err := b.client.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return respCh(t, st)
}

// TestWatchSendsDeltas: a stream that accepts deltas and holds the previous version gets the delta;
// one holding an older version in the history gets one combined delta; old data planes, want_full, no
// held version and a version outside the history get the whole snapshot.
func TestWatchSendsDeltas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()

	b.srv.Publish(keysSnap(1, 1, 2, 3, 4, 5, 6, 7, 8))
	follower := open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "f", KnownVersion: 1, AcceptDeltas: true})
	old := open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "old", KnownVersion: 1})
	testkit.WaitFor(t, "2 watchers", func() bool { return b.srv.Watchers() == 2 })

	// v2: key 9 added, key 2 removed.
	d2 := &snapshotv1.SnapshotDelta{BaseVersion: 1, Version: 2, UpsertApiKeys: []*configv1.ApiKey{key(9, "nine")},
		RemoveApiKeyIds: []int64{2}}
	if !b.srv.PublishDelta(keysSnap(2, 1, 3, 4, 5, 6, 7, 8, 9), d2) {
		t.Fatal("PublishDelta(2) = false")
	}
	if r := next(t, follower); !proto.Equal(r.GetDelta(), d2) || r.GetSnapshot() != nil {
		t.Fatalf("follower got %v, want delta %v", r, d2)
	}
	if r := next(t, old); r.GetSnapshot().GetVersion() != 2 || r.GetDelta() != nil {
		t.Fatalf("old data plane got %v, want the whole snapshot 2", r)
	}

	// v3: key 10 added then (v4) removed again, key 3 changed, key 9 removed.
	d3 := &snapshotv1.SnapshotDelta{BaseVersion: 2, Version: 3,
		UpsertApiKeys: []*configv1.ApiKey{key(3, "three"), key(10, "ten")}}
	b.srv.PublishDelta(keysSnap(3, 1, 3, 4, 5, 6, 7, 8, 9, 10), d3)
	d4 := &snapshotv1.SnapshotDelta{BaseVersion: 3, Version: 4, RemoveApiKeyIds: []int64{9, 10}}
	b.srv.PublishDelta(keysSnap(4, 1, 3, 4, 5, 6, 7, 8), d4)

	// Holding 1: one delta 1 → 4. Key 10 was added and removed within the range: not named at all.
	want := &snapshotv1.SnapshotDelta{BaseVersion: 1, Version: 4, UpsertApiKeys: []*configv1.ApiKey{key(3, "three")},
		RemoveApiKeyIds: []int64{2}}
	// The two open streams are sent 3 and 4 (or 4 alone: latest wins) on their own goroutines; their
	// encodings are not the ones counted below, so they must be done first.
	for _, ch := range []<-chan *snapshotv1.WatchResponse{follower, old} {
		for v := int64(0); v != 4; {
			r := next(t, ch)
			v = max(r.GetDelta().GetVersion(), r.GetSnapshot().GetVersion())
		}
	}
	encodes := counter(t, b.reg, "tollgate_snapshot_encodes_total")
	for i := 0; i < 3; i++ { // the later streams share the first one's combination and encoding
		c := open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "from1", KnownVersion: 1, AcceptDeltas: true})
		if r := next(t, c); !proto.Equal(r.GetDelta(), want) {
			t.Fatalf("holding 1 got %v, want %v", r, want)
		}
	}
	if got := counter(t, b.reg, "tollgate_snapshot_encodes_total") - encodes; got != 1 {
		t.Errorf("3 streams wanting delta 1 → 4 made %v encodings, want 1", got)
	}
	for _, req := range []*snapshotv1.WatchRequest{
		{NodeId: "want-full", KnownVersion: 3, AcceptDeltas: true, WantFull: true},
		{NodeId: "holds-none", AcceptDeltas: true},
	} {
		if r := next(t, open(t, b, ctx, req)); r.GetSnapshot().GetVersion() != 4 || r.GetDelta() != nil {
			t.Fatalf("%s got %v, want the whole snapshot 4", req.GetNodeId(), r)
		}
	}
	// want_full with the latest version held: the whole snapshot anyway.
	if r := next(t, open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "resync", KnownVersion: 4, AcceptDeltas: true,
		WantFull: true})); r.GetSnapshot().GetVersion() != 4 {
		t.Fatalf("want_full holding the latest got %v, want the whole snapshot 4", r)
	}

	// A whole-snapshot publish empties the history: a data plane holding 4 gets the whole 5.
	b.srv.Publish(keysSnap(5, 1))
	if r := next(t, open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "after-full", KnownVersion: 4,
		AcceptDeltas: true})); r.GetSnapshot().GetVersion() != 5 {
		t.Fatalf("after a whole publish got %v, want the whole snapshot 5", r)
	}

	text, err := telemetry.Text(b.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`tollgate_snapshot_sends_total{kind="delta"} `, `tollgate_snapshot_sends_total{kind="full"} `} {
		if !strings.Contains(text, line) {
			t.Errorf("metrics lack %s:\n%s", line, text)
		}
	}
}

// TestWatchDeltaLargerThanSnapshot: a delta no smaller than the whole snapshot is not sent.
func TestWatchDeltaLargerThanSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()
	b.srv.Publish(keysSnap(1, 1, 2, 3))
	c := open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "f", KnownVersion: 1, AcceptDeltas: true})
	testkit.WaitFor(t, "watcher", func() bool { return b.srv.Watchers() == 1 })
	// Every key removed, one left: the delta names three removals, the snapshot holds nothing.
	b.srv.PublishDelta(&snapshotv1.Snapshot{Version: 2}, &snapshotv1.SnapshotDelta{BaseVersion: 1, Version: 2,
		RemoveApiKeyIds: []int64{1, 2, 3}})
	if r := next(t, c); r.GetSnapshot().GetVersion() != 2 || r.GetDelta() != nil {
		t.Fatalf("got %v, want the whole (smaller) snapshot 2", r)
	}
}

// TestWatchLaggingReplicaSendsNothingOlder: a data plane accepting deltas that holds a version newer than
// this replica's gets nothing until the replica has a newer version, then a whole snapshot (no delta
// can start from a version the replica never had).
func TestWatchLaggingReplicaSendsNothingOlder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()
	b.srv.Publish(keysSnap(5, 1))
	c := open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "ahead", KnownVersion: 7, AcceptDeltas: true})
	quiet(t, c)
	b.srv.PublishDelta(keysSnap(6, 1, 2), &snapshotv1.SnapshotDelta{BaseVersion: 5, Version: 6,
		UpsertApiKeys: []*configv1.ApiKey{key(2, "two")}})
	quiet(t, c)
	b.srv.PublishDelta(keysSnap(8, 1, 2, 3), &snapshotv1.SnapshotDelta{BaseVersion: 6, Version: 8,
		UpsertApiKeys: []*configv1.ApiKey{key(3, "three")}})
	if r := next(t, c); r.GetSnapshot().GetVersion() != 8 {
		t.Fatalf("got %v, want the whole snapshot 8", r)
	}
}

// TestWatchDeltaHistoryIsBounded: a data plane behind the last MaxDeltaHistory deltas gets the whole
// snapshot; one at the oldest kept base still gets one combined delta.
func TestWatchDeltaHistoryIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()
	b.srv.Publish(keysSnap(1, 1))
	last := int64(watch.MaxDeltaHistory + 2)
	for v := int64(2); v <= last; v++ {
		d := &snapshotv1.SnapshotDelta{BaseVersion: v - 1, Version: v, UpsertApiKeys: []*configv1.ApiKey{key(1, fmt.Sprint(v))}}
		if !b.srv.PublishDelta(keysSnap(v, 1, 2, 3, 4, 5, 6, 7, 8), d) {
			t.Fatalf("PublishDelta(%d) = false", v)
		}
	}
	if r := next(t, open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "far", KnownVersion: 1, AcceptDeltas: true})); r.GetSnapshot().GetVersion() != last {
		t.Fatalf("behind the history: got %v, want the whole snapshot %d", r, last)
	}
	r := next(t, open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "oldest", KnownVersion: 2, AcceptDeltas: true}))
	if d := r.GetDelta(); d.GetBaseVersion() != 2 || d.GetVersion() != last || len(d.GetUpsertApiKeys()) != 1 ||
		d.GetUpsertApiKeys()[0].GetName() != fmt.Sprint(last) {
		t.Fatalf("at the oldest kept base: got %v, want one delta 2 → %d with key 1's last version", r, last)
	}
}

// TestWatchComposesGatewaySettings: a delta combined over several versions carries the latest gateway
// settings a step changed (the cost-disclosure switch, docs/cost.md) beside the steps' keys.
func TestWatchComposesGatewaySettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(authed(context.Background()))
	defer cancel()
	b.srv.Publish(keysSnap(1, 1, 2, 3, 4, 5, 6, 7, 8))
	snap := func(v int64, on bool) *snapshotv1.Snapshot {
		s := keysSnap(v, 1, 2, 3, 4, 5, 6, 7, 8)
		s.GatewaySettings = &configv1.GatewaySettings{CostDisclosure: on}
		return s
	}
	off := &configv1.GatewaySettings{}
	b.srv.PublishDelta(snap(2, false), &snapshotv1.SnapshotDelta{BaseVersion: 1, Version: 2, GatewaySettings: off})
	hidden := key(3, "hidden")
	hidden.CostDisclosure = proto.Bool(false)
	b.srv.PublishDelta(snap(3, false), &snapshotv1.SnapshotDelta{BaseVersion: 2, Version: 3, UpsertApiKeys: []*configv1.ApiKey{hidden}})
	want := &snapshotv1.SnapshotDelta{BaseVersion: 1, Version: 3, UpsertApiKeys: []*configv1.ApiKey{hidden}, GatewaySettings: off}
	if r := next(t, open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "from1", KnownVersion: 1, AcceptDeltas: true})); !proto.Equal(r.GetDelta(), want) {
		t.Fatalf("holding 1 got %v, want %v", r, want)
	}
	// The switch turned back on later wins over the earlier step's.
	on := &configv1.GatewaySettings{CostDisclosure: true}
	b.srv.PublishDelta(snap(4, true), &snapshotv1.SnapshotDelta{BaseVersion: 3, Version: 4, GatewaySettings: on})
	want = &snapshotv1.SnapshotDelta{BaseVersion: 1, Version: 4, UpsertApiKeys: []*configv1.ApiKey{hidden}, GatewaySettings: on}
	if r := next(t, open(t, b, ctx, &snapshotv1.WatchRequest{NodeId: "from1-again", KnownVersion: 1, AcceptDeltas: true})); !proto.Equal(r.GetDelta(), want) {
		t.Fatalf("holding 1 got %v, want %v", r, want)
	}
}
