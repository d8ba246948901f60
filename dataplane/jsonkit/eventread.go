package jsonkit

import (
	"errors"
	"strings"
	"unsafe"
)

// The stream decoders read the common upstream events by hand, with Reader (the one hand-written JSON reader of
// the package, shared with the request decoders), and leave every other event to the general decoder
// (UnmarshalEvent). A fast reader accepts an event only where it decides it exactly as the general decoder
// does, and declines everything else, so the general decoder then decides the event — and reports its
// error — as before; the fast paths change speed, never results (FuzzEventScan, TestEventScanMatchesDecoder):
//   - member names: an exact match of a field it reads; a name it does not read is skipped (after
//     validation), as the general decoder skips unknown members, unless it matches one of the struct's
//     fields case-insensitively (strings.EqualFold): then it declines; a duplicate name declines;
//   - null is the field's zero value (a nil pointer or slice, "", 0, false), as in the general decoder;
//   - any syntax error, invalid UTF-8 (which the general decoder carries through), escaped lone surrogate,
//     number that is not an integer in range, value of another kind or a shape it does not handle declines.
//
// A fast reader first reads the whole event (strings as views of the event's bytes), then maps it to
// canonical events: decoder state changes only once an event is accepted, and the strings that go into
// events are copied then (the event's bytes are the stream reader's buffer, reused for the next event).

// ErrDecline leaves an event to the general decoder.
var ErrDecline = errors.New("event left to the general decoder")

// EventReader reads one upstream event for a fast path.
type EventReader struct{ Reader }

func NewEventReader(data []byte) EventReader { return EventReader{Reader{B: data}} }

// StrView is a decoded string: a view of the event's bytes, or a new string when it had escapes (owned).
type StrView struct {
	S     string `json:"-"`
	owned bool
}

// Keep returns the string to put into an event: a copy of a view.
func (v StrView) Keep() string {
	if v.owned || v.S == "" {
		return v.S
	}
	return string(StringBytes(v.S)) // a copy (one-byte strings come from the runtime's static table)
}

// Owned wraps a string the general decoder already copied.
func Owned(s string) StrView { return StrView{S: s, owned: true} }

// Seen is the set of members of one object a fast reader has read, by name (for a case that reads several
// names as one member, the case's first name). A duplicate declines, as does a thirteenth member (never
// read by a fast reader): the general decoder decides those.
type Seen struct {
	names [12]string
	n     int
}

// Once records member name as read; a duplicate declines.
func (s *Seen) Once(name string) error {
	for _, n := range s.names[:s.n] {
		if n == name {
			return ErrDecline
		}
	}
	if s.n == len(s.names) {
		return ErrDecline
	}
	s.names[s.n] = name
	s.n++
	return nil
}

// Other handles a member the fast reader does not read: skipped, unless it names one of fields
// (case-insensitively), which declines.
func (r *EventReader) Other(name string, fields []string) error {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			ascii = false // a non-ASCII letter may fold to an ASCII one ('K' Kelvin to 'k'): compare all
			break
		}
	}
	for _, f := range fields {
		if (!ascii || len(f) == len(name)) && strings.EqualFold(f, name) {
			return ErrDecline
		}
	}
	return r.Skip()
}

// Str reads a string, or null as "".
func (r *EventReader) Str() (StrView, error) {
	switch r.Peek() {
	case '"':
		start := r.I + 1
		esc, err := r.ScanStr()
		if err != nil {
			return StrView{}, err
		}
		in := r.B[start : r.I-1]
		if esc {
			return StrView{S: Unquote(in), owned: true}, nil
		}
		if len(in) == 0 {
			return StrView{}, nil
		}
		return StrView{S: unsafe.String(&in[0], len(in))}, nil
	case 'n':
		return StrView{}, r.Literal("null")
	}
	return StrView{}, ErrDecline
}

// Num reads an integer, or null as 0.
func (r *EventReader) Num() (int64, error) {
	switch r.Peek() {
	case '0':
		return r.int64Of()
	case 'n':
		return 0, r.Literal("null")
	}
	return 0, ErrDecline
}

// Flag reads a bool, or null as false.
func (r *EventReader) Flag() (bool, error) {
	var v bool
	if r.Peek() == 0 {
		return false, ErrDecline
	}
	err := r.Boolean(&v)
	return v, err
}

// IsNull consumes a null and reports true, or reports false before any other value.
func (r *EventReader) IsNull() (bool, error) {
	if r.Peek() == 'n' {
		return true, r.Literal("null")
	}
	return false, nil
}

// openObj starts an object; false for null (consumed). Any other value declines.
func (r *EventReader) openObj() (bool, error) {
	switch r.Peek() {
	case '{':
		return true, r.Open()
	case 'n':
		return false, r.Literal("null")
	}
	return false, ErrDecline
}

// OpenArr starts an array; false for null (consumed). Any other value declines.
func (r *EventReader) OpenArr() (bool, error) {
	switch r.Peek() {
	case '[':
		return true, r.Open()
	case 'n':
		return false, r.Literal("null")
	}
	return false, ErrDecline
}

// ElemObj positions at the next element of an array, which must be an object (opened); false at the end.
func (r *EventReader) ElemObj(first bool) (bool, error) {
	ok, err := r.elem(first)
	if err != nil || !ok {
		return false, err
	}
	if r.Peek() != '{' {
		return false, ErrDecline
	}
	return true, r.Open()
}

// Event reads the event's top-level object, calling member for each member, then its end.
func (r *EventReader) Event(member func(name string) error) error {
	if r.Peek() != '{' {
		return ErrDecline
	}
	if err := r.Open(); err != nil {
		return err
	}
	if err := r.Fields(member); err != nil {
		return err
	}
	return r.end()
}

// Members reads an object member (null: no members), calling member for each.
func (r *EventReader) Members(member func(name string) error) error {
	ok, err := r.openObj()
	if err != nil || !ok {
		return err
	}
	return r.Fields(member)
}

// Fields reads the members of an opened object.
func (r *EventReader) Fields(member func(name string) error) error {
	for first := true; ; first = false {
		name, ok, err := r.name(first)
		if err != nil || !ok {
			return err
		}
		if err := member(name); err != nil {
			return err
		}
	}
}

// plainName[c] reports whether a member name may hold byte c as it is: printable ASCII but '"' and '\\'.
var plainName = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// name is Reader.Key for the usual member — a short name of printable ASCII without escapes, in one loop over
// its bytes; anything else (an escape, non-ASCII, an error) is read by Reader.Key from the same position.
func (r *EventReader) name(first bool) (string, bool, error) {
	b, i := r.B, r.I
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	if i < len(b) && b[i] == '}' {
		r.I = i + 1
		r.Depth--
		return "", false, nil
	}
	if !first {
		if i >= len(b) || b[i] != ',' {
			return r.Key(first)
		}
		i++
		for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
			i++
		}
	}
	if i >= len(b) || b[i] != '"' {
		return r.Key(first)
	}
	j := i + 1
	for j < len(b) && plainName[b[j]] {
		j++
	}
	if j >= len(b) || b[j] != '"' || j == i+1 {
		return r.Key(first)
	}
	k := j + 1
	for k < len(b) && (b[k] == ' ' || b[k] == '\n' || b[k] == '\r' || b[k] == '\t') {
		k++
	}
	if k >= len(b) || b[k] != ':' {
		return r.Key(first)
	}
	r.I = k + 1
	return unsafe.String(&b[i+1], j-i-1), true, nil // a view: the event's bytes are not modified
}
