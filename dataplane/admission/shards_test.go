package admission_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/shared/redistest"
)

// TestKeySlotMatchesRedisCluster: KeySlot agrees with a real cluster's CLUSTER KEYSLOT, hash-tag edge
// cases, shard tags and random keys included.
func TestKeySlotMatchesRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	rdb := redis.NewClient(&redis.Options{Addr: c.Masters[0]})
	t.Cleanup(func() { rdb.Close() })
	keys := []string{"", "a", "qp:org:1", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "a{b", "a}b{c}",
		"{tg}:qp:org:1", "\xff\x00{\x80}", "qp:{s3.1}:org:42"}
	for _, tag := range admission.NewShards(16).Tags() {
		keys = append(keys, admission.Keys{Tag: tag}.Pending("org", 1))
	}
	for range 200 {
		b := make([]byte, rand.IntN(24))
		for i := range b {
			b[i] = "ab{}:\x00\xff"[rand.IntN(7)]
		}
		keys = append(keys, string(b))
	}
	for _, k := range keys {
		want, err := rdb.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := admission.KeySlot(k); int64(got) != want {
			t.Errorf("KeySlot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
		}
	}
}

// FuzzKeySlot: KeySlot agrees with a real cluster node's CLUSTER KEYSLOT for any key.
func FuzzKeySlot(f *testing.F) {
	c := redistest.StartCluster(f, 3, 0)
	rdb := redis.NewClient(&redis.Options{Addr: c.Masters[0]})
	f.Cleanup(func() { rdb.Close() })
	for _, k := range []string{"", "{tollgate}:qp:org:1", "a{}b{c}", "{{x}}", "\x00{\xff}", "qp:{s0.3}:org:1"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		want, err := rdb.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := admission.KeySlot(k); int64(got) != want {
			t.Fatalf("KeySlot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
		}
	})
}

// TestShardTagsSpreadOverSlots: shard i of n has its slot in the i-th of n equal slot ranges (so n
// shards spread over any number of masters up to n that split the slots evenly), the tags are distinct,
// an organisation's shard is its id modulo n, and one shard means no tag.
func TestShardTagsSpreadOverSlots(t *testing.T) {
	for _, n := range []int{2, 3, 16, 100, admission.MaxShards} {
		s := admission.NewShards(n)
		if s.N() != n || len(s.Tags()) != n {
			t.Fatalf("NewShards(%d): N %d, %d tags", n, s.N(), len(s.Tags()))
		}
		seen := map[string]bool{}
		for i, tag := range s.Tags() {
			slot := admission.KeySlot(tag)
			if slot < i*16384/n || slot >= (i+1)*16384/n {
				t.Errorf("n=%d shard %d tag %q: slot %d outside [%d, %d)", n, i, tag, slot, i*16384/n, (i+1)*16384/n)
			}
			if seen[tag] {
				t.Errorf("n=%d: tag %q twice", n, tag)
			}
			seen[tag] = true
			if got := s.Tag(int64(i + 7*n)); got != tag {
				t.Errorf("n=%d: org %d in shard %q, want %q", n, i+7*n, got, tag)
			}
		}
	}
	if got := admission.NewShards(16).Tags()[3]; admission.ShardTag(3, 16) != got {
		t.Errorf("ShardTag(3, 16) = %q, NewShards: %q", admission.ShardTag(3, 16), got)
	}
	one := admission.NewShards(1)
	if one.Tag(42) != "" || len(one.Tags()) != 1 || one.Tags()[0] != "" {
		t.Errorf("one shard: tag %q, tags %q; want untagged", one.Tag(42), one.Tags())
	}
	if k := (admission.Keys{Prefix: "p:"}).PendingIn("org", 42, "2026-01"); k != "p:qp:org:42:2026-01" {
		t.Errorf("untagged pending key %q: the names of the releases before sharding changed", k)
	}
	if k := (admission.Keys{Prefix: "p:", Tag: "s3.1"}).Hold("req_1"); k != "p:qh:{s3.1}:req_1" {
		t.Errorf("tagged marker key %q", k)
	}
}
