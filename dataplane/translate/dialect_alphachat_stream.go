package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/shared/vocab"
)

// ---- upstream alpha chat stream -> canonical events ----

type chatDecoder struct {
	started  bool
	tools    map[int]bool
	sawTools bool
	ev       chatChunk       // the event being decoded
	calls    []chatCallDelta // the tool call deltas of the event being decoded (reused, cleared)
}

type chatChunk struct {
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
	Usage *chatUsage `json:"usage"`
}

// Block indices used by the alpha chat decoder: text 0, thinking 1, tool call k at 100+k.
const (
	chatTextBlock     = 0
	chatThinkingBlock = 1
	chatToolBase      = 100
)

func (d *chatDecoder) decode(_ string, data []byte, out []event) ([]event, error) {
	if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) {
		return out, nil
	}
	// Reused: the choices keep their array (the decoder zeroes each element it decodes into;
	// TestStreamDecoderReuseKeepsNothing).
	if o, ok := d.fast(data, out); ok {
		return o, nil
	}
	return d.general(data, out)
}

// general decodes any event with the general decoder.
func (d *chatDecoder) general(data []byte, out []event) ([]event, error) {
	d.ev = chatChunk{Choices: d.ev.Choices[:0]}
	c := &d.ev
	if err := unmarshalEvent(data, c); err != nil {
		return out, err
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return append(out, event{Type: evError, Err: parseUpstreamError(500, nil, append([]byte(`{"error":`), append(c.Error, '}')...))}), nil
	}
	if !d.started {
		d.started = true
		out = append(out, event{Type: evStart, ID: c.ID, Model: c.Model, ServiceTier: c.ServiceTier})
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		dl := &ch.Delta
		calls := d.calls[:0]
		for _, tc := range dl.ToolCalls {
			k := 0
			if tc.Index != nil {
				k = *tc.Index
			}
			calls = append(calls, chatCallDelta{index: k, id: owned(tc.ID), name: owned(tc.Function.Name), args: owned(tc.Function.Arguments)})
		}
		out = d.choice(out, owned(dl.ReasoningContent), owned(dl.Content), owned(dl.Refusal), calls, ch.FinishReason)
		clear(calls)
		d.calls = calls[:0]
	}
	if c.Usage != nil {
		out = append(out, event{Type: evUsage, Usage: c.Usage.canonical()})
	}
	return out, nil
}

// chatCallDelta is one tool call delta of a chunk.
type chatCallDelta struct {
	index          int
	id, name, args vstr
}

// choice maps the index-0 choice of a chunk: its reasoning, text, refusal, tool call deltas and finish
// reason.
func (d *chatDecoder) choice(out []event, reasoning, content, refusal vstr, calls []chatCallDelta, fin string) []event {
	if reasoning.s != "" {
		out = append(out, event{Type: evThinking, Index: chatThinkingBlock, Text: reasoning.keep()})
	}
	if content.s != "" {
		out = append(out, event{Type: evText, Index: chatTextBlock, Text: content.keep()})
	}
	if refusal.s != "" {
		out = append(out, event{Type: evText, Index: chatTextBlock, Text: refusal.keep()})
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
			out = append(out, event{Type: evToolStart, Index: chatToolBase + k, CallID: tc.id.keep(), Name: tc.name.keep()})
		}
		if tc.args.s != "" {
			out = append(out, event{Type: evToolArgs, Index: chatToolBase + k, Text: tc.args.keep()})
		}
	}
	if fin != "" {
		f := chatFinishIn(fin)
		if f == finishStop && d.sawTools {
			f = finishToolCalls
		}
		out = append(out, event{Type: evFinish, Finish: f})
	}
	return out
}

func (alphaChat) newDecoder(*reqState) streamDecoder { return &chatDecoder{} }

// ---- canonical events -> client alpha chat stream ----

type chatEncoder struct {
	w        io.Writer
	st       *reqState
	id       string
	model    string
	tier     string
	created  int64
	started  bool
	finished bool
	fin      finish
	toolIdx  map[int]int // upstream block index -> client tool index
	nTools   int
	usage    usage
	out      jw // the event being written, reused
}

func (alphaChat) newEncoder(w io.Writer, st *reqState) streamEncoder {
	return &chatEncoder{w: w, st: st, created: st.now()}
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
func (e *chatEncoder) frame() *jw {
	e.out.b = append(e.out.b[:0], "data: {"...)
	return &e.out
}

// send ends the event begun by frame and writes it.
func (e *chatEncoder) send() error {
	e.out.b = append(e.out.b, '}', '\n', '\n')
	_, err := e.w.Write(e.out.b)
	return err
}

// head writes the members every chunk starts with.
func (e *chatEncoder) head(w *jw) {
	w.key("id")
	w.str(e.id)
	w.key("object")
	w.str("chat.completion.chunk")
	w.key("created")
	w.int(e.created)
	w.key("model")
	w.str(e.model)
	if e.tier != "" {
		w.key("service_tier")
		w.str(e.tier)
	}
}

// chunk writes one chunk with one choice; fin "" is a null finish_reason.
func (e *chatEncoder) chunk(d chatDelta, fin string) error {
	w := e.frame()
	e.head(w)
	w.key("choices")
	w.open('[')
	w.open('{')
	w.key("index")
	w.int(0)
	w.key("delta")
	w.open('{')
	if d.role != "" {
		w.key("role")
		w.str(d.role)
	}
	if d.hasContent {
		w.key("content")
		w.str(d.content)
	}
	if d.reasoning != "" {
		w.key("reasoning_content")
		w.str(d.reasoning)
	}
	if t := &d.tool; d.hasTool {
		w.key("tool_calls")
		w.open('[')
		w.open('{')
		w.key("index")
		w.int(int64(t.index))
		if t.start {
			w.key("id")
			w.str(t.id)
			w.key("type")
			w.str("function")
		}
		w.key("function")
		w.open('{')
		if t.start {
			w.key("name")
			w.str(t.name)
		}
		w.key("arguments")
		w.str(t.args)
		w.close('}')
		w.close('}')
		w.close(']')
	}
	w.close('}')
	w.key("logprobs")
	w.null()
	w.key("finish_reason")
	if fin != "" {
		w.str(fin)
	} else {
		w.null()
	}
	w.close('}')
	w.close(']')
	if e.st.includeUsage() {
		// include_usage clients see "usage":null on every chunk, as alpha sends it
		w.key("usage")
		w.null()
	}
	return e.send()
}

func (e *chatEncoder) start(ev *event) error {
	if e.started {
		return nil
	}
	e.started = true
	if e.id == "" {
		e.id = clientID("chatcmpl-", "", e.st)
	}
	return e.chunk(chatDelta{role: "assistant", hasContent: true}, "")
}

func (e *chatEncoder) emit(ev *event) error {
	switch ev.Type {
	case evStart:
		e.id = clientID("chatcmpl-", ev.ID, e.st)
		e.model = ev.Model
		e.tier = alphaTier(ev.ServiceTier)
		return e.start(ev)
	case evUsage:
		e.usage.merge(ev.Usage)
		return nil
	case evFinish:
		e.fin = ev.Finish
		return nil
	}
	if err := e.start(ev); err != nil {
		return err
	}
	switch ev.Type {
	case evText:
		if ev.Text == "" {
			return nil
		}
		return e.chunk(chatDelta{content: ev.Text, hasContent: true}, "")
	case evThinking:
		if ev.Text == "" {
			return nil
		}
		return e.chunk(chatDelta{reasoning: ev.Text}, "")
	case evToolStart:
		if e.toolIdx == nil {
			e.toolIdx = map[int]int{}
		}
		k := e.nTools
		e.toolIdx[ev.Index] = k
		e.nTools++
		id := ev.CallID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d", e.st.respSuffix(), k)
		}
		return e.chunk(chatDelta{hasTool: true, tool: chatToolDelta{index: k, start: true, id: id, name: ev.Name}}, "")
	case evToolArgs:
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
	if f == finishStop && e.nTools > 0 {
		f = finishToolCalls
	}
	return e.chunk(chatDelta{}, chatFinishOut(f))
}

func (e *chatEncoder) finish() error {
	if err := e.start(nil); err != nil {
		return err
	}
	if err := e.finishChunk(); err != nil {
		return err
	}
	if e.st.includeUsage() {
		w := e.frame()
		e.head(w)
		w.key("choices")
		w.open('[')
		w.close(']')
		w.key("usage")
		b, err := marshal(toChatUsage(e.usage))
		if err != nil {
			return err
		}
		w.raw(b)
		if err := e.send(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(e.w, "data: [DONE]\n\n")
	return err
}

func (e *chatEncoder) fail(ae *apiError) error {
	_, err := fmt.Fprintf(e.w, "data: %s\n\n", ae.body(vocab.KindAlpha))
	return err
}
