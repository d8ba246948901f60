package translate

import (
	"encoding/json"
	"io"
)

// ---- upstream alpha responses stream -> canonical events ----

type respDecoder struct {
	started  bool
	argsSeen map[int]bool
	calls    bool
	summary  map[int]int
	ev       respStreamEvent // the event being decoded
}

func (alphaResp) newDecoder(*reqState) streamDecoder {
	return &respDecoder{argsSeen: map[int]bool{}, summary: map[int]int{}}
}

type respStreamEvent struct {
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

func (d *respDecoder) decode(name string, data []byte, out []event) ([]event, error) {
	if len(data) == 0 {
		return out, nil
	}
	if o, ok := d.fast(data, out); ok {
		return o, nil
	}
	return d.general(name, data, out)
}

// general decodes any event with the general decoder.
func (d *respDecoder) general(name string, data []byte, out []event) ([]event, error) {
	d.ev = respStreamEvent{} // reused: one allocation less per event
	e := &d.ev
	if err := unmarshalEvent(data, e); err != nil {
		return out, err
	}
	typ := e.Type
	if typ == "" {
		typ = name
	}
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		if !d.started && e.Response != nil {
			d.started = true
			out = append(out, event{Type: evStart, ID: e.Response.ID, Model: e.Response.Model, ServiceTier: e.Response.ServiceTier})
		}
	case "response.output_item.added":
		if e.Item != nil && e.Item.Type == "function_call" {
			d.calls = true
			out = append(out, event{Type: evToolStart, Index: e.OutputIndex, CallID: e.Item.CallID, Name: e.Item.Name, ItemID: e.Item.ID})
			if e.Item.Arguments != nil && *e.Item.Arguments != "" {
				d.argsSeen[e.OutputIndex] = true
				out = append(out, event{Type: evToolArgs, Index: e.OutputIndex, Text: *e.Item.Arguments})
			}
		}
	case "response.output_text.delta", "response.refusal.delta":
		out = append(out, event{Type: evText, Index: e.OutputIndex, Text: e.Delta})
	case "response.reasoning_summary_part.added":
		if e.SummaryIndex > 0 {
			out = append(out, event{Type: evThinking, Index: e.OutputIndex, Text: "\n\n"})
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		out = append(out, event{Type: evThinking, Index: e.OutputIndex, Text: e.Delta})
	case "response.function_call_arguments.delta":
		d.argsSeen[e.OutputIndex] = true
		out = append(out, event{Type: evToolArgs, Index: e.OutputIndex, Text: e.Delta})
	case "response.function_call_arguments.done":
		if !d.argsSeen[e.OutputIndex] && e.Arguments != "" {
			d.argsSeen[e.OutputIndex] = true
			out = append(out, event{Type: evToolArgs, Index: e.OutputIndex, Text: e.Arguments})
		}
	case "response.output_item.done":
		if it := e.Item; it != nil {
			switch it.Type {
			case "reasoning":
				if sig := respSignature(it.ID, it.EncryptedContent); it.EncryptedContent != "" {
					out = append(out, event{Type: evSignature, Index: e.OutputIndex, Text: sig})
				}
			case "function_call":
				if !d.argsSeen[e.OutputIndex] && it.Arguments != nil && *it.Arguments != "" {
					d.argsSeen[e.OutputIndex] = true
					out = append(out, event{Type: evToolArgs, Index: e.OutputIndex, Text: *it.Arguments})
				}
			}
		}
		out = append(out, event{Type: evBlockStop, Index: e.OutputIndex})
	case "response.completed", "response.incomplete", "response.failed":
		if e.Response == nil {
			return out, nil
		}
		r := e.Response
		if r.Usage != nil {
			out = append(out, event{Type: evUsage, Usage: r.Usage.canonical()})
		}
		if typ == "response.failed" {
			msg, code := "response failed", ""
			if r.Error != nil {
				msg, code = r.Error.Message, r.Error.Code
			}
			return append(out, event{Type: evError, Err: &apiError{Status: 500, Class: classServer, Message: msg, Code: code}}), nil
		}
		reason := ""
		if r.IncompleteDetails != nil {
			reason = r.IncompleteDetails.Reason
		}
		out = append(out, event{Type: evFinish, Finish: respFinishIn(r.Status, reason, d.calls || hasToolCall(respOutputToParts(r.Output)))})
	case "error":
		out = append(out, event{Type: evError, Err: parseUpstreamError(500, nil, data)})
	}
	return out, nil
}

// ---- canonical events -> client alpha responses stream ----

type respOpenItem struct {
	kind   evType
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
	st      *reqState
	seq     int
	id      string
	model   string
	tier    string
	created int64
	started bool
	open    *respOpenItem
	items   []*respOpenItem
	parts   []part
	tools   map[int]*respOpenItem
	fin     finish
	usage   usage
	out     jw // the event being written, reused
}

func (alphaResp) newEncoder(w io.Writer, st *reqState) streamEncoder {
	return &respEncoder{w: w, st: st, created: st.now(), tools: map[int]*respOpenItem{}}
}

// frame starts a client event of type typ in the reused buffer, with its type and sequence number written.
func (e *respEncoder) frame(typ string) *jw {
	w := &e.out
	w.b = append(w.b[:0], "event: "...)
	w.b = append(w.b, typ...)
	w.b = append(w.b, "\ndata: {"...)
	w.key("type")
	w.str(typ)
	w.key("sequence_number")
	w.int(int64(e.seq))
	e.seq++
	return w
}

// end closes the event begun by frame and writes it.
func (e *respEncoder) end() error {
	e.out.b = append(e.out.b, '}', '\n', '\n')
	_, err := e.w.Write(e.out.b)
	return err
}

// send writes an event of type typ with fields after its type and sequence number.
func (e *respEncoder) send(typ string, fields obj) error {
	w := e.frame(typ)
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		w.key(k)
		var err error
		if w.b, err = appendJSON(w.b, fields[i+1]); err != nil {
			return err
		}
	}
	return e.end()
}

// delta writes a text, summary or argument delta event: item_id, output_index, then the index member idxKey
// (none when "") with 0, then delta; text deltas end with an empty logprobs.
func (e *respEncoder) delta(typ string, it *respOpenItem, idxKey, text string, logprobs bool) error {
	w := e.frame(typ)
	w.key("item_id")
	w.str(it.id)
	w.key("output_index")
	w.int(int64(it.out))
	if idxKey != "" {
		w.key(idxKey)
		w.int(0)
	}
	w.key("delta")
	w.str(text)
	if logprobs {
		w.key("logprobs")
		w.open('[')
		w.close(']')
	}
	return e.end()
}

func (e *respEncoder) shell(status string, errv any) obj {
	return obj{"id", e.id, "object", "response", "created_at", e.created, "status", status, "error", errv,
		"incomplete_details", nil, "model", e.model, "output", []any{}, "parallel_tool_calls", true, "tool_choice", "auto",
		"tools", []any{}, "usage", nil}
}

func (e *respEncoder) start() error {
	if e.started {
		return nil
	}
	e.started = true
	if e.id == "" {
		e.id = clientID("resp_", "", e.st)
	}
	if err := e.send("response.created", obj{"response", e.shell("in_progress", nil)}); err != nil {
		return err
	}
	return e.send("response.in_progress", obj{"response", e.shell("in_progress", nil)})
}

func (e *respEncoder) openItem(kind evType, key int, p part) (*respOpenItem, error) {
	if err := e.closeOpen(); err != nil {
		return nil, err
	}
	idx := len(e.parts)
	it := &respOpenItem{kind: kind, key: key, out: idx}
	var item obj
	switch kind {
	case evText:
		it.id = nonEmpty(p.get().ItemID, respItemID("msg", e.st, idx))
		item = obj{"id", it.id, "type", "message", "status", "in_progress", "role", "assistant", "content", []any{}}
	case evThinking:
		it.id = nonEmpty(p.get().ItemID, respItemID("rs", e.st, idx))
		item = obj{"id", it.id, "type", "reasoning", "summary", []any{}}
	case evToolStart:
		it.id = nonEmpty(p.get().ItemID, respItemID("fc", e.st, idx))
		if p.CallID == "" {
			p.CallID = "call_" + e.st.respSuffix() + "_" + itoa(idx)
		}
		item = obj{"id", it.id, "type", "function_call", "status", "in_progress", "call_id", p.CallID, "name", p.Name, "arguments", ""}
		e.tools[key] = it
	}
	e.parts = append(e.parts, p)
	e.items = append(e.items, it)
	e.open = it
	if err := e.send("response.output_item.added", obj{"output_index", idx, "item", item}); err != nil {
		return nil, err
	}
	if kind == evText {
		return it, e.send("response.content_part.added", obj{"item_id", it.id, "output_index", idx, "content_index", 0,
			"part", obj{"type", "output_text", "text", "", "annotations", []any{}}})
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
	case evText:
		p.Text = string(it.text)
		if err := e.send("response.output_text.done", obj{"item_id", it.id, "output_index", it.out, "content_index", 0, "text", p.Text, "logprobs", []any{}}); err != nil {
			return err
		}
		if err := e.send("response.content_part.done", obj{"item_id", it.id, "output_index", it.out, "content_index", 0,
			"part", obj{"type", "output_text", "text", p.Text, "annotations", []any{}}}); err != nil {
			return err
		}
	case evThinking:
		p.Text, p.Signature = string(it.text), it.sig
		if it.hasSum {
			if err := e.send("response.reasoning_summary_text.done", obj{"item_id", it.id, "output_index", it.out, "summary_index", 0, "text", p.Text}); err != nil {
				return err
			}
			if err := e.send("response.reasoning_summary_part.done", obj{"item_id", it.id, "output_index", it.out, "summary_index", 0,
				"part", obj{"type", "summary_text", "text", p.Text}}); err != nil {
				return err
			}
		}
	case evToolStart:
		p.Args = argsObject(string(it.text))
		if err := e.send("response.function_call_arguments.done", obj{"item_id", it.id, "output_index", it.out, "arguments", string(it.text)}); err != nil {
			return err
		}
	}
	if it.kind == evToolStart {
		x := p.get()
		x.RawArgs = string(it.text) // exactly the streamed fragments
		*p = p.withExtra(x)
	}
	item := respOutputItem(*p, it.out, e.st)
	return e.send("response.output_item.done", obj{"output_index", it.out, "item", item})
}

func (e *respEncoder) closeOpen() error { return e.closeItem(e.open) }

func (e *respEncoder) emit(ev *event) error {
	switch ev.Type {
	case evStart:
		e.id = clientID("resp_", ev.ID, e.st)
		e.model = ev.Model
		e.tier = alphaTier(ev.ServiceTier)
		return e.start()
	case evUsage:
		e.usage.merge(ev.Usage)
		return nil
	case evFinish:
		e.fin = ev.Finish
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
		it := e.open
		if it == nil || it.kind != evText || it.key != ev.Index {
			var err error
			if it, err = e.openItem(evText, ev.Index, part{Type: partText}.withExtra(partExtra{ItemID: ev.ItemID})); err != nil {
				return err
			}
		}
		it.text = append(it.text, ev.Text...)
		return e.delta("response.output_text.delta", it, "content_index", ev.Text, true)
	case evThinking, evSignature:
		it := e.open
		if it == nil || it.kind != evThinking || it.key != ev.Index {
			var err error
			if it, err = e.openItem(evThinking, ev.Index, part{Type: partThinking}.withExtra(partExtra{ItemID: ev.ItemID})); err != nil {
				return err
			}
		}
		if ev.Type == evSignature {
			it.sig += ev.Text
			return nil
		}
		if ev.Text == "" {
			return nil
		}
		if !it.hasSum {
			it.hasSum = true
			if err := e.send("response.reasoning_summary_part.added", obj{"item_id", it.id, "output_index", it.out, "summary_index", 0,
				"part", obj{"type", "summary_text", "text", ""}}); err != nil {
				return err
			}
		}
		it.text = append(it.text, ev.Text...)
		return e.delta("response.reasoning_summary_text.delta", it, "summary_index", ev.Text, false)
	case evToolStart:
		_, err := e.openItem(evToolStart, ev.Index, part{Type: partToolCall, CallID: ev.CallID, Name: ev.Name}.withExtra(partExtra{ItemID: ev.ItemID}))
		return err
	case evToolArgs:
		it := e.tools[ev.Index]
		if it == nil || it.closed || ev.Text == "" {
			return nil
		}
		it.text = append(it.text, ev.Text...)
		return e.delta("response.function_call_arguments.delta", it, "", ev.Text, false)
	case evBlockStop:
		if e.open != nil && e.open.key == ev.Index {
			return e.closeOpen()
		}
		if it := e.tools[ev.Index]; it != nil {
			return e.closeItem(it)
		}
	}
	return nil
}

func (e *respEncoder) finish() error {
	if err := e.start(); err != nil {
		return err
	}
	for _, it := range e.items {
		if err := e.closeItem(it); err != nil {
			return err
		}
	}
	f := e.fin
	if f == finishStop && hasToolCall(e.parts) {
		f = finishToolCalls
	}
	r := &response{Model: e.model, Parts: e.parts, Finish: f, Usage: e.usage, ServiceTier: e.tier}
	full := respBuildResponse(r, e.st, e.id, e.created)
	if full.Usage == nil {
		full.Usage = toRespUsage(usage{})
	}
	typ := "response.completed"
	if full.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return e.send(typ, obj{"response", full})
}

func (e *respEncoder) fail(ae *apiError) error {
	if err := e.start(); err != nil {
		return err
	}
	code := ae.alphaCode()
	if code == "" {
		code = ae.alphaType()
	}
	if err := e.send("error", obj{"code", code, "message", ae.Message, "param", nil}); err != nil {
		return err
	}
	sh := e.shell("failed", obj{"code", code, "message", ae.Message})
	return e.send("response.failed", obj{"response", sh})
}
