package settle

import (
	"context"

	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// drainSpill delivers every spilled record straight to the control plane, retrying until it answers or
// ctx ends (what is left stays spilled), then refunds the delivered records' holds; holds Redis cannot
// refund yet stay owed for the next call. Only a delivery failure is returned; a refund failure is logged.
func (f *Forwarder) drainSpill(ctx context.Context) error {
	sp := f.opts.Spill
	if sp == nil {
		return nil
	}
	for {
		batch := sp.take(f.opts.BatchSize)
		if len(batch) == 0 {
			break
		}
		f.log.Warn("delivering settlement records Redis did not take straight to the control plane", "records", len(batch))
		n, err := f.deliver(ctx, batch,
			func(es []entry, resp *settlementv1.SettleResponse) error {
				o := make([]owed, len(es))
				for i, e := range es {
					o[i] = owed{e: e, resp: resp}
				}
				sp.owe(o)
				return nil
			},
			func(e entry, reason error) error {
				// It cannot go to the dead-letter stream (Redis refused it already): logged whole, dropped.
				b, _ := marshalRecord(e.rec)
				f.log.Error("control plane refused spilled settlement record; dropped", "request_id", e.rec.GetRequestId(),
					"record_base64", b, "err", reason)
				f.deadLettered.Inc()
				sp.owe([]owed{{e: e}}) // its hold is refunded all the same
				return nil
			})
		if err != nil {
			sp.putBack(batch[n:])
			return err
		}
	}
	if err := f.refundOwed(ctx); err != nil {
		f.log.Warn("refund holds of delivered spilled records; retrying later", "owed", sp.Owed(), "err", err)
	}
	return nil
}

// refundOwed runs the settle script for delivered spilled records (no stream entry: refund only), one
// call per control-plane answer and shard, so the answer still refreshes the cost_used mirror.
func (f *Forwarder) refundOwed(ctx context.Context) error {
	sp := f.opts.Spill
	for {
		o := sp.takeOwed(f.opts.BatchSize)
		if len(o) == 0 {
			return nil
		}
		for i := 0; i < len(o); {
			j := i + 1
			for j < len(o) && o[j].resp == o[i].resp && o[j].e.hold.Tag == o[i].e.hold.Tag {
				j++
			}
			es := make([]entry, j-i)
			for k := range es {
				es[k] = o[i+k].e
			}
			if err := f.finish(ctx, es, o[i].resp); err != nil {
				sp.oweFront(o[i:])
				return err
			}
			i = j
		}
	}
}
