package translate

import (
	"encoding/json"
	"io"

	"github.com/tollgate/tollgate/shared/vocab"
)

// ---- upstream gamma stream -> canonical events ----

type gammaDecoder struct {
	started bool
	cur     evType // kind of the open block (evText, evThinking) or -1
	idx     int
	next    int
	calls   bool
	ev      gammaResponse // the event being decoded
	// the fast path's parts and finish reasons, and usage modalities, of the event being read (reused,
	// cleared)
	items      []gammaFastItem
	modalities []modalityCount
}

func (gammaGen) newDecoder(*reqState) streamDecoder { return &gammaDecoder{cur: -1} }

func (d *gammaDecoder) block(kind evType, out []event) ([]event, int) {
	if d.cur == kind {
		return out, d.idx
	}
	if d.cur >= 0 {
		out = append(out, event{Type: evBlockStop, Index: d.idx})
	}
	d.cur, d.idx = kind, d.next
	d.next++
	return out, d.idx
}

func (d *gammaDecoder) decode(_ string, data []byte, out []event) ([]event, error) {
	if len(data) == 0 {
		return out, nil
	}
	if o, ok := d.fast(data, out); ok {
		return o, nil
	}
	return d.general(data, out)
}

// general decodes any event with the general decoder.
func (d *gammaDecoder) general(data []byte, out []event) ([]event, error) {
	// Reused: the candidates keep their array (the decoder zeroes each element it decodes into;
	// TestStreamDecoderReuseKeepsNothing).
	d.ev = gammaResponse{Candidates: d.ev.Candidates[:0]}
	c := &d.ev
	if err := unmarshalEvent(data, c); err != nil {
		return out, err
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return append(out, event{Type: evError, Err: parseUpstreamError(500, nil, data)}), nil
	}
	if !d.started {
		d.started = true
		out = append(out, event{Type: evStart, ID: c.ResponseID, Model: c.ModelVersion})
	}
	if c.UsageMetadata != nil {
		out = append(out, event{Type: evUsage, Usage: c.UsageMetadata.canonical()})
	}
	for _, cand := range c.Candidates {
		if cand.Index != 0 {
			continue
		}
		if cand.Content != nil {
			for i := range cand.Content.Parts {
				p := &cand.Content.Parts[i]
				ep := gammaEvPart{thought: p.Thought, sig: owned(p.ThoughtSignature)}
				if p.Text != nil {
					ep.text, ep.hasText = owned(*p.Text), true
				}
				if c := p.FunctionCall; c != nil {
					ep.call, ep.callID, ep.name, ep.args = true, owned(c.ID), owned(c.Name), c.Args
				}
				out = d.part(out, &ep)
			}
		}
		if cand.FinishReason != "" {
			out = d.finish(out, cand.FinishReason)
		}
	}
	if len(c.Candidates) == 0 && c.PromptFeedback != nil && c.PromptFeedback.BlockReason != "" {
		out = append(out, event{Type: evFinish, Finish: finishContentFilter})
	}
	return out, nil
}

// gammaEvPart is one part of the index-0 candidate, as the general decoder or the fast path read it.
type gammaEvPart struct {
	text         vstr
	hasText      bool // text was set (not null)
	thought      bool
	sig          vstr
	call         bool // a function call (not null)
	callID, name vstr
	args         []byte
}

// part maps one part.
func (d *gammaDecoder) part(out []event, p *gammaEvPart) []event {
	var idx int
	thoughtText := p.thought && p.hasText
	if p.sig.s != "" && !thoughtText {
		out, idx = d.block(evThinking, out)
		out = append(out, event{Type: evSignature, Index: idx, Text: tagSig(vocab.KindGamma, p.sig.s)})
	}
	switch {
	case p.call:
		if d.cur >= 0 {
			out = append(out, event{Type: evBlockStop, Index: d.idx})
		}
		d.cur = -1
		i := d.next
		d.next++
		d.calls = true
		args := p.args
		if len(args) == 0 || string(args) == "null" {
			args = []byte("{}")
		}
		out = append(out, event{Type: evToolStart, Index: i, CallID: p.callID.keep(), Name: p.name.keep()},
			event{Type: evToolArgs, Index: i, Text: string(compactJSON(args))}, event{Type: evBlockStop, Index: i})
	case thoughtText:
		out, idx = d.block(evThinking, out)
		if p.text.s != "" {
			out = append(out, event{Type: evThinking, Index: idx, Text: p.text.keep()})
		}
		if p.sig.s != "" {
			out = append(out, event{Type: evSignature, Index: idx, Text: tagSig(vocab.KindGamma, p.sig.s)})
		}
	case p.hasText && p.text.s != "":
		out, idx = d.block(evText, out)
		out = append(out, event{Type: evText, Index: idx, Text: p.text.keep()})
	}
	return out
}

// finish maps a candidate's finish reason.
func (d *gammaDecoder) finish(out []event, reason string) []event {
	f := gammaFinishIn(reason)
	if f == finishStop && d.calls {
		f = finishToolCalls
	}
	return append(out, event{Type: evFinish, Finish: f})
}

// ---- canonical events -> client gamma stream (alt=sse or JSON array) ----

type gammaEncoder struct {
	w       io.Writer
	st      *reqState
	sse     bool
	opened  bool // JSON array: '[' written
	first   bool // JSON array: an element written
	id      string
	model   string
	sig     string
	calls   []*gammaPendingCall
	byIdx   map[int]*gammaPendingCall
	fin     finish
	usage   usage
	out     jw // the event being written, reused
	started bool
}

type gammaPendingCall struct {
	id, name string
	args     []byte
	done     bool
}

func (gammaGen) newEncoder(w io.Writer, st *reqState) streamEncoder {
	return &gammaEncoder{w: w, st: st, sse: st.gammaSSE}
}

// begin starts a client event in the reused buffer: the SSE prefix, or the array's bracket or separator.
func (e *gammaEncoder) begin() *jw {
	w := &e.out
	w.b = w.b[:0]
	if e.sse {
		w.b = append(w.b, "data: "...)
	} else {
		if !e.opened {
			e.opened = true
			w.b = append(w.b, '[')
		}
		if e.first {
			w.b = append(w.b, ",\r\n"...)
		}
		e.first = true
	}
	return w
}

// end finishes the event begun by begin and writes it.
func (e *gammaEncoder) end() error {
	if e.sse {
		e.out.b = append(e.out.b, "\r\n\r\n"...)
	}
	_, err := e.w.Write(e.out.b)
	return err
}

// chunk writes one response chunk holding the part p, as encoding/json wrote gammaResponseOut.
func (e *gammaEncoder) chunk(p *gammaPart, fin string, u *gammaUsage) error {
	if !e.started {
		e.started = true
		if e.id == "" {
			e.id = clientID("", "", e.st)
		}
	}
	w := e.begin()
	w.b = append(w.b, `{"candidates":[{"content":{"role":"model","parts":[`...)
	if p.Text != nil && p.InlineData == nil && p.FileData == nil && p.FunctionCall == nil && p.FunctionResponse == nil &&
		len(p.ExecutableCode) == 0 && len(p.CodeExecutionResult) == 0 {
		w.b = append(w.b, '{')
		w.key("text")
		w.str(*p.Text)
		if p.Thought {
			w.key("thought")
			w.bool(true)
		}
		if p.ThoughtSignature != "" {
			w.key("thoughtSignature")
			w.str(p.ThoughtSignature)
		}
		w.close('}')
	} else {
		q := *p // only this copy escapes (encoding/json), not every text part
		var err error
		if w.b, err = appendJSON(w.b, &q); err != nil {
			return err
		}
	}
	w.close(']')
	w.close('}')
	if fin != "" {
		w.key("finishReason")
		w.str(fin)
	}
	w.key("index")
	w.int(0)
	w.close('}')
	w.close(']')
	if u != nil {
		w.key("usageMetadata")
		var err error
		if w.b, err = appendJSON(w.b, u); err != nil {
			return err
		}
	}
	if e.model != "" {
		w.key("modelVersion")
		w.str(e.model)
	}
	if e.id != "" {
		w.key("responseId")
		w.str(e.id)
	}
	w.close('}')
	return e.end()
}

func (e *gammaEncoder) part(p gammaPart) error {
	if e.sig != "" {
		p.ThoughtSignature, e.sig = e.st.sigToClient(e.sig), ""
	}
	return e.chunk(&p, "", nil)
}

func (e *gammaEncoder) flushCall(c *gammaPendingCall) error {
	if c.done {
		return nil
	}
	c.done = true
	args := json.RawMessage(argsObject(string(c.args)))
	return e.part(gammaPart{FunctionCall: &gammaCall{ID: c.id, Name: c.name, Args: args}})
}

func (e *gammaEncoder) emit(ev *event) error {
	switch ev.Type {
	case evStart:
		e.id = clientID("", ev.ID, e.st)
		e.model = ev.Model
	case evUsage:
		e.usage.merge(ev.Usage)
	case evFinish:
		e.fin = ev.Finish
	case evText:
		if ev.Text != "" {
			return e.part(gammaPart{Text: &ev.Text})
		}
	case evThinking:
		if ev.Text != "" {
			return e.chunk(&gammaPart{Text: &ev.Text, Thought: true}, "", nil)
		}
	case evSignature:
		e.sig += ev.Text
	case evToolStart:
		c := &gammaPendingCall{id: ev.CallID, name: ev.Name}
		if e.byIdx == nil {
			e.byIdx = map[int]*gammaPendingCall{}
		}
		e.byIdx[ev.Index] = c
		e.calls = append(e.calls, c)
	case evToolArgs:
		if c := e.byIdx[ev.Index]; c != nil && !c.done {
			c.args = append(c.args, ev.Text...)
		}
	case evBlockStop:
		if c := e.byIdx[ev.Index]; c != nil {
			return e.flushCall(c)
		}
	}
	return nil
}

func (e *gammaEncoder) finish() error {
	for _, c := range e.calls {
		if err := e.flushCall(c); err != nil {
			return err
		}
	}
	p := gammaPart{Text: strp("")}
	if e.sig != "" {
		p.ThoughtSignature, e.sig = e.st.sigToClient(e.sig), ""
	}
	var u *gammaUsage
	if e.usage.Known {
		u = toGammaUsage(e.usage)
	}
	if err := e.chunk(&p, gammaFinishOut(e.fin), u); err != nil {
		return err
	}
	if !e.sse {
		_, err := io.WriteString(e.w, "]")
		return err
	}
	return nil
}

func (e *gammaEncoder) fail(ae *apiError) error {
	w := e.begin()
	w.b = append(w.b, ae.body(vocab.KindGamma)...)
	if err := e.end(); err != nil {
		return err
	}
	if !e.sse {
		_, err := io.WriteString(e.w, "]")
		return err
	}
	return nil
}
