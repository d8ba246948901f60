package gamma

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ---- upstream gamma stream -> canonical events ----

type Decoder struct {
	started bool
	Cur     canon.EvType `json:"-"` // kind of the open block (evText, evThinking) or -1
	idx     int
	next    int
	calls   bool
	Ev      Response `json:"-"` // the event being decoded
	// the fast path's parts and finish reasons, and usage modalities, of the event being read (reused,
	// cleared)
	Items      []gammaFastItem `json:"-"`
	Modalities []modalityIn    `json:"-"`
	Bill       Billing         `json:"-"` // the billed usage, read from the decoded chunks
}

// Billed implements canon.Biller: the billed usage of the latest usageMetadata decoded (gamma reports its
// output in every snapshot).
func (d *Decoder) Billed() (u usage.Usage, found, outputReported bool) {
	u, found = d.Bill.Usage()
	return u, found, true
}

// ObserveHeader implements canon.Biller: the served tier of the response header.
func (d *Decoder) ObserveHeader(h http.Header) { d.Bill.ObserveHeader(h) }

func (GenerateContent) NewDecoder(*canon.State) canon.StreamDecoder { return &Decoder{Cur: -1} }

func (d *Decoder) block(kind canon.EvType, out []canon.Event) ([]canon.Event, int) {
	if d.Cur == kind {
		return out, d.idx
	}
	if d.Cur >= 0 {
		out = append(out, canon.Event{Type: canon.EvBlockStop, Index: d.idx})
	}
	d.Cur, d.idx = kind, d.next
	d.next++
	return out, d.idx
}

func (d *Decoder) Decode(_ string, data []byte, out []canon.Event) ([]canon.Event, error) {
	if len(data) == 0 {
		return out, nil
	}
	if o, ok := d.Fast(data, out); ok {
		return o, nil
	}
	return d.General(data, out)
}

// General decodes any event with the general decoder.
// billUnreadable bills the usageMetadata of a chunk the decoder cannot read (another member of a type it
// cannot carry), decoded alone: what the translator cannot carry never costs the bill.
func (d *Decoder) billUnreadable(data []byte) {
	var c struct {
		UsageMetadata *usageIn `json:"usageMetadata"`
	}
	if jsonkit.UnmarshalEvent(data, &c) == nil {
		d.Bill.take(c.UsageMetadata)
	}
}

func (d *Decoder) General(data []byte, out []canon.Event) ([]canon.Event, error) {
	// Reused: the candidates keep their array (the decoder zeroes each element it decodes into;
	// TestStreamDecoderReuseKeepsNothing).
	d.Ev = Response{Candidates: d.Ev.Candidates[:0]}
	c := &d.Ev
	if err := jsonkit.UnmarshalEvent(data, c); err != nil {
		d.billUnreadable(data)
		return out, err
	}
	d.Bill.take(c.UsageMetadata) // any chunk's, an error chunk's included
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return append(out, canon.Event{Type: canon.EvError, Err: canon.ParseUpstreamError(500, nil, data)}), nil
	}
	if !d.started {
		d.started = true
		out = append(out, canon.Event{Type: canon.EvStart, ID: c.ResponseID, Model: c.ModelVersion})
	}
	if c.UsageMetadata != nil {
		out = append(out, canon.Event{Type: canon.EvUsage, Usage: c.UsageMetadata.canonical()})
	}
	for _, cand := range c.Candidates {
		if cand.Index != 0 {
			continue
		}
		if cand.Content != nil {
			for i := range cand.Content.Parts {
				p := &cand.Content.Parts[i]
				ep := gammaEvPart{thought: p.Thought, sig: jsonkit.Owned(p.ThoughtSignature)}
				if p.Text != nil {
					ep.text, ep.hasText = jsonkit.Owned(*p.Text), true
				}
				if c := p.FunctionCall; c != nil {
					ep.call, ep.callID, ep.name, ep.args = true, jsonkit.Owned(c.ID), jsonkit.Owned(c.Name), c.Args
				}
				out = d.part(out, &ep)
			}
		}
		if cand.FinishReason != "" {
			out = d.Finish(out, cand.FinishReason)
		}
	}
	if len(c.Candidates) == 0 && c.PromptFeedback != nil && c.PromptFeedback.BlockReason != "" {
		out = append(out, canon.Event{Type: canon.EvFinish, Finish: canon.FinishContentFilter})
	}
	return out, nil
}

// gammaEvPart is one part of the index-0 candidate, as the general decoder or the fast path read it.
type gammaEvPart struct {
	text         jsonkit.StrView
	hasText      bool // text was set (not null)
	thought      bool
	sig          jsonkit.StrView
	call         bool // a function call (not null)
	callID, name jsonkit.StrView
	args         []byte
}

// part maps one part.
func (d *Decoder) part(out []canon.Event, p *gammaEvPart) []canon.Event {
	var idx int
	thoughtText := p.thought && p.hasText
	if p.sig.S != "" && !thoughtText {
		out, idx = d.block(canon.EvThinking, out)
		out = append(out, canon.Event{Type: canon.EvSignature, Index: idx, Text: canon.TagSig(vocab.KindGamma, p.sig.S)})
	}
	switch {
	case p.call:
		if d.Cur >= 0 {
			out = append(out, canon.Event{Type: canon.EvBlockStop, Index: d.idx})
		}
		d.Cur = -1
		i := d.next
		d.next++
		d.calls = true
		args := p.args
		if len(args) == 0 || string(args) == "null" {
			args = []byte("{}")
		}
		out = append(out, canon.Event{Type: canon.EvToolStart, Index: i, CallID: p.callID.Keep(), Name: p.name.Keep()},
			canon.Event{Type: canon.EvToolArgs, Index: i, Text: string(jsonkit.CompactJSON(args))}, canon.Event{Type: canon.EvBlockStop, Index: i})
	case thoughtText:
		out, idx = d.block(canon.EvThinking, out)
		if p.text.S != "" {
			out = append(out, canon.Event{Type: canon.EvThinking, Index: idx, Text: p.text.Keep()})
		}
		if p.sig.S != "" {
			out = append(out, canon.Event{Type: canon.EvSignature, Index: idx, Text: canon.TagSig(vocab.KindGamma, p.sig.S)})
		}
	case p.hasText && p.text.S != "":
		out, idx = d.block(canon.EvText, out)
		out = append(out, canon.Event{Type: canon.EvText, Index: idx, Text: p.text.Keep()})
	}
	return out
}

// Finish maps a candidate's finish reason.
func (d *Decoder) Finish(out []canon.Event, reason string) []canon.Event {
	f := gammaFinishIn(reason)
	if f == canon.FinishStop && d.calls {
		f = canon.FinishToolCalls
	}
	return append(out, canon.Event{Type: canon.EvFinish, Finish: f})
}

// ---- canonical events -> client gamma stream (alt=sse or JSON array) ----

type Encoder struct {
	w       io.Writer
	st      *canon.State
	sse     bool
	Opened  bool `json:"-"` // JSON array: '[' written
	first   bool // JSON array: an element written
	id      string
	model   string
	sig     string
	calls   []*gammaPendingCall
	byIdx   map[int]*gammaPendingCall
	fin     canon.Finish
	usage   canon.Usage
	out     jsonkit.Writer // the event being written, reused
	started bool
}

type gammaPendingCall struct {
	id, name string
	args     []byte
	done     bool
}

func (GenerateContent) NewEncoder(w io.Writer, st *canon.State) canon.StreamEncoder {
	return &Encoder{w: w, st: st, sse: st.GammaSSE}
}

// begin starts a client event in the reused buffer: the SSE prefix, or the array's bracket or separator.
func (e *Encoder) begin() *jsonkit.Writer {
	w := &e.out
	w.B = w.B[:0]
	if e.sse {
		w.B = append(w.B, "data: "...)
	} else {
		if !e.Opened {
			e.Opened = true
			w.B = append(w.B, '[')
		}
		if e.first {
			w.B = append(w.B, ",\r\n"...)
		}
		e.first = true
	}
	return w
}

// end finishes the event begun by begin and writes it.
func (e *Encoder) end() error {
	if e.sse {
		e.out.B = append(e.out.B, "\r\n\r\n"...)
	}
	_, err := e.w.Write(e.out.B)
	return err
}

// chunk writes one response chunk holding the part p, as encoding/json wrote gammaResponseOut.
func (e *Encoder) chunk(p *Part, fin string, u *gammaUsage) error {
	if !e.started {
		e.started = true
		if e.id == "" {
			e.id = canon.ClientID("", "", e.st)
		}
	}
	w := e.begin()
	w.B = append(w.B, `{"candidates":[{"content":{"role":"model","parts":[`...)
	if p.Text != nil && p.InlineData == nil && p.FileData == nil && p.FunctionCall == nil && p.FunctionResponse == nil &&
		len(p.ExecutableCode) == 0 && len(p.CodeExecutionResult) == 0 {
		w.B = append(w.B, '{')
		w.Key("text")
		w.Str(*p.Text)
		if p.Thought {
			w.Key("thought")
			w.Bool(true)
		}
		if p.ThoughtSignature != "" {
			w.Key("thoughtSignature")
			w.Str(p.ThoughtSignature)
		}
		w.Close('}')
	} else {
		q := *p // only this copy escapes (encoding/json), not every text part
		var err error
		if w.B, err = jsonkit.AppendJSON(w.B, &q); err != nil {
			return err
		}
	}
	w.Close(']')
	w.Close('}')
	if fin != "" {
		w.Key("finishReason")
		w.Str(fin)
	}
	w.Key("index")
	w.Int(0)
	w.Close('}')
	w.Close(']')
	if u != nil {
		w.Key("usageMetadata")
		var err error
		if w.B, err = jsonkit.AppendJSON(w.B, u); err != nil {
			return err
		}
	}
	if e.model != "" {
		w.Key("modelVersion")
		w.Str(e.model)
	}
	if e.id != "" {
		w.Key("responseId")
		w.Str(e.id)
	}
	w.Close('}')
	return e.end()
}

func (e *Encoder) part(p Part) error {
	if e.sig != "" {
		p.ThoughtSignature, e.sig = e.st.SigToClient(e.sig), ""
	}
	return e.chunk(&p, "", nil)
}

func (e *Encoder) flushCall(c *gammaPendingCall) error {
	if c.done {
		return nil
	}
	c.done = true
	args := json.RawMessage(jsonkit.ArgsObject(string(c.args)))
	return e.part(Part{FunctionCall: &Call{ID: c.id, Name: c.name, Args: args}})
}

func (e *Encoder) Emit(ev *canon.Event) error {
	switch ev.Type {
	case canon.EvStart:
		e.id = canon.ClientID("", ev.ID, e.st)
		e.model = ev.Model
	case canon.EvUsage:
		e.usage.Merge(ev.Usage)
	case canon.EvFinish:
		e.fin = ev.Finish
	case canon.EvText:
		if ev.Text != "" {
			return e.part(Part{Text: &ev.Text})
		}
	case canon.EvThinking:
		if ev.Text != "" {
			return e.chunk(&Part{Text: &ev.Text, Thought: true}, "", nil)
		}
	case canon.EvSignature:
		e.sig += ev.Text
	case canon.EvToolStart:
		c := &gammaPendingCall{id: ev.CallID, name: ev.Name}
		if e.byIdx == nil {
			e.byIdx = map[int]*gammaPendingCall{}
		}
		e.byIdx[ev.Index] = c
		e.calls = append(e.calls, c)
	case canon.EvToolArgs:
		if c := e.byIdx[ev.Index]; c != nil && !c.done {
			c.args = append(c.args, ev.Text...)
		}
	case canon.EvBlockStop:
		if c := e.byIdx[ev.Index]; c != nil {
			return e.flushCall(c)
		}
	}
	return nil
}

func (e *Encoder) Finish() error {
	for _, c := range e.calls {
		if err := e.flushCall(c); err != nil {
			return err
		}
	}
	p := Part{Text: canon.Strp("")}
	if e.sig != "" {
		p.ThoughtSignature, e.sig = e.st.SigToClient(e.sig), ""
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

func (e *Encoder) Fail(ae *canon.APIError) error {
	w := e.begin()
	w.B = append(w.B, ErrorBody(ae.Fields(vocab.KindGamma))...)
	if err := e.end(); err != nil {
		return err
	}
	if !e.sse {
		_, err := io.WriteString(e.w, "]")
		return err
	}
	return nil
}
