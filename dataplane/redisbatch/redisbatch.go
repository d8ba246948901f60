// Package redisbatch coalesces the request path's Redis commands: a go-redis hook that sends the
// commands concurrent requests issue at the same moment as one pipeline — one write and one read on one
// connection instead of one round trip each — and hands every caller its own command's reply.
//
// It is group commit without a background goroutine: the first caller becomes the leader and sends
// whatever is queued by then (at least its own command); callers arriving while that batch is on the wire
// queue up, and when it completes the leader promotes the oldest of them to lead the next batch. A caller
// alone — one connection's worth of traffic — leads a batch of one and never waits for anyone, so
// coalescing costs nothing at low concurrency and saves a write, a read and a wake-up per command under
// load. At most one batch is in flight: a command waits at most for the batch ahead of it.
//
// Only the commands named in Install are coalesced (the data plane: the admission script and the outbox
// append, which neither block nor depend on one another); every other command, and every explicit
// pipeline, passes through unchanged. Commands keep their individual semantics: Redis runs a pipeline's
// commands one by one, so a script is as atomic as when sent alone, and each caller sees its own reply or
// error (a NOSCRIPT reply still makes Script.Run fall back to EVAL, which is coalesced too).
//
// A Redis that hangs cannot hold a caller past its context (docs/dataplane.md, "Redis outage"). A caller
// whose context ends while its command is still queued leaves at once and its command is never sent
// (ErrNotSent). A caller whose command is already on the wire in a batch leaves at once too — the batch's
// leader included, at its deadline: the batch is sent by a goroutine of its own and carries a private copy of every
// caller's command, so the late reply lands in the copy and is dropped — the command itself may still run
// in Redis when it answers (callers whose commands change state must make them idempotent or compensate;
// see dataplane/admission). The batch itself lasts until the latest deadline among its callers, bounded
// by the client's timeouts too.
package redisbatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotSent is returned (wrapping the context's error) to a caller whose context ended while its
// command was still queued: the command never reached Redis.
var ErrNotSent = errors.New("redisbatch: command not sent")

// Hook is the redis.Hook Install adds to a client. It is safe for concurrent use.
type Hook struct {
	rdb   redis.UniversalClient
	names map[string]bool

	mu      sync.Mutex
	queue   []*op
	leading bool // a batch is being sent; new commands queue for the next one

	ops sync.Pool
}

// op is one caller's command. Its state fields are guarded by Hook.mu.
type op struct {
	cmd redis.Cmder // the caller's command
	// sent is what a batch led by another caller sends: a private copy of cmd (or cmd itself when it
	// cannot be copied), so a caller that left does not race with its late reply.
	sent redis.Cmder
	// deadline is the caller's context deadline (zero: none).
	deadline time.Time
	// turn receives false when the reply is in sent, true when the caller must lead the next batch.
	turn chan bool

	promoted bool // chosen to lead the next batch (turn <- true is coming)
	taken    bool // in a batch: its command is being sent
	copyable bool // clone can copy cmd, so its caller may leave while it is on the wire
}

// Install makes rdb coalesce the named commands (e.g. "evalsha", "xadd"; any case) and returns the hook.
// Batches are sent with rdb's own pipeline (so hooks added after this one see them as pipelines). rdb may
// be a cluster client: its pipeline sends each command to the node owning the command's slot (one
// pipeline per node, in parallel), so a batch may mix commands of different slots.
func Install(rdb redis.UniversalClient, commands ...string) *Hook {
	h := &Hook{rdb: rdb, names: map[string]bool{}}
	for _, c := range commands {
		h.names[strings.ToLower(c)] = true
	}
	h.ops.New = func() any { return &op{turn: make(chan bool, 1)} }
	rdb.AddHook(h)
	return h
}

// DialHook passes dialing through.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook passes pipelines (explicit ones, and the batches) through.
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook coalesces the configured commands and passes the others through.
func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.names[cmd.Name()] {
			return next(ctx, cmd)
		}
		return h.do(ctx, cmd, next)
	}
}

func (h *Hook) do(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	o := h.ops.Get().(*op)
	o.cmd = cmd
	o.copyable = copyable(cmd)
	o.deadline, _ = ctx.Deadline()
	h.mu.Lock()
	h.queue = append(h.queue, o)
	if !h.leading {
		h.leading = true
		h.mu.Unlock()
		return h.lead(ctx, o, next)
	}
	h.mu.Unlock()
	select {
	case lead := <-o.turn:
		if lead {
			return h.lead(ctx, o, next)
		}
		err := deliver(o)
		h.put(o)
		return err
	case <-ctx.Done():
		return h.leave(ctx, o)
	}
}

// leave ends the wait of a caller whose context ended. A command still queued is taken out of the queue
// (passing the lead on if it had just been given it) and never sent. A command already in a batch stays
// there: its copy's reply will be dropped. Either way the op is not reused (a late turn may still
// arrive on its channel).
func (h *Hook) leave(ctx context.Context, o *op) error {
	h.mu.Lock()
	if o.taken {
		h.mu.Unlock()
		if !o.copyable { // the batch writes the caller's own command: wait for it
			<-o.turn
			err := deliver(o)
			h.put(o)
			return err
		}
		return fmt.Errorf("redisbatch: left while the command was on the wire: %w", ctx.Err())
	}
	for i, q := range h.queue {
		if q == o {
			h.queue = append(h.queue[:i], h.queue[i+1:]...)
			break
		}
	}
	var next *op
	if o.promoted { // it was to lead the next batch: the oldest other caller leads instead
		next = h.promoteLocked()
	}
	h.mu.Unlock()
	if next != nil {
		next.turn <- true
	}
	return fmt.Errorf("%w: %w", ErrNotSent, ctx.Err())
}

// lead sends everything queued (self, the leader's own command, included) as one pipeline, gives each
// waiting caller its reply, and passes the lead to the oldest caller that queued meanwhile. It returns
// the leader's own command's error, and is done with self (pooled again) unless the leader left early.
//
// A batch of several commands is sent by a goroutine of its own, so the leader waits for it only until its
// own deadline — like every other caller of the batch — and not until the latest deadline
// among the callers it carries (a caller promoted just before its deadline would otherwise wait up to
// twice its timeout on a hung Redis).
func (h *Hook) lead(ctx context.Context, self *op, next redis.ProcessHook) error {
	h.mu.Lock()
	batch := h.queue
	h.queue = nil
	// The batch lasts at most until the latest deadline among its callers (no limit but the client's
	// timeouts when one of them has none).
	var latest time.Time
	bounded := true
	for _, o := range batch {
		o.taken = true
		if o.deadline.IsZero() {
			bounded = false
		} else if o.deadline.After(latest) {
			latest = o.deadline
		}
	}
	h.mu.Unlock()

	if len(batch) == 1 { // alone: the ordinary single-command path, under the caller's own context
		err := next(ctx, self.cmd)
		h.handOff()
		h.put(self)
		return err
	}
	// The batch carries other callers' commands: it must not fail because the leader's request was
	// cancelled, nor outlive the last of its callers. Each command holds its own reply or error
	// afterwards (go-redis stamps a connection failure on every command of a pipeline).
	bctx := context.WithoutCancel(ctx)
	var cancel context.CancelFunc = func() {}
	if bounded {
		bctx, cancel = context.WithDeadline(bctx, latest)
	}
	pipe := h.rdb.Pipeline()
	for _, o := range batch {
		o.sent = clone(bctx, o.cmd)    // the leader's own too: it may leave before the reply
		_ = pipe.Process(bctx, o.sent) // queues; nothing is sent until Exec
	}
	done := make(chan struct{})
	go func() {
		defer cancel()
		_, _ = pipe.Exec(bctx)
		for _, o := range batch {
			if o != self {
				o.turn <- false
			}
		}
		h.handOff()
		close(done)
	}()
	if self.copyable && !self.deadline.IsZero() {
		// The leader waits until its own deadline at most; a cancellation does not end its wait (the
		// batch runs detached from any one request's cancellation, so its command still gets its reply).
		timer := time.NewTimer(time.Until(self.deadline))
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			// Left while its command is on the wire: its copy's late reply is dropped, and the op is not
			// reused (the batch still holds it).
			return fmt.Errorf("redisbatch: left while the command was on the wire: %w", context.DeadlineExceeded)
		}
	} else {
		<-done // no deadline, or the batch writes the caller's own command (clone could not copy it)
	}
	err := deliver(self)
	h.put(self)
	return err
}

// handOff ends a batch: the oldest caller that queued meanwhile leads the next one.
func (h *Hook) handOff() {
	h.mu.Lock()
	next := h.promoteLocked()
	h.mu.Unlock()
	if next != nil {
		next.turn <- true
	}
}

// promoteLocked picks the oldest queued caller to lead the next batch (nil, and no batch in progress,
// when none is queued). The caller sends it its turn after unlocking.
func (h *Hook) promoteLocked() *op {
	if len(h.queue) == 0 {
		h.leading = false
		return nil
	}
	h.queue[0].promoted = true
	return h.queue[0]
}

func (h *Hook) put(o *op) {
	*o = op{turn: o.turn}
	h.ops.Put(o)
}

// clone returns a command equal to cmd that the batch can fill in while cmd's caller may already have
// left; deliver copies its reply into cmd. Only the reply types of the commands the data plane
// coalesces (EVAL/EVALSHA: *redis.Cmd; XADD: *redis.StringCmd) are copied; any other command is sent
// as it is, and its caller must then wait for the batch (it cannot leave early without racing the reply).
func clone(ctx context.Context, cmd redis.Cmder) redis.Cmder {
	switch cmd.(type) {
	case *redis.Cmd:
		return redis.NewCmd(ctx, cmd.Args()...)
	case *redis.StringCmd:
		return redis.NewStringCmd(ctx, cmd.Args()...)
	}
	return cmd
}

func copyable(cmd redis.Cmder) bool {
	switch cmd.(type) {
	case *redis.Cmd, *redis.StringCmd:
		return true
	}
	return false
}

// deliver gives a waiting caller the reply its batch received.
func deliver(o *op) error {
	switch dst := o.cmd.(type) {
	case *redis.Cmd:
		if src, ok := o.sent.(*redis.Cmd); ok && src != dst {
			dst.SetVal(src.Val())
			dst.SetErr(src.Err())
		}
	case *redis.StringCmd:
		if src, ok := o.sent.(*redis.StringCmd); ok && src != dst {
			dst.SetVal(src.Val())
			dst.SetErr(src.Err())
		}
	}
	return o.cmd.Err()
}
