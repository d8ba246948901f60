package alpha

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ---- upstream alpha chat stream -> canonical events ----

type ChatDecoder struct {
	started  bool
	tools    map[int]bool
	sawTools bool
	Ev       ChatChunk       `json:"-"` // the event being decoded
	Calls    []chatCallDelta `json:"-"` // the tool call deltas of the event being decoded (reused, cleared)
	Bill     Billing         `json:"-"` // the billed usage, read from the decoded chunks
}

// ObserveHeader implements canon.Biller; alpha reports its tier in the body.
func (d *ChatDecoder) ObserveHeader(http.Header) {}

// Billed implements canon.Biller: the billed usage of the chunks decoded so far (alpha chat reports its
// output in its usage chunk).
func (d *ChatDecoder) Billed() (u usage.Usage, found, outputReported bool) {
	u, found = d.Bill.Usage()
	return u, found, true
}

type ChatChunk struct {
	ID          string          `json:"id"`
	Model       string          `json:"model"`
	ServiceTier string          `json:"service_tier"`
	Error       json.RawMessage `json:"error"`
	Choices     []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string         `json:"content"`
			Refusal          string         `json:"refusal"`
			ReasoningContent string         `json:"reasoning_content"`
			ToolCalls        []chatToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsageIn `json:"usage"`
}

// Block indices used by the alpha chat decoder: text 0, thinking 1, tool call k at 100+k.
const (
	chatTextBlock     = 0
	chatThinkingBlock = 1
	chatToolBase      = 100
)

func (d *ChatDecoder) Decode(_ string, data []byte, out []canon.Event) ([]canon.Event, error) {
	if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) {
		return out, nil
	}
	// Reused: the choices keep their array (the decoder zeroes each element it decodes into;
	// TestStreamDecoderReuseKeepsNothing).
	if o, ok := d.Fast(data, out); ok {
		return o, nil
	}
	return d.General(data, out)
}

// General decodes any event with the general decoder.
// billUnreadable bills the usage members of a chunk the decoder cannot read (a member of a type it cannot
// carry), as the passthrough relay reader reads them: what the translator cannot carry never costs the bill.
func (d *ChatDecoder) billUnreadable(data []byte) {
	if !jsonkit.ValidJSON(data) {
		return // not JSON: bills nothing
	}
	var r jsonkit.Relay
	ReadChatRelay(data, &r)
	d.Bill.ObserveRelay(&r)
}

func (d *ChatDecoder) General(data []byte, out []canon.Event) ([]canon.Event, error) {
	d.Ev = ChatChunk{Choices: d.Ev.Choices[:0]}
	c := &d.Ev
	if err := jsonkit.UnmarshalEvent(data, c); err != nil {
		d.billUnreadable(data)
		return out, err
	}
	d.Bill.top(c.ServiceTier) // any chunk's, an error chunk's included
	d.Bill.add(c.Usage)
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return append(out, canon.Event{Type: canon.EvError, Err: canon.ParseUpstreamError(500, nil, append([]byte(`{"error":`), append(c.Error, '}')...))}), nil
	}
	if !d.started {
		d.started = true
		out = append(out, canon.Event{Type: canon.EvStart, ID: c.ID, Model: c.Model, ServiceTier: c.ServiceTier})
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		dl := &ch.Delta
		calls := d.Calls[:0]
		for _, tc := range dl.ToolCalls {
			k := 0
			if tc.Index != nil {
				k = *tc.Index
			}
			calls = append(calls, chatCallDelta{index: k, id: jsonkit.Owned(tc.ID), name: jsonkit.Owned(tc.Function.Name), args: jsonkit.Owned(tc.Function.Arguments)})
		}
		out = d.choice(out, jsonkit.Owned(dl.ReasoningContent), jsonkit.Owned(dl.Content), jsonkit.Owned(dl.Refusal), calls, ch.FinishReason)
		clear(calls)
		d.Calls = calls[:0]
	}
	if c.Usage != nil {
		out = append(out, canon.Event{Type: canon.EvUsage, Usage: c.Usage.canonical()})
	}
	return out, nil
}

// chatCallDelta is one tool call delta of a chunk.
type chatCallDelta struct {
	index          int
	id, name, args jsonkit.StrView
}

// choice maps the index-0 choice of a chunk: its reasoning, text, refusal, tool call deltas and finish
// reason.
func (d *ChatDecoder) choice(out []canon.Event, reasoning, content, refusal jsonkit.StrView, calls []chatCallDelta, fin string) []canon.Event {
	if reasoning.S != "" {
		out = append(out, canon.Event{Type: canon.EvThinking, Index: chatThinkingBlock, Text: reasoning.Keep()})
	}
	if content.S != "" {
		out = append(out, canon.Event{Type: canon.EvText, Index: chatTextBlock, Text: content.Keep()})
	}
	if refusal.S != "" {
		out = append(out, canon.Event{Type: canon.EvText, Index: chatTextBlock, Text: refusal.Keep()})
	}
	for i := range calls {
		tc := &calls[i]
		k := tc.index
		if d.tools == nil {
			d.tools = map[int]bool{}
		}
		if !d.tools[k] {
			d.tools[k] = true
			d.sawTools = true
			out = append(out, canon.Event{Type: canon.EvToolStart, Index: chatToolBase + k, CallID: tc.id.Keep(), Name: tc.name.Keep()})
		}
		if tc.args.S != "" {
			out = append(out, canon.Event{Type: canon.EvToolArgs, Index: chatToolBase + k, Text: tc.args.Keep()})
		}
	}
	if fin != "" {
		f := chatFinishIn(fin)
		if f == canon.FinishStop && d.sawTools {
			f = canon.FinishToolCalls
		}
		out = append(out, canon.Event{Type: canon.EvFinish, Finish: f})
	}
	return out
}

func (Chat) NewDecoder(*canon.State) canon.StreamDecoder { return &ChatDecoder{} }

// ---- canonical events -> client alpha chat stream ----

type chatEncoder struct {
	w        io.Writer
	st       *canon.State
	id       string
	model    string
	tier     string
	created  int64
	started  bool
	finished bool
	fin      canon.Finish
	toolIdx  map[int]int // upstream block index -> client tool index
	nTools   int
	usage    canon.Usage
	out      jsonkit.Writer // the event being written, reused
}

func (Chat) NewEncoder(w io.Writer, st *canon.State) canon.StreamEncoder {
	return &chatEncoder{w: w, st: st, created: st.Now()}
}

// chatDelta is a chunk's delta; only the non-empty members are written.
type chatDelta struct {
	role       string
	content    string
	hasContent bool // content is written, even when ""
	reasoning  string
	tool       chatToolDelta
	hasTool    bool // tool_calls is written
}

// chatToolDelta is the one tool call of a chunk: its start (id, name, empty arguments) or an argument
// fragment.
type chatToolDelta struct {
	index int
	start bool
	id    string
	name  string
	args  string
}

// frame starts a client event in the reused buffer: "data: {".
func (e *chatEncoder) frame() *jsonkit.Writer {
	e.out.B = append(e.out.B[:0], "data: {"...)
	return &e.out
}

// send ends the event begun by frame and writes it.
func (e *chatEncoder) send() error {
	e.out.B = append(e.out.B, '}', '\n', '\n')
	_, err := e.w.Write(e.out.B)
	return err
}

// head writes the members every chunk starts with.
func (e *chatEncoder) head(w *jsonkit.Writer) {
	w.Key("id")
	w.Str(e.id)
	w.Key("object")
	w.Str("chat.completion.chunk")
	w.Key("created")
	w.Int(e.created)
	w.Key("model")
	w.Str(e.model)
	if e.tier != "" {
		w.Key("service_tier")
		w.Str(e.tier)
	}
}

// chunk writes one chunk with one choice; fin "" is a null finish_reason.
func (e *chatEncoder) chunk(d chatDelta, fin string) error {
	w := e.frame()
	e.head(w)
	w.Key("choices")
	w.Open('[')
	w.Open('{')
	w.Key("index")
	w.Int(0)
	w.Key("delta")
	w.Open('{')
	if d.role != "" {
		w.Key("role")
		w.Str(d.role)
	}
	if d.hasContent {
		w.Key("content")
		w.Str(d.content)
	}
	if d.reasoning != "" {
		w.Key("reasoning_content")
		w.Str(d.reasoning)
	}
	if t := &d.tool; d.hasTool {
		w.Key("tool_calls")
		w.Open('[')
		w.Open('{')
		w.Key("index")
		w.Int(int64(t.index))
		if t.start {
			w.Key("id")
			w.Str(t.id)
			w.Key("type")
			w.Str("function")
		}
		w.Key("function")
		w.Open('{')
		if t.start {
			w.Key("name")
			w.Str(t.name)
		}
		w.Key("arguments")
		w.Str(t.args)
		w.Close('}')
		w.Close('}')
		w.Close(']')
	}
	w.Close('}')
	w.Key("logprobs")
	w.Null()
	w.Key("finish_reason")
	if fin != "" {
		w.Str(fin)
	} else {
		w.Null()
	}
	w.Close('}')
	w.Close(']')
	if e.st.IncludeUsage() {
		// include_usage clients see "usage":null on every chunk, as alpha sends it
		w.Key("usage")
		w.Null()
	}
	return e.send()
}

func (e *chatEncoder) start(ev *canon.Event) error {
	if e.started {
		return nil
	}
	e.started = true
	if e.id == "" {
		e.id = canon.ClientID("chatcmpl-", "", e.st)
	}
	return e.chunk(chatDelta{role: "assistant", hasContent: true}, "")
}

func (e *chatEncoder) Emit(ev *canon.Event) error {
	switch ev.Type {
	case canon.EvStart:
		e.id = canon.ClientID("chatcmpl-", ev.ID, e.st)
		e.model = ev.Model
		e.tier = alphaTier(ev.ServiceTier)
		return e.start(ev)
	case canon.EvUsage:
		e.usage.Merge(ev.Usage)
		return nil
	case canon.EvFinish:
		e.fin = ev.Finish
		return nil
	}
	if err := e.start(ev); err != nil {
		return err
	}
	switch ev.Type {
	case canon.EvText:
		if ev.Text == "" {
			return nil
		}
		return e.chunk(chatDelta{content: ev.Text, hasContent: true}, "")
	case canon.EvThinking:
		if ev.Text == "" {
			return nil
		}
		return e.chunk(chatDelta{reasoning: ev.Text}, "")
	case canon.EvToolStart:
		if e.toolIdx == nil {
			e.toolIdx = map[int]int{}
		}
		k := e.nTools
		e.toolIdx[ev.Index] = k
		e.nTools++
		id := ev.CallID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d", e.st.RespSuffix(), k)
		}
		return e.chunk(chatDelta{hasTool: true, tool: chatToolDelta{index: k, start: true, id: id, name: ev.Name}}, "")
	case canon.EvToolArgs:
		k, ok := e.toolIdx[ev.Index]
		if !ok || ev.Text == "" {
			return nil
		}
		return e.chunk(chatDelta{hasTool: true, tool: chatToolDelta{index: k, args: ev.Text}}, "")
	}
	return nil
}

func (e *chatEncoder) finishChunk() error {
	if e.finished {
		return nil
	}
	e.finished = true
	f := e.fin
	if f == canon.FinishStop && e.nTools > 0 {
		f = canon.FinishToolCalls
	}
	return e.chunk(chatDelta{}, chatFinishOut(f))
}

func (e *chatEncoder) Finish() error {
	if err := e.start(nil); err != nil {
		return err
	}
	if err := e.finishChunk(); err != nil {
		return err
	}
	if e.st.IncludeUsage() {
		w := e.frame()
		e.head(w)
		w.Key("choices")
		w.Open('[')
		w.Close(']')
		w.Key("usage")
		b, err := jsonkit.Marshal(toChatUsage(e.usage))
		if err != nil {
			return err
		}
		w.Raw(b)
		if err := e.send(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(e.w, "data: [DONE]\n\n")
	return err
}

func (e *chatEncoder) Fail(ae *canon.APIError) error {
	_, err := fmt.Fprintf(e.w, "data: %s\n\n", ErrorBody(ae.Fields(vocab.KindAlpha)))
	return err
}
