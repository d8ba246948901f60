package alpha

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
)

// ---- upstream alpha responses stream -> canonical events ----

type RespDecoder struct {
	started  bool
	ArgsSeen map[int]bool `json:"-"`
	calls    bool
	Summary  map[int]int     `json:"-"`
	Ev       RespStreamEvent `json:"-"` // the event being decoded
	Bill     Billing         `json:"-"` // the billed usage, read from the response objects decoded
}

func (Responses) NewDecoder(*canon.State) canon.StreamDecoder {
	return &RespDecoder{ArgsSeen: map[int]bool{}, Summary: map[int]int{}, Bill: ResponsesBilling()}
}

// ObserveHeader implements canon.Biller; alpha reports its tier in the body.
func (d *RespDecoder) ObserveHeader(http.Header) {}

// Billed implements canon.Biller: the billed usage of the response objects decoded so far (the terminal
// response.completed / incomplete / failed carries the usage).
func (d *RespDecoder) Billed() (u usage.Usage, found, outputReported bool) {
	u, found = d.Bill.Usage()
	return u, found, true
}

// billUnreadable bills the response object of an event the decoder cannot read (a member of a type it
// cannot carry), as the passthrough relay reader reads it: what the translator cannot carry never costs
// the bill.
func (d *RespDecoder) billUnreadable(data []byte) {
	if !jsonkit.ValidJSON(data) {
		return // not JSON: bills nothing
	}
	var r jsonkit.Relay
	ReadResponsesRelay(data, &r)
	d.Bill.ObserveRelay(&r)
}

type RespStreamEvent struct {
	Type         string          `json:"type"`
	Response     *respResponse   `json:"response"`
	OutputIndex  int             `json:"output_index"`
	SummaryIndex int             `json:"summary_index"`
	Item         *respOutItem    `json:"item"`
	Delta        string          `json:"delta"`
	Arguments    string          `json:"arguments"`
	Code         json.RawMessage `json:"code"`
	Message      string          `json:"message"`
}

func (d *RespDecoder) Decode(name string, data []byte, out []canon.Event) ([]canon.Event, error) {
	if len(data) == 0 {
		return out, nil
	}
	if o, ok := d.Fast(data, out); ok {
		return o, nil
	}
	return d.General(name, data, out)
}

// General decodes any event with the general decoder.
func (d *RespDecoder) General(name string, data []byte, out []canon.Event) ([]canon.Event, error) {
	d.Ev = RespStreamEvent{} // reused: one allocation less per event
	e := &d.Ev
	if err := jsonkit.UnmarshalEvent(data, e); err != nil {
		d.billUnreadable(data)
		return out, err
	}
	if r := e.Response; r != nil {
		d.Bill.top(r.ServiceTier)
		d.Bill.add(r.Usage)
	}
	typ := e.Type
	if typ == "" {
		typ = name
	}
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		if !d.started && e.Response != nil {
			d.started = true
			out = append(out, canon.Event{Type: canon.EvStart, ID: e.Response.ID, Model: e.Response.Model, ServiceTier: e.Response.ServiceTier})
		}
	case "response.output_item.added":
		if e.Item != nil && e.Item.Type == "function_call" {
			d.calls = true
			out = append(out, canon.Event{Type: canon.EvToolStart, Index: e.OutputIndex, CallID: e.Item.CallID, Name: e.Item.Name, ItemID: e.Item.ID})
			if e.Item.Arguments != nil && *e.Item.Arguments != "" {
				d.ArgsSeen[e.OutputIndex] = true
				out = append(out, canon.Event{Type: canon.EvToolArgs, Index: e.OutputIndex, Text: *e.Item.Arguments})
			}
		}
	case "response.output_text.delta", "response.refusal.delta":
		out = append(out, canon.Event{Type: canon.EvText, Index: e.OutputIndex, Text: e.Delta})
	case "response.reasoning_summary_part.added":
		if e.SummaryIndex > 0 {
			out = append(out, canon.Event{Type: canon.EvThinking, Index: e.OutputIndex, Text: "\n\n"})
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		out = append(out, canon.Event{Type: canon.EvThinking, Index: e.OutputIndex, Text: e.Delta})
	case "response.function_call_arguments.delta":
		d.ArgsSeen[e.OutputIndex] = true
		out = append(out, canon.Event{Type: canon.EvToolArgs, Index: e.OutputIndex, Text: e.Delta})
	case "response.function_call_arguments.done":
		if !d.ArgsSeen[e.OutputIndex] && e.Arguments != "" {
			d.ArgsSeen[e.OutputIndex] = true
			out = append(out, canon.Event{Type: canon.EvToolArgs, Index: e.OutputIndex, Text: e.Arguments})
		}
	case "response.output_item.done":
		if it := e.Item; it != nil {
			switch it.Type {
			case "reasoning":
				if sig := respSignature(it.ID, it.EncryptedContent); it.EncryptedContent != "" {
					out = append(out, canon.Event{Type: canon.EvSignature, Index: e.OutputIndex, Text: sig})
				}
			case "function_call":
				if !d.ArgsSeen[e.OutputIndex] && it.Arguments != nil && *it.Arguments != "" {
					d.ArgsSeen[e.OutputIndex] = true
					out = append(out, canon.Event{Type: canon.EvToolArgs, Index: e.OutputIndex, Text: *it.Arguments})
				}
			}
		}
		out = append(out, canon.Event{Type: canon.EvBlockStop, Index: e.OutputIndex})
	case "response.completed", "response.incomplete", "response.failed":
		if e.Response == nil {
			return out, nil
		}
		r := e.Response
		if r.Usage != nil {
			out = append(out, canon.Event{Type: canon.EvUsage, Usage: r.Usage.canonical()})
		}
		if typ == "response.failed" {
			msg, code := "response failed", ""
			if r.Error != nil {
				msg, code = r.Error.Message, r.Error.Code
			}
			return append(out, canon.Event{Type: canon.EvError, Err: &canon.APIError{Status: 500, Class: canon.ClassServer, Message: msg, Code: code}}), nil
		}
		reason := ""
		if r.IncompleteDetails != nil {
			reason = r.IncompleteDetails.Reason
		}
		out = append(out, canon.Event{Type: canon.EvFinish, Finish: respFinishIn(r.Status, reason, d.calls || canon.HasToolCall(respOutputToParts(r.Output)))})
	case "error":
		out = append(out, canon.Event{Type: canon.EvError, Err: canon.ParseUpstreamError(500, nil, data)})
	}
	return out, nil
}

// ---- canonical events -> client alpha responses stream ----

type respOpenItem struct {
	kind   canon.EvType
	key    int
	out    int // output index
	id     string
	text   []byte
	sig    string
	closed bool
	hasSum bool
}

type respEncoder struct {
	w       io.Writer
	st      *canon.State
	seq     int
	id      string
	model   string
	tier    string
	created int64
	started bool
	open    *respOpenItem
	items   []*respOpenItem
	parts   []canon.Part
	tools   map[int]*respOpenItem
	fin     canon.Finish
	usage   canon.Usage
	out     jsonkit.Writer // the event being written, reused
}

func (Responses) NewEncoder(w io.Writer, st *canon.State) canon.StreamEncoder {
	return &respEncoder{w: w, st: st, created: st.Now(), tools: map[int]*respOpenItem{}}
}

// frame starts a client event of type typ in the reused buffer, with its type and sequence number written.
func (e *respEncoder) frame(typ string) *jsonkit.Writer {
	w := &e.out
	w.B = append(w.B[:0], "event: "...)
	w.B = append(w.B, typ...)
	w.B = append(w.B, "\ndata: {"...)
	w.Key("type")
	w.Str(typ)
	w.Key("sequence_number")
	w.Int(int64(e.seq))
	e.seq++
	return w
}

// end closes the event begun by frame and writes it.
func (e *respEncoder) end() error {
	e.out.B = append(e.out.B, '}', '\n', '\n')
	_, err := e.w.Write(e.out.B)
	return err
}

// send writes an event of type typ with fields after its type and sequence number.
func (e *respEncoder) send(typ string, fields jsonkit.Obj) error {
	w := e.frame(typ)
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		w.Key(k)
		var err error
		if w.B, err = jsonkit.AppendJSON(w.B, fields[i+1]); err != nil {
			return err
		}
	}
	return e.end()
}

// delta writes a text, summary or argument delta event: item_id, output_index, then the index member idxKey
// (none when "") with 0, then delta; text deltas end with an empty logprobs.
func (e *respEncoder) delta(typ string, it *respOpenItem, idxKey, text string, logprobs bool) error {
	w := e.frame(typ)
	w.Key("item_id")
	w.Str(it.id)
	w.Key("output_index")
	w.Int(int64(it.out))
	if idxKey != "" {
		w.Key(idxKey)
		w.Int(0)
	}
	w.Key("delta")
	w.Str(text)
	if logprobs {
		w.Key("logprobs")
		w.Open('[')
		w.Close(']')
	}
	return e.end()
}

func (e *respEncoder) shell(status string, errv any) jsonkit.Obj {
	return jsonkit.Obj{"id", e.id, "object", "response", "created_at", e.created, "status", status, "error", errv,
		"incomplete_details", nil, "model", e.model, "output", []any{}, "parallel_tool_calls", true, "tool_choice", "auto",
		"tools", []any{}, "usage", nil}
}

func (e *respEncoder) start() error {
	if e.started {
		return nil
	}
	e.started = true
	if e.id == "" {
		e.id = canon.ClientID("resp_", "", e.st)
	}
	if err := e.send("response.created", jsonkit.Obj{"response", e.shell("in_progress", nil)}); err != nil {
		return err
	}
	return e.send("response.in_progress", jsonkit.Obj{"response", e.shell("in_progress", nil)})
}

func (e *respEncoder) openItem(kind canon.EvType, key int, p canon.Part) (*respOpenItem, error) {
	if err := e.closeOpen(); err != nil {
		return nil, err
	}
	idx := len(e.parts)
	it := &respOpenItem{kind: kind, key: key, out: idx}
	var item jsonkit.Obj
	switch kind {
	case canon.EvText:
		it.id = canon.NonEmpty(p.Get().ItemID, respItemID("msg", e.st, idx))
		item = jsonkit.Obj{"id", it.id, "type", "message", "status", "in_progress", "role", "assistant", "content", []any{}}
	case canon.EvThinking:
		it.id = canon.NonEmpty(p.Get().ItemID, respItemID("rs", e.st, idx))
		item = jsonkit.Obj{"id", it.id, "type", "reasoning", "summary", []any{}}
	case canon.EvToolStart:
		it.id = canon.NonEmpty(p.Get().ItemID, respItemID("fc", e.st, idx))
		if p.CallID == "" {
			p.CallID = "call_" + e.st.RespSuffix() + "_" + itoa(idx)
		}
		item = jsonkit.Obj{"id", it.id, "type", "function_call", "status", "in_progress", "call_id", p.CallID, "name", p.Name, "arguments", ""}
		e.tools[key] = it
	}
	e.parts = append(e.parts, p)
	e.items = append(e.items, it)
	e.open = it
	if err := e.send("response.output_item.added", jsonkit.Obj{"output_index", idx, "item", item}); err != nil {
		return nil, err
	}
	if kind == canon.EvText {
		return it, e.send("response.content_part.added", jsonkit.Obj{"item_id", it.id, "output_index", idx, "content_index", 0,
			"part", jsonkit.Obj{"type", "output_text", "text", "", "annotations", []any{}}})
	}
	return it, nil
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func (e *respEncoder) closeItem(it *respOpenItem) error {
	if it == nil || it.closed {
		return nil
	}
	it.closed = true
	if e.open == it {
		e.open = nil
	}
	p := &e.parts[it.out]
	switch it.kind {
	case canon.EvText:
		p.Text = string(it.text)
		if err := e.send("response.output_text.done", jsonkit.Obj{"item_id", it.id, "output_index", it.out, "content_index", 0, "text", p.Text, "logprobs", []any{}}); err != nil {
			return err
		}
		if err := e.send("response.content_part.done", jsonkit.Obj{"item_id", it.id, "output_index", it.out, "content_index", 0,
			"part", jsonkit.Obj{"type", "output_text", "text", p.Text, "annotations", []any{}}}); err != nil {
			return err
		}
	case canon.EvThinking:
		p.Text, p.Signature = string(it.text), it.sig
		if it.hasSum {
			if err := e.send("response.reasoning_summary_text.done", jsonkit.Obj{"item_id", it.id, "output_index", it.out, "summary_index", 0, "text", p.Text}); err != nil {
				return err
			}
			if err := e.send("response.reasoning_summary_part.done", jsonkit.Obj{"item_id", it.id, "output_index", it.out, "summary_index", 0,
				"part", jsonkit.Obj{"type", "summary_text", "text", p.Text}}); err != nil {
				return err
			}
		}
	case canon.EvToolStart:
		p.Args = jsonkit.ArgsObject(string(it.text))
		if err := e.send("response.function_call_arguments.done", jsonkit.Obj{"item_id", it.id, "output_index", it.out, "arguments", string(it.text)}); err != nil {
			return err
		}
	}
	if it.kind == canon.EvToolStart {
		x := p.Get()
		x.RawArgs = string(it.text) // exactly the streamed fragments
		*p = p.WithExtra(x)
	}
	item := respOutputItem(*p, it.out, e.st)
	return e.send("response.output_item.done", jsonkit.Obj{"output_index", it.out, "item", item})
}

func (e *respEncoder) closeOpen() error { return e.closeItem(e.open) }

func (e *respEncoder) Emit(ev *canon.Event) error {
	switch ev.Type {
	case canon.EvStart:
		e.id = canon.ClientID("resp_", ev.ID, e.st)
		e.model = ev.Model
		e.tier = alphaTier(ev.ServiceTier)
		return e.start()
	case canon.EvUsage:
		e.usage.Merge(ev.Usage)
		return nil
	case canon.EvFinish:
		e.fin = ev.Finish
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
		it := e.open
		if it == nil || it.kind != canon.EvText || it.key != ev.Index {
			var err error
			if it, err = e.openItem(canon.EvText, ev.Index, canon.Part{Type: canon.PartText}.WithExtra(canon.PartExtra{ItemID: ev.ItemID})); err != nil {
				return err
			}
		}
		it.text = append(it.text, ev.Text...)
		return e.delta("response.output_text.delta", it, "content_index", ev.Text, true)
	case canon.EvThinking, canon.EvSignature:
		it := e.open
		if it == nil || it.kind != canon.EvThinking || it.key != ev.Index {
			var err error
			if it, err = e.openItem(canon.EvThinking, ev.Index, canon.Part{Type: canon.PartThinking}.WithExtra(canon.PartExtra{ItemID: ev.ItemID})); err != nil {
				return err
			}
		}
		if ev.Type == canon.EvSignature {
			it.sig += ev.Text
			return nil
		}
		if ev.Text == "" {
			return nil
		}
		if !it.hasSum {
			it.hasSum = true
			if err := e.send("response.reasoning_summary_part.added", jsonkit.Obj{"item_id", it.id, "output_index", it.out, "summary_index", 0,
				"part", jsonkit.Obj{"type", "summary_text", "text", ""}}); err != nil {
				return err
			}
		}
		it.text = append(it.text, ev.Text...)
		return e.delta("response.reasoning_summary_text.delta", it, "summary_index", ev.Text, false)
	case canon.EvToolStart:
		_, err := e.openItem(canon.EvToolStart, ev.Index, canon.Part{Type: canon.PartToolCall, CallID: ev.CallID, Name: ev.Name}.WithExtra(canon.PartExtra{ItemID: ev.ItemID}))
		return err
	case canon.EvToolArgs:
		it := e.tools[ev.Index]
		if it == nil || it.closed || ev.Text == "" {
			return nil
		}
		it.text = append(it.text, ev.Text...)
		return e.delta("response.function_call_arguments.delta", it, "", ev.Text, false)
	case canon.EvBlockStop:
		if e.open != nil && e.open.key == ev.Index {
			return e.closeOpen()
		}
		if it := e.tools[ev.Index]; it != nil {
			return e.closeItem(it)
		}
	}
	return nil
}

func (e *respEncoder) Finish() error {
	if err := e.start(); err != nil {
		return err
	}
	for _, it := range e.items {
		if err := e.closeItem(it); err != nil {
			return err
		}
	}
	f := e.fin
	if f == canon.FinishStop && canon.HasToolCall(e.parts) {
		f = canon.FinishToolCalls
	}
	r := &canon.Response{Model: e.model, Parts: e.parts, Finish: f, Usage: e.usage, ServiceTier: e.tier}
	full := respBuildResponse(r, e.st, e.id, e.created)
	if full.Usage == nil {
		full.Usage = toRespUsage(canon.Usage{})
	}
	typ := "response.completed"
	if full.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return e.send(typ, jsonkit.Obj{"response", full})
}

func (e *respEncoder) Fail(ae *canon.APIError) error {
	if err := e.start(); err != nil {
		return err
	}
	code := ae.AlphaCode()
	if code == "" {
		code = ae.AlphaType()
	}
	if err := e.send("error", jsonkit.Obj{"code", code, "message", ae.Message, "param", nil}); err != nil {
		return err
	}
	sh := e.shell("failed", jsonkit.Obj{"code", code, "message", ae.Message})
	return e.send("response.failed", jsonkit.Obj{"response", sh})
}
