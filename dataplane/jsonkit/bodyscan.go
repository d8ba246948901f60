package jsonkit

import (
	"bytes"
	"encoding/json"
)

// bodyUsageKeys are the top-level members the dialects' body billing reads (alpha.BillBody, beta.BillBody,
// gamma.BillBody): alpha and beta "usage" and "service_tier", gamma "usageMetadata". They decode with
// UnmarshalEvent (names matched after unescaping and ignoring case, the last one winning), so BodyScanner
// keeps every member whose decoded name matches one of these ignoring case, in order.
var bodyUsageKeys = [...]string{"usage", "service_tier", "usageMetadata"}

// MaxKeptUsage bounds what a BodyScanner keeps of one response: the usage members of a real response are
// a few hundred bytes; a response whose kept members exceed it yields no usage (Reduced returns nil).
const MaxKeptUsage = 1 << 20

// maxName bounds a member name the scanner reads: the longest spelling of a usage key — every letter a
// six-byte escape — is shorter, so a longer name is never one of them.
const maxName = 6*len("usageMetadata") + 2

// BodyScanner reads a non-streaming response body in pieces, as it is relayed, and keeps only the
// top-level members usage extraction reads, so usage is found however large the body is and anywhere in
// it, in memory bounded by MaxKeptUsage. Reduced returns those members as one JSON object; a dialect's body
// billing of it equals its billing of the whole body when the body is valid JSON. The rest of the body is checked for
// structure only (strings, nesting), not validated.
type BodyScanner struct {
	st    scanState
	depth int  // nesting depth inside the current member's value
	esc   bool // the previous byte was a backslash inside a string
	inStr bool // inside a string within the current value
	keep  bool // the current member is kept
	name  []byte
	long  bool // the current name exceeded maxName
	out   []byte
	over  bool // kept members exceeded MaxKeptUsage
	// closed is set once Reduced closed out.
	closed bool
}

type scanState uint8

const (
	sStart     scanState = iota // before the top-level '{'
	sBeforeKey                  // after '{' or ','
	sKey                        // inside a member name
	sColon                      // after a member name
	sBeforeVal                  // after ':'
	sString                     // inside a string value
	sNested                     // inside an object or array value
	sScalar                     // inside a number or literal
	sAfterVal                   // after a value
	sDone                       // after the closing '}'
	sBad                        // not a JSON object
)

// Reset readies s for another body, keeping its buffers unless they grew large.
func (s *BodyScanner) Reset() {
	out, name := s.out[:0], s.name[:0]
	if cap(out) > 64<<10 {
		out = nil
	}
	*s = BodyScanner{out: out, name: name}
}

// Write feeds the next piece of the body; it never fails.
func (s *BodyScanner) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch s.st {
		case sStart:
			switch {
			case isSpace(c):
			case c == '{':
				s.st = sBeforeKey
				s.out = append(s.out[:0], '{')
			default:
				s.st = sBad
			}
		case sBeforeKey:
			switch {
			case isSpace(c):
			case c == '"':
				s.st, s.name, s.long, s.esc = sKey, s.name[:0], false, false
			case c == '}' && len(s.out) == 1:
				s.st = sDone
			default:
				s.st = sBad
			}
		case sKey:
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.st, s.keep = sColon, !s.long && s.usageKey()
				continue
			}
			if len(s.name) < maxName {
				s.name = append(s.name, c)
			} else {
				s.long = true
			}
		case sColon:
			switch {
			case isSpace(c):
			case c == ':':
				s.st = sBeforeVal
				if s.keep {
					if len(s.out) > 1 {
						s.out = append(s.out, ',')
					}
					s.out = append(s.out, '"')
					s.out = append(s.out, s.name...)
					s.out = append(s.out, '"', ':')
				}
			default:
				s.st = sBad
			}
		case sBeforeVal:
			switch {
			case isSpace(c):
				continue
			case c == '"':
				s.st, s.esc = sString, false
			case c == '{' || c == '[':
				s.st, s.depth, s.inStr, s.esc = sNested, 1, false, false
			case c == '}' || c == ']' || c == ',' || c == ':':
				s.st = sBad
				continue
			default:
				s.st = sScalar
			}
			s.emit(c)
		case sString:
			if !s.esc {
				var ok bool
				if i, ok = s.skipInString(p, i); !ok {
					continue
				}
				c = p[i]
			}
			s.emit(c)
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.st = sAfterVal
			}
		case sNested:
			if s.inStr && !s.esc {
				var ok bool
				if i, ok = s.skipInString(p, i); !ok {
					continue
				}
				c = p[i]
			}
			s.emit(c)
			switch {
			case s.inStr && s.esc:
				s.esc = false
			case s.inStr && c == '\\':
				s.esc = true
			case s.inStr && c == '"':
				s.inStr = false
			case s.inStr:
			case c == '"':
				s.inStr = true
			case c == '{' || c == '[':
				s.depth++
			case c == '}' || c == ']':
				if s.depth--; s.depth == 0 {
					s.st = sAfterVal
				}
			}
		case sScalar:
			if isSpace(c) || c == ',' || c == '}' {
				s.st = sAfterVal
				i-- // the delimiter is the next state's
				continue
			}
			s.emit(c)
		case sAfterVal:
			switch {
			case isSpace(c):
			case c == ',':
				s.st = sBeforeKey
			case c == '}':
				s.st = sDone
			default:
				s.st = sBad
			}
		case sDone:
			if !isSpace(c) {
				s.st = sBad
			}
		case sBad:
			return len(p), nil
		}
	}
	return len(p), nil
}

// skipInString emits the string bytes of p from i up to the next quote or backslash and returns that
// position; ok is false when p ended first (all of p[i:] was emitted). String values are most of a large
// body, so they are skipped in one step instead of byte by byte.
func (s *BodyScanner) skipInString(p []byte, i int) (next int, ok bool) {
	j := bytes.IndexAny(p[i:], `"\`)
	if j < 0 {
		s.emitN(p[i:])
		return len(p), false
	}
	s.emitN(p[i : i+j])
	return i + j, true
}

func (s *BodyScanner) emit(c byte) {
	if !s.keep {
		return
	}
	if len(s.out) >= MaxKeptUsage {
		s.over = true
		return
	}
	s.out = append(s.out, c)
}

func (s *BodyScanner) emitN(b []byte) {
	if !s.keep || len(b) == 0 {
		return
	}
	if len(s.out)+len(b) > MaxKeptUsage {
		s.over = true
		return
	}
	s.out = append(s.out, b...)
}

// usageKey reports whether the member name just read is one of bodyUsageKeys for encoding/json.
func (s *BodyScanner) usageKey() bool {
	name := s.name
	if bytes.IndexByte(name, '\\') >= 0 {
		var u string
		q := make([]byte, 0, len(name)+2)
		q = append(append(append(q, '"'), name...), '"')
		if json.Unmarshal(q, &u) != nil {
			return false
		}
		name = []byte(u)
	}
	for _, k := range bodyUsageKeys {
		if bytes.EqualFold(name, []byte(k)) {
			return true
		}
	}
	return false
}

// Reduced returns the kept members as one JSON object, or nil when the body was not one complete JSON
// object or the kept members were too large. It aliases the scanner's buffer until Reset.
func (s *BodyScanner) Reduced() []byte {
	if s.st != sDone || s.over {
		return nil
	}
	if !s.closed {
		s.out, s.closed = append(s.out, '}'), true
	}
	return s.out
}
