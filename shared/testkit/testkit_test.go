package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "%d", i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := len(b.String()); n != 800 {
		t.Fatalf("buffer holds %d bytes, want 800", n)
	}
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var flag atomic.Bool
	time.AfterFunc(20*time.Millisecond, func() { flag.Store(true) })
	WaitFor(t, "flag set", flag.Load)
	if !flag.Load() {
		t.Fatal("WaitFor returned before the condition held")
	}
}

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func TestWaitWithinFailsNamingWhatItWaitedFor(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				panic(p)
			}
		}()
		WaitWithin(r, 30*time.Millisecond, "the moon", func() bool { return false })
	}()
	if want := "the moon: not reached within 30ms"; r.msg != want {
		t.Fatalf("failure = %q, want %q", r.msg, want)
	}
}

func TestSharedFindsTheDataDirectoryBesideTheRepository(t *testing.T) {
	p := Shared(t, "catalogs")
	if fi, err := os.Stat(filepath.Join(p, "genai-prices", "data.json")); err != nil || fi.IsDir() {
		t.Fatalf("Shared(catalogs) = %s: no genai-prices/data.json in it (%v)", p, err)
	}
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				panic(p)
			}
		}()
		Shared(r, "no-such-directory")
	}()
	if !strings.Contains(r.msg, "no-such-directory must be in the project's shared data directory") {
		t.Fatalf("missing directory: failure = %q", r.msg)
	}
}
