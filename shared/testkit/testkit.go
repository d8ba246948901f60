// Package testkit is the one kit of helpers that the tests of every package share (only tests import it):
// a buffer that concurrent writers (child processes, loggers, servers) may write while the test reads it,
// and a wait for a condition that becomes true in the background. A helper that two packages' tests would
// otherwise each write belongs here; one that knows a package's internals stays with that package.
package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent Write and String: the log sink of a server, a logger or a
// child process that the test reads while they run. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// WaitTimeout is how long WaitFor waits: generous, because it only bounds a failing test and the test
// machines are small and shared.
const WaitTimeout = time.Minute

// WaitFor polls cond every 5 ms until it holds, and fails the test naming what it waited for when it does
// not hold within WaitTimeout.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitWithin(t, WaitTimeout, what, cond)
}

// WaitWithin is WaitFor with its own bound, for a test whose point is that cond holds within d.
func WaitWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Shared returns the path of elem under the project's shared data directory, ../shared beside the
// repository root (the price catalogs, the recorded provider traffic), and fails the test when it is
// missing: those tests never skip.
func Shared(t testing.TB, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testkit: repository root (go.mod) not found above the test's directory")
		}
		dir = parent
	}
	p := filepath.Join(append([]string{dir, "..", "shared"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("testkit: %s must be in the project's shared data directory, ../shared beside the repository (%s): %v",
			filepath.Join(elem...), p, err)
	}
	return p
}
