package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cleanupRedisPrefix deletes every key under prefix when the test ends (after the data planes using it
// have stopped, since cleanups run in reverse order of registration). The Redis server is shared, so
// tests never FLUSHDB.
func cleanupRedisPrefix(t testing.TB, prefix string) {
	t.Helper()
	t.Cleanup(func() {
		opts, err := redis.ParseURL(RedisURL)
		if err != nil {
			t.Errorf("cleanup redis: %v", err)
			return
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleanup redis prefix %s: %v", prefix, err)
		}
	})
}
