package translate

import (
	"errors"
	"strings"
	"unsafe"
)

// The stream decoders read the common upstream events by hand, with jr (the one hand-written JSON reader of
// the package, shared with the request decoders), and leave every other event to the general decoder
// (unmarshalEvent). A fast reader accepts an event only where it decides it exactly as the general decoder
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

// errDecline leaves an event to the general decoder.
var errDecline = errors.New("event left to the general decoder")

// er reads one upstream event for a fast path.
type er struct{ jr }

func newER(data []byte) er { return er{jr{b: data}} }

// vstr is a decoded string: a view of the event's bytes, or a new string when it had escapes (owned).
type vstr struct {
	s     string
	owned bool
}

// keep returns the string to put into an event: a copy of a view.
func (v vstr) keep() string {
	if v.owned || v.s == "" {
		return v.s
	}
	return string(stringBytes(v.s)) // a copy (one-byte strings come from the runtime's static table)
}

// owned wraps a string the general decoder already copied.
func owned(s string) vstr { return vstr{s: s, owned: true} }

// once marks member bit k of an object as read; a duplicate declines.
func once(seen *uint32, k uint) error {
	if *seen&(1<<k) != 0 {
		return errDecline
	}
	*seen |= 1 << k
	return nil
}

// other handles a member the fast reader does not read: skipped, unless it names one of fields
// (case-insensitively), which declines.
func (r *er) other(name string, fields []string) error {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			ascii = false // a non-ASCII letter may fold to an ASCII one ('K' Kelvin to 'k'): compare all
			break
		}
	}
	for _, f := range fields {
		if (!ascii || len(f) == len(name)) && strings.EqualFold(f, name) {
			return errDecline
		}
	}
	return r.skip()
}

// str reads a string, or null as "".
func (r *er) str() (vstr, error) {
	switch r.peek() {
	case '"':
		start := r.i + 1
		esc, err := r.scanStr()
		if err != nil {
			return vstr{}, err
		}
		in := r.b[start : r.i-1]
		if esc {
			return vstr{s: unquote(in), owned: true}, nil
		}
		if len(in) == 0 {
			return vstr{}, nil
		}
		return vstr{s: unsafe.String(&in[0], len(in))}, nil
	case 'n':
		return vstr{}, r.literal("null")
	}
	return vstr{}, errDecline
}

// num reads an integer, or null as 0.
func (r *er) num() (int64, error) {
	switch r.peek() {
	case '0':
		return r.int64Of()
	case 'n':
		return 0, r.literal("null")
	}
	return 0, errDecline
}

// flag reads a bool, or null as false.
func (r *er) flag() (bool, error) {
	var v bool
	if r.peek() == 0 {
		return false, errDecline
	}
	err := r.boolean(&v)
	return v, err
}

// isNull consumes a null and reports true, or reports false before any other value.
func (r *er) isNull() (bool, error) {
	if r.peek() == 'n' {
		return true, r.literal("null")
	}
	return false, nil
}

// openObj starts an object; false for null (consumed). Any other value declines.
func (r *er) openObj() (bool, error) {
	switch r.peek() {
	case '{':
		return true, r.open()
	case 'n':
		return false, r.literal("null")
	}
	return false, errDecline
}

// openArr starts an array; false for null (consumed). Any other value declines.
func (r *er) openArr() (bool, error) {
	switch r.peek() {
	case '[':
		return true, r.open()
	case 'n':
		return false, r.literal("null")
	}
	return false, errDecline
}

// elemObj positions at the next element of an array, which must be an object (opened); false at the end.
func (r *er) elemObj(first bool) (bool, error) {
	ok, err := r.elem(first)
	if err != nil || !ok {
		return false, err
	}
	if r.peek() != '{' {
		return false, errDecline
	}
	return true, r.open()
}

// ---- beta ----

var (
	betaEventFields = []string{"type", "message", "index", "content_block", "error", "delta", "usage"}
	betaDeltaFields = []string{"type", "text", "partial_json", "thinking", "signature", "stop_reason", "stop_sequence"}
)

// fast reads a beta content_block_delta (text, thinking, arguments, signature), content_block_stop, or an
// event the general decoder maps to nothing (message_stop, ping, ...).
func (d *betaDecoder) fast(data []byte, out []event) ([]event, bool) {
	r := newER(data)
	var typ, dtyp, text, partial, thinking, sig vstr
	var idx int64
	var seen, dseen uint32
	err := r.event(func(name string) (err error) {
		switch name {
		case "type":
			if err = once(&seen, 0); err == nil {
				typ, err = r.str()
			}
		case "index":
			if err = once(&seen, 1); err == nil {
				idx, err = r.num()
			}
		case "delta":
			if err = once(&seen, 2); err != nil {
				return err
			}
			return r.members(func(name string) (err error) {
				switch name {
				case "type":
					if err = once(&dseen, 0); err == nil {
						dtyp, err = r.str()
					}
				case "text":
					if err = once(&dseen, 1); err == nil {
						text, err = r.str()
					}
				case "partial_json":
					if err = once(&dseen, 2); err == nil {
						partial, err = r.str()
					}
				case "thinking":
					if err = once(&dseen, 3); err == nil {
						thinking, err = r.str()
					}
				case "signature":
					if err = once(&dseen, 4); err == nil {
						sig, err = r.str()
					}
				default:
					err = r.other(name, betaDeltaFields)
				}
				return err
			})
		default:
			err = r.other(name, betaEventFields)
		}
		return err
	})
	if err != nil {
		return out, false
	}
	i := int(idx)
	switch typ.s {
	case "content_block_delta":
		switch dtyp.s {
		case "text_delta":
			out = append(out, event{Type: evText, Index: i, Text: text.keep()})
		case "input_json_delta":
			out = append(out, event{Type: evToolArgs, Index: i, Text: partial.keep()})
		case "thinking_delta":
			out = append(out, event{Type: evThinking, Index: i, Text: thinking.keep()})
		case "signature_delta":
			out = append(out, d.signature(i, sig.keep()))
		}
	case "content_block_stop":
		out = append(out, event{Type: evBlockStop, Index: i})
	case "message_start", "content_block_start", "message_delta", "error":
		return out, false
	}
	return out, true
}

// event reads the event's top-level object, calling member for each member, then its end.
func (r *er) event(member func(name string) error) error {
	if r.peek() != '{' {
		return errDecline
	}
	if err := r.open(); err != nil {
		return err
	}
	if err := r.fields(member); err != nil {
		return err
	}
	return r.end()
}

// members reads an object member (null: no members), calling member for each.
func (r *er) members(member func(name string) error) error {
	ok, err := r.openObj()
	if err != nil || !ok {
		return err
	}
	return r.fields(member)
}

// fields reads the members of an opened object.
func (r *er) fields(member func(name string) error) error {
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

// name is jr.key for the usual member — a short name of printable ASCII without escapes, in one loop over
// its bytes; anything else (an escape, non-ASCII, an error) is read by jr.key from the same position.
func (r *er) name(first bool) (string, bool, error) {
	b, i := r.b, r.i
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	if i < len(b) && b[i] == '}' {
		r.i = i + 1
		r.depth--
		return "", false, nil
	}
	if !first {
		if i >= len(b) || b[i] != ',' {
			return r.key(first)
		}
		i++
		for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
			i++
		}
	}
	if i >= len(b) || b[i] != '"' {
		return r.key(first)
	}
	j := i + 1
	for j < len(b) && plainName[b[j]] {
		j++
	}
	if j >= len(b) || b[j] != '"' || j == i+1 {
		return r.key(first)
	}
	k := j + 1
	for k < len(b) && (b[k] == ' ' || b[k] == '\n' || b[k] == '\r' || b[k] == '\t') {
		k++
	}
	if k >= len(b) || b[k] != ':' {
		return r.key(first)
	}
	r.i = k + 1
	return unsafe.String(&b[i+1], j-i-1), true, nil // a view: the event's bytes are not modified
}

// ---- alpha responses ----

var respEventFields = []string{"type", "response", "output_index", "summary_index", "item", "delta", "arguments", "code", "message"}

// fast reads an alpha responses text, reasoning or argument delta, a reasoning summary part, the end of a
// call's arguments, or an event the general decoder maps to nothing (content_part.added, output_text.done…).
func (d *respDecoder) fast(data []byte, out []event) ([]event, bool) {
	r := newER(data)
	var typ, delta, args vstr
	var idx, sum int64
	var seen uint32
	err := r.event(func(name string) (err error) {
		switch name {
		case "type":
			if err = once(&seen, 0); err == nil {
				typ, err = r.str()
			}
		case "output_index":
			if err = once(&seen, 1); err == nil {
				idx, err = r.num()
			}
		case "summary_index":
			if err = once(&seen, 2); err == nil {
				sum, err = r.num()
			}
		case "delta":
			if err = once(&seen, 3); err == nil {
				delta, err = r.str()
			}
		case "arguments":
			if err = once(&seen, 4); err == nil {
				args, err = r.str()
			}
		default:
			err = r.other(name, respEventFields)
		}
		return err
	})
	if err != nil {
		return out, false
	}
	i := int(idx)
	switch typ.s {
	case "response.output_text.delta", "response.refusal.delta":
		out = append(out, event{Type: evText, Index: i, Text: delta.keep()})
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		out = append(out, event{Type: evThinking, Index: i, Text: delta.keep()})
	case "response.function_call_arguments.delta":
		d.argsSeen[i] = true
		out = append(out, event{Type: evToolArgs, Index: i, Text: delta.keep()})
	case "response.reasoning_summary_part.added":
		if sum > 0 {
			out = append(out, event{Type: evThinking, Index: i, Text: "\n\n"})
		}
	case "response.function_call_arguments.done":
		if !d.argsSeen[i] && args.s != "" {
			d.argsSeen[i] = true
			out = append(out, event{Type: evToolArgs, Index: i, Text: args.keep()})
		}
	case "", "response.created", "response.in_progress", "response.queued", "response.output_item.added",
		"response.output_item.done", "response.completed", "response.incomplete", "response.failed", "error":
		return out, false // the type comes from the SSE name, or the event needs members read only there
	}
	return out, true
}

// ---- alpha chat ----

var (
	chatChunkFields  = []string{"id", "model", "service_tier", "error", "choices", "usage"}
	chatChoiceFields = []string{"index", "delta", "finish_reason"}
	chatDeltaFields  = []string{"content", "refusal", "reasoning_content", "tool_calls"}
	chatCallFields   = []string{"index", "id", "type", "function"}
	chatFuncFields   = []string{"name", "arguments"}
)

// fast reads an alpha chat chunk with at most one choice: text, reasoning, refusal, tool call deltas, a
// finish reason, usage.
func (d *chatDecoder) fast(data []byte, out []event) ([]event, bool) {
	r := newER(data)
	var id, model, tier, content, reasoning, refusal, fin vstr
	var u *chatUsage
	var ub chatUsage
	var seen, cseen, dseen uint32
	var cidx int64
	choices := 0
	calls := d.calls[:0]
	err := r.event(func(name string) (err error) {
		switch name {
		case "id":
			if err = once(&seen, 0); err == nil {
				id, err = r.str()
			}
		case "model":
			if err = once(&seen, 1); err == nil {
				model, err = r.str()
			}
		case "service_tier":
			if err = once(&seen, 2); err == nil {
				tier, err = r.str()
			}
		case "error":
			if err = once(&seen, 3); err != nil {
				return err
			}
			if null, err := r.isNull(); err != nil || !null {
				return errDecline
			}
		case "usage":
			if err = once(&seen, 4); err != nil {
				return err
			}
			if null, err := r.isNull(); err != nil || null {
				return err
			}
			u = &ub
			return r.chatUsage(u)
		case "choices":
			if err = once(&seen, 5); err != nil {
				return err
			}
			ok, err := r.openArr()
			if err != nil || !ok {
				return err
			}
			for first := true; ; first = false {
				ok, err := r.elemObj(first)
				if err != nil || !ok {
					return err
				}
				if choices++; choices > 1 {
					return errDecline
				}
				err = r.fields(func(name string) (err error) {
					switch name {
					case "index":
						if err = once(&cseen, 0); err == nil {
							cidx, err = r.num()
						}
					case "finish_reason":
						if err = once(&cseen, 1); err == nil {
							fin, err = r.str()
						}
					case "delta":
						if err = once(&cseen, 2); err != nil {
							return err
						}
						return r.members(func(name string) (err error) {
							switch name {
							case "content":
								if err = once(&dseen, 0); err == nil {
									content, err = r.str()
								}
							case "reasoning_content":
								if err = once(&dseen, 1); err == nil {
									reasoning, err = r.str()
								}
							case "refusal":
								if err = once(&dseen, 2); err == nil {
									refusal, err = r.str()
								}
							case "tool_calls":
								if err = once(&dseen, 3); err == nil {
									calls, err = r.chatCalls(calls)
								}
							default:
								err = r.other(name, chatDeltaFields)
							}
							return err
						})
					default:
						err = r.other(name, chatChoiceFields)
					}
					return err
				})
				if err != nil {
					return err
				}
			}
		default:
			err = r.other(name, chatChunkFields)
		}
		return err
	})
	d.calls = calls[:0]
	if err != nil {
		clear(calls)
		return out, false
	}
	if !d.started {
		d.started = true
		out = append(out, event{Type: evStart, ID: id.keep(), Model: model.keep(), ServiceTier: tier.keep()})
	}
	if choices == 1 && cidx == 0 {
		out = d.choice(out, reasoning, content, refusal, calls, fin.s)
	}
	clear(calls)
	if u != nil {
		out = append(out, event{Type: evUsage, Usage: u.canonical()})
	}
	return out, true
}

// chatCalls reads a tool_calls array (null: none) into calls.
func (r *er) chatCalls(calls []chatCallDelta) ([]chatCallDelta, error) {
	calls = calls[:0]
	ok, err := r.openArr()
	if err != nil || !ok {
		return calls, err
	}
	for first := true; ; first = false {
		ok, err := r.elemObj(first)
		if err != nil || !ok {
			return calls, err
		}
		var c chatCallDelta
		var seen, fseen uint32
		err = r.fields(func(name string) (err error) {
			switch name {
			case "index":
				if err = once(&seen, 0); err == nil {
					var k int64
					k, err = r.num()
					c.index = int(k)
				}
			case "id":
				if err = once(&seen, 1); err == nil {
					c.id, err = r.str()
				}
			case "type":
				if err = once(&seen, 2); err == nil {
					_, err = r.str()
				}
			case "function":
				if err = once(&seen, 3); err != nil {
					return err
				}
				return r.members(func(name string) (err error) {
					switch name {
					case "name":
						if err = once(&fseen, 0); err == nil {
							c.name, err = r.str()
						}
					case "arguments":
						if err = once(&fseen, 1); err == nil {
							c.args, err = r.str()
						}
					default:
						err = r.other(name, chatFuncFields)
					}
					return err
				})
			default:
				err = r.other(name, chatCallFields)
			}
			return err
		})
		if err != nil {
			return calls, err
		}
		calls = append(calls, c)
	}
}

var (
	chatUsageFields      = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"}
	chatPromptDetFields  = []string{"cached_tokens", "cache_write_tokens", "audio_tokens", "image_tokens", "text_tokens"}
	chatComplDetFields   = []string{"reasoning_tokens"}
	gammaUsageFields     = []string{"promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount", "toolUsePromptTokenCount", "thoughtsTokenCount", "totalTokenCount", "promptTokensDetails"}
	gammaModalityFields  = []string{"modality", "tokenCount"}
	gammaChunkFields     = []string{"candidates", "promptFeedback", "usageMetadata", "modelVersion", "responseId", "error"}
	gammaCandidateFields = []string{"content", "finishReason", "index"}
	gammaContentFields   = []string{"role", "parts"}
	gammaPartFields      = []string{"text", "thought", "inlineData", "fileData", "functionCall", "functionResponse", "thoughtSignature", "executableCode", "codeExecutionResult"}
	gammaCallFields      = []string{"id", "name", "args"}
)

// chatUsage reads an alpha chat usage object (the caller read null).
func (r *er) chatUsage(u *chatUsage) error {
	var seen, pseen, cseen uint32
	return r.members(func(name string) (err error) {
		switch name {
		case "prompt_tokens":
			if err = once(&seen, 0); err == nil {
				u.PromptTokens, err = r.num()
			}
		case "completion_tokens":
			if err = once(&seen, 1); err == nil {
				u.CompletionTokens, err = r.num()
			}
		case "total_tokens":
			if err = once(&seen, 2); err == nil {
				u.TotalTokens, err = r.num()
			}
		case "prompt_tokens_details":
			if err = once(&seen, 3); err != nil {
				return err
			}
			if null, err := r.isNull(); err != nil || null {
				return err
			}
			p := &u.PromptTokensDetails
			*p = new(struct {
				CachedTokens     int64 `json:"cached_tokens"`
				CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
				AudioTokens      int64 `json:"audio_tokens,omitempty"`
				ImageTokens      int64 `json:"image_tokens,omitempty"`
				TextTokens       int64 `json:"text_tokens,omitempty"`
			})
			return r.members(func(name string) (err error) {
				var dst *int64
				switch name {
				case "cached_tokens":
					err, dst = once(&pseen, 0), &(*p).CachedTokens
				case "cache_write_tokens":
					err, dst = once(&pseen, 1), &(*p).CacheWriteTokens
				case "audio_tokens":
					err, dst = once(&pseen, 2), &(*p).AudioTokens
				case "image_tokens":
					err, dst = once(&pseen, 3), &(*p).ImageTokens
				case "text_tokens":
					err, dst = once(&pseen, 4), &(*p).TextTokens
				default:
					return r.other(name, chatPromptDetFields)
				}
				if err == nil {
					*dst, err = r.num()
				}
				return err
			})
		case "completion_tokens_details":
			if err = once(&seen, 4); err != nil {
				return err
			}
			if null, err := r.isNull(); err != nil || null {
				return err
			}
			c := &u.CompletionTokensDetails
			*c = new(struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			})
			return r.members(func(name string) (err error) {
				if name != "reasoning_tokens" {
					return r.other(name, chatComplDetFields)
				}
				if err = once(&cseen, 0); err == nil {
					(*c).ReasoningTokens, err = r.num()
				}
				return err
			})
		default:
			err = r.other(name, chatUsageFields)
		}
		return err
	})
}

// ---- gamma ----

// gammaFastItem is one part of the index-0 candidate, or its finish reason (finish set), read by the fast
// path in order.
type gammaFastItem struct {
	finish vstr
	isFin  bool
	part   gammaEvPart
}

// fast reads a gamma chunk: text, thought and function-call parts, thought signatures, finish reasons,
// usage.
func (d *gammaDecoder) fast(data []byte, out []event) ([]event, bool) {
	r := newER(data)
	var id, model vstr
	var u *gammaUsage
	var seen uint32
	items := d.items[:0]
	ub := gammaUsage{PromptTokensDetails: d.modalities[:0]}
	err := r.event(func(name string) (err error) {
		switch name {
		case "responseId":
			if err = once(&seen, 0); err == nil {
				id, err = r.str()
			}
		case "modelVersion":
			if err = once(&seen, 1); err == nil {
				model, err = r.str()
			}
		case "usageMetadata":
			if err = once(&seen, 2); err != nil {
				return err
			}
			if null, err := r.isNull(); err != nil || null {
				return err
			}
			u = &ub
			return r.gammaUsage(u)
		case "error", "promptFeedback":
			if err = once(&seen, 3); err != nil {
				return err
			}
			if null, err := r.isNull(); err != nil || !null {
				return errDecline
			}
		case "candidates":
			if err = once(&seen, 4); err != nil {
				return err
			}
			items, err = r.gammaCandidates(items)
		default:
			err = r.other(name, gammaChunkFields)
		}
		return err
	})
	d.items, d.modalities = items[:0], ub.PromptTokensDetails[:0]
	if err == nil {
		if !d.started {
			d.started = true
			out = append(out, event{Type: evStart, ID: id.keep(), Model: model.keep()})
		}
		if u != nil {
			out = append(out, event{Type: evUsage, Usage: u.canonical()})
		}
		for i := range items {
			if it := &items[i]; it.isFin {
				out = d.finish(out, it.finish.s)
			} else {
				out = d.part(out, &it.part)
			}
		}
	}
	clear(items)
	clear(ub.PromptTokensDetails)
	return out, err == nil
}

// gammaCandidates reads the candidates array, keeping the items of those with index 0.
func (r *er) gammaCandidates(items []gammaFastItem) ([]gammaFastItem, error) {
	ok, err := r.openArr()
	if err != nil || !ok {
		return items, err
	}
	for first := true; ; first = false {
		ok, err := r.elemObj(first)
		if err != nil || !ok {
			return items, err
		}
		from := len(items)
		var seen uint32
		var idx int64
		var fin vstr
		err = r.fields(func(name string) (err error) {
			switch name {
			case "index":
				if err = once(&seen, 0); err == nil {
					idx, err = r.num()
				}
			case "finishReason":
				if err = once(&seen, 1); err == nil {
					fin, err = r.str()
				}
			case "content":
				if err = once(&seen, 2); err != nil {
					return err
				}
				var cseen uint32
				return r.members(func(name string) (err error) {
					switch name {
					case "role":
						if err = once(&cseen, 0); err == nil {
							_, err = r.str()
						}
					case "parts":
						if err = once(&cseen, 1); err == nil {
							items, err = r.gammaParts(items)
						}
					default:
						err = r.other(name, gammaContentFields)
					}
					return err
				})
			default:
				err = r.other(name, gammaCandidateFields)
			}
			return err
		})
		if err != nil {
			return items, err
		}
		if idx != 0 {
			clear(items[from:])
			items = items[:from]
			continue
		}
		if fin.s != "" {
			items = append(items, gammaFastItem{finish: fin, isFin: true})
		}
	}
}

// gammaParts reads a parts array.
func (r *er) gammaParts(items []gammaFastItem) ([]gammaFastItem, error) {
	ok, err := r.openArr()
	if err != nil || !ok {
		return items, err
	}
	for first := true; ; first = false {
		ok, err := r.elemObj(first)
		if err != nil || !ok {
			return items, err
		}
		var p gammaEvPart
		var seen, cseen uint32
		err = r.fields(func(name string) (err error) {
			switch name {
			case "text":
				if err = once(&seen, 0); err != nil {
					return err
				}
				if null, err := r.isNull(); err != nil || null {
					return err
				}
				p.hasText = true
				p.text, err = r.str()
			case "thought":
				if err = once(&seen, 1); err == nil {
					p.thought, err = r.flag()
				}
			case "thoughtSignature":
				if err = once(&seen, 2); err == nil {
					p.sig, err = r.str()
				}
			case "functionCall":
				if err = once(&seen, 3); err != nil {
					return err
				}
				if null, err := r.isNull(); err != nil || null {
					return err
				}
				p.call = true
				return r.members(func(name string) (err error) {
					switch name {
					case "id":
						if err = once(&cseen, 0); err == nil {
							p.callID, err = r.str()
						}
					case "name":
						if err = once(&cseen, 1); err == nil {
							p.name, err = r.str()
						}
					case "args":
						if err = once(&cseen, 2); err == nil {
							var raw []byte
							r.ws()
							start := r.i
							if err = r.skip(); err == nil {
								raw = r.b[start:r.i:r.i]
							}
							p.args = raw
						}
					default:
						err = r.other(name, gammaCallFields)
					}
					return err
				})
			default:
				err = r.other(name, gammaPartFields)
			}
			return err
		})
		if err != nil {
			return items, err
		}
		items = append(items, gammaFastItem{part: p})
	}
}

// gammaUsage reads a usageMetadata object (the caller read null).
func (r *er) gammaUsage(u *gammaUsage) error {
	var seen uint32
	return r.members(func(name string) (err error) {
		var dst *int64
		switch name {
		case "promptTokenCount":
			err, dst = once(&seen, 0), &u.PromptTokenCount
		case "cachedContentTokenCount":
			err, dst = once(&seen, 1), &u.CachedContentTokenCount
		case "candidatesTokenCount":
			err, dst = once(&seen, 2), &u.CandidatesTokenCount
		case "toolUsePromptTokenCount":
			err, dst = once(&seen, 3), &u.ToolUsePromptTokenCount
		case "thoughtsTokenCount":
			err, dst = once(&seen, 4), &u.ThoughtsTokenCount
		case "totalTokenCount":
			err, dst = once(&seen, 5), &u.TotalTokenCount
		case "promptTokensDetails":
			if err = once(&seen, 6); err != nil {
				return err
			}
			ok, err := r.openArr()
			if err != nil || !ok {
				return err
			}
			for first := true; ; first = false {
				ok, err := r.elemObj(first)
				if err != nil || !ok {
					return err
				}
				var m modalityCount
				var mseen uint32
				err = r.fields(func(name string) (err error) {
					switch name {
					case "modality":
						if err = once(&mseen, 0); err == nil {
							var v vstr
							v, err = r.str()
							m.Modality = v.s // compared only (canonical), never kept
						}
					case "tokenCount":
						if err = once(&mseen, 1); err == nil {
							m.TokenCount, err = r.num()
						}
					default:
						err = r.other(name, gammaModalityFields)
					}
					return err
				})
				if err != nil {
					return err
				}
				u.PromptTokensDetails = append(u.PromptTokensDetails, m)
			}
		default:
			return r.other(name, gammaUsageFields)
		}
		if err == nil {
			*dst, err = r.num()
		}
		return err
	})
}
