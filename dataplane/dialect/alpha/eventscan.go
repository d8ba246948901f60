package alpha

import (
	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// The fast reader of this dialect's common stream events (see jsonkit.EventReader: it decides an event
// exactly as the general decoder would, or declines it).

var respEventFields = []string{"type", "response", "output_index", "summary_index", "item", "delta", "arguments", "code", "message"}

// Fast reads an alpha responses text, reasoning or argument delta, a reasoning summary part, the end of a
// call's arguments, or an event the general decoder maps to nothing (content_part.added, output_text.done…).
func (d *RespDecoder) Fast(data []byte, out []canon.Event) ([]canon.Event, bool) {
	r := jsonkit.NewEventReader(data)
	var typ, delta, args jsonkit.StrView
	var idx, sum int64
	var seen jsonkit.Seen
	err := r.Event(func(name string) (err error) {
		switch name {
		case "type":
			if err = seen.Once("type"); err == nil {
				typ, err = r.Str()
			}
		case "output_index":
			if err = seen.Once("output_index"); err == nil {
				idx, err = r.Num()
			}
		case "summary_index":
			if err = seen.Once("summary_index"); err == nil {
				sum, err = r.Num()
			}
		case "delta":
			if err = seen.Once("delta"); err == nil {
				delta, err = r.Str()
			}
		case "arguments":
			if err = seen.Once("arguments"); err == nil {
				args, err = r.Str()
			}
		default:
			err = r.Other(name, respEventFields)
		}
		return err
	})
	if err != nil {
		return out, false
	}
	i := int(idx)
	switch typ.S {
	case "response.output_text.delta", "response.refusal.delta":
		out = append(out, canon.Event{Type: canon.EvText, Index: i, Text: delta.Keep()})
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		out = append(out, canon.Event{Type: canon.EvThinking, Index: i, Text: delta.Keep()})
	case "response.function_call_arguments.delta":
		d.ArgsSeen[i] = true
		out = append(out, canon.Event{Type: canon.EvToolArgs, Index: i, Text: delta.Keep()})
	case "response.reasoning_summary_part.added":
		if sum > 0 {
			out = append(out, canon.Event{Type: canon.EvThinking, Index: i, Text: "\n\n"})
		}
	case "response.function_call_arguments.done":
		if !d.ArgsSeen[i] && args.S != "" {
			d.ArgsSeen[i] = true
			out = append(out, canon.Event{Type: canon.EvToolArgs, Index: i, Text: args.Keep()})
		}
	case "", "response.created", "response.in_progress", "response.queued", "response.output_item.added",
		"response.output_item.done", "response.completed", "response.incomplete", "response.failed", "error":
		return out, false // the type comes from the SSE name, or the event needs members read only there
	}
	return out, true
}

var (
	chatChunkFields  = []string{"id", "model", "service_tier", "error", "choices", "usage"}
	chatChoiceFields = []string{"index", "delta", "finish_reason"}
	chatDeltaFields  = []string{"content", "refusal", "reasoning_content", "tool_calls"}
	chatCallFields   = []string{"index", "id", "type", "function"}
	chatFuncFields   = []string{"name", "arguments"}
)

// Fast reads an alpha chat chunk with at most one choice: text, reasoning, refusal, tool call deltas, a
// finish reason, usage.
func (d *ChatDecoder) Fast(data []byte, out []canon.Event) ([]canon.Event, bool) {
	r := jsonkit.NewEventReader(data)
	var id, model, tier, content, reasoning, refusal, fin jsonkit.StrView
	var seen, cseen, dseen jsonkit.Seen
	var cidx int64
	choices := 0
	calls := d.Calls[:0]
	err := r.Event(func(name string) (err error) {
		switch name {
		case "id":
			if err = seen.Once("id"); err == nil {
				id, err = r.Str()
			}
		case "model":
			if err = seen.Once("model"); err == nil {
				model, err = r.Str()
			}
		case "service_tier":
			if err = seen.Once("service_tier"); err == nil {
				tier, err = r.Str()
			}
		case "error":
			if err = seen.Once("error"); err != nil {
				return err
			}
			if null, err := r.IsNull(); err != nil || !null {
				return jsonkit.ErrDecline
			}
		case "usage":
			if err = seen.Once("usage"); err != nil {
				return err
			}
			if null, err := r.IsNull(); err != nil || null {
				return err
			}
			return jsonkit.ErrDecline // the usage chunk: the general decoder reads it whole (Decoder.Bill)
		case "choices":
			if err = seen.Once("choices"); err != nil {
				return err
			}
			ok, err := r.OpenArr()
			if err != nil || !ok {
				return err
			}
			for first := true; ; first = false {
				ok, err := r.ElemObj(first)
				if err != nil || !ok {
					return err
				}
				if choices++; choices > 1 {
					return jsonkit.ErrDecline
				}
				err = r.Fields(func(name string) (err error) {
					switch name {
					case "index":
						if err = cseen.Once("index"); err == nil {
							cidx, err = r.Num()
						}
					case "finish_reason":
						if err = cseen.Once("finish_reason"); err == nil {
							fin, err = r.Str()
						}
					case "delta":
						if err = cseen.Once("delta"); err != nil {
							return err
						}
						return r.Members(func(name string) (err error) {
							switch name {
							case "content":
								if err = dseen.Once("content"); err == nil {
									content, err = r.Str()
								}
							case "reasoning_content":
								if err = dseen.Once("reasoning_content"); err == nil {
									reasoning, err = r.Str()
								}
							case "refusal":
								if err = dseen.Once("refusal"); err == nil {
									refusal, err = r.Str()
								}
							case "tool_calls":
								if err = dseen.Once("tool_calls"); err == nil {
									calls, err = scanChatCalls(&r, calls)
								}
							default:
								err = r.Other(name, chatDeltaFields)
							}
							return err
						})
					default:
						err = r.Other(name, chatChoiceFields)
					}
					return err
				})
				if err != nil {
					return err
				}
			}
		default:
			err = r.Other(name, chatChunkFields)
		}
		return err
	})
	d.Calls = calls[:0]
	if err != nil {
		clear(calls)
		return out, false
	}
	d.Bill.top(tier.S)
	if !d.started {
		d.started = true
		out = append(out, canon.Event{Type: canon.EvStart, ID: id.Keep(), Model: model.Keep(), ServiceTier: tier.Keep()})
	}
	if choices == 1 && cidx == 0 {
		out = d.choice(out, reasoning, content, refusal, calls, fin.S)
	}
	clear(calls)
	return out, true
}

// chatCalls reads a tool_calls array (null: none) into calls.
func scanChatCalls(r *jsonkit.EventReader, calls []chatCallDelta) ([]chatCallDelta, error) {
	calls = calls[:0]
	ok, err := r.OpenArr()
	if err != nil || !ok {
		return calls, err
	}
	for first := true; ; first = false {
		ok, err := r.ElemObj(first)
		if err != nil || !ok {
			return calls, err
		}
		var c chatCallDelta
		var seen, fseen jsonkit.Seen
		err = r.Fields(func(name string) (err error) {
			switch name {
			case "index":
				if err = seen.Once("index"); err == nil {
					var k int64
					k, err = r.Num()
					c.index = int(k)
				}
			case "id":
				if err = seen.Once("id"); err == nil {
					c.id, err = r.Str()
				}
			case "type":
				if err = seen.Once("type"); err == nil {
					_, err = r.Str()
				}
			case "function":
				if err = seen.Once("function"); err != nil {
					return err
				}
				return r.Members(func(name string) (err error) {
					switch name {
					case "name":
						if err = fseen.Once("name"); err == nil {
							c.name, err = r.Str()
						}
					case "arguments":
						if err = fseen.Once("arguments"); err == nil {
							c.args, err = r.Str()
						}
					default:
						err = r.Other(name, chatFuncFields)
					}
					return err
				})
			default:
				err = r.Other(name, chatCallFields)
			}
			return err
		})
		if err != nil {
			return calls, err
		}
		calls = append(calls, c)
	}
}
