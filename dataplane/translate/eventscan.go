package translate

import (
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// scan reads the common upstream stream events (text, thinking and argument deltas) without the general
// decoder: a small fixed set of members, exact names, no duplicates. Anything else — another member, a
// name in other case, a duplicate, an unusual value, invalid UTF-8, malformed JSON — makes it report false,
// and the event goes to the general decoder (unmarshalEvent), which decides it as before; so the fast path
// changes speed, never results (FuzzEventScan, TestEventScanMatchesDecoder).
type scan struct {
	b  []byte
	i  int
	ok bool
}

func newScan(b []byte) scan { return scan{b: b, ok: true} }

func (s *scan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c (after whitespace) or fails.
func (s *scan) byte(c byte) {
	s.ws()
	if s.ok && s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return
	}
	s.ok = false
}

// peek reports whether the next byte (after whitespace) is c, without consuming it.
func (s *scan) peek(c byte) bool {
	s.ws()
	return s.ok && s.i < len(s.b) && s.b[s.i] == c
}

// more starts the next member of an object: false at its closing brace (consumed).
func (s *scan) more(first bool) bool {
	if !s.ok {
		return false
	}
	if s.peek('}') {
		s.i++
		return false
	}
	if !first {
		s.byte(',')
	}
	return s.ok
}

// name reads a member name and its colon; names with escapes fail.
func (s *scan) name() []byte {
	v := s.view()
	s.byte(':')
	return v
}

// view reads a JSON string without escapes and returns its bytes (a view of the event: compare, don't keep).
func (s *scan) view() []byte {
	s.byte('"')
	if !s.ok {
		return nil
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			v := s.b[start:s.i]
			s.i++
			if !utf8.Valid(v) {
				break
			}
			return v
		}
		if c == '\\' || c < 0x20 {
			break
		}
		s.i++
	}
	s.ok = false
	return nil
}

// nullable reports whether the next value is null (consumed) rather than something else.
func (s *scan) nullable() bool {
	if s.peek('n') {
		s.null()
		return true
	}
	return false
}

// emptyArray reads [].
func (s *scan) emptyArray() {
	s.byte('[')
	s.byte(']')
}

// str reads a JSON string into a new string (the event's bytes are the stream reader's reused buffer).
func (s *scan) str() string {
	s.byte('"')
	if !s.ok {
		return ""
	}
	start := s.i
	esc := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			in := s.b[start:s.i]
			s.i++
			if !utf8.Valid(in) {
				s.ok = false // the general decoder's replacement rules apply
				return ""
			}
			if esc {
				u, err := jsontext.AppendUnquote(nil, s.b[start-1:s.i])
				if err != nil || !utf8.Valid(u) {
					s.ok = false
					return ""
				}
				return string(u)
			}
			return string(in)
		case c == '\\':
			esc = true
			s.i += 2
			continue
		case c < 0x20:
			s.ok = false
			return ""
		}
		s.i++
	}
	s.ok = false
	return ""
}

// int reads a non-negative integer (at most 18 digits, no fraction or exponent).
func (s *scan) int() int {
	s.ws()
	n, d := 0, 0
	for s.ok && s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' && d < 18 {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
		d++
	}
	if d == 0 || d > 1 && s.b[s.i-d] == '0' || s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E' || s.b[s.i] >= '0' && s.b[s.i] <= '9') {
		s.ok = false
	}
	return n
}

// null reads a literal null.
func (s *scan) null() {
	s.ws()
	if s.ok && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return
	}
	s.ok = false
}

// end accepts only trailing whitespace.
func (s *scan) end() bool {
	s.ws()
	return s.ok && s.i == len(s.b)
}

// seen marks member bit k as read, failing on a duplicate.
func (s *scan) seen(mask *uint32, k uint) {
	if *mask&(1<<k) != 0 {
		s.ok = false
	}
	*mask |= 1 << k
}

// fastDelta reads a beta content_block_delta carrying text, thinking or argument JSON.
func (d *betaDecoder) fastDelta(data []byte, out []event) ([]event, bool) {
	s := newScan(data)
	var seen, dseen uint32
	var typ, dtyp []byte
	var text, partial, thinking string
	idx := 0
	s.byte('{')
	for first := true; s.more(first); first = false {
		switch string(s.name()) {
		case "type":
			s.seen(&seen, 0)
			typ = s.view()
		case "index":
			s.seen(&seen, 1)
			idx = s.int()
		case "delta":
			s.seen(&seen, 2)
			s.byte('{')
			for first := true; s.more(first); first = false {
				switch string(s.name()) {
				case "type":
					s.seen(&dseen, 0)
					dtyp = s.view()
				case "text":
					s.seen(&dseen, 1)
					text = s.str()
				case "partial_json":
					s.seen(&dseen, 2)
					partial = s.str()
				case "thinking":
					s.seen(&dseen, 3)
					thinking = s.str()
				default:
					s.ok = false
				}
			}
		default:
			s.ok = false
		}
	}
	if !s.end() || string(typ) != "content_block_delta" {
		return out, false
	}
	switch string(dtyp) {
	case "text_delta":
		return append(out, event{Type: evText, Index: idx, Text: text}), true
	case "input_json_delta":
		return append(out, event{Type: evToolArgs, Index: idx, Text: partial}), true
	case "thinking_delta":
		return append(out, event{Type: evThinking, Index: idx, Text: thinking}), true
	}
	return out, false
}

// fastDelta reads an alpha responses text, reasoning or argument delta.
func (d *respDecoder) fastDelta(data []byte, out []event) ([]event, bool) {
	s := newScan(data)
	var seen uint32
	var typ []byte
	var delta string
	idx := 0
	s.byte('{')
	for first := true; s.more(first); first = false {
		switch string(s.name()) {
		case "type":
			s.seen(&seen, 0)
			typ = s.view()
		case "output_index":
			s.seen(&seen, 1)
			idx = s.int()
		case "delta":
			s.seen(&seen, 2)
			delta = s.str()
		case "item_id":
			s.seen(&seen, 3)
			s.view()
		case "content_index":
			s.seen(&seen, 4)
			s.int()
		case "sequence_number":
			s.seen(&seen, 5)
			s.int()
		case "logprobs":
			s.seen(&seen, 6)
			s.emptyArray()
		case "obfuscation":
			s.seen(&seen, 7)
			s.view()
		case "summary_index":
			s.seen(&seen, 8)
			s.int()
		default:
			s.ok = false
		}
	}
	if !s.end() {
		return out, false
	}
	switch string(typ) {
	case "response.output_text.delta", "response.refusal.delta":
		return append(out, event{Type: evText, Index: idx, Text: delta}), true
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return append(out, event{Type: evThinking, Index: idx, Text: delta}), true
	case "response.function_call_arguments.delta":
		d.argsSeen[idx] = true
		return append(out, event{Type: evToolArgs, Index: idx, Text: delta}), true
	}
	return out, false
}

// fastChunk reads an alpha chat chunk whose one choice carries text or reasoning (no tool calls, no finish,
// no usage).
func (d *chatDecoder) fastChunk(data []byte, out []event) ([]event, bool) {
	s := newScan(data)
	var seen, cseen, dseen uint32
	var id, model, tier []byte
	var content, reasoning, refusal string
	choices := 0
	s.byte('{')
	for first := true; s.more(first); first = false {
		switch string(s.name()) {
		case "id":
			s.seen(&seen, 0)
			id = s.view()
		case "model":
			s.seen(&seen, 1)
			model = s.view()
		case "service_tier":
			s.seen(&seen, 2)
			if !s.nullable() {
				tier = s.view()
			}
		case "object":
			s.seen(&seen, 3)
			s.view()
		case "created":
			s.seen(&seen, 4)
			s.int()
		case "system_fingerprint":
			s.seen(&seen, 5)
			if !s.nullable() {
				s.view()
			}
		case "usage":
			s.seen(&seen, 6)
			s.null()
		case "obfuscation":
			s.seen(&seen, 7)
			s.view()
		case "choices":
			s.seen(&seen, 8)
			s.byte('[')
			s.byte('{')
			choices++
			for first := true; s.more(first); first = false {
				switch string(s.name()) {
				case "index":
					s.seen(&cseen, 0)
					if s.int() != 0 {
						s.ok = false
					}
				case "logprobs":
					s.seen(&cseen, 1)
					s.null()
				case "finish_reason":
					s.seen(&cseen, 2)
					s.null()
				case "delta":
					s.seen(&cseen, 3)
					s.byte('{')
					for first := true; s.more(first); first = false {
						switch string(s.name()) {
						case "role":
							s.seen(&dseen, 0)
							s.view()
						case "content":
							s.seen(&dseen, 1)
							if !s.nullable() {
								content = s.str()
							}
						case "reasoning_content":
							s.seen(&dseen, 2)
							if !s.nullable() {
								reasoning = s.str()
							}
						case "refusal":
							s.seen(&dseen, 3)
							if !s.nullable() {
								refusal = s.str()
							}
						default:
							s.ok = false
						}
					}
				default:
					s.ok = false
				}
			}
			s.byte(']')
		default:
			s.ok = false
		}
	}
	if !s.end() || choices != 1 || cseen&(1<<3) == 0 {
		return out, false
	}
	if !d.started {
		d.started = true
		out = append(out, event{Type: evStart, ID: string(id), Model: string(model), ServiceTier: string(tier)})
	}
	if reasoning != "" {
		out = append(out, event{Type: evThinking, Index: chatThinkingBlock, Text: reasoning})
	}
	if content != "" {
		out = append(out, event{Type: evText, Index: chatTextBlock, Text: content})
	}
	if refusal != "" {
		out = append(out, event{Type: evText, Index: chatTextBlock, Text: refusal})
	}
	return out, true
}

// object reads a JSON object's bytes without checking them (the caller decodes them, which checks).
func (s *scan) object() []byte {
	s.ws()
	if !s.ok || s.i >= len(s.b) || s.b[s.i] != '{' {
		s.ok = false
		return nil
	}
	start, depth, in := s.i, 0, false
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		switch {
		case in && c == '\\':
			s.i++
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				s.i++
				return s.b[start:s.i]
			}
		}
	}
	s.ok = false
	return nil
}

// bool reads true or false.
func (s *scan) bool() bool {
	s.ws()
	switch {
	case !s.ok:
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false
	}
	s.ok = false
	return false
}

// fastChunk reads a gamma chunk whose one candidate holds one text or thought-text part (usage allowed, no
// finish reason, function call or signature).
func (d *gammaDecoder) fastChunk(data []byte, out []event) ([]event, bool) {
	s := newScan(data)
	var seen, cseen, tseen, pseen uint32
	var id, model, usageRaw []byte
	var text string
	thought, parts := false, 0
	s.byte('{')
	for first := true; s.more(first); first = false {
		switch string(s.name()) {
		case "responseId":
			s.seen(&seen, 0)
			id = s.view()
		case "modelVersion":
			s.seen(&seen, 1)
			model = s.view()
		case "createTime":
			s.seen(&seen, 2)
			s.view()
		case "usageMetadata":
			s.seen(&seen, 3)
			if !s.nullable() {
				usageRaw = s.object()
			}
		case "candidates":
			s.seen(&seen, 4)
			s.byte('[')
			s.byte('{')
			for first := true; s.more(first); first = false {
				switch string(s.name()) {
				case "index":
					s.seen(&cseen, 0)
					if s.int() != 0 {
						s.ok = false
					}
				case "content":
					s.seen(&cseen, 1)
					s.byte('{')
					for first := true; s.more(first); first = false {
						switch string(s.name()) {
						case "role":
							s.seen(&tseen, 0)
							s.view()
						case "parts":
							s.seen(&tseen, 1)
							s.byte('[')
							s.byte('{')
							parts++
							for first := true; s.more(first); first = false {
								switch string(s.name()) {
								case "text":
									s.seen(&pseen, 0)
									text = s.str()
								case "thought":
									s.seen(&pseen, 1)
									thought = s.bool()
								default:
									s.ok = false
								}
							}
							s.byte(']')
						default:
							s.ok = false
						}
					}
				default:
					s.ok = false
				}
			}
			s.byte(']')
		default:
			s.ok = false
		}
	}
	if !s.end() || parts != 1 || pseen&1 == 0 {
		return out, false
	}
	var u *gammaUsage
	if usageRaw != nil {
		u = new(gammaUsage)
		if unmarshalEvent(usageRaw, u) != nil {
			return out, false
		}
	}
	if !d.started {
		d.started = true
		out = append(out, event{Type: evStart, ID: string(id), Model: string(model)})
	}
	if u != nil {
		out = append(out, event{Type: evUsage, Usage: u.canonical()})
	}
	var idx int
	switch {
	case thought:
		out, idx = d.block(evThinking, out)
		if text != "" {
			out = append(out, event{Type: evThinking, Index: idx, Text: text})
		}
	case text != "":
		out, idx = d.block(evText, out)
		out = append(out, event{Type: evText, Index: idx, Text: text})
	}
	return out, true
}
