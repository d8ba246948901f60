package e2e

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	dpconfig "github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/deploy/mockupstream"
	"github.com/tollgate/tollgate/shared/redistest"
	"github.com/tollgate/tollgate/shared/testkit"
)

// TestRedisClusterFailoverUnderLoad runs a data plane on a real Redis Cluster (three masters, each with a
// replica, started here) in cluster mode (TOLLGATE_REDIS_CLUSTER, go-redis's cluster URL) with the
// default shards and a plain key prefix: every key of the organisation's requests, and its shard's outbox
// stream, carry the shard's hash tag. Under continuous plain and streaming load, the master holding that
// shard's slot is failed over to its replica (CLUSTER FAILOVER): the client sees no error, every answer
// it saw succeed has exactly one usage row (and there are no others), and every hold is refunded.
func TestRedisClusterFailoverUnderLoad(t *testing.T) {
	rc := redistest.StartCluster(t, 3, 1)
	c := newCluster(t)
	_, mockURL := startMock(t, mockupstream.Options{MaxRecords: -1})
	cp := c.startCP("cp", "")
	c.seed()
	rev := exec(t, c.db.Pool, `UPDATE providers SET base_url = $1 WHERE id = 1`, mockURL)
	prefix := "e2e-" + randomHex(4) + ":"
	d := c.startDP("dp-cluster", []string{cp.srv.GRPCAddr()}, "TOLLGATE_REDIS_URL", rc.URL(), "TOLLGATE_REDIS_CLUSTER", "true",
		"TOLLGATE_REDIS_KEY_PREFIX", prefix)
	d.wait(t, rev)
	d.wantReady(t, rev)
	if d.srv.Config.RedisShards != dpconfig.DefaultClusterShards {
		t.Fatalf("cluster mode runs %d shards, want the default %d", d.srv.Config.RedisShards, dpconfig.DefaultClusterShards)
	}

	// The master owning the slot of the seeded key's organisation (1): its shard's outbox stream.
	opts, err := redis.ParseClusterURL(rc.URL())
	if err != nil {
		t.Fatal(err)
	}
	crdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { crdb.Close() })
	ctx := context.Background()
	stream := settle.Streams{Prefix: prefix}.Outbox(admission.NewShards(dpconfig.DefaultClusterShards).Tag(1))
	slot, err := crdb.ClusterKeySlot(ctx, stream).Result()
	if err != nil {
		t.Fatal(err)
	}
	shards, err := crdb.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var master string
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start > slot || slot > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					master = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				}
			}
		}
	}
	if master == "" {
		t.Fatalf("no master owns slot %d: %+v", slot, shards)
	}

	load := &rollLoad{url: d.srv.Addr(), key: "tg-e2e-key"}
	stop := make(chan struct{})
	wait := load.run(stop, 6)
	done := func() int { load.mu.Lock(); defer load.mu.Unlock(); return len(load.succeeded) }
	testkit.WaitFor(t, "load flowing", func() bool { return done() >= 20 })
	before := done()
	promoted := rc.Failover(t, master)
	t.Logf("slot %d: master %s failed over to %s after %d answers", slot, master, promoted, before)
	testkit.WaitFor(t, "load after the failover", func() bool { return done() >= before+40 })
	close(stop)
	wait()

	load.mu.Lock()
	defer load.mu.Unlock()
	if len(load.failures) > 0 {
		t.Errorf("%d client errors during the failover (want none), first: %s", len(load.failures), load.failures[0])
	}
	if load.counts[0] == 0 || load.counts[1] == 0 {
		t.Fatalf("load did not cover both kinds: plain %d, streaming %d", load.counts[0], load.counts[1])
	}
	want := map[string]bool{}
	for _, id := range load.succeeded {
		want[id] = true
	}
	var rows map[string]int
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rows = usageCounts(t, c)
		if len(rows) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	for id := range want {
		if rows[id] != 1 {
			t.Errorf("request %s: %d usage rows, want 1", id, rows[id])
		}
	}
	for id, n := range rows {
		if !want[id] {
			t.Errorf("usage row(s) for %s (%d) that the client never saw succeed", id, n)
		}
	}
	// Settlement went through the cluster's outbox, not only the in-memory spill, and every hold the
	// organisation's requests reserved on its quota is refunded.
	if n := metricValue(t, d, "tollgate_settle_records_forwarded_total"); n == 0 {
		t.Errorf("no record was forwarded from the outbox on the cluster")
	}
	if n, err := crdb.Exists(ctx, admission.Keys{Prefix: prefix, Tag: admission.NewShards(dpconfig.DefaultClusterShards).Tag(1)}.Used("org", 1)).Result(); err != nil || n != 1 {
		t.Errorf("org 1's cost mirror is not in its shard (%d, %v)", n, err)
	}
	waitClusterPendingZero(t, crdb, prefix)
}
