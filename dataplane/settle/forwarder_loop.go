package settle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// outbox is one outbox stream: a shard's (tag) or the untagged one (tag "").
type outbox struct{ tag, name string }

// Run forwards until ctx ends, every outbox stream on its own (a cluster cannot read streams of several
// slots in one call; one slow stream holds no other): first the entries this node had read but not
// acknowledged before a restart, then, in a loop, stale entries of other (dead) consumers and new entries.
// A short batch of new entries lingers (ForwarderOptions.Linger) for more before it is settled. A batch
// the control plane cannot take is retried with capped, jittered backoff, so records survive a
// control-plane outage in the stream. Spilled records are delivered as soon as they are spilled. Run
// returns nil when ctx ends; entries it had read but not settled stay pending for this node (Flush, or
// Run after a restart, delivers them first).
func (f *Forwarder) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if f.opts.Spill != nil {
		wg.Go(func() { f.runSpill(ctx) })
	}
	for _, o := range f.outboxes {
		wg.Go(func() { f.runOutbox(ctx, o) })
	}
	wg.Wait()
	return nil
}

// runSpill delivers spilled records whenever one is spilled, and at least every Block (holds owed
// refunds are refunded once Redis answers).
func (f *Forwarder) runSpill(ctx context.Context) {
	for ctx.Err() == nil {
		if err := f.drainSpill(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("deliver spilled settlement records", "err", err)
		}
		t := time.NewTimer(f.opts.Block)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-f.opts.Spill.pushed:
		}
		t.Stop()
	}
}

// runOutbox forwards one outbox stream until ctx ends.
func (f *Forwarder) runOutbox(ctx context.Context, o outbox) {
	if err := f.ensureGroup(ctx, o); err != nil && ctx.Err() == nil {
		f.log.Warn("settlement outbox group", "stream", o.name, "err", err)
	}
	lastClaim := time.Time{}
	// ownPending says this node's pending list may hold entries it read but did not settle: at start (a
	// restart), after any failure, after a batch of own or claimed entries, and at every claim check.
	// After a batch of new entries settled completely it is empty, so the loop skips that read.
	ownPending := true
	for ctx.Err() == nil {
		if time.Since(lastClaim) >= f.opts.ClaimMinIdle/4 {
			ownPending = true
		}
		msgs, fresh, err := f.read(ctx, o, &lastClaim, f.opts.Block, ownPending)
		if err != nil {
			ownPending = true
			if ctx.Err() != nil {
				break
			}
			f.log.Warn("read settlement outbox", "stream", o.name, "err", err)
			sleep(ctx, f.opts.ControlPlane.BackoffMax)
			continue
		}
		if len(msgs) == 0 {
			ownPending = false
			continue
		}
		if fresh && len(msgs) < f.opts.BatchSize && f.opts.Linger > 0 {
			if msgs, err = f.linger(ctx, o, msgs); err != nil {
				ownPending = true
				if ctx.Err() != nil {
					break // what was read stays pending for this node
				}
				f.log.Warn("read settlement outbox", "stream", o.name, "err", err)
			}
		}
		if err := f.forward(ctx, o, msgs); err != nil {
			ownPending = true
			if ctx.Err() == nil {
				f.log.Warn("forward settlement batch", "stream", o.name, "err", err)
			}
			continue
		}
		// Own or claimed entries come BatchSize at a time: look again until none are left.
		ownPending = !fresh
	}
}

// lingerPoll is the longest pause between two outbox reads while a batch lingers.
const lingerPoll = 25 * time.Millisecond

// linger tops up a short batch of new entries: it polls the outbox for more every Linger/4 (at most
// every lingerPoll) until the batch is full or Linger has passed. An error (or the end of ctx) returns what was read so far with it;
// entries read by a failed poll are at worst left pending for this node.
func (f *Forwarder) linger(ctx context.Context, o outbox, msgs []redis.XMessage) ([]redis.XMessage, error) {
	deadline := time.Now().Add(f.opts.Linger)
	step := min(max(f.opts.Linger/4, time.Millisecond), lingerPoll)
	for len(msgs) < f.opts.BatchSize {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if !sleep(ctx, min(step, left)) {
			return msgs, ctx.Err()
		}
		more, err := f.readGroup(ctx, o, ">", int64(f.opts.BatchSize-len(msgs)), -1)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, more...)
	}
	return msgs, nil
}

// Flush drains what it can within ctx: the spilled records, then of every outbox stream this node's
// unacknowledged entries, stale ones of dead consumers, then the entries appended up to the moment its
// flush started (so busy peers cannot keep it going forever). It returns an error when ctx ended first;
// the rest stays in the streams for another data plane. Call it after Run has returned.
func (f *Forwarder) Flush(ctx context.Context) error {
	if err := f.drainSpill(ctx); err != nil {
		n := f.opts.Spill.Len()
		f.log.Error("settlement records held in memory could not be delivered; lost", "records", n, "err", err)
		return fmt.Errorf("settle: flush: %d spilled records undelivered: %w", n, err)
	}
	var errs []error
	for _, o := range f.outboxes {
		if err := f.flush(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("settle: flush %s: %w", o.name, err))
		}
	}
	return errors.Join(errs...)
}

// flush drains one outbox stream (Flush).
func (f *Forwarder) flush(ctx context.Context, o outbox) error {
	if err := f.ensureGroup(ctx, o); err != nil {
		return err
	}
	ictx, cancel := f.redisCtx(ctx, 0)
	info, err := f.rdb.XInfoStream(ictx, o.name).Result()
	cancel()
	if err != nil {
		return err
	}
	mark := info.LastGeneratedID
	lastClaim := time.Time{}
	for {
		msgs, fresh, err := f.read(ctx, o, &lastClaim, -1, true)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		if err := f.forward(ctx, o, msgs); err != nil {
			return err
		}
		if fresh && compareIDs(msgs[len(msgs)-1].ID, mark) >= 0 {
			return nil
		}
	}
}

// compareIDs orders two stream ids ("<ms>-<seq>").
func compareIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	for _, p := range [][2]string{{am, bm}, {as, bs}} {
		x, _ := strconv.ParseUint(p[0], 10, 64)
		y, _ := strconv.ParseUint(p[1], 10, 64)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
