package settle

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/dataplane/admission"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// forward settles one batch of entries of outbox o, retrying until the control plane answers or ctx ends.
// Every entry's hold names keys of the stream's shard (the Recorder appended it there).
func (f *Forwarder) forward(ctx context.Context, o outbox, msgs []redis.XMessage) error {
	entries := make([]entry, 0, len(msgs))
	for _, m := range msgs {
		if m.Values == nil { // deleted from the stream while pending: nothing left to settle
			if err := f.finish(ctx, []entry{{id: m.ID, hold: admission.Hold{Tag: o.tag}}}, nil); err != nil {
				return err
			}
			continue
		}
		rec, hold, err := DecodeEntry(m.Values)
		if err != nil {
			f.log.Error("undecodable settlement outbox entry; dead-lettered", "stream", o.name, "id", m.ID, "err", err)
			if err := f.deadLetter(ctx, entry{id: m.ID, hold: admission.Hold{Tag: o.tag}}, m.Values, err); err != nil {
				return err
			}
			continue
		}
		hold.Tag = o.tag
		entries = append(entries, entry{id: m.ID, rec: rec, hold: hold})
	}
	if len(entries) == 0 {
		return nil
	}
	_, err := f.deliver(ctx, entries,
		func(es []entry, resp *settlementv1.SettleResponse) error { return f.finish(ctx, es, resp) },
		func(e entry, reason error) error { return f.deadLetterEntry(ctx, e, reason) })
	return err
}

// deliver settles entries with the control plane: as one batch or, when the control plane refuses the
// batch as invalid, one record at a time, so one bad record does not block the rest. answered gets every
// settled batch with its answer; refused gets each record refused on its own. It returns how many entries
// were dealt with before an error (the rest are untouched).
func (f *Forwarder) deliver(ctx context.Context, entries []entry, answered func([]entry, *settlementv1.SettleResponse) error,
	refused func(entry, error) error) (int, error) {
	resp, err := f.settle(ctx, entries)
	switch {
	case err == nil:
		if err := answered(entries, resp); err != nil {
			return 0, err
		}
		return len(entries), nil
	case status.Code(err) != codes.InvalidArgument:
		return 0, err
	case len(entries) == 1:
		if err := refused(entries[0], err); err != nil {
			return 0, err
		}
		return 1, nil
	}
	for i := range entries {
		if _, err := f.deliver(ctx, entries[i:i+1], answered, refused); err != nil {
			return i, err
		}
	}
	return len(entries), nil
}

// settle calls Settle until it answers, ctx ends, or the control plane refuses the batch as invalid.
func (f *Forwarder) settle(ctx context.Context, entries []entry) (*settlementv1.SettleResponse, error) {
	req := &settlementv1.SettleRequest{NodeId: f.opts.NodeID, Records: make([]*settlementv1.SettlementRecord, len(entries))}
	for i, e := range entries {
		req.Records[i] = e.rec
	}
	for attempt := 1; ; attempt++ {
		cc, endpoint := f.cp.Current()
		callCtx, cancel := context.WithTimeout(ctx, f.opts.RPCTimeout)
		resp, err := settlementv1.NewSettlementServiceClient(cc).Settle(callCtx, req)
		cancel()
		if err == nil {
			return resp, nil
		}
		if status.Code(err) == codes.InvalidArgument {
			return nil, err
		}
		f.failures.Inc()
		f.cp.Rotate()
		if attempt == 1 || attempt%20 == 0 {
			f.log.Warn("settle call failed; retrying", "endpoint", endpoint, "records", len(entries), "attempt", attempt, "err", err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("settle %d records: %w (last error: %v)", len(entries), ctx.Err(), err)
		}
		if !sleep(ctx, f.cp.Backoff(attempt)) {
			return nil, fmt.Errorf("settle %d records: %w (last error: %v)", len(entries), ctx.Err(), err)
		}
	}
}
