package sse

import (
	"errors"
	"fmt"
	"io"
)

// ErrBadField is returned when an event name or id would break the framing (it contains CR, LF or NUL).
var ErrBadField = errors.New("sse: field contains CR, LF or NUL")

// AppendEvent appends one event in canonical framing: an optional `event:` line, one `data:` line per line
// of data (data lines are split on CR, LF and CRLF), and the terminating blank line. Callers that emit
// JSON (which has no raw newlines) get exactly `event: x\ndata: {...}\n\n`.
func AppendEvent(dst []byte, name string, data []byte) []byte {
	if name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, '\n')
	}
	for {
		i := lineEnd(data)
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n')
}

// WriteEvent writes one event to w (see AppendEvent). It rejects names that would break the framing.
func WriteEvent(w io.Writer, name string, data []byte) error {
	if !validField(name) {
		return fmt.Errorf("write event %q: %w", name, ErrBadField)
	}
	var stack [512]byte
	if _, err := w.Write(AppendEvent(stack[:0], name, data)); err != nil {
		return fmt.Errorf("write event %q: %w", name, err)
	}
	return nil
}

// WriteEventID writes one event with an `id:` line.
func WriteEventID(w io.Writer, name, id string, data []byte) error {
	if !validField(name) || !validField(id) {
		return fmt.Errorf("write event %q: %w", name, ErrBadField)
	}
	b := make([]byte, 0, len(data)+len(name)+len(id)+32)
	b = append(b, "id: "...)
	b = append(b, id...)
	b = append(b, '\n')
	b = AppendEvent(b, name, data)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write event %q: %w", name, err)
	}
	return nil
}

// WriteComment writes a comment line (`: text\n`) WITHOUT a following blank line. A comment alone is a
// complete no-op for conforming parsers; omitting the blank line also keeps decoders that dispatch an empty
// event on every blank line (openai-go v1's ssestream does, then fails to unmarshal it) working.
func WriteComment(w io.Writer, text string) error {
	if !validField(text) {
		return fmt.Errorf("write comment: %w", ErrBadField)
	}
	if _, err := io.WriteString(w, ": "+text+"\n"); err != nil {
		return fmt.Errorf("write comment: %w", err)
	}
	return nil
}

func validField(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}
