package beta

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ---- upstream beta stream -> canonical events ----

type Decoder struct {
	Signed map[int]bool `json:"-"` // thinking blocks whose signature tag was emitted
	Ev     StreamEvent  `json:"-"` // the event being decoded
	Bill   Billing      `json:"-"` // the billed usage, read from the decoded events
}

// ObserveHeader implements canon.Biller; beta reports its tier in the body.
func (d *Decoder) ObserveHeader(http.Header) {}

// Billed implements canon.Biller: the billed usage of the stream so far, from the events this decoder read.
func (d *Decoder) Billed() (u usage.Usage, found, outputReported bool) {
	u, found = d.Bill.Usage()
	return u, found, d.Bill.OutputReported()
}

type StreamEvent struct {
	Type         string          `json:"type"`
	Message      *betaResponse   `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *Block          `json:"content_block"`
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
	Usage *usageIn `json:"usage"`
}

func (Messages) NewDecoder(*canon.State) canon.StreamDecoder { return &Decoder{Signed: map[int]bool{}} }

func (d *Decoder) Decode(name string, data []byte, out []canon.Event) ([]canon.Event, error) {
	if len(data) == 0 {
		return out, nil
	}
	if o, ok := d.Fast(data, out); ok {
		return o, nil
	}
	return d.General(data, out)
}

// signature is the event of a signature fragment of block i: a block's first fragment is tagged, later
// fragments append to it.
func (d *Decoder) signature(i int, sig string) canon.Event {
	if !d.Signed[i] {
		d.Signed[i] = true
		sig = canon.TagSig(vocab.KindBeta, sig)
	}
	return canon.Event{Type: canon.EvSignature, Index: i, Text: sig}
}

// General decodes any event with the general decoder.
// billUnreadable bills the usage members of an event the decoder cannot read (a member of a type it cannot
// carry), as the passthrough relay reader reads them: what the translator cannot carry never costs the bill.
func (d *Decoder) billUnreadable(data []byte) {
	if !jsonkit.ValidJSON(data) {
		return // not JSON: bills nothing
	}
	var r jsonkit.Relay
	ReadRelay(data, &r)
	d.Bill.ObserveRelay(&r)
}

func (d *Decoder) General(data []byte, out []canon.Event) ([]canon.Event, error) {
	d.Ev = StreamEvent{} // reused: one allocation less per event
	e := &d.Ev
	if err := jsonkit.UnmarshalEvent(data, e); err != nil {
		d.billUnreadable(data)
		return out, err
	}
	// Any event's message and top-level usage are billed (message_start's and message_delta's in practice).
	if e.Message != nil {
		d.Bill.message(e.Message)
	}
	d.Bill.add(e.Usage, true)
	switch e.Type {
	case "message_start":
		if e.Message == nil {
			return out, nil
		}
		out = append(out, canon.Event{Type: canon.EvStart, ID: e.Message.ID, Model: e.Message.Model})
		if e.Message.Usage != nil {
			out = append(out, canon.Event{Type: canon.EvUsage, Usage: e.Message.Usage.canonical(), ServiceTier: e.Message.Usage.ServiceTier.S})
		}
	case "content_block_start":
		b := e.ContentBlock
		if b == nil {
			return out, nil
		}
		switch b.Type {
		case "text":
			if b.Text != "" {
				out = append(out, canon.Event{Type: canon.EvText, Index: e.Index, Text: b.Text})
			}
		case "tool_use":
			out = append(out, canon.Event{Type: canon.EvToolStart, Index: e.Index, CallID: b.ID, Name: b.Name})
			if len(b.Input) > 0 && string(jsonkit.CompactJSON(b.Input)) != "{}" {
				out = append(out, canon.Event{Type: canon.EvToolArgs, Index: e.Index, Text: string(jsonkit.CompactJSON(b.Input))})
			}
		case "thinking":
			if b.Thinking != nil && *b.Thinking != "" {
				out = append(out, canon.Event{Type: canon.EvThinking, Index: e.Index, Text: *b.Thinking})
			}
		case "redacted_thinking":
			out = append(out, canon.Event{Type: canon.EvRedacted, Index: e.Index, Text: b.Data})
		}
	case "content_block_delta":
		switch e.Delta.Type {
		case "text_delta":
			out = append(out, canon.Event{Type: canon.EvText, Index: e.Index, Text: e.Delta.Text})
		case "input_json_delta":
			out = append(out, canon.Event{Type: canon.EvToolArgs, Index: e.Index, Text: e.Delta.PartialJSON})
		case "thinking_delta":
			out = append(out, canon.Event{Type: canon.EvThinking, Index: e.Index, Text: e.Delta.Thinking})
		case "signature_delta":
			out = append(out, d.signature(e.Index, e.Delta.Signature))
		}
	case "content_block_stop":
		out = append(out, canon.Event{Type: canon.EvBlockStop, Index: e.Index})
	case "message_delta":
		if e.Usage != nil {
			out = append(out, canon.Event{Type: canon.EvUsage, Usage: e.Usage.canonical()})
		}
		if e.Delta.StopReason != nil {
			ev := canon.Event{Type: canon.EvFinish, Finish: betaFinishIn(*e.Delta.StopReason)}
			if e.Delta.StopSequence != nil {
				ev.StopSequence = *e.Delta.StopSequence
			}
			out = append(out, ev)
		}
	case "error":
		out = append(out, canon.Event{Type: canon.EvError, Err: canon.ParseUpstreamError(500, nil, data)})
	}
	return out, nil
}

// ---- canonical events -> client beta stream ----

type betaEncoder struct {
	w        io.Writer
	st       *canon.State
	id       string
	model    string
	started  bool
	open     int // client index of the open block, -1 when none
	openKind canon.EvType
	openKey  int
	next     int
	tools    map[int]int // upstream tool block index -> client index
	fin      canon.Finish
	stopSeq  string
	usage    canon.Usage
	nTools   int
	out      jsonkit.Writer // the event being written, reused
}

func (Messages) NewEncoder(w io.Writer, st *canon.State) canon.StreamEncoder {
	return &betaEncoder{w: w, st: st, open: -1}
}

// frame starts a client event named name in the reused buffer: "event: <name>\ndata: ".
func (e *betaEncoder) frame(name string) *jsonkit.Writer {
	w := &e.out
	w.B = append(w.B[:0], "event: "...)
	w.B = append(w.B, name...)
	w.B = append(w.B, "\ndata: "...)
	return w
}

// end finishes the event begun by frame and writes it.
func (e *betaEncoder) end() error {
	e.out.B = append(e.out.B, '\n', '\n')
	_, err := e.w.Write(e.out.B)
	return err
}

func (e *betaEncoder) send(name string, v any) error {
	w := e.frame(name)
	var err error
	if w.B, err = jsonkit.AppendJSON(w.B, v); err != nil {
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
		e.id = canon.ClientID("msg_", "", e.st)
	}
	u := toBetaUsage(e.usage)
	if u.OutputTokens == 0 {
		u.OutputTokens = 1
	}
	msg := betaResponseOut{ID: e.id, Type: "message", Role: "assistant", Model: e.model, Content: []Block{}, Usage: u}
	return e.send("message_start", jsonkit.Obj{"type", "message_start", "message", msg})
}

func (e *betaEncoder) closeOpen() error {
	if e.open < 0 {
		return nil
	}
	i := e.open
	e.open = -1
	return e.send("content_block_stop", jsonkit.Obj{"type", "content_block_stop", "index", i})
}

// openBlock closes the open block and starts a new one.
func (e *betaEncoder) openBlock(kind canon.EvType, key int, block any) (int, error) {
	if err := e.closeOpen(); err != nil {
		return 0, err
	}
	i := e.next
	e.next++
	e.open, e.openKind, e.openKey = i, kind, key
	return i, e.send("content_block_start", jsonkit.Obj{"type", "content_block_start", "index", i, "content_block", block})
}

// delta writes a content_block_delta event for block i: {"type":typ,key:text}.
func (e *betaEncoder) delta(i int, typ, key, text string) error {
	w := e.frame("content_block_delta")
	w.B = append(w.B, `{"type":"content_block_delta","index":`...)
	w.B = strconv.AppendInt(w.B, int64(i), 10)
	w.B = append(w.B, `,"delta":{"type":`...)
	w.Str(typ)
	w.Key(key)
	w.Str(text)
	w.B = append(w.B, '}', '}')
	return e.end()
}

func (e *betaEncoder) Emit(ev *canon.Event) error {
	switch ev.Type {
	case canon.EvStart:
		e.id = canon.ClientID("msg_", ev.ID, e.st)
		e.model = ev.Model
		return nil // message_start waits for the first content, so input usage is known when possible
	case canon.EvUsage:
		e.usage.Merge(ev.Usage)
		return nil
	case canon.EvFinish:
		e.fin, e.stopSeq = ev.Finish, ev.StopSequence
		return nil
	}
	if err := e.start(); err != nil {
		return err
	}
	switch ev.Type {
	case canon.EvText:
		if ev.Text == "" {
			return nil
		}
		i := e.open
		if i < 0 || e.openKind != canon.EvText || e.openKey != ev.Index {
			var err error
			if i, err = e.openBlock(canon.EvText, ev.Index, jsonkit.Obj{"type", "text", "text", ""}); err != nil {
				return err
			}
		}
		return e.delta(i, "text_delta", "text", ev.Text)
	case canon.EvThinking, canon.EvSignature:
		i := e.open
		if i < 0 || e.openKind != canon.EvThinking || e.openKey != ev.Index {
			var err error
			if i, err = e.openBlock(canon.EvThinking, ev.Index, Block{Type: "thinking", Thinking: canon.Strp(""), Signature: canon.Strp("")}); err != nil {
				return err
			}
		}
		if ev.Type == canon.EvSignature {
			return e.delta(i, "signature_delta", "signature", e.st.SigToClient(ev.Text))
		}
		if ev.Text == "" {
			return nil
		}
		return e.delta(i, "thinking_delta", "thinking", ev.Text)
	case canon.EvRedacted:
		if _, err := e.openBlock(canon.EvRedacted, ev.Index, Block{Type: "redacted_thinking", Data: ev.Text}); err != nil {
			return err
		}
		return e.closeOpen()
	case canon.EvToolStart:
		id := ev.CallID
		if id == "" {
			id = fmt.Sprintf("toolu_%s_%d", e.st.RespSuffix(), e.nTools)
		}
		e.nTools++
		i, err := e.openBlock(canon.EvToolStart, ev.Index, Block{Type: "tool_use", ID: canon.SanitizeID(id), Name: ev.Name, Input: json.RawMessage("{}")})
		if err != nil {
			return err
		}
		if e.tools == nil {
			e.tools = map[int]int{}
		}
		e.tools[ev.Index] = i
		return nil
	case canon.EvToolArgs:
		i, ok := e.tools[ev.Index]
		if !ok || ev.Text == "" {
			return nil
		}
		// Fragments are addressed by index, so even an interleaved upstream never loses arguments.
		return e.delta(i, "input_json_delta", "partial_json", ev.Text)
	case canon.EvBlockStop:
		if e.open >= 0 && e.openKey == ev.Index {
			return e.closeOpen()
		}
	}
	return nil
}

func (e *betaEncoder) Finish() error {
	if err := e.start(); err != nil {
		return err
	}
	if err := e.closeOpen(); err != nil {
		return err
	}
	f := e.fin
	if (f == canon.FinishStop || f == canon.FinishNone) && e.nTools > 0 {
		f = canon.FinishToolCalls
	}
	if f == canon.FinishStop && e.stopSeq != "" {
		f = canon.FinishStopSequence
	}
	var seq any
	if f == canon.FinishStopSequence && e.stopSeq != "" {
		seq = e.stopSeq
	}
	delta := jsonkit.Obj{"stop_reason", betaFinishOut(f), "stop_sequence", seq}
	u := toBetaUsage(e.usage)
	if err := e.send("message_delta", jsonkit.Obj{"type", "message_delta", "delta", delta, "usage", u}); err != nil {
		return err
	}
	return e.send("message_stop", jsonkit.Obj{"type", "message_stop"})
}

func (e *betaEncoder) Fail(ae *canon.APIError) error {
	return e.send("error", json.RawMessage(ErrorBody(ae.Fields(vocab.KindBeta))))
}
