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
package redisbatch

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Hook is the redis.Hook Install adds to a client. It is safe for concurrent use.
type Hook struct {
	rdb   *redis.Client
	names map[string]bool

	mu      sync.Mutex
	queue   []*op
	leading bool // a batch is being sent; new commands queue for the next one

	ops sync.Pool
}

type op struct {
	cmd redis.Cmder
	// turn receives false when the command's reply is in cmd, true when the caller must lead the next batch.
	turn chan bool
}

// Install makes rdb coalesce the named commands (e.g. "evalsha", "xadd"; any case) and returns the hook.
// Batches are sent with rdb's own pipeline (so hooks added after this one see them as pipelines).
func Install(rdb *redis.Client, commands ...string) *Hook {
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
	o := h.ops.Get().(*op)
	o.cmd = cmd
	h.mu.Lock()
	h.queue = append(h.queue, o)
	if h.leading {
		h.mu.Unlock()
		if lead := <-o.turn; !lead {
			h.put(o)
			return cmd.Err()
		}
	} else {
		h.leading = true
		h.mu.Unlock()
	}
	err := h.lead(ctx, o, next)
	h.put(o)
	return err
}

// lead sends everything queued (self, the leader's own command, included) as one pipeline, gives each
// waiting caller its reply, and passes the lead to the oldest caller that queued meanwhile. It returns
// the leader's own command's error.
func (h *Hook) lead(ctx context.Context, self *op, next redis.ProcessHook) error {
	h.mu.Lock()
	batch := h.queue
	h.queue = nil
	h.mu.Unlock()

	if len(batch) == 1 { // alone: the ordinary single-command path, under the caller's own context
		err := next(ctx, self.cmd)
		h.handOff()
		return err
	}
	// The batch carries other callers' commands: it must not fail because the leader's request was
	// cancelled. The client's read and write timeouts still bound it. Each command holds its own reply or
	// error afterwards (go-redis stamps a connection failure on every command of a pipeline).
	ctx = context.WithoutCancel(ctx)
	pipe := h.rdb.Pipeline()
	for _, o := range batch {
		_ = pipe.Process(ctx, o.cmd) // queues; nothing is sent until Exec
	}
	_, _ = pipe.Exec(ctx)
	for _, o := range batch {
		if o != self {
			o.turn <- false
		}
	}
	h.handOff()
	return self.cmd.Err()
}

// handOff ends a batch: the oldest caller that queued meanwhile leads the next one.
func (h *Hook) handOff() {
	h.mu.Lock()
	var next *op
	if len(h.queue) > 0 {
		next = h.queue[0]
	} else {
		h.leading = false
	}
	h.mu.Unlock()
	if next != nil {
		next.turn <- true
	}
}

func (h *Hook) put(o *op) {
	o.cmd = nil
	h.ops.Put(o)
}
