package redisbatch

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/shared/redistest"
)

// TestClusterClientCoalescesAcrossSlots: on a real three-master Redis Cluster, the hook installed on a
// cluster client sends concurrent scripts and stream appends of many slots (spread over every master)
// through the cluster pipeline: each caller gets its own reply and every command lands on its slot's
// node, no CROSSSLOT or MOVED error reaching a caller.
func TestClusterClientCoalescesAcrossSlots(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	opts, err := redis.ParseClusterURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { rdb.Close() })
	Install(rdb, "evalsha", "eval", "xadd")
	incr := redis.NewScript(`return redis.call("INCR", KEYS[1])`)
	ctx := context.Background()
	const workers, each, tags = 16, 40, 16
	type reply struct {
		tag int
		v   int64
	}
	seen := make(chan reply, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				tag := (w*each + i) % tags
				v, err := incr.Run(ctx, rdb, []string{fmt.Sprintf("c:{t%d}", tag)}).Int64()
				if err != nil {
					t.Errorf("script on tag %d: %v", tag, err)
					return
				}
				if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: fmt.Sprintf("s:{t%d}", tag), Values: []any{"v", v}}).Err(); err != nil {
					t.Errorf("xadd on tag %d: %v", tag, err)
					return
				}
				seen <- reply{tag, v}
			}
		})
	}
	wg.Wait()
	close(seen)
	got := map[reply]bool{}
	for r := range seen {
		if got[r] {
			t.Fatalf("tag %d value %d answered twice: replies crossed callers", r.tag, r.v)
		}
		got[r] = true
	}
	nodes := map[string]bool{}
	for tag := range tags {
		n, err := rdb.XLen(ctx, fmt.Sprintf("s:{t%d}", tag)).Result()
		if err != nil || n != workers*each/tags {
			t.Errorf("stream of tag %d holds %d entries (%v), want %d", tag, n, err, workers*each/tags)
		}
		slot, err := rdb.ClusterKeySlot(ctx, fmt.Sprintf("s:{t%d}", tag)).Result()
		if err != nil {
			t.Fatal(err)
		}
		nodes[fmt.Sprint(slot*3/16384)] = true
	}
	if len(nodes) != 3 {
		t.Errorf("the tags cover %d of the three masters' slot ranges; the test must span every master", len(nodes))
	}
}
