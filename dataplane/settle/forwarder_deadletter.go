package settle

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/dataplane/admission"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// deadLetter copies an entry to the dead-letter stream with the reason, then acknowledges it (refunding
// its hold if it could be decoded).
func (f *Forwarder) deadLetter(ctx context.Context, e entry, values map[string]any, reason error) error {
	dv := []any{"reason", reason.Error(), "id", e.id, "tag", e.hold.Tag, "node", f.opts.NodeID}
	for k, v := range values {
		dv = append(dv, "f_"+k, v)
	}
	if err := f.deadXAdd(ctx, dv); err != nil {
		return fmt.Errorf("dead-letter outbox entry %s: %w", e.id, err)
	}
	f.deadLettered.Inc()
	e.rec = nil
	return f.finish(ctx, []entry{e}, nil)
}

func (f *Forwarder) deadLetterEntry(ctx context.Context, e entry, reason error) error {
	f.log.Error("control plane refused settlement record; dead-lettered", "request_id", e.rec.GetRequestId(), "err", reason)
	b, err := marshalRecord(e.rec)
	if err != nil {
		return err
	}
	dv := []any{"reason", reason.Error(), "id", e.id, "tag", e.hold.Tag, "node", f.opts.NodeID, "f_" + fieldRecord, b, "f_" + fieldHold, admission.EncodeHold(e.hold)}
	if err := f.deadXAdd(ctx, dv); err != nil {
		return fmt.Errorf("dead-letter outbox entry %s: %w", e.id, err)
	}
	f.deadLettered.Inc()
	return f.finish(ctx, []entry{e}, nil)
}

// deadXAdd appends values to the dead-letter stream.
func (f *Forwarder) deadXAdd(ctx context.Context, values []any) error {
	ctx, cancel := f.redisCtx(ctx, 0)
	defer cancel()
	return f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.streams.Dead(), Values: values}).Err()
}

func marshalRecord(rec *settlementv1.SettlementRecord) ([]byte, error) {
	b, err := proto.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record %s: %w", rec.GetRequestId(), err)
	}
	return b, nil
}
