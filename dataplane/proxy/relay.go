package proxy

import (
	"bytes"

	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
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
	isError bool // the current event is named "error"
	// failed is set once the upstream sent its dialect's in-stream error event; done once it sent its
	// dialect's terminal event (the client then has the whole answer).
	failed, done bool

	// out, when set, makes the tap the relay's writer: the raw bytes of each event are passed to out once
	// the event is complete, unless drop says the event is to be left out (the usage chunk the client did
	// not ask for). An event whose raw bytes exceed maxTapPending is passed on as it comes, unfiltered.
	out  func([]byte) error
	drop func(data []byte) bool
	raw  []byte
	// werr is the first error out returned (the client went away); nothing more is written after it.
	werr error
}

// emit passes the raw bytes held so far to out, unless the event they end is dropped.
func (t *sseTap) emit(dropped bool) {
	if !dropped && len(t.raw) > 0 && t.werr == nil {
		t.werr = t.out(t.raw)
	}
	t.raw = t.raw[:0]
}

func (t *sseTap) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if t.out != nil {
			if i < 0 {
				t.raw = append(t.raw, p...)
			} else {
				t.raw = append(t.raw, p[:i+1]...)
			}
			if len(t.raw) > maxTapPending {
				t.emit(false)
			}
		}
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
			t.failed = t.failed || t.isError || isStreamError(t.data)
			t.done = t.done || isStreamEnd(t.data)
		}
		if t.out != nil {
			t.emit(t.hasData && t.drop != nil && t.drop(t.data))
		}
		t.data, t.hasData, t.isError = t.data[:0], false, false
		return
	}
	if name, ok := bytes.CutPrefix(ln, []byte("event:")); ok {
		t.isError = string(bytes.TrimSpace(name)) == "error"
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
		t.failed = t.failed || t.isError || isStreamError(t.data)
		t.done = t.done || isStreamEnd(t.data)
	}
	if t.out != nil {
		t.emit(t.hasData && t.drop != nil && t.drop(t.data))
	}
	t.data, t.hasData, t.line, t.isError = t.data[:0], false, t.line[:0], false
}

// isStreamError reports whether an event payload is its dialect's in-stream failure: a top-level "error"
// member (alpha chat chunks, gamma chunks, beta and alpha responses error events) or an alpha responses
// "response.failed" event. It scans without decoding.
func isStreamError(data []byte) bool {
	if start, end, found, err := vocab.TopLevelField(data, "error"); err == nil && found {
		return string(data[start:end]) != "null"
	}
	if start, end, found, err := vocab.TopLevelField(data, "type"); err == nil && found {
		if v, ok := vocab.StringValue(data[start:end]); ok {
			return string(v) == "error" || string(v) == "response.failed"
		}
	}
	return false
}

// isUsageChunk reports whether an alpha chat chunk is the usage chunk include_usage adds: an empty
// choices array and a non-null usage member.
func isUsageChunk(data []byte) bool {
	start, end, found, err := vocab.TopLevelField(data, "usage")
	if err != nil || !found || string(data[start:end]) == "null" {
		return false
	}
	start, end, found, err = vocab.TopLevelField(data, "choices")
	return err == nil && found && len(bytes.TrimSpace(data[start+1:end-1])) == 0 && data[start] == '['
}

// isStreamEnd reports whether an event payload is its dialect's terminal event: alpha chat's "[DONE]", beta's
// message_stop, alpha responses' response.completed / response.incomplete, or a gamma chunk with a
// finishReason (gamma's last chunk; a JSON-array stream ends with its closing bracket instead).
func isStreamEnd(data []byte) bool {
	if string(data) == "[DONE]" {
		return true
	}
	if start, end, found, err := vocab.TopLevelField(data, "type"); err == nil && found {
		if v, ok := vocab.StringValue(data[start:end]); ok {
			switch string(v) {
			case "message_stop", "response.completed", "response.incomplete":
				return true
			}
		}
		return false
	}
	return bytes.Contains(data, []byte(`"finishReason"`))
}

// arrayTap observes a gamma JSON-array stream ("[{…},\r\n{…}]") and hands each top-level element to the
// accumulator.
type arrayTap struct {
	acc      usage.Accumulator
	failed   bool // an element was an in-stream error
	done     bool // the array was closed
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
					t.failed = t.failed || isStreamError(t.elem)
				}
				t.elem = t.elem[:0]
			}
			if t.depth == 0 {
				t.done = true
			}
			if t.depth < 0 {
				t.depth = 0
			}
		}
	}
}
