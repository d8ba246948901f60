package redisbatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
)

// probe sits below the coalescing hook and sees what reaches the connection: every batch of coalesced
// commands (a pipeline, or a single command sent alone: size 1), and the name of every other single
// command. While gate is set, a batch waits for it to close.
type probe struct {
	coalesced map[string]bool
	mu        sync.Mutex
	pipelines []int
	singles   []string
	gate      chan struct{}
	entered   chan struct{} // receives once per batch that reached the probe
}

func (p *probe) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *probe) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if p.coalesced[cmd.Name()] {
			p.batch(1)
		} else {
			p.mu.Lock()
			p.singles = append(p.singles, cmd.Name())
			p.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (p *probe) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if p.coalesced[cmds[0].Name()] { // not the connection's own handshake
			p.batch(len(cmds))
		}
		return next(ctx, cmds)
	}
}

func (p *probe) batch(n int) {
	p.mu.Lock()
	p.pipelines = append(p.pipelines, n)
	gate, entered := p.gate, p.entered
	p.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if gate != nil {
		<-gate
	}
}

func (p *probe) sizes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.pipelines...)
}

func setup(t *testing.T, commands ...string) (*redis.Client, string, *Hook, *probe) {
	t.Helper()
	rdb, prefix := admissiontest.Redis(t)
	h := Install(rdb, commands...) // outer
	p := &probe{coalesced: map[string]bool{}}
	for _, c := range commands {
		p.coalesced[c] = true
	}
	rdb.AddHook(p) // inner: between the coalescer and the connection
	return rdb, prefix, h, p
}

func (h *Hook) queued() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queue)
}

// echo is a script answering its argument, so every caller can check it got its own reply.
var echo = redis.NewScript(`return ARGV[1]`)

func TestAloneEveryCommandIsABatchOfOne(t *testing.T) {
	rdb, prefix, _, p := setup(t, "evalsha", "eval", "xadd")
	ctx := context.Background()
	for i := range 5 {
		if got, err := echo.Run(ctx, rdb, nil, fmt.Sprint("v", i)).Text(); err != nil || got != fmt.Sprint("v", i) {
			t.Fatalf("echo %d = %q, %v", i, got, err)
		}
	}
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "s", Values: []any{"f", "v"}}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range p.sizes() {
		if n != 1 {
			t.Fatalf("pipelines %v: a caller alone must send its command by itself", p.sizes())
		}
	}
	if len(p.sizes()) < 6 {
		t.Fatalf("pipelines %v, want one per coalesced command", p.sizes())
	}
}

func TestOtherCommandsPassThrough(t *testing.T) {
	rdb, prefix, _, p := setup(t, "xadd")
	ctx := context.Background()
	if err := rdb.Set(ctx, prefix+"k", "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rdb.Get(ctx, prefix+"k").Result(); err != nil || v != "1" {
		t.Fatalf("get = %q, %v", v, err)
	}
	if len(p.sizes()) != 0 || !strings.Contains(strings.Join(p.singles, ","), "get") {
		t.Fatalf("pipelines %v singles %v: set/get must not be coalesced", p.sizes(), p.singles)
	}
}

// While one batch is on the wire, the commands issued meanwhile wait and then go as one pipeline; each
// caller gets its own reply, a failing command fails only its caller, and the batch survives the
// cancellation of the request that leads it once it is on the wire.
func TestConcurrentCommandsShareOnePipeline(t *testing.T) {
	rdb, prefix, h, p := setup(t, "evalsha", "eval", "xadd")
	ctx := context.Background()
	// Load the script first so the batch below holds EVALSHAs, not the NOSCRIPT fallback.
	if err := echo.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.gate, p.entered = make(chan struct{}), make(chan struct{}, 100)
	p.mu.Unlock()

	first := make(chan error, 1)
	go func() {
		first <- rdb.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "s", Values: []any{"f", "first"}}).Err()
	}()
	<-p.entered // the first batch (one XADD, alone) is on its way and held by the gate

	const n = 12
	type result struct {
		i   int
		got string
		err error
	}
	results := make(chan result, n)
	waitQueued := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for h.queued() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d commands queued behind the held batch, want %d", h.queued(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Caller 0 queues first, so it will lead the next batch; its request is cancelled while that batch is
	// on the wire, which must fail nobody's command — its own included, since the batch runs detached
	// from any one request's cancellation.
	leaderCtx, cancelLeader := context.WithCancel(ctx)
	for i := range n {
		cctx := ctx
		if i == 0 {
			cctx = leaderCtx
		}
		go func() {
			if i == 5 { // a command Redis refuses: its caller alone sees the error
				results <- result{i, "", redis.NewScript(`return redis.error_reply("nope")`).Run(cctx, rdb, nil).Err()}
				return
			}
			got, err := echo.Run(cctx, rdb, nil, fmt.Sprint("caller-", i)).Text()
			results <- result{i, got, err}
		}()
		if i == 0 {
			waitQueued(1)
		}
	}
	waitQueued(n)
	gate := p.gate
	p.mu.Lock()
	p.gate = make(chan struct{})
	p.mu.Unlock()
	close(gate) // the held batch goes; the queued commands follow as one pipeline, held in turn
	<-p.entered
	cancelLeader()
	close(p.gate)
	if err := <-first; err != nil {
		t.Errorf("leader's XADD: %v", err)
	}
	for range n {
		r := <-results
		switch {
		case r.i == 5:
			if r.err == nil || !strings.Contains(r.err.Error(), "nope") {
				t.Errorf("caller 5: err %v, want the script's error", r.err)
			}
		case r.err != nil || r.got != fmt.Sprint("caller-", r.i):
			t.Errorf("caller %d got %q, %v", r.i, r.got, r.err)
		}
	}
	// The first batch held the leader's XADD alone; the twelve waiting callers went as one pipeline. (Caller
	// 5's script was never loaded: its NOSCRIPT reply made Script.Run resend it as EVAL, a batch of its own.)
	if sizes := p.sizes(); len(sizes) < 2 || sizes[0] != 1 || sizes[1] != n {
		t.Fatalf("pipelines %v, want [1 %d ...]", sizes, n)
	}
	if l, err := rdb.XLen(ctx, prefix+"s").Result(); err != nil || l != 1 {
		t.Fatalf("stream length %d, %v; want the one XADD", l, err)
	}
}

// A script Redis has never seen answers NOSCRIPT to EVALSHA; Script.Run's fallback to EVAL still works
// through the coalescer.
func TestNoScriptFallback(t *testing.T) {
	rdb, _, _, _ := setup(t, "evalsha", "eval")
	s := redis.NewScript("-- " + randomHex(8) + "\nreturn ARGV[1]")
	if got, err := s.Run(context.Background(), rdb, nil, "x").Text(); err != nil || got != "x" {
		t.Fatalf("Run = %q, %v", got, err)
	}
}

// Many callers at once: every reply reaches its own caller (a counter script returns distinct values).
func TestManyConcurrentCallers(t *testing.T) {
	rdb, prefix, _, p := setup(t, "evalsha", "eval")
	incr := redis.NewScript(`return redis.call("INCR", KEYS[1])`)
	ctx := context.Background()
	const workers, each = 32, 50
	seen := make(chan int64, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				v, err := incr.Run(ctx, rdb, []string{prefix + "c"}).Int64()
				if err != nil {
					t.Error(err)
					return
				}
				seen <- v
			}
		})
	}
	wg.Wait()
	close(seen)
	got := map[int64]bool{}
	for v := range seen {
		if got[v] {
			t.Fatalf("value %d answered twice: replies crossed callers", v)
		}
		got[v] = true
	}
	if len(got) != workers*each {
		t.Fatalf("%d distinct replies, want %d", len(got), workers*each)
	}
	total := 0
	for _, n := range p.sizes() {
		total += n
	}
	if total < workers*each {
		t.Fatalf("pipelines carried %d commands, want at least %d", total, workers*each)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// benchXAdd measures XADD of a 300-byte record by GOMAXPROCS×parallelism callers (parallelism 0: one
// caller), with and without coalescing.
func benchXAdd(b *testing.B, parallelism int) {
	for _, coalesce := range []bool{false, true} {
		b.Run(fmt.Sprint("coalesce=", coalesce), func(b *testing.B) {
			rdb, prefix := admissiontest.Redis(b)
			if coalesce {
				Install(rdb, "xadd")
			}
			ctx := context.Background()
			args := func() *redis.XAddArgs {
				return &redis.XAddArgs{Stream: prefix + "s", MaxLen: 1000, Approx: true, Values: []any{"r", strings.Repeat("x", 300), "h", "0"}}
			}
			b.ReportAllocs()
			if parallelism == 0 {
				a := args()
				for b.Loop() {
					if err := rdb.XAdd(ctx, a).Err(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(parallelism)
			b.RunParallel(func(pb *testing.PB) {
				a := args()
				for pb.Next() {
					if err := rdb.XAdd(ctx, a).Err(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// One caller at a time (one connection's traffic): the coalescer's cost over a plain client, per command.
func BenchmarkSequentialXAdd(b *testing.B) { benchXAdd(b, 0) }

// Many callers at once (saturation): coalesced commands share round trips.
func BenchmarkParallelXAdd(b *testing.B) { benchXAdd(b, 16) }
