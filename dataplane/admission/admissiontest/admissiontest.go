// Package admissiontest gives data-plane integration tests a client of the real Redis server named by
// TOLLGATE_TEST_REDIS_URL (default redis://127.0.0.1:6379/0) and a key prefix unique to the test; every
// key under the prefix is deleted when the test ends. The server is shared: tests never FLUSHDB. Without
// -short a missing server fails the test loudly; it never skips.
package admissiontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL is the Redis server tests use.
func URL() string {
	if u := os.Getenv("TOLLGATE_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// Redis returns a connected client and a fresh key prefix ("test:<random>:").
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Redis; skipped in -short mode")
	}
	opts, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("admissiontest: parse %s: %v", URL(), err)
	}
	opts.PoolSize = 64
	rdb := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("admissiontest: Redis at %s (set TOLLGATE_TEST_REDIS_URL): %v", URL(), err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range Keys(t, rdb, prefix) {
			rdb.Del(ctx, k)
		}
		rdb.Close()
	})
	return rdb, prefix
}

// Keys lists every key under prefix.
func Keys(t testing.TB, rdb *redis.Client, prefix string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("admissiontest: scan %s*: %v", prefix, err)
	}
	return out
}
