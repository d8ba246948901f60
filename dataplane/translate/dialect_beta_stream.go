package translate

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/tollgate/tollgate/shared/vocab"
)

// ---- upstream beta stream -> canonical events ----

type betaDecoder struct {
	signed map[int]bool    // thinking blocks whose signature tag was emitted
	ev     betaStreamEvent // the event being decoded
}

type betaStreamEvent struct {
	Type         string          `json:"type"`
	Message      *betaResponse   `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *betaBlock      `json:"content_block"`
	Error        json.RawMessage `json:"error"`
	Delta        struct {
		Type         string  `json:"type"`
		Text         string  `json:"text"`
		PartialJSON  string  `json:"partial_json"`
		Thinking     string  `json:"thinking"`
		Signature    string  `json:"signature"`
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage *betaUsage `json:"usage"`
}

func (betaMsgs) newDecoder(*reqState) streamDecoder { return &betaDecoder{signed: map[int]bool{}} }

func (d *betaDecoder) decode(name string, data []byte, out []event) ([]event, error) {
	if len(data) == 0 {
		return out, nil
	}
	if o, ok := d.fast(data, out); ok {
		return o, nil
	}
	return d.general(data, out)
}

// signature is the event of a signature fragment of block i: a block's first fragment is tagged, later
// fragments append to it.
func (d *betaDecoder) signature(i int, sig string) event {
	if !d.signed[i] {
		d.signed[i] = true
		sig = tagSig(vocab.KindBeta, sig)
	}
	return event{Type: evSignature, Index: i, Text: sig}
}

// general decodes any event with the general decoder.
func (d *betaDecoder) general(data []byte, out []event) ([]event, error) {
	d.ev = betaStreamEvent{} // reused: one allocation less per event
	e := &d.ev
	if err := unmarshalEvent(data, e); err != nil {
		return out, err
	}
	switch e.Type {
	case "message_start":
		if e.Message == nil {
			return out, nil
		}
		out = append(out, event{Type: evStart, ID: e.Message.ID, Model: e.Message.Model})
		if e.Message.Usage != nil {
			out = append(out, event{Type: evUsage, Usage: e.Message.Usage.canonical(), ServiceTier: e.Message.Usage.ServiceTier})
		}
	case "content_block_start":
		b := e.ContentBlock
		if b == nil {
			return out, nil
		}
		switch b.Type {
		case "text":
			if b.Text != "" {
				out = append(out, event{Type: evText, Index: e.Index, Text: b.Text})
			}
		case "tool_use":
			out = append(out, event{Type: evToolStart, Index: e.Index, CallID: b.ID, Name: b.Name})
			if len(b.Input) > 0 && string(compactJSON(b.Input)) != "{}" {
				out = append(out, event{Type: evToolArgs, Index: e.Index, Text: string(compactJSON(b.Input))})
			}
		case "thinking":
			if b.Thinking != nil && *b.Thinking != "" {
				out = append(out, event{Type: evThinking, Index: e.Index, Text: *b.Thinking})
			}
		case "redacted_thinking":
			out = append(out, event{Type: evRedacted, Index: e.Index, Text: b.Data})
		}
	case "content_block_delta":
		switch e.Delta.Type {
		case "text_delta":
			out = append(out, event{Type: evText, Index: e.Index, Text: e.Delta.Text})
		case "input_json_delta":
			out = append(out, event{Type: evToolArgs, Index: e.Index, Text: e.Delta.PartialJSON})
		case "thinking_delta":
			out = append(out, event{Type: evThinking, Index: e.Index, Text: e.Delta.Thinking})
		case "signature_delta":
			out = append(out, d.signature(e.Index, e.Delta.Signature))
		}
	case "content_block_stop":
		out = append(out, event{Type: evBlockStop, Index: e.Index})
	case "message_delta":
		if e.Usage != nil {
			out = append(out, event{Type: evUsage, Usage: e.Usage.canonical()})
		}
		if e.Delta.StopReason != nil {
			ev := event{Type: evFinish, Finish: betaFinishIn(*e.Delta.StopReason)}
			if e.Delta.StopSequence != nil {
				ev.StopSequence = *e.Delta.StopSequence
			}
			out = append(out, ev)
		}
	case "error":
		out = append(out, event{Type: evError, Err: parseUpstreamError(500, nil, data)})
	}
	return out, nil
}

// ---- canonical events -> client beta stream ----

type betaEncoder struct {
	w        io.Writer
	st       *reqState
	id       string
	model    string
	started  bool
	open     int // client index of the open block, -1 when none
	openKind evType
	openKey  int
	next     int
	tools    map[int]int // upstream tool block index -> client index
	fin      finish
	stopSeq  string
	usage    usage
	nTools   int
	out      jw // the event being written, reused
}

func (betaMsgs) newEncoder(w io.Writer, st *reqState) streamEncoder {
	return &betaEncoder{w: w, st: st, open: -1}
}

// frame starts a client event named name in the reused buffer: "event: <name>\ndata: ".
func (e *betaEncoder) frame(name string) *jw {
	w := &e.out
	w.b = append(w.b[:0], "event: "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, "\ndata: "...)
	return w
}

// end finishes the event begun by frame and writes it.
func (e *betaEncoder) end() error {
	e.out.b = append(e.out.b, '\n', '\n')
	_, err := e.w.Write(e.out.b)
	return err
}

func (e *betaEncoder) send(name string, v any) error {
	w := e.frame(name)
	var err error
	if w.b, err = appendJSON(w.b, v); err != nil {
		return err
	}
	return e.end()
}

func (e *betaEncoder) start() error {
	if e.started {
		return nil
	}
	e.started = true
	if e.id == "" {
		e.id = clientID("msg_", "", e.st)
	}
	u := toBetaUsage(e.usage)
	if u.OutputTokens == 0 {
		u.OutputTokens = 1
	}
	msg := betaResponseOut{ID: e.id, Type: "message", Role: "assistant", Model: e.model, Content: []betaBlock{}, Usage: u}
	return e.send("message_start", obj{"type", "message_start", "message", msg})
}

func (e *betaEncoder) closeOpen() error {
	if e.open < 0 {
		return nil
	}
	i := e.open
	e.open = -1
	return e.send("content_block_stop", obj{"type", "content_block_stop", "index", i})
}

// openBlock closes the open block and starts a new one.
func (e *betaEncoder) openBlock(kind evType, key int, block any) (int, error) {
	if err := e.closeOpen(); err != nil {
		return 0, err
	}
	i := e.next
	e.next++
	e.open, e.openKind, e.openKey = i, kind, key
	return i, e.send("content_block_start", obj{"type", "content_block_start", "index", i, "content_block", block})
}

// delta writes a content_block_delta event for block i: {"type":typ,key:text}.
func (e *betaEncoder) delta(i int, typ, key, text string) error {
	w := e.frame("content_block_delta")
	w.b = append(w.b, `{"type":"content_block_delta","index":`...)
	w.b = strconv.AppendInt(w.b, int64(i), 10)
	w.b = append(w.b, `,"delta":{"type":`...)
	w.str(typ)
	w.key(key)
	w.str(text)
	w.b = append(w.b, '}', '}')
	return e.end()
}

func (e *betaEncoder) emit(ev *event) error {
	switch ev.Type {
	case evStart:
		e.id = clientID("msg_", ev.ID, e.st)
		e.model = ev.Model
		return nil // message_start waits for the first content, so input usage is known when possible
	case evUsage:
		e.usage.merge(ev.Usage)
		return nil
	case evFinish:
		e.fin, e.stopSeq = ev.Finish, ev.StopSequence
		return nil
	}
	if err := e.start(); err != nil {
		return err
	}
	switch ev.Type {
	case evText:
		if ev.Text == "" {
			return nil
		}
		i := e.open
		if i < 0 || e.openKind != evText || e.openKey != ev.Index {
			var err error
			if i, err = e.openBlock(evText, ev.Index, obj{"type", "text", "text", ""}); err != nil {
				return err
			}
		}
		return e.delta(i, "text_delta", "text", ev.Text)
	case evThinking, evSignature:
		i := e.open
		if i < 0 || e.openKind != evThinking || e.openKey != ev.Index {
			var err error
			if i, err = e.openBlock(evThinking, ev.Index, betaBlock{Type: "thinking", Thinking: strp(""), Signature: strp("")}); err != nil {
				return err
			}
		}
		if ev.Type == evSignature {
			return e.delta(i, "signature_delta", "signature", e.st.sigToClient(ev.Text))
		}
		if ev.Text == "" {
			return nil
		}
		return e.delta(i, "thinking_delta", "thinking", ev.Text)
	case evRedacted:
		if _, err := e.openBlock(evRedacted, ev.Index, betaBlock{Type: "redacted_thinking", Data: ev.Text}); err != nil {
			return err
		}
		return e.closeOpen()
	case evToolStart:
		id := ev.CallID
		if id == "" {
			id = fmt.Sprintf("toolu_%s_%d", e.st.respSuffix(), e.nTools)
		}
		e.nTools++
		i, err := e.openBlock(evToolStart, ev.Index, betaBlock{Type: "tool_use", ID: sanitizeID(id), Name: ev.Name, Input: json.RawMessage("{}")})
		if err != nil {
			return err
		}
		if e.tools == nil {
			e.tools = map[int]int{}
		}
		e.tools[ev.Index] = i
		return nil
	case evToolArgs:
		i, ok := e.tools[ev.Index]
		if !ok || ev.Text == "" {
			return nil
		}
		// Fragments are addressed by index, so even an interleaved upstream never loses arguments.
		return e.delta(i, "input_json_delta", "partial_json", ev.Text)
	case evBlockStop:
		if e.open >= 0 && e.openKey == ev.Index {
			return e.closeOpen()
		}
	}
	return nil
}

func (e *betaEncoder) finish() error {
	if err := e.start(); err != nil {
		return err
	}
	if err := e.closeOpen(); err != nil {
		return err
	}
	f := e.fin
	if (f == finishStop || f == finishNone) && e.nTools > 0 {
		f = finishToolCalls
	}
	if f == finishStop && e.stopSeq != "" {
		f = finishStopSequence
	}
	var seq any
	if f == finishStopSequence && e.stopSeq != "" {
		seq = e.stopSeq
	}
	delta := obj{"stop_reason", betaFinishOut(f), "stop_sequence", seq}
	u := toBetaUsage(e.usage)
	if err := e.send("message_delta", obj{"type", "message_delta", "delta", delta, "usage", u}); err != nil {
		return err
	}
	return e.send("message_stop", obj{"type", "message_stop"})
}

func (e *betaEncoder) fail(ae *apiError) error {
	return e.send("error", json.RawMessage(ae.body(vocab.KindBeta)))
}
