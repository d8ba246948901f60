package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/deploy/mockupstream"
	"github.com/tollgate/tollgate/shared/redistest"
	"github.com/tollgate/tollgate/shared/testkit"
)

// TestRedisSentinelFailoverUnderLoad runs a data plane on a real Redis Sentinel setup (a master, its
// replica and three sentinels, started here) through TOLLGATE_REDIS_SENTINEL_MASTER. Under continuous
// plain and streaming load the sentinels fail the master over to the replica (SENTINEL FAILOVER): the
// client sees no error, every answer it saw succeed has exactly one usage row (and there are no others),
// and settlement went through the outbox on the new master.
func TestRedisSentinelFailoverUnderLoad(t *testing.T) {
	rs := redistest.StartSentinel(t)
	c := newCluster(t)
	_, mockURL := startMock(t, mockupstream.Options{MaxRecords: -1})
	cp := c.startCP("cp", "")
	c.seed()
	rev := exec(t, c.db.Pool, `UPDATE providers SET base_url = $1 WHERE id = 1`, mockURL)
	d := c.startDP("dp-sentinel", []string{cp.srv.GRPCAddr()}, "TOLLGATE_REDIS_URL", rs.URL(),
		"TOLLGATE_REDIS_SENTINEL_MASTER", redistest.SentinelMaster)
	d.wait(t, rev)
	d.wantReady(t, rev)

	load := &rollLoad{url: d.srv.Addr(), key: "tg-e2e-key"}
	stop := make(chan struct{})
	wait := load.run(stop, 6)
	done := func() int { load.mu.Lock(); defer load.mu.Unlock(); return len(load.succeeded) }
	testkit.WaitFor(t, "load flowing", func() bool { return done() >= 20 })
	before := done()
	promoted := rs.Failover(t)
	failedOver := time.Now()
	t.Logf("master %s failed over to %s after %d answers", rs.Master, promoted, before)
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
	if n := metricValue(t, d, "tollgate_settle_records_forwarded_total"); n == 0 {
		t.Errorf("no record was forwarded from the outbox on the sentinel-managed master")
	}
	// Records were appended to the outbox on the promoted master after the failover (not only spilled).
	rdb := redis.NewClient(&redis.Options{Addr: promoted})
	defer rdb.Close()
	info, err := rdb.XInfoStream(context.Background(), settle.Streams{Prefix: d.srv.Config.RedisKeyPrefix}.Outbox("")).Result()
	if err != nil {
		t.Fatalf("outbox on the promoted master %s: %v", promoted, err)
	}
	ms, _, _ := strings.Cut(info.LastGeneratedID, "-")
	if last, _ := strconv.ParseInt(ms, 10, 64); last < failedOver.UnixMilli() {
		t.Errorf("the promoted master's outbox got its last append at %d, before the failover (%d)", last, failedOver.UnixMilli())
	}
}
