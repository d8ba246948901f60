// Package sse owns the byte-level stream framings the data plane relays: a streaming Server-Sent Events
// decoder and encoder (text/event-stream, as used by every alpha and beta stream and by gamma `alt=sse`)
// and an incremental decoder for gamma's JSON-array stream framing (`[{...},\r\n{...}]` without `alt=sse`).
//
// The decoders never buffer more than one event (or one array element) and bound that by a maximum size,
// so a hostile or broken upstream cannot make the gateway allocate without limit.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxEventSize bounds one decoded event (all its data lines) or one JSON-array element.
const DefaultMaxEventSize = 8 << 20

// ErrEventTooLarge is returned (wrapped) when an event or array element exceeds the decoder's maximum size.
var ErrEventTooLarge = errors.New("sse: event exceeds maximum size")

// Event is one dispatched SSE event. Name is the `event:` field ("" when absent), Data the `data:` lines
// joined by "\n", ID the last `id:` field seen (it persists across events, as the SSE specification says).
type Event struct {
	Name string
	Data []byte
	ID   string
}

// Decoder reads SSE events from a stream. It accepts CR, LF and CRLF line endings, multi-line data,
// comments (lines starting with ':'), fields without a space after the colon, and a final event that is not
// followed by a blank line at EOF. It never blocks waiting for a byte it does not need: a CR line ending is
// resolved against a following LF only when the next line is read.
type Decoder struct {
	r    *bufio.Reader
	max  int
	line []byte
	data []byte
	name []byte
	// nameS is the last event name as a string: a stream repeats a few names, so an event whose name is
	// the previous one's shares its string instead of allocating one.
	nameS   string
	id      string
	skipLF  bool
	err     error
	hasData bool
	// keepRaw makes the decoder keep the raw bytes it consumed since the previous Next (Raw).
	keepRaw bool
	raw     []byte
}

// NewDecoder returns a decoder reading from r with DefaultMaxEventSize.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 32<<10), max: DefaultMaxEventSize}
}

// Reset makes the decoder read a new stream from r, keeping its buffers (and KeepRaw), so decoders can be
// pooled. The maximum event size is kept too.
func (d *Decoder) Reset(r io.Reader) {
	d.r.Reset(r)
	d.line, d.data, d.name, d.raw = d.line[:0], d.data[:0], d.name[:0], d.raw[:0]
	d.id, d.skipLF, d.err, d.hasData = "", false, nil, false
}

// Footprint is the memory its buffers hold beyond the read buffer (a pool drops a decoder that grew large).
func (d *Decoder) Footprint() int { return cap(d.line) + cap(d.data) + cap(d.raw) }

// SetMaxEventSize changes the maximum size of one event; n <= 0 restores the default.
func (d *Decoder) SetMaxEventSize(n int) {
	if n <= 0 {
		n = DefaultMaxEventSize
	}
	d.max = n
}

// KeepRaw makes the decoder keep the raw bytes of each event (see Raw), so a relay can pass an event on
// byte for byte, or leave it out. The raw bytes between two events count towards the maximum event size.
func (d *Decoder) KeepRaw() { d.keepRaw = true }

// Raw returns the bytes consumed by the last call to Next (with KeepRaw): the event's lines and anything
// before them since the previous event (comments, blank lines); after the last event, what followed it. A
// CR line ending's LF may be counted with the next call. It aliases an internal buffer valid until the next
// call to Next.
func (d *Decoder) Raw() []byte { return d.raw }

// Rest returns a reader of the bytes the decoder has not consumed yet (its buffer, then the underlying
// reader), for a caller that stops decoding and copies the remainder as is.
func (d *Decoder) Rest() io.Reader { return d.r }

// discard consumes n buffered bytes, keeping them in raw when asked.
func (d *Decoder) discard(n int) error {
	if d.keepRaw {
		if len(d.raw)+n > d.max {
			d.err = fmt.Errorf("decode event of more than %d bytes: %w", d.max, ErrEventTooLarge)
			return d.err
		}
		b, _ := d.r.Peek(n)
		d.raw = append(d.raw, b...)
	}
	_, _ = d.r.Discard(n)
	return nil
}

// Next returns the next event. Event.Data aliases an internal buffer and is valid only until the next call
// to Next; copy it to keep it. At the end of the stream Next returns io.EOF; after any error it keeps
// returning that error.
func (d *Decoder) Next() (Event, error) {
	d.raw = d.raw[:0]
	if d.err != nil {
		return Event{}, d.err
	}
	d.data = d.data[:0]
	d.name = d.name[:0]
	d.hasData = false
	for {
		line, err := d.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && d.hasData {
				// Final event without its blank line: dispatch it, report EOF next time.
				d.err = io.EOF
				return d.event(), nil
			}
			d.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			if !d.hasData {
				d.name = d.name[:0]
				continue
			}
			return d.event(), nil
		}
		if line[0] == ':' {
			continue // comment
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if len(d.data)+len(value)+1 > d.max {
				d.err = fmt.Errorf("decode event of more than %d bytes: %w", d.max, ErrEventTooLarge)
				return Event{}, d.err
			}
			d.data = append(d.data, value...)
			d.data = append(d.data, '\n')
			d.hasData = true
		case "event":
			d.name = append(d.name[:0], value...)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				d.id = string(value)
			}
		}
		// "retry" and unknown fields are ignored.
	}
}

func (d *Decoder) event() Event {
	data := d.data
	if n := len(data); n > 0 && data[n-1] == '\n' {
		data = data[:n-1]
	}
	if string(d.name) != d.nameS {
		d.nameS = string(d.name)
	}
	return Event{Name: d.nameS, Data: data, ID: d.id}
}

// readLine returns the next line without its terminator. A line cut by EOF is returned as a line; a bare
// EOF is returned as io.EOF.
func (d *Decoder) readLine() ([]byte, error) {
	d.line = d.line[:0]
	for {
		if d.skipLF {
			b, err := d.r.Peek(1)
			if err != nil {
				if len(d.line) > 0 && errors.Is(err, io.EOF) {
					return d.line, nil
				}
				return nil, err
			}
			if b[0] == '\n' {
				if err := d.discard(1); err != nil {
					return nil, err
				}
			}
			d.skipLF = false
		}
		if d.r.Buffered() == 0 {
			if _, err := d.r.Peek(1); err != nil {
				if len(d.line) > 0 && errors.Is(err, io.EOF) {
					return d.line, nil
				}
				return nil, err
			}
		}
		buf, _ := d.r.Peek(d.r.Buffered())
		i := lineEnd(buf)
		if i < 0 {
			if len(d.line)+len(buf) > d.max {
				d.err = fmt.Errorf("decode line of more than %d bytes: %w", d.max, ErrEventTooLarge)
				return nil, d.err
			}
			d.line = append(d.line, buf...)
			if err := d.discard(len(buf)); err != nil {
				return nil, err
			}
			continue
		}
		if len(d.line)+i > d.max {
			d.err = fmt.Errorf("decode line of more than %d bytes: %w", d.max, ErrEventTooLarge)
			return nil, d.err
		}
		d.line = append(d.line, buf[:i]...)
		if buf[i] == '\r' {
			d.skipLF = true
		}
		if err := d.discard(i + 1); err != nil {
			return nil, err
		}
		return d.line, nil
	}
}

// lineEnd is the index of the first CR or LF in b, or -1: bytes.IndexAny(b, "\r\n") with two vectorised
// byte searches instead of IndexAny's byte-at-a-time loop (a fifth of a translated stream event's
// instructions; FuzzLineEnd).
func lineEnd(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	if n < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if r := bytes.IndexByte(b[:n], '\r'); r >= 0 {
		return r
	}
	return n
}
