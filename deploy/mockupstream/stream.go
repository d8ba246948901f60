package mockupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// loremWords is the fixed vocabulary of generated output; one word is one output token.
var loremWords = [...]string{
	"lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do", "eiusmod",
	"tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua", "enim", "ad", "minim", "veniam",
	"quis", "nostrud", "exercitation", "ullamco", "laboris", "nisi", "aliquip", "ex", "ea", "commodo",
	"consequat", "duis", "aute", "irure", "in", "reprehenderit", "voluptate", "velit", "esse", "cillum",
	"fugiat", "nulla", "pariatur", "excepteur", "sint", "occaecat", "cupidatat", "non", "proident", "sunt",
	"culpa", "qui", "officia", "deserunt", "mollit", "anim", "id", "est", "laborum",
}

// lorem returns n text deltas ("Lorem", " ipsum", ...) starting at a position derived from seed.
func lorem(seed uint64, n int) []string {
	out := make([]string, n)
	start := int(seed % uint64(len(loremWords)))
	for i := range n {
		w := loremWords[(start+i)%len(loremWords)]
		if i == 0 {
			out[i] = strings.ToUpper(w[:1]) + w[1:]
		} else {
			out[i] = " " + w
		}
	}
	if n > 0 {
		out[n-1] += "."
	}
	return out
}

// tokensOf is the mock tokenizer: ceil(bytes/4), at least 1 for non-empty input.
func tokensOf(n int) int {
	return (n + 3) / 4
}

// splitFragments cuts s into at most n pieces of roughly equal size (argument deltas).
func splitFragments(s string, n int) []string {
	if n < 1 {
		n = 1
	}
	size := (len(s) + n - 1) / n
	if size == 0 {
		return []string{s}
	}
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	return append(out, s)
}

// framing selects how stream events are written.
type framing int

const (
	framingData      framing = iota // "data: <json>\n\n" (alpha chat, gamma alt=sse)
	framingNamed                    // "event: <type>\ndata: <json>\n\n" (alpha responses/images, beta)
	framingJSONArray                // gamma without alt: "[" chunk ",\r\n" chunk ... "]"
	// framingEventStream is AWS event-stream (Bedrock): one binary frame per event, written by the AWS SDK's
	// encoder; the event's JSON is the payload, its name the :event-type (InvokeModelWithResponseStream
	// wraps it: a "chunk" event whose payload is {"bytes": base64 of the event's JSON}).
	framingEventStream
)

// esException is an event-stream exception frame (Bedrock's in-stream error).
type esException struct {
	Type    string // :exception-type, e.g. modelStreamErrorException
	Message string
}

// streamer writes events, flushing each, and applies the stream controls.
type streamer struct {
	x     *exchange
	mode  framing
	rc    *http.ResponseController
	buf   bytes.Buffer
	enc   *json.Encoder
	errFn func(seq int) (name string, v any) // the dialect's in-stream error event
	seq   int                                // events written
	es    *eventstream.Encoder               // framingEventStream
	wrap  bool                               // framingEventStream: InvokeModel's base64 "chunk" wrapping
}

func (x *exchange) startStream(mode framing, errFn func(int) (string, any)) *streamer {
	st := &streamer{x: x, mode: mode, rc: http.NewResponseController(x.w), errFn: errFn}
	st.enc = json.NewEncoder(&st.buf)
	st.enc.SetEscapeHTML(false)
	h := x.w.Header()
	switch mode {
	case framingJSONArray:
		h.Set("Content-Type", "application/json; charset=UTF-8")
	case framingEventStream:
		st.es = eventstream.NewEncoder()
		h.Set("Content-Type", "application/vnd.amazon.eventstream")
		h.Set("x-amzn-RequestId", x.bedrockRequestID())
		if errFn != nil {
			st.errFn = func(int) (string, any) {
				return "", esException{Type: "modelStreamErrorException", Message: "The model stream failed."}
			}
		}
	default:
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
	}
	x.stream = true
	x.w.WriteHeader(http.StatusOK)
	x.status = http.StatusOK
	_ = st.rc.Flush()
	return st
}

// event writes one event. It returns errStopped when the stream must end now (the mock cut it, emitted an
// in-stream error, or the client went away); the handler then returns without its terminal event.
func (st *streamer) event(name string, v any) error {
	x := st.x
	if st.seq == x.ctl.disconnect {
		st.abort()
		return errStopped
	}
	if st.stalled() {
		return errStopped
	}
	if st.seq == x.ctl.streamError && st.errFn != nil {
		x.erred = true
		en, ev := st.errFn(st.seq)
		if err := st.write(en, ev); err != nil {
			return err
		}
		if st.mode == framingJSONArray {
			_, _ = x.w.Write([]byte("]"))
			_ = st.rc.Flush()
		}
		x.completed = true
		return errStopped
	}
	if st.seq > 0 && !x.sleep(x.ctl.chunkDelay) {
		return errStopped
	}
	return st.write(name, v)
}

func (st *streamer) write(name string, v any) error {
	x := st.x
	st.buf.Reset()
	switch st.mode {
	case framingNamed:
		st.buf.WriteString("event: ")
		st.buf.WriteString(name)
		st.buf.WriteString("\ndata: ")
	case framingData:
		st.buf.WriteString("data: ")
	case framingJSONArray:
		if st.seq == 0 {
			st.buf.WriteString("[")
		} else {
			st.buf.WriteString(",\r\n")
		}
	}
	if st.mode == framingEventStream {
		if err := st.eventStreamFrame(name, v); err != nil {
			return err
		}
	} else if err := st.enc.Encode(v); err != nil {
		return fmt.Errorf("encode stream event %s: %w", name, err)
	}
	// Encode appended "\n"; SSE wants a blank line after the data line, the array wants nothing.
	switch st.mode {
	case framingJSONArray:
		st.buf.Truncate(st.buf.Len() - 1)
	case framingEventStream:
	default:
		st.buf.WriteString("\n")
	}
	if _, err := x.w.Write(st.buf.Bytes()); err != nil {
		x.cancelled = true
		return errStopped
	}
	if err := st.rc.Flush(); err != nil {
		x.cancelled = true
		return errStopped
	}
	st.seq++
	x.events = st.seq
	return nil
}

// raw writes a literal frame (the alpha chat "[DONE]" sentinel) and flushes.
func (st *streamer) raw(s string) error {
	if st.seq == st.x.ctl.disconnect {
		st.abort()
		return errStopped
	}
	if st.stalled() {
		return errStopped
	}
	if st.seq > 0 && !st.x.sleep(st.x.ctl.chunkDelay) {
		return errStopped
	}
	if _, err := st.x.w.Write([]byte(s)); err != nil {
		st.x.cancelled = true
		return errStopped
	}
	if err := st.rc.Flush(); err != nil {
		st.x.cancelled = true
		return errStopped
	}
	return nil
}

// maxStall bounds x-mock-stall-after: a client that never leaves gets the rest of the stream then.
const maxStall = 5 * time.Minute

// stalled holds the stream at x-mock-stall-after until the client goes away (true: stop now).
func (st *streamer) stalled() bool {
	if st.seq != st.x.ctl.stall {
		return false
	}
	st.x.ctl.stall = -1
	return !st.x.sleep(maxStall)
}

// end closes the stream normally.
func (st *streamer) end() {
	if st.mode == framingJSONArray {
		if st.seq == 0 {
			_ = st.raw("[")
		}
		if err := st.raw("]"); err != nil {
			return
		}
	}
	st.x.completed = true
	if d := st.x.ctl.linger; d > 0 { // the answer is complete: a client leaving now is no cancellation
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-st.x.r.Context().Done():
		}
	}
}

// abort cuts the connection without a terminal event or the final chunk.
func (st *streamer) abort() { st.x.abort() }

// abort cuts the client connection: whatever was flushed stays, nothing else follows (no terminal event,
// no final chunk; before any byte, the client sees a connection error).
func (x *exchange) abort() {
	x.aborted = true
	conn, _, err := http.NewResponseController(x.w).Hijack()
	if err != nil {
		// HTTP/2 or a writer without Hijack: abort the way net/http knows (ServeHTTP's deferred
		// bookkeeping still runs while the panic unwinds).
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// fields is a JSON object written with its keys in the given order (key, value, key, value, ...), so stream
// events read like the real ones ("type" first) without a struct per event type.
type fields []any

// MarshalJSON implements json.Marshaler.
func (f fields) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 64*len(f))
	b = append(b, '{')
	for i := 0; i+1 < len(f); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		k, ok := f[i].(string)
		if !ok {
			return nil, fmt.Errorf("fields: key %d is %T, not a string", i/2, f[i])
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("fields: key %q: %w", k, err)
		}
		vb, err := json.Marshal(f[i+1])
		if err != nil {
			return nil, fmt.Errorf("fields: value of %q: %w", k, err)
		}
		b = append(append(append(b, kb...), ':'), vb...)
	}
	return append(b, '}'), nil
}

// eventStreamFrame encodes v as one event-stream message into st.buf.
func (st *streamer) eventStreamFrame(name string, v any) error {
	msg := eventstream.Message{}
	if ex, ok := v.(esException); ok {
		msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
		msg.Headers.Set(":exception-type", eventstream.StringValue(ex.Type))
		v = map[string]string{"message": ex.Message}
	} else {
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode stream event %s: %w", name, err)
	}
	if st.wrap && msg.Headers.Get(":exception-type") == nil {
		name = "chunk"
		if payload, err = json.Marshal(map[string][]byte{"bytes": payload}); err != nil {
			return fmt.Errorf("encode stream chunk: %w", err)
		}
	}
	if msg.Headers.Get(":exception-type") == nil {
		msg.Headers.Set(":event-type", eventstream.StringValue(name))
	}
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	msg.Payload = payload
	if err := st.es.Encode(&st.buf, msg); err != nil {
		return fmt.Errorf("encode event-stream frame %s: %w", name, err)
	}
	return nil
}
