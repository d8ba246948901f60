package redisbatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/shared/testkit"
)

// hungSetup is a client of a redis-server of the test's own, configured as the data plane's (context
// deadlines bound every socket read and write) but with client-wide timeouts far beyond the test, so only
// the callers' contexts can end a wait on a hung server.
func hungSetup(t *testing.T) (*admissiontest.Server, *redis.Client, *Hook) {
	t.Helper()
	srv := admissiontest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, ReadTimeout: time.Minute,
		WriteTimeout: time.Minute, PoolTimeout: time.Minute, MaxRetries: -1, PoolSize: 16, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { rdb.Close() })
	// Open (and handshake) connections before the freeze, so the commands below reach the frozen
	// server's socket instead of waiting on a new connection's handshake.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := rdb.BLPop(context.Background(), time.Second, "warm-up").Err(); !errors.Is(err, redis.Nil) {
				t.Errorf("warm-up BLPOP: %v", err)
			}
		})
	}
	wg.Wait()
	h := Install(rdb, "evalsha", "eval", "xadd")
	return srv, rdb, h
}

// result is one caller's outcome and whether the server was still frozen when it came back.
type result struct {
	name        string
	err         error
	whileFrozen bool
}

// TestWaitersHonourContextOnHungRedis freezes Redis under three kinds of caller: one alone on the wire
// (its deadline ends it), callers queued behind it (never sent: their contexts end them, by deadline or
// by cancellation), and callers whose commands went out in a batch another caller leads (they leave at
// their deadlines; the batch's leader at the latest of them). Every caller returns while Redis is still
// frozen; once it is thawed, no command runs twice, those never sent never run, and the hook serves new
// commands (nothing is stuck, every reply reaches its own caller).
func TestWaitersHonourContextOnHungRedis(t *testing.T) {
	srv, rdb, h := hungSetup(t)
	ctx := context.Background()
	incr := redis.NewScript(`redis.call("INCR", KEYS[1]) return ARGV[1]`)
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	results := make(chan result, 64)
	run := func(name string, ctx context.Context, key string) {
		_, err := incr.Run(ctx, rdb, []string{key}, name).Text()
		results <- result{name: name, err: err, whileFrozen: srv.Stopped()}
	}
	wait := func(n int) []result {
		t.Helper()
		var out []result
		limit := time.After(20 * time.Second)
		for range n {
			select {
			case r := <-results:
				out = append(out, r)
			case <-limit:
				t.Fatalf("%d of %d callers returned while Redis was frozen; the rest hang", len(out), n)
			}
		}
		return out
	}

	// A leader alone on the wire, bounded by its deadline.
	leadCtx, cancelLead := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancelLead()
	go run("leader", leadCtx, "k:lead")
	testkit.WaitFor(t, "a batch leader", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.leading })
	// Queued behind it: one cancelled (no deadline), several with deadlines shorter than the leader's.
	cancelCtx, cancel := context.WithCancel(ctx)
	go run("cancelled", cancelCtx, "k:queued")
	for i := range 3 {
		qctx, qcancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer qcancel()
		go run(fmt.Sprint("queued", i), qctx, "k:queued")
	}
	testkit.WaitFor(t, "4 queued calls", func() bool { return h.queued() == 4 })
	cancel()
	for _, r := range wait(5) {
		if !r.whileFrozen || r.err == nil {
			t.Fatalf("caller %s: %v (returned while frozen: %v), want an error while Redis is frozen", r.name, r.err, r.whileFrozen)
		}
		switch {
		case r.name == "leader":
			if errors.Is(r.err, ErrNotSent) {
				t.Errorf("leader: %v, want its own command's timeout", r.err)
			}
		case !errors.Is(r.err, ErrNotSent) || !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded):
			t.Errorf("queued caller %s: %v, want ErrNotSent with its context's error (its command never left)", r.name, r.err)
		}
	}

	// A batch in flight: callers queue behind a second lone leader, which times out and hands the lead
	// to the oldest of them; that batch goes out to the frozen server with everyone's command.
	lead2, cancelLead2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelLead2()
	go run("leader2", lead2, "k:lead")
	testkit.WaitFor(t, "a batch leader", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.leading })
	for i := range 5 {
		bctx, bcancel := context.WithTimeout(ctx, time.Duration(800+100*i)*time.Millisecond)
		defer bcancel()
		go run(fmt.Sprint("batched", i), bctx, "k:batch")
	}
	testkit.WaitFor(t, "5 queued calls", func() bool { return h.queued() == 5 })
	for _, r := range wait(6) {
		if !r.whileFrozen || r.err == nil {
			t.Fatalf("caller %s: %v (returned while frozen: %v), want an error while Redis is frozen", r.name, r.err, r.whileFrozen)
		}
		if errors.Is(r.err, ErrNotSent) {
			t.Errorf("caller %s: %v, want a command that was sent (not ErrNotSent)", r.name, r.err)
		}
	}

	srv.Cont()
	// Once thawed, a command that was sent runs at most once (go-redis may or may not have got a
	// frozen server's socket to take it); a command that was never sent never runs.
	time.Sleep(200 * time.Millisecond)
	if v, err := rdb.Get(ctx, "k:lead").Int(); err != nil && !errors.Is(err, redis.Nil) || v > 2 {
		t.Errorf("k:lead = %d, %v; want at most 2 (each leader's command at most once)", v, err)
	}
	if v, err := rdb.Get(ctx, "k:batch").Int(); err != nil && !errors.Is(err, redis.Nil) || v > 5 {
		t.Errorf("k:batch = %d, %v; want at most 5", v, err)
	}
	if n, err := rdb.Exists(ctx, "k:queued").Result(); err != nil || n != 0 {
		t.Errorf("k:queued exists = %d, %v; want 0 (queued commands were never sent)", n, err)
	}
	// The hook is not stuck and replies reach their own callers.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			want := fmt.Sprint("after", i)
			if got, err := incr.Run(ctx, rdb, []string{"k:after"}, want).Text(); err != nil || got != want {
				t.Errorf("after thaw: %q, %v; want %q", got, err, want)
			}
		})
	}
	wg.Wait()
}

// TestLeaveWhileOnTheWire: callers whose commands are in a batch held on its way to Redis leave at their
// deadlines; when the batch then completes, their replies land in private copies and are dropped (no
// data race under -race, no reply reaching another caller), their commands ran once, and the leader and
// the callers still waiting get their own replies.
func TestLeaveWhileOnTheWire(t *testing.T) {
	rdb, prefix, h, p := setup(t, "evalsha", "eval", "xadd")
	ctx := context.Background()
	incr := redis.NewScript(`return {redis.call("INCR", KEYS[1]), ARGV[1]}`)
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.gate, p.entered = make(chan struct{}), make(chan struct{}, 100)
	p.mu.Unlock()
	type res struct {
		i   int
		v   []any
		err error
	}
	out := make(chan res, 10)
	call := func(ctx context.Context, i int) {
		v, err := incr.Run(ctx, rdb, []string{prefix + "n"}, fmt.Sprint(i)).Slice()
		out <- res{i, v, err}
	}
	recv := func() res {
		t.Helper()
		select {
		case r := <-out:
			return r
		case <-time.After(20 * time.Second):
			t.Fatal("no caller returned in 20s")
			return res{}
		}
	}
	go call(ctx, 0) // alone: held at the gate
	<-p.entered
	// Callers 1..6 queue; 2, 4 and 6 will leave while their batch is held on the wire.
	var cancels []context.CancelFunc
	for i := 1; i <= 6; i++ {
		cctx := ctx
		if i%2 == 0 {
			var cancel context.CancelFunc
			cctx, cancel = context.WithCancel(ctx)
			defer cancel()
			cancels = append(cancels, cancel)
		}
		go call(cctx, i)
		testkit.WaitFor(t, "i queued calls", func() bool { return h.queued() == i })
	}
	gate := p.gate
	p.mu.Lock()
	p.gate = make(chan struct{})
	p.mu.Unlock()
	close(gate) // batch 1 goes; batch 2 (callers 1..6) is held in turn
	<-p.entered
	for _, cancel := range cancels {
		cancel()
	}
	// Callers 2, 4 and 6 leave while batch 2 is held.
	left := map[int]bool{}
	for len(left) < 3 {
		r := recv()
		if r.i == 0 {
			if r.err != nil {
				t.Fatalf("caller 0: %v", r.err)
			}
			continue
		}
		if r.i%2 != 0 || !errors.Is(r.err, context.Canceled) || errors.Is(r.err, ErrNotSent) {
			t.Fatalf("caller %d: %v, %v; want only the cancelled callers to return, with their context's error (sent, not ErrNotSent)", r.i, r.v, r.err)
		}
		left[r.i] = true
	}
	close(p.gate)
	for range 3 {
		r := recv()
		if r.i == 0 {
			r = recv()
		}
		if r.err != nil || len(r.v) != 2 || r.v[1] != fmt.Sprint(r.i) {
			t.Errorf("caller %d: %v, %v; want its own reply", r.i, r.v, r.err)
		}
	}
	if v, err := rdb.Get(ctx, prefix+"n").Int(); err != nil || v != 7 {
		t.Errorf("counter %d, %v; want 7 (every sent command ran once, the abandoned ones included)", v, err)
	}
	if sizes := p.sizes(); len(sizes) < 2 || sizes[1] != 6 {
		t.Errorf("pipelines %v, want the six queued callers as one batch", sizes)
	}
}
