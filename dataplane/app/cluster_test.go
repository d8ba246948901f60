package app

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/shared/redistest"
)

// TestKeySlotMatchesRedisCluster: keySlot agrees with a real cluster's CLUSTER KEYSLOT, hash-tag edge
// cases and random keys included.
func TestKeySlotMatchesRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	rdb := redis.NewClient(&redis.Options{Addr: c.Masters[0]})
	t.Cleanup(func() { rdb.Close() })
	keys := []string{"", "a", "qp:org:1", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "a{b", "a}b{c}",
		"{tg}:qp:org:1", "\xff\x00{\x80}"}
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
		if got := keySlot(k); int64(got) != want {
			t.Errorf("keySlot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
		}
	}
}

// TestClusterModeNeedsCoLocatedKeys: cluster mode is refused, naming the keys, while the scripts' keys
// span slots; a key prefix with a hash tag puts every key in one slot and is accepted.
func TestClusterModeNeedsCoLocatedKeys(t *testing.T) {
	err := checkClusterSlots("")
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") || !strings.Contains(err.Error(), "qp:org:1") {
		t.Fatalf("untagged keys: %v, want a refusal naming the keys", err)
	}
	if err := checkClusterSlots("{tollgate}:"); err != nil {
		t.Fatalf("hash-tagged prefix: %v", err)
	}
}

// FuzzKeySlot: keySlot agrees with a real cluster node's CLUSTER KEYSLOT for any key.
func FuzzKeySlot(f *testing.F) {
	c := redistest.StartCluster(f, 3, 0)
	rdb := redis.NewClient(&redis.Options{Addr: c.Masters[0]})
	f.Cleanup(func() { rdb.Close() })
	for _, k := range []string{"", "{tollgate}:qp:org:1", "a{}b{c}", "{{x}}", "\x00{\xff}"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		want, err := rdb.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := keySlot(k); int64(got) != want {
			t.Fatalf("keySlot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
		}
	})
}
