package translate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"io"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Stream converts one upstream stream into the client's stream. Feed it every upstream event in order and
// flush the client connection after each call; call Finish at a clean upstream end, or Fail when the
// upstream broke. Not safe for concurrent use.
type Stream struct {
	dec      canon.StreamDecoder
	enc      canon.StreamEncoder
	st       *canon.State
	buf      []canon.Event
	usage    canon.Usage
	done     bool
	finished bool // the upstream signalled its end (a finish reason)
	upstream error
	observe  func(name string, data []byte)
	text     func(string)
}

// Biller returns the upstream decoder's billing when it bills from its own decoding (canon.Biller): then
// the stream's usage needs no other reading of the events.
func (s *Stream) Biller() (canon.Biller, bool) {
	b, ok := s.dec.(canon.Biller)
	return b, ok
}

// CollectText sets a function feed calls with the output text of every decoded upstream event (text,
// thinking and tool-argument fragments), for local counting when the upstream reports no output usage.
func (s *Stream) CollectText(f func(text string)) { s.text = f }

// Observe sets a function Pump calls with every upstream event (SSE event name and data, or a gamma array
// element with an empty name) as it was decoded, before converting it: the data plane reads usage from the
// same decoding that produces the client's stream. data is valid only during the call.
func (s *Stream) Observe(f func(name string, data []byte)) { s.observe = f }

// Feed converts one upstream SSE event (alpha, beta, gamma `alt=sse`).
func (s *Stream) Feed(ev sse.Event) error { return s.feed(ev.Name, ev.Data) }

// FeedJSON converts one element of a gamma JSON-array stream (see jsonkit.JSONArrayDecoder).
func (s *Stream) FeedJSON(elem []byte) error { return s.feed("", elem) }

func (s *Stream) feed(name string, data []byte) error {
	if s.done {
		return nil
	}
	var err error
	s.buf, err = s.dec.Decode(name, bytes.TrimSpace(data), s.buf[:0])
	if err != nil {
		return fmt.Errorf("decode upstream stream event %q: %w", name, err)
	}
	for i := range s.buf {
		ev := &s.buf[i]
		switch ev.Type {
		case canon.EvFinish:
			s.finished = true
		case canon.EvUsage:
			s.usage.Merge(ev.Usage)
		case canon.EvText, canon.EvThinking, canon.EvToolArgs:
			if s.text != nil {
				s.text(ev.Text)
			}
		case canon.EvError:
			s.done = true
			s.upstream = ev.Err
			if err := s.enc.Fail(ev.Err); err != nil {
				return fmt.Errorf("write client stream error: %w", err)
			}
			return nil
		}
		if err := s.enc.Emit(ev); err != nil {
			return fmt.Errorf("write client stream: %w", err)
		}
	}
	return nil
}

// Finish writes the client's terminal events (alpha chat usage chunk and `[DONE]`, beta `message_delta` +
// `message_stop`, alpha responses `response.completed`, gamma final chunk / closing `]`). It is a no-op
// after a mid-stream error was relayed.
func (s *Stream) Finish() error {
	if s.done {
		return nil
	}
	s.done = true
	if err := s.enc.Finish(); err != nil {
		return fmt.Errorf("finish client stream: %w", err)
	}
	return nil
}

// Fail writes the client dialect's in-stream error for a broken upstream (err is logged by the caller; the
// client sees a generic upstream error) and ends the stream.
func (s *Stream) Fail(err error) error {
	if s.done {
		return nil
	}
	s.done = true
	e := &canon.APIError{Status: http.StatusBadGateway, Class: canon.ClassServer, Message: "upstream stream interrupted"}
	var ae *canon.APIError
	if errors.As(err, &ae) {
		e = ae
	}
	if werr := s.enc.Fail(e); werr != nil {
		return fmt.Errorf("write client stream error: %w", werr)
	}
	return nil
}

// Complete reports whether the upstream signalled the end of its answer (a finish/stop reason). A stream
// that reaches EOF without it was cut: Pump then relays an in-stream error instead of finishing.
func (s *Stream) Complete() bool { return s.finished }

// UpstreamError reports the upstream's in-stream error, if one was relayed.
func (s *Stream) UpstreamError() error { return s.upstream }

// Usage returns the usage seen so far (latest cumulative values).
func (s *Stream) Usage() Usage { return exportUsage(s.usage) }

// Usage is token usage in canonical form: InputTotal includes cache reads and writes,
// OutputTotal includes reasoning. Known is false when the upstream reported none.
type Usage struct {
	Known       bool
	InputTotal  int64
	CacheRead   int64
	CacheWrite  int64
	OutputTotal int64
	Reasoning   int64
}

func exportUsage(u canon.Usage) Usage {
	return Usage{Known: u.Known, InputTotal: u.InputTotal, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite,
		OutputTotal: u.OutputTotal, Reasoning: u.Reasoning}
}

// Pump is a convenience loop for ModeStream: it decodes the upstream body (SSE, or gamma's JSON array when
// jsonArray is set), feeds the converter, calls flush after every upstream event, and finishes or fails the
// stream. A read error, or an EOF before the upstream's finish reason, is relayed as the client's in-stream
// error and returned (wrapped); so is an event that cannot be converted, after which the rest of the upstream
// still reaches the observer (Observe) for its usage; an in-stream upstream error is relayed and Pump returns
// nil (see UpstreamError).
func (s *Stream) Pump(upstream io.Reader, jsonArray bool, flush func()) error {
	if flush == nil {
		flush = func() {}
	}
	next := sseNext(upstream)
	if jsonArray {
		next = arrayNext(upstream)
	}
	for {
		name, data, err := next()
		if errors.Is(err, io.EOF) {
			if !s.finished && !s.done {
				_ = s.Fail(io.ErrUnexpectedEOF)
				flush()
				return fmt.Errorf("read upstream stream: ended without a finish reason: %w", io.ErrUnexpectedEOF)
			}
			if ferr := s.Finish(); ferr != nil {
				return ferr
			}
			flush()
			return nil
		}
		if err != nil {
			_ = s.Fail(err)
			flush()
			return fmt.Errorf("read upstream stream: %w", err)
		}
		if s.observe != nil {
			s.observe(name, data)
		}
		if err := s.feed(name, data); err != nil {
			// The answer cannot be carried on (an event the translator cannot read, or the client's
			// connection failed): the client's stream ends with an in-stream error, and the rest of the
			// upstream is still read for its usage (drain), so the usage the upstream reports at its end is
			// billed.
			_ = s.Fail(err)
			flush()
			s.drain(next)
			return err
		}
		flush()
		if s.done {
			return nil
		}
	}
}

// drain reads the rest of the upstream stream for its usage only (nothing reaches the client): into the
// observer, and through the decoder when it bills (canon.Biller), whose canonical events are dropped.
func (s *Stream) drain(next func() (string, []byte, error)) {
	_, bills := s.dec.(canon.Biller)
	if s.observe == nil && !bills {
		return
	}
	for {
		name, data, err := next()
		if err != nil {
			return
		}
		if s.observe != nil {
			s.observe(name, data)
		}
		if bills {
			s.buf, _ = s.dec.Decode(name, bytes.TrimSpace(data), s.buf[:0]) // an event it cannot read bills nothing
		}
	}
}

func sseNext(r io.Reader) func() (string, []byte, error) {
	d := sse.NewDecoder(r)
	return func() (string, []byte, error) {
		ev, err := d.Next()
		return ev.Name, ev.Data, err
	}
}

func arrayNext(r io.Reader) func() (string, []byte, error) {
	d := jsonkit.NewJSONArrayDecoder(r)
	return func() (string, []byte, error) {
		el, err := d.Next()
		return "", el, err
	}
}

// Keepalive writes one keepalive in the client's stream dialect (ModeSynthesize), unless edge mode is on:
// beta `event: ping` + `data: {"type":"ping"}`; alpha chat and alpha responses an SSE comment line
// `: keepalive` (no blank line after it); gamma `alt=sse` two CRLF blank lines (the genai SDK rejects any non-empty
// line that is not `data:`, and splits on blank-line pairs, so the keepalive is the empty event "\r\n\r\n");
// gamma JSON array the opening `[` once, then a newline (whitespace inside the array).
func (t *Translator) Keepalive(w io.Writer) error {
	if t.opts.Edge {
		return nil
	}
	var err error
	switch t.pair.Kind {
	case vocab.KindBetaMessages:
		_, err = io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
	case vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses:
		err = sse.WriteComment(w, "keepalive")
	case vocab.KindGammaGenerateContent:
		if t.st.GammaSSE {
			// An empty event, framed like the data events ("\r\n\r\n"). The genai SDK splits the body on
			// "\n\n" / "\r\n\r\n" (not on lines): an empty token is skipped, but a single blank line would
			// be glued to the next event ("\r\ndata: ...") and fail as an invalid chunk.
			_, err = io.WriteString(w, "\r\n\r\n")
		} else if !t.arrOpen {
			t.arrOpen = true
			_, err = io.WriteString(w, "[\n")
		} else {
			_, err = io.WriteString(w, "\n")
		}
	}
	if err != nil {
		return fmt.Errorf("write keepalive: %w", err)
	}
	return nil
}

// RunKeepalive calls keepalive every interval (DefaultKeepaliveInterval when <= 0) until ctx is done, then
// returns. It does nothing in edge mode. The caller must serialise keepalive with its other writes (stop
// RunKeepalive, by cancelling ctx and waiting for it to return, before calling Synthesize).
func (t *Translator) RunKeepalive(ctx context.Context, interval time.Duration, w io.Writer, flush func()) {
	if t.opts.Edge {
		return
	}
	RunKeepalive(ctx, interval, func() error {
		if err := t.Keepalive(w); err != nil {
			return err
		}
		if flush != nil {
			flush()
		}
		return nil
	})
}

// RunKeepalive calls tick every interval (DefaultKeepaliveInterval when <= 0) until ctx is done or tick fails.
func RunKeepalive(ctx context.Context, interval time.Duration, tick func() error) {
	if interval <= 0 {
		interval = DefaultKeepaliveInterval
	}
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			if tick() != nil {
				return
			}
		}
	}
}

// Synthesize writes the client's complete stream, in its exact wire shape, from one buffered upstream
// response (ModeSynthesize). A non-2xx status yields the client dialect's in-stream error instead (the
// client already holds a 200 once a keepalive was sent; callers that sent nothing yet may prefer Error).
func (t *Translator) Synthesize(w io.Writer, status int, header http.Header, body []byte) error {
	enc := t.client.NewEncoder(w, t.st)
	if ga, ok := enc.(*gamma.Encoder); ok && t.arrOpen {
		ga.Opened = true
	}
	if status < 200 || status > 299 {
		if err := enc.Fail(canon.ParseUpstreamError(status, header, body)); err != nil {
			return fmt.Errorf("synthesize error stream: %w", err)
		}
		return nil
	}
	r, err := t.upstream.DecodeResponse(body, t.st)
	if err == nil {
		t.billed = r.Billed
	}
	if err != nil {
		_ = enc.Fail(&canon.APIError{Status: http.StatusBadGateway, Class: canon.ClassServer, Message: "malformed upstream response"})
		return fmt.Errorf("synthesize stream: %w", err)
	}
	for _, ev := range responseEvents(r) {
		if err := enc.Emit(&ev); err != nil {
			return fmt.Errorf("synthesize stream: %w", err)
		}
	}
	if err := enc.Finish(); err != nil {
		return fmt.Errorf("synthesize stream: %w", err)
	}
	return nil
}

// responseEvents replays a buffered response as canonical stream events.
func responseEvents(r *canon.Response) []canon.Event {
	evs := make([]canon.Event, 0, len(r.Parts)*3+4)
	evs = append(evs, canon.Event{Type: canon.EvStart, ID: r.ID, Model: r.Model, ServiceTier: r.ServiceTier})
	if r.Usage.Known {
		evs = append(evs, canon.Event{Type: canon.EvUsage, Usage: r.Usage})
	}
	for i, p := range r.Parts {
		switch p.Type {
		case canon.PartText:
			evs = append(evs, canon.Event{Type: canon.EvText, Index: i, Text: p.Text, ItemID: p.Get().ItemID}, canon.Event{Type: canon.EvBlockStop, Index: i})
		case canon.PartThinking:
			if p.Text != "" {
				evs = append(evs, canon.Event{Type: canon.EvThinking, Index: i, Text: p.Text, ItemID: p.Get().ItemID})
			}
			if p.Signature != "" {
				evs = append(evs, canon.Event{Type: canon.EvSignature, Index: i, Text: p.Signature, ItemID: p.Get().ItemID})
			}
			evs = append(evs, canon.Event{Type: canon.EvBlockStop, Index: i})
		case canon.PartRedactedThinking:
			evs = append(evs, canon.Event{Type: canon.EvRedacted, Index: i, Text: p.Data}, canon.Event{Type: canon.EvBlockStop, Index: i})
		case canon.PartToolCall:
			evs = append(evs, canon.Event{Type: canon.EvToolStart, Index: i, CallID: p.CallID, Name: p.Name, ItemID: p.Get().ItemID},
				canon.Event{Type: canon.EvToolArgs, Index: i, Text: string(p.Args)}, canon.Event{Type: canon.EvBlockStop, Index: i})
		}
	}
	if r.Refusal != "" {
		evs = append(evs, canon.Event{Type: canon.EvText, Index: len(r.Parts), Text: r.Refusal})
	}
	evs = append(evs, canon.Event{Type: canon.EvFinish, Finish: r.Finish, StopSequence: r.StopSequence})
	return evs
}

// SynthesizeWhile runs the whole ModeSynthesize flow: it sends keepalives every interval (none in edge mode)
// while fetch obtains the buffered upstream response, stops them, then writes the synthesised stream (or
// the in-stream error for a non-2xx status). A fetch error is relayed as an in-stream upstream error and
// returned. flush is called after every write. The caller must have written the response headers first
// (ContentType, status 200): the first keepalive commits them.
func (t *Translator) SynthesizeWhile(ctx context.Context, interval time.Duration, w io.Writer, flush func(),
	fetch func(context.Context) (status int, header http.Header, body []byte, err error)) error {
	if flush == nil {
		flush = func() {}
	}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.RunKeepalive(kctx, interval, w, flush)
	}()
	status, header, body, err := fetch(ctx)
	stop()
	<-done
	if err != nil {
		enc := t.client.NewEncoder(w, t.st)
		if ga, ok := enc.(*gamma.Encoder); ok && t.arrOpen {
			ga.Opened = true
		}
		_ = enc.Fail(&canon.APIError{Status: http.StatusBadGateway, Class: canon.ClassServer, Message: "upstream request failed"})
		flush()
		return fmt.Errorf("fetch buffered upstream: %w", err)
	}
	err = t.Synthesize(w, status, header, body)
	flush()
	return err
}
