package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Responder turns one upstream response into the client's bytes and, from the same reading, reports how
// the request ended: status, end state, time to first byte and usage. Every routing cell is served by one:
// passthrough (passthroughResponder: the upstream's bytes as they are), transform_to (a Transform from the
// Transformer: the translator's bytes). Dispatch only chooses the candidate and hands the response over.
type Responder interface {
	// Respond writes the client's answer from resp (any status that dispatch does not fail over) and
	// reports how it ended. It does not close resp.Body.
	Respond(ctx context.Context, w http.ResponseWriter, resp *http.Response) Result
}

// Result is how a response ended.
type Result struct {
	Status     int
	End        vocab.EndState
	FirstByte  time.Time
	Usage      usage.Usage
	UsageFound bool
	// Output is the upstream's output text (bounded to maxCollectedText bytes, cut at a character) and
	// OutputBytes its whole length, for local counting when the upstream reported no usage: collected from
	// an alpha chat stream, read from a buffered generation answer without usage; else empty.
	Output      string
	OutputBytes int64
	// OutputUnreported says Usage is the upstream's, but without its output count: a beta stream that ended
	// before message_delta reported only message_start's placeholder. Output then holds the relayed text,
	// and dispatch counts the output locally.
	OutputUnreported bool
	// Failed, when set, says nothing was written to the client: the upstream broke before its first body
	// byte, and dispatch fails over like after a connection error.
	Failed error
	// Refused, when set, says nothing was written and the gateway answers this error instead (an upstream
	// answer the translator cannot carry).
	Refused *httperr.Error
	// Abort says the upstream cut a response relayed byte for byte: the client connection is aborted
	// (after settlement), so the client sees a truncated response, not a clean end.
	Abort bool
}

// errCutBeforeFirstByte is the attempt failure of an upstream that broke its response before a body byte.
var errCutBeforeFirstByte = errors.New("the upstream response broke before its first body byte")

// hopResponseHeaders are not copied from the upstream response: hop-by-hop headers, the request id (the
// gateway's wins) and the gateway's cost fields (an upstream cannot say what the caller is charged).
var hopResponseHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Transfer-Encoding": true, "Upgrade": true, "Trailer": true, "Te": true, "X-Request-Id": true,
	hdrCost: true, hdrRule: true, hdrRuleVersion: true, hdrTier: true, hdrSource: true}

// passthroughResponder relays an upstream answer unchanged. Streams (SSE and gamma's JSON array) are read
// by the dataplane/sse decoders — the one framing code — and every upstream read reaches the client as it
// arrives, flushed; each decoded event goes to its dialect's usage billing and decides the end state (the
// dialect's terminal event, an in-stream error). An alpha chat stream whose usage only the gateway asked
// for is relayed event by event instead (the raw bytes of each event, the usage chunk left out). Buffered
// answers are copied through one pooled buffer while jsonkit.BodyScanner keeps their usage members. It lives
// in the pooled per-request state and is reused.
type passthroughResponder struct {
	now func() time.Time
	// set per request by prepare
	class     Class
	billable  bool
	collect   bool // keep the output text for local counting (a local counter is configured)
	dropUsage bool // the gateway asked for the usage chunk: leave it out of the client's stream
	// costEvents says the client asked for its stream's cost: the final usage event carries it (costSlot).
	costEvents bool
	costB      []byte // scratch of the cost members
	// ids, when set, is the provider whose stored-resource ids (responses, conversations) the answer's
	// ids are rewritten to name (stored.go).
	ids int64
	// cost tells the call the answer's cost (cost headers or trailers); nil tells nothing.
	cost costTeller

	// holdMax is how many bytes of a plain answer are held before its headers are written (Options.HoldAnswerBytes).
	holdMax int64

	copyB []byte    // the 32 KiB copy buffer
	held  [][]byte  // a plain answer held until it is whole (plain): the first read, then holdBlock blocks
	one   [1][]byte // the first read, as copy takes it
	out   []byte    // the first bytes of a buffered answer, for local counting without usage
	scan  jsonkit.BodyScanner
	text  textCollector
	rel   jsonkit.Relay // the event being relayed, as its dialect's relay reader read it
	// the usage of a beta or alpha stream, billed from the relay reader's members (relayBiller)
	betaBill  beta.Billing
	alphaBill alpha.Billing
	gammaBill gamma.Billing
	sseD      *sse.Decoder
	arrD      *jsonkit.JSONArrayDecoder
	up        upReader
}

// reset forgets a request; buffers grown beyond keep are dropped.
func (p *passthroughResponder) reset(keep int) {
	p.scan.Reset()
	if p.sseD != nil && p.sseD.Footprint() > keep {
		p.sseD = nil
	}
	if p.arrD != nil && p.arrD.Footprint() > keep {
		p.arrD = nil
	}
	out := p.out[:0]
	if cap(out) > keep {
		out = nil // a whole answer read for its ids
	}
	held := p.held[:0]
	if cap(held)*holdBlock > keep {
		held = nil // a long answer: not kept pinned in the pool
	}
	*p = passthroughResponder{now: p.now, holdMax: p.holdMax, copyB: p.copyB, held: held, out: out, scan: p.scan,
		sseD: p.sseD, arrD: p.arrD, up: upReader{pending: p.up.pending[:0]}}
	if cap(p.up.pending) > keep {
		p.up.pending = nil
	}
}

// Respond implements Responder. Nothing is written to the client until the first body byte (or the end of
// an empty body) arrived: an upstream that breaks before is a failed attempt (Result.Failed).
func (p *passthroughResponder) Respond(ctx context.Context, w http.ResponseWriter, resp *http.Response) Result {
	if p.copyB == nil {
		p.copyB = make([]byte, 32<<10)
	}
	buf := p.copyB
	var n int
	var err error
	for n == 0 && err == nil {
		n, err = resp.Body.Read(buf)
	}
	if n == 0 && !errors.Is(err, io.EOF) {
		return Result{Failed: fmt.Errorf("%w: %w", errCutBeforeFirstByte, err)}
	}
	res := Result{Status: resp.StatusCode, FirstByte: p.now()}
	dst := w.Header()
	for k, v := range resp.Header {
		if !hopResponseHeaders[k] {
			dst[k] = v
		}
	}
	if v := resp.Header["X-Request-Id"]; len(v) > 0 {
		dst["X-Upstream-Request-Id"] = v
	}
	ok := resp.StatusCode < 300
	// A stored response retrieved as a stream (GET /v1/responses/{id}?stream=true) is relayed as one.
	streaming := ok && (p.class.Stream || (p.ids != 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")))
	if p.ids != 0 && ok && !streaming {
		p.whole(w, resp, n, err, &res)
		return res
	}
	if !streaming {
		p.plain(ctx, w, resp, n, err, ok, &res)
		return res
	}
	dst.Del("Content-Length")
	if p.cost != nil {
		p.cost.costTrailers(dst, true)
	}
	w.WriteHeader(resp.StatusCode)
	if b := p.relayBiller(); b != nil {
		p.stream(ctx, w, resp, buf[:n], err, b, &res)
		return res
	}
	p.one[0] = buf[:n]
	p.copy(ctx, w, resp, p.one[:], err, ok, &res)
	return res
}

// plain relays a plain (non-stream) answer. It is held until it is whole, up to p.holdMax bytes, and only
// then are the headers written, with the length received: an upstream that cuts it before its end (a
// Content-Length it does not keep, chunks without the terminating one) wrote nothing to the client, so the
// attempt failed (Result.Failed: failover, then a 502 in the client's dialect). An answer longer than the
// bound has its headers sent and is relayed as it comes from there on: a cut after that aborts the client
// connection. The answer is held in blocks of holdBlock bytes, so memory follows the bytes received.
func (p *passthroughResponder) plain(ctx context.Context, w http.ResponseWriter, resp *http.Response, n int, err error, ok bool, res *Result) {
	held := append(p.held[:0], p.copyB[:n])
	total := int64(n)
	for err == nil && total <= p.holdMax {
		last := len(held) - 1
		if len(held[last]) == cap(held[last]) || last == 0 {
			var blk []byte
			if len(held) < cap(held) {
				blk = held[: len(held)+1 : cap(held)][len(held)] // a block kept from an earlier request
			}
			if cap(blk) != holdBlock {
				blk = make([]byte, 0, holdBlock)
			}
			held = append(held, blk[:0])
			last++
		}
		b := held[last]
		var m int
		m, err = resp.Body.Read(b[len(b):cap(b)])
		held[last] = b[:len(b)+m]
		total += int64(m)
	}
	p.held = held
	switch {
	case errors.Is(err, io.EOF):
		w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
	case err != nil:
		// Cut before its end: nothing was written yet, so this is a failed attempt (or a client that left,
		// which dispatch tells from the context).
		res.Failed = fmt.Errorf("the upstream answer broke after %d bytes, before its end: %w", total, err)
		return
	}
	scanned := false
	switch {
	case p.cost == nil:
	case err != nil:
		// Whole: its usage is read before the headers, which carry its cost (docs/cost.md).
		res.End = vocab.EndCompleted
		if !ok {
			res.End = vocab.EndUpstreamError
		}
		if ok && p.billable {
			for _, b := range held {
				p.capture(b)
			}
			p.billCaptured(resp, res)
		}
		scanned = true
		p.cost.costHeaders(w.Header(), *res)
	default:
		p.cost.costTrailers(w.Header(), false) // beyond the bound: the cost follows the body
	}
	w.WriteHeader(resp.StatusCode)
	if err == nil {
		// Longer than the bound: the headers leave now, so a client whose answer is cut later sees a 200
		// whose body breaks (the connection is aborted), never no answer at all.
		_ = http.NewResponseController(w).Flush()
	}
	p.copy(ctx, w, resp, held, err, ok && !scanned, res)
}

// holdBlock is the size of the blocks a plain answer is held in.
const holdBlock = 64 << 10

// copy relays a body as it comes (a buffered answer, or a stream without usage), scanning a billable
// buffered answer for its usage members and keeping its first bytes for local counting.
//
// first is what was read before the headers were written (the first read, or a held plain answer) and err
// the error that ended that reading. capture says the answer's usage is still to be read (a 2xx answer not
// scanned before its headers).
func (p *passthroughResponder) copy(ctx context.Context, w http.ResponseWriter, resp *http.Response, first [][]byte, err error, capture bool, res *Result) {
	buf := p.copyB
	flusher, _ := w.(http.Flusher)
	if !p.class.Stream {
		flusher = nil
	}
	ok := resp.StatusCode < 300
	capture = capture && !p.class.Stream && p.billable
	for i := 0; ; i++ {
		var chunk []byte
		if i < len(first) {
			chunk = first[i]
		} else {
			var n int
			n, err = resp.Body.Read(buf)
			chunk = buf[:n]
		}
		if len(chunk) > 0 {
			if _, werr := w.Write(chunk); werr != nil {
				res.End = vocab.EndClientDropped
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			if capture {
				p.capture(chunk)
			}
		}
		if i < len(first)-1 {
			continue // the rest of what was read before
		}
		if err != nil {
			break
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		res.End = vocab.EndCompleted
		if !ok {
			res.End = vocab.EndUpstreamError
		}
	case ctx.Err() != nil:
		res.End = vocab.EndClientDropped
	default:
		res.End, res.Abort = vocab.EndUpstreamInterrupted, true
	}
	if capture {
		p.billCaptured(resp, res)
	}
}

// capture reads a chunk of a buffered answer for its usage members, keeping its first bytes for local counting.
func (p *passthroughResponder) capture(chunk []byte) {
	_, _ = p.scan.Write(chunk)
	if len(p.out) <= maxCollectedText { // the answer's first bytes, for local counting without usage
		p.out = append(p.out, chunk[:min(len(chunk), maxCollectedText+1-len(p.out))]...)
	}
}

// billCaptured reads the usage of a buffered answer from what capture kept.
func (p *passthroughResponder) billCaptured(resp *http.Response, res *Result) {
	// Only the usage members were kept, wherever they were in a body of any length; the reported tier is
	// kept even when the body carries no token counts.
	if red := p.scan.Reduced(); red != nil {
		if u, found, err := bodyUsage(p.class.Kind, p.class.Op, red, resp.Header); err == nil {
			res.Usage, res.UsageFound = u, found
		}
	}
	if !res.UsageFound && p.collect && len(p.out) <= maxCollectedText && p.class.Op.IsGeneration() {
		// A whole buffered answer was kept: its text is the output (a longer one counts the prompt only).
		res.Output, res.OutputBytes = responseText(p.out)
	}
}

// whole relays a buffered answer whose stored-resource ids are rewritten: it is read whole (at most
// maxUpstreamBody), its ids encoded, and sent with its new length.
func (p *passthroughResponder) whole(w http.ResponseWriter, resp *http.Response, n int, err error, res *Result) {
	body := append(p.out[:0], p.copyB[:n]...)
	if err == nil {
		var rest []byte
		rest, err = io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
		body = append(body, rest...)
		if err == nil {
			err = io.EOF
		}
	}
	p.out = body
	if !errors.Is(err, io.EOF) {
		// Cut mid-body: nothing was written yet, so this is a failed attempt (failover, then a 502).
		res.Failed = fmt.Errorf("read upstream answer: %w", err)
		return
	}
	out, changed := encodeBodyIDs(nil, body, p.ids)
	if !changed {
		out = body
	}
	if p.billable {
		if u, found, err := bodyUsage(p.class.Kind, p.class.Op, body, resp.Header); err == nil {
			res.Usage, res.UsageFound = u, found
		}
		if !res.UsageFound && p.collect && p.class.Op.IsGeneration() {
			res.Output, res.OutputBytes = responseText(body)
		}
	}
	res.End = vocab.EndCompleted
	if p.cost != nil {
		p.cost.costHeaders(w.Header(), *res)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(resp.StatusCode)
	if _, werr := w.Write(out); werr != nil {
		res.End = vocab.EndClientDropped
	}
}

// relayBiller is a dialect's billing of a passthrough stream from its relay reader's members (each event
// read once): beta.Billing, alpha.Billing (chat, responses, images), gamma.Billing (which also takes the
// response header's tier).
type relayBiller interface {
	ObserveRelay(r *jsonkit.Relay)
	Usage() (usage.Usage, bool)
}

// relayBiller returns the billing of this request's stream, reset; nil for streams without usage.
func (p *passthroughResponder) relayBiller() relayBiller {
	switch p.class.Kind {
	case vocab.KindBetaMessages:
		p.betaBill = beta.Billing{}
		return &p.betaBill
	case vocab.KindGammaGenerateContent:
		p.gammaBill.Reset()
		return &p.gammaBill
	}
	if b, ok := alphaBilling(p.class.Kind, p.class.Op); ok {
		p.alphaBill = b
		return &p.alphaBill
	}
	return nil
}

// observeHeader hands the response header to a billing that reads it (gamma's served tier).
func observeHeader(b relayBiller, h http.Header) {
	if hb, ok := b.(interface{ ObserveHeader(http.Header) }); ok {
		hb.ObserveHeader(h)
	}
}

// alphaBilling is the billing of an alpha stream of kind and op, and false when it has no usage.
func alphaBilling(kind vocab.Kind, op vocab.Operation) (alpha.Billing, bool) {
	switch {
	case kind == vocab.KindAlphaChatCompletions:
		return alpha.Billing{}, true
	case kind == vocab.KindAlphaResponses:
		return alpha.ResponsesBilling(), true
	case kind == vocab.KindAlpha && (op == vocab.OpCreateImage || op == vocab.OpEditImage):
		return alpha.ImageBilling(), true
	}
	return alpha.Billing{}, false
}

// stream relays a stream read by the sse decoders; first is the first read (n bytes) and err its error.
// Usage is billed by bill from the relay reader's members.
func (p *passthroughResponder) stream(ctx context.Context, w http.ResponseWriter, resp *http.Response, first []byte, ferr error, bill relayBiller, res *Result) {
	observeHeader(bill, resp.Header)
	if p.collect && (p.class.Kind == vocab.KindAlphaChatCompletions || p.class.Kind == vocab.KindBetaMessages) {
		// Keep the relayed text for local counting: alpha chat reports no usage when a stream ends in an
		// error before its usage chunk, beta no output count when it ends before message_delta.
		p.text.on = true
	}
	flusher, _ := w.(http.Flusher)
	u := &p.up
	u.w, u.f, u.body, u.pre = w, flusher, resp.Body, first
	if errors.Is(ferr, io.EOF) {
		u.eof, u.body = true, http.NoBody
	} else if ferr != nil {
		u.err, u.body = ferr, errReader{ferr}
	}
	// Each event is read once, by its dialect's relay reader: terminal, error, the usage chunk, and the
	// members usage billing takes. An event's usage is billed from those members (only their values are
	// decoded); the others leave usage unchanged.
	read := relayReader(p.class.Kind)
	rel := &p.rel
	var failed, done bool
	observe := func(name string, data []byte) { // data was read into rel
		if rel.HasUsage {
			bill.ObserveRelay(rel)
		}
		switch {
		case !p.text.on:
		case p.class.Kind == vocab.KindBetaMessages:
			p.text.pend = beta.AppendOutputText(p.text.pend[:0], rel)
			p.text.addBytes(p.text.pend)
		default:
			p.text.observe(data)
		}
		failed = failed || name == "error" || rel.Failed
		done = done || rel.Terminal
	}
	var rest io.Reader // what is left when decoding stopped on the framing (an oversized event)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if p.sseD == nil {
			p.sseD = sse.NewDecoder(u)
		} else {
			p.sseD.Reset(u)
		}
		d := p.sseD
		events := p.dropUsage || p.ids != 0 || p.costEvents
		if events {
			d.KeepRaw() // event by event: each event's raw bytes are written before the next upstream read
		} else {
			u.tee = true // every read reaches the client as it arrives
			u.write(first)
		}
		for {
			ev, err := d.Next()
			if err == nil {
				read(ev.Data, rel)
			}
			observed := false
			if events {
				var slot []string
				if err == nil && p.costEvents {
					slot = costSlot(p.class.Kind, rel)
				}
				switch {
				case err != nil:
					u.pending = append(u.pending, d.Raw()...)
				case p.dropUsage && rel.UsageChunk:
					// left out
				case slot != nil:
					// The final usage event: billed first, then told its cost (its stored ids encoded too).
					observe(ev.Name, ev.Data)
					observed = true
					data := ev.Data
					if p.ids != 0 {
						if enc, ok := encodeEventIDs(data, p.ids); ok {
							data = enc
						}
					}
					if out, ok := p.withStreamCost(data, slot, bill); ok {
						if p.ids != 0 {
							u.pending = sse.AppendEvent(u.pending, ev.Name, out)
						} else {
							u.pending = spliceEvent(u.pending, d.Raw(), ev.Name, ev.Data, out)
						}
						break
					}
					if p.ids != 0 {
						u.pending = sse.AppendEvent(u.pending, ev.Name, data)
						break
					}
					u.pending = append(u.pending, d.Raw()...)
				case p.ids != 0:
					if data, ok := encodeEventIDs(ev.Data, p.ids); ok {
						u.pending = sse.AppendEvent(u.pending, ev.Name, data)
						break
					}
					u.pending = append(u.pending, d.Raw()...)
				default:
					u.pending = append(u.pending, d.Raw()...)
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) && u.werr == nil && u.err == nil {
					rest = d.Rest()
				}
				break
			}
			if !observed {
				observe(ev.Name, ev.Data)
			}
		}
	} else {
		if p.arrD == nil {
			p.arrD = jsonkit.NewJSONArrayDecoder(u)
		} else {
			p.arrD.Reset(u)
		}
		// A client that asked for its cost gets the array element by element (the final one told its cost);
		// any other gets every read as it arrives.
		u.tee = !p.costEvents
		if u.tee {
			u.write(first)
		}
		for n := 0; ; n++ {
			el, err := p.arrD.Next()
			if err != nil {
				done = done || (errors.Is(err, io.EOF) && u.eof) // the array was closed
				if !u.tee && done {
					u.pending = jsonkit.AppendArrayEnd(u.pending, n)
				}
				if !errors.Is(err, io.EOF) && u.werr == nil && u.err == nil && !u.eof {
					rest = u // already relayed as read: read on to the end
				}
				break
			}
			read(el, rel)
			observe("", el)
			if !u.tee {
				out := el
				if slot := costSlot(p.class.Kind, rel); slot != nil {
					if b, ok := p.withStreamCost(el, slot, bill); ok {
						out = b
					}
				}
				u.pending = append(jsonkit.AppendArraySep(u.pending, n), out...)
			}
		}
	}
	if rest != nil {
		// The framing could not be followed (an event beyond sse.DefaultMaxEventSize, a malformed array):
		// the rest is relayed as it is, not observed.
		if u.tee {
			_, _ = io.Copy(io.Discard, rest)
		} else {
			u.flushPending() // the partial event's raw bytes, then the decoder's buffer and the body as they come
			_, _ = io.Copy(writerTo{u}, rest)
		}
	}
	u.flushPending()
	switch {
	case u.werr != nil:
		res.End = vocab.EndClientDropped
	case u.err == nil:
		res.End = vocab.EndCompleted
	case done:
		// The terminal event was relayed: the client has the whole answer, whoever closed first.
		res.End = vocab.EndCompleted
	case ctx.Err() != nil:
		res.End = vocab.EndClientDropped
	default:
		// The relay is byte for byte, so the client cannot be told in its dialect; the connection is aborted.
		res.End, res.Abort = vocab.EndUpstreamInterrupted, true
	}
	if p.billable { // a stored response replayed is not billed again
		res.Usage, res.UsageFound = bill.Usage()
		if b, ok := bill.(interface{ OutputReported() bool }); ok { // beta: message_start's output is a placeholder
			res.OutputUnreported = res.UsageFound && !b.OutputReported()
		}
	}
	if p.text.on {
		res.Output, res.OutputBytes = p.text.b.String(), p.text.total
	}
	if failed && res.End == vocab.EndCompleted {
		// An in-stream error: after delivered output the upstream interrupted a generation the client
		// partly got (billed: reported usage, else local counting of what was relayed); before any, it failed.
		res.End = vocab.EndUpstreamError
		if p.text.total > 0 || (res.UsageFound && res.Usage.Output > 0) {
			res.End = vocab.EndUpstreamInterrupted
		}
	}
}

// withStreamCost returns a final usage event's data with the cost members, priced from the stream's
// billing so far, or false when the client is not told.
func (p *passthroughResponder) withStreamCost(data []byte, slot []string, bill relayBiller) ([]byte, bool) {
	u, found := bill.Usage()
	return withCost(p.cost, &p.costB, data, slot, u, found)
}

// upReader is the upstream body as the stream decoders read it. In tee mode every read is written to the
// client as it arrives and flushed; otherwise (event mode) the events decoded so far (pending) are written
// and flushed before each upstream read. It records how the body ended and whether the client went away.
type upReader struct {
	pre     []byte // the first read, taken before the headers were written (already written in tee mode)
	body    io.Reader
	tee     bool
	pending []byte
	w       io.Writer
	f       http.Flusher
	werr    error // the client went away
	err     error // the upstream body broke (not EOF)
	eof     bool
}

func (u *upReader) Read(b []byte) (int, error) {
	if u.werr != nil {
		return 0, u.werr
	}
	if len(u.pre) > 0 {
		n := copy(b, u.pre)
		u.pre = u.pre[n:]
		return n, nil
	}
	u.flushPending()
	if u.werr != nil {
		return 0, u.werr
	}
	n, err := u.body.Read(b)
	if n > 0 && u.tee {
		u.write(b[:n])
	}
	switch {
	case errors.Is(err, io.EOF):
		u.eof = true
	case err != nil && u.err == nil:
		u.err = err
	}
	if u.werr != nil {
		return n, u.werr
	}
	return n, err
}

// write passes p to the client and flushes.
func (u *upReader) write(p []byte) {
	if len(p) == 0 || u.werr != nil {
		return
	}
	if _, u.werr = u.w.Write(p); u.werr == nil && u.f != nil {
		u.f.Flush()
	}
}

func (u *upReader) flushPending() {
	if len(u.pending) > 0 {
		u.write(u.pending)
		u.pending = u.pending[:0]
	}
}

// writerTo writes to the client through an upReader.
type writerTo struct{ u *upReader }

func (w writerTo) Write(p []byte) (int, error) {
	w.u.write(p)
	if w.u.werr != nil {
		return 0, w.u.werr
	}
	return len(p), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// relayReader returns the relay reader of a stream's dialect (jsonkit.Relay): alpha chat, alpha responses
// and images, beta messages, gamma.
func relayReader(kind vocab.Kind) func([]byte, *jsonkit.Relay) {
	switch kind {
	case vocab.KindAlphaChatCompletions:
		return alpha.ReadChatRelay
	case vocab.KindBetaMessages:
		return beta.ReadRelay
	case vocab.KindGammaGenerateContent:
		return gamma.ReadRelay
	}
	return alpha.ReadResponsesRelay
}
