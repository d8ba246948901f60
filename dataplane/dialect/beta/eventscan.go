package beta

import (
	"errors"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// The fast reader of this dialect's common stream events (see jsonkit.EventReader: it decides an event
// exactly as the general decoder would, or declines it).

// errBilled declines an event carrying usage to the general decoder, which bills it.
var errBilled = errors.New("event carries usage")

var (
	betaEventFields = []string{"type", "message", "index", "content_block", "error", "delta", "usage"}
	betaDeltaFields = []string{"type", "text", "partial_json", "thinking", "signature", "stop_reason", "stop_sequence"}
)

// Fast reads a beta content_block_delta (text, thinking, arguments, signature), content_block_stop, or an
// event the general decoder maps to nothing (message_stop, ping, ...).
func (d *Decoder) Fast(data []byte, out []canon.Event) ([]canon.Event, bool) {
	r := jsonkit.NewEventReader(data)
	var typ, dtyp, text, partial, thinking, sig jsonkit.StrView
	var idx int64
	var seen, dseen jsonkit.Seen
	err := r.Event(func(name string) (err error) {
		switch name {
		case "type":
			if err = seen.Once("type"); err == nil {
				typ, err = r.Str()
			}
		case "index":
			if err = seen.Once("index"); err == nil {
				idx, err = r.Num()
			}
		case "delta":
			if err = seen.Once("delta"); err != nil {
				return err
			}
			return r.Members(func(name string) (err error) {
				switch name {
				case "type":
					if err = dseen.Once("type"); err == nil {
						dtyp, err = r.Str()
					}
				case "text":
					if err = dseen.Once("text"); err == nil {
						text, err = r.Str()
					}
				case "partial_json":
					if err = dseen.Once("partial_json"); err == nil {
						partial, err = r.Str()
					}
				case "thinking":
					if err = dseen.Once("thinking"); err == nil {
						thinking, err = r.Str()
					}
				case "signature":
					if err = dseen.Once("signature"); err == nil {
						sig, err = r.Str()
					}
				default:
					err = r.Other(name, betaDeltaFields)
				}
				return err
			})
		case "message", "usage":
			return errBilled // billed members: the general decoder reads them (Decoder.Bill)
		default:
			err = r.Other(name, betaEventFields)
		}
		return err
	})
	if err != nil {
		return out, false
	}
	i := int(idx)
	switch typ.S {
	case "content_block_delta":
		switch dtyp.S {
		case "text_delta":
			out = append(out, canon.Event{Type: canon.EvText, Index: i, Text: text.Keep()})
		case "input_json_delta":
			out = append(out, canon.Event{Type: canon.EvToolArgs, Index: i, Text: partial.Keep()})
		case "thinking_delta":
			out = append(out, canon.Event{Type: canon.EvThinking, Index: i, Text: thinking.Keep()})
		case "signature_delta":
			out = append(out, d.signature(i, sig.Keep()))
		}
	case "content_block_stop":
		out = append(out, canon.Event{Type: canon.EvBlockStop, Index: i})
	case "message_start", "content_block_start", "message_delta", "error":
		return out, false
	}
	return out, true
}
