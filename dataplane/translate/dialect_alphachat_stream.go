package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// ---- upstream alpha chat stream -> canonical events ----

type chatDecoder struct {
	started  bool
	tools    map[int]bool
	sawTools bool
}

type chatChunk struct {
	ID          string          `json:"id"`
	Model       string          `json:"model"`
	ServiceTier string          `json:"service_tier"`
	Error       json.RawMessage `json:"error"`
	Choices     []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string        `json:"content"`
			Refusal          *string        `json:"refusal"`
			ReasoningContent *string        `json:"reasoning_content"`
			ToolCalls        []chatToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
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
	var c chatChunk
	if err := unmarshalEvent(data, &c); err != nil {
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
		dl := ch.Delta
		if dl.ReasoningContent != nil && *dl.ReasoningContent != "" {
			out = append(out, event{Type: evThinking, Index: chatThinkingBlock, Text: *dl.ReasoningContent})
		}
		if dl.Content != nil && *dl.Content != "" {
			out = append(out, event{Type: evText, Index: chatTextBlock, Text: *dl.Content})
		}
		if dl.Refusal != nil && *dl.Refusal != "" {
			out = append(out, event{Type: evText, Index: chatTextBlock, Text: *dl.Refusal})
		}
		for _, tc := range dl.ToolCalls {
			k := 0
			if tc.Index != nil {
				k = *tc.Index
			}
			if d.tools == nil {
				d.tools = map[int]bool{}
			}
			if !d.tools[k] {
				d.tools[k] = true
				d.sawTools = true
				out = append(out, event{Type: evToolStart, Index: chatToolBase + k, CallID: tc.ID, Name: tc.Function.Name})
			}
			if tc.Function.Arguments != "" {
				out = append(out, event{Type: evToolArgs, Index: chatToolBase + k, Text: tc.Function.Arguments})
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			f := chatFinishIn(*ch.FinishReason)
			if f == finishStop && d.sawTools {
				f = finishToolCalls
			}
			out = append(out, event{Type: evFinish, Finish: f})
		}
	}
	if c.Usage != nil {
		out = append(out, event{Type: evUsage, Usage: c.Usage.canonical()})
	}
	return out, nil
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
	buf      []byte
}

func (alphaChat) newEncoder(w io.Writer, st *reqState) streamEncoder {
	return &chatEncoder{w: w, st: st, created: st.now()}
}

// chatDelta builds a chunk delta; only the non-empty members are written.
type chatDelta struct {
	role      string
	content   *string
	reasoning string
	toolCalls []any
}

func (d chatDelta) obj() obj {
	o := make(obj, 0, 8)
	if d.role != "" {
		o = append(o, "role", d.role)
	}
	if d.content != nil {
		o = append(o, "content", *d.content)
	}
	if d.reasoning != "" {
		o = append(o, "reasoning_content", d.reasoning)
	}
	if d.toolCalls != nil {
		o = append(o, "tool_calls", d.toolCalls)
	}
	return o
}

func (e *chatEncoder) write(c obj) error {
	var err error
	e.buf = append(e.buf[:0], "data: "...)
	if e.buf, err = c.appendTo(e.buf); err != nil {
		return err
	}
	e.buf = append(e.buf, '\n', '\n')
	_, err = e.w.Write(e.buf)
	return err
}

func (e *chatEncoder) head() obj {
	o := make(obj, 0, 16)
	o = append(o, "id", e.id, "object", "chat.completion.chunk", "created", e.created, "model", e.model)
	if e.tier != "" {
		o = append(o, "service_tier", e.tier)
	}
	return o
}

func (e *chatEncoder) chunk(d chatDelta, fin any) obj {
	o := append(e.head(), "choices", []any{obj{"index", 0, "delta", d.obj(), "logprobs", nil, "finish_reason", fin}})
	if e.st.includeUsage() {
		// include_usage clients see "usage":null on every chunk, as alpha sends it
		o = append(o, "usage", nil)
	}
	return o
}

func (e *chatEncoder) start(ev *event) error {
	if e.started {
		return nil
	}
	e.started = true
	if e.id == "" {
		e.id = clientID("chatcmpl-", "", e.st)
	}
	empty := ""
	return e.write(e.chunk(chatDelta{role: "assistant", content: &empty}, nil))
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
		t := ev.Text
		return e.write(e.chunk(chatDelta{content: &t}, nil))
	case evThinking:
		if ev.Text == "" {
			return nil
		}
		return e.write(e.chunk(chatDelta{reasoning: ev.Text}, nil))
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
		tc := obj{"index", k, "id", id, "type", "function", "function", obj{"name", ev.Name, "arguments", ""}}
		return e.write(e.chunk(chatDelta{toolCalls: []any{tc}}, nil))
	case evToolArgs:
		k, ok := e.toolIdx[ev.Index]
		if !ok || ev.Text == "" {
			return nil
		}
		tc := obj{"index", k, "function", obj{"arguments", ev.Text}}
		return e.write(e.chunk(chatDelta{toolCalls: []any{tc}}, nil))
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
	return e.write(e.chunk(chatDelta{}, chatFinishOut(f)))
}

func (e *chatEncoder) finish() error {
	if err := e.start(nil); err != nil {
		return err
	}
	if err := e.finishChunk(); err != nil {
		return err
	}
	if e.st.includeUsage() {
		c := append(e.head(), "choices", []any{}, "usage", toChatUsage(e.usage))
		if err := e.write(c); err != nil {
			return err
		}
	}
	_, err := io.WriteString(e.w, "data: [DONE]\n\n")
	return err
}

func (e *chatEncoder) fail(ae *apiError) error {
	b, err := marshal(map[string]any{"error": ae.alphaBody()})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.w, "data: %s\n\n", b)
	return err
}
