package settle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

func (f *Forwarder) ensureGroup(ctx context.Context, o outbox) error {
	ctx, cancel := f.redisCtx(ctx, 0)
	defer cancel()
	err := f.rdb.XGroupCreateMkStream(ctx, o.name, group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group: %w", err)
	}
	return nil
}

// read returns the next batch: own pending entries first (when ownPending says there may be some), then
// (at most every ClaimMinIdle/4) stale entries claimed from other consumers, then new entries (blocking
// up to block; -1: not at all). fresh reports that the batch holds new entries.
func (f *Forwarder) read(ctx context.Context, o outbox, lastClaim *time.Time, block time.Duration, ownPending bool) (msgs []redis.XMessage, fresh bool, err error) {
	count := int64(f.opts.BatchSize)
	if ownPending {
		own, err := f.readGroup(ctx, o, "0", count, -1)
		if err != nil {
			return nil, false, err
		}
		if len(own) > 0 {
			return own, false, nil
		}
	}
	if time.Since(*lastClaim) >= f.opts.ClaimMinIdle/4 {
		*lastClaim = time.Now()
		cctx, cancel := f.redisCtx(ctx, 0)
		claimed, _, err := f.rdb.XAutoClaim(cctx, &redis.XAutoClaimArgs{Stream: o.name, Group: group,
			MinIdle: f.opts.ClaimMinIdle, Start: "0-0", Count: count, Consumer: f.opts.NodeID}).Result()
		cancel()
		if err != nil {
			return nil, false, fmt.Errorf("claim stale outbox entries: %w", err)
		}
		if len(claimed) > 0 {
			f.log.Info("claimed stale settlement entries", "stream", o.name, "count", len(claimed))
			return claimed, false, nil
		}
	}
	msgs, err = f.readGroup(ctx, o, ">", count, block)
	return msgs, true, err
}

func (f *Forwarder) readGroup(ctx context.Context, o outbox, id string, count int64, block time.Duration) ([]redis.XMessage, error) {
	rctx, cancel := f.redisCtx(ctx, block)
	res, err := f.rdb.XReadGroup(rctx, &redis.XReadGroupArgs{Group: group, Consumer: f.opts.NodeID,
		Streams: []string{o.name, id}, Count: count, Block: block}).Result()
	cancel()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOGROUP") {
			if gerr := f.ensureGroup(ctx, o); gerr != nil {
				return nil, gerr
			}
			return nil, nil
		}
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	var out []redis.XMessage
	for _, s := range res {
		out = append(out, s.Messages...)
	}
	return out, nil
}

// entry is a decoded outbox entry.
type entry struct {
	id   string
	rec  *settlementv1.SettlementRecord
	hold admission.Hold
}
