package proxy

import (
	"bytes"

	"github.com/tollgate/tollgate/shared/usage"
)

// maxTapPending bounds what a tap holds for one incomplete event or array element; a larger one is
// dropped from usage observation (the bytes still reach the client unchanged).
const maxTapPending = 8 << 20

// sseTap observes a relayed SSE byte stream: it splits it into events and hands each event's data to the
// usage accumulator. It never changes the bytes the client gets.
type sseTap struct {
	acc     usage.Accumulator
	line    []byte // incomplete line carried over
	data    []byte // data of the event being read
	hasData bool
	skip    bool // current line overflowed
}

func (t *sseTap) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(t.line)+len(p) > maxTapPending {
				t.line, t.skip = t.line[:0], true
			} else {
				t.line = append(t.line, p...)
			}
			return
		}
		var ln []byte
		if len(t.line) > 0 {
			t.line = append(t.line, p[:i]...)
			ln = t.line
		} else {
			ln = p[:i]
		}
		p = p[i+1:]
		if !t.skip {
			t.onLine(bytes.TrimSuffix(ln, []byte{'\r'}))
		}
		t.line, t.skip = t.line[:0], false
	}
}

func (t *sseTap) onLine(ln []byte) {
	if len(ln) == 0 {
		if t.hasData {
			_ = t.acc.Observe(t.data) // a payload that is not JSON leaves usage unchanged
		}
		t.data, t.hasData = t.data[:0], false
		return
	}
	v, ok := bytes.CutPrefix(ln, []byte("data:"))
	if !ok {
		return
	}
	v = bytes.TrimPrefix(v, []byte{' '})
	if t.hasData {
		t.data = append(t.data, '\n')
	}
	if len(t.data)+len(v) <= maxTapPending {
		t.data = append(t.data, v...)
	}
	t.hasData = true
}

// finish dispatches a last event that was not followed by a blank line.
func (t *sseTap) finish() {
	if len(t.line) > 0 && !t.skip {
		t.onLine(bytes.TrimSuffix(t.line, []byte{'\r'}))
	}
	if t.hasData {
		_ = t.acc.Observe(t.data)
	}
	t.data, t.hasData, t.line = t.data[:0], false, t.line[:0]
}

// arrayTap observes a gamma JSON-array stream ("[{…},\r\n{…}]") and hands each top-level element to the
// accumulator.
type arrayTap struct {
	acc      usage.Accumulator
	elem     []byte
	depth    int
	inString bool
	escape   bool
	overflow bool
}

func (t *arrayTap) write(p []byte) {
	for _, c := range p {
		if t.depth >= 2 {
			if len(t.elem) < maxTapPending {
				t.elem = append(t.elem, c)
			} else {
				t.overflow = true
			}
		}
		switch {
		case t.inString:
			switch {
			case t.escape:
				t.escape = false
			case c == '\\':
				t.escape = true
			case c == '"':
				t.inString = false
			}
		case c == '"':
			t.inString = true
		case c == '{' || c == '[':
			t.depth++
			if t.depth == 2 {
				t.elem = append(t.elem[:0], c)
				t.overflow = false
			}
		case c == '}' || c == ']':
			t.depth--
			if t.depth == 1 {
				if !t.overflow {
					_ = t.acc.Observe(t.elem)
				}
				t.elem = t.elem[:0]
			}
			if t.depth < 0 {
				t.depth = 0
			}
		}
	}
}
