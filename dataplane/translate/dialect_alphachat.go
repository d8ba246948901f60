package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// alphaChat is the alpha chat completions codec: /v1/chat/completions requests, answers and stream chunks.
type alphaChat struct{}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessageIn struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        []chatToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
	Refusal          *string         `json:"refusal"`
	FunctionCall     json.RawMessage `json:"function_call"`

	// text is Content's value when it is a string (isText), read in the one pass over the body.
	text   string
	isText bool
}

// contentText is the message's text content: its string, or its text parts joined (rawText).
func (m *chatMessageIn) contentText() (string, bool) {
	if m.isText {
		return m.text, true
	}
	return rawText(m.Content)
}

// contentParts appends the parts of the message's content to dst (chatContentParts; field is made for an
// error only).
func (m *chatMessageIn) contentParts(field func() fieldPath, dst []part) ([]part, error) {
	if !m.isText {
		return chatContentParts(m.Content, field, dst)
	}
	if m.text == "" {
		return dst, nil
	}
	return append(dst, part{Type: partText, Text: m.text}), nil
}

type chatRequestIn struct {
	Model               string          `json:"model"`
	Messages            []chatMessageIn `json:"messages"`
	Tools               []json.RawMessage
	ToolChoice          json.RawMessage    `json:"tool_choice"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	MaxTokens           *int               `json:"max_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	Stop                json.RawMessage    `json:"stop"`
	Stream              bool               `json:"stream"`
	StreamOptions       *chatStreamOptions `json:"stream_options"`
	N                   *int               `json:"n"`
	Seed                *int64             `json:"seed"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	Logprobs            *bool              `json:"logprobs"`
	TopLogprobs         *int               `json:"top_logprobs"`
	LogitBias           json.RawMessage    `json:"logit_bias"`
	ResponseFormat      json.RawMessage    `json:"response_format"`
	ReasoningEffort     string             `json:"reasoning_effort"`
	Modalities          []string           `json:"modalities"`
	Audio               json.RawMessage    `json:"audio"`
	ServiceTier         string             `json:"service_tier"`
	User                string             `json:"user"`
	SafetyIdentifier    string             `json:"safety_identifier"`
	WebSearchOptions    json.RawMessage    `json:"web_search_options"`
	Functions           json.RawMessage    `json:"functions"`

	calls []chatToolCall // the messages' tool calls, one array (storage from chatCallsScratch)
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatToolIn struct {
	Type     string `json:"type"`
	Function tool   `json:"function"`
}

type chatFormatIn struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

type chatToolChoiceIn struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type chatPartIn struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

func (c alphaChat) decodeRequest(body []byte, st *reqState) (*request, error) {
	return c.decodeInto(body, st, nil)
}

func (alphaChat) decodeInto(body []byte, st *reqState, store *reqStore) (*request, error) {
	body = st.own(body)
	in := chatRequestIn{Messages: chatMessagesScratch.get(), calls: chatCallsScratch.get()}
	defer func() { chatMessagesScratch.put(in.Messages); chatCallsScratch.put(in.calls) }()
	d := jr{b: body}
	if err := d.done(in.read(&d)); err != nil {
		return nil, badRequest("body", fmt.Errorf("invalid chat completions request: %w", err))
	}
	switch {
	case in.N != nil && *in.N > 1:
		return nil, refuse("n", "n > 1 (several choices) cannot be translated")
	case in.Logprobs != nil && *in.Logprobs:
		return nil, refuse("logprobs", "logprobs cannot be translated")
	case len(in.LogitBias) > 0 && string(in.LogitBias) != "null" && string(in.LogitBias) != "{}":
		return nil, refuse("logit_bias", "logit_bias cannot be translated")
	case len(in.Audio) > 0 && string(in.Audio) != "null":
		return nil, refuse("audio", "audio output cannot be translated")
	case len(in.WebSearchOptions) > 0 && string(in.WebSearchOptions) != "null":
		return nil, refuse("web_search_options", "built-in web search cannot be translated")
	case len(in.Functions) > 0 && string(in.Functions) != "null":
		return nil, refuse("functions", "legacy functions are not supported; use tools")
	}
	for _, m := range in.Modalities {
		if m != "text" {
			return nil, refuse("modalities", "output modality %q cannot be translated", m)
		}
	}
	r := &request{Model: in.Model, ParallelToolCalls: in.ParallelToolCalls, Temperature: in.Temperature, TopP: in.TopP,
		Seed: in.Seed, PresencePenalty: in.PresencePenalty, FrequencyPenalty: in.FrequencyPenalty,
		ServiceTier: in.ServiceTier, User: in.User, Stream: in.Stream}
	if r.User == "" {
		r.User = in.SafetyIdentifier
	}
	r.MaxTokens = in.MaxCompletionTokens
	if r.MaxTokens == nil {
		r.MaxTokens = in.MaxTokens
	}
	if in.StreamOptions != nil {
		r.IncludeUsage = in.StreamOptions.IncludeUsage
	}
	var err error
	if r.Stop, err = stopList(in.Stop); err != nil {
		return nil, badRequest("stop", err)
	}
	if in.ReasoningEffort != "" {
		if in.ReasoningEffort == "none" {
			r.Reasoning = &reasoning{Disabled: true}
		} else {
			r.Reasoning = &reasoning{Effort: in.ReasoningEffort}
		}
	}
	if r.Format, err = chatFormat(in.ResponseFormat); err != nil {
		return nil, err
	}
	for i, raw := range in.Tools {
		var t chatToolIn
		d := jr{b: raw}
		if err := d.done(t.read(&d)); err != nil || t.Type != "function" {
			return nil, refuse(fmt.Sprintf("tools[%d]", i), "only function tools can be translated")
		}
		r.Tools = append(r.Tools, t.Function)
	}
	if r.ToolChoice, err = chatToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	s := store.take(len(in.Messages))
	r.Messages = s.msgs
	a := &chatArena{parts: s.parts, results: s.results}
	for i := range in.Messages {
		if err := chatMessageToIR(r, i, &in.Messages[i], a); err != nil {
			return nil, err
		}
	}
	s.keep(r.Messages, a.parts, a.results)
	return r, nil
}

func chatFormat(raw json.RawMessage) (*responseFormat, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f chatFormatIn
	d := jr{b: raw}
	if err := d.done(f.read(&d)); err != nil {
		return nil, badRequest("response_format", err)
	}
	switch f.Type {
	case "text", "":
		return nil, nil
	case "json_object":
		return &responseFormat{Type: "json_object"}, nil
	case "json_schema":
		return &responseFormat{Type: "json_schema", Name: f.JSONSchema.Name, Schema: f.JSONSchema.Schema, Strict: f.JSONSchema.Strict}, nil
	}
	return nil, refuse("response_format", "response_format type %q cannot be translated", f.Type)
}

func chatToolChoice(raw json.RawMessage) (*toolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if stringOf(raw, &s) {
		switch s {
		case "auto", "none", "required":
			return &toolChoice{Mode: s}, nil
		}
		return nil, refuse("tool_choice", "unknown tool_choice %q", s)
	}
	var o chatToolChoiceIn
	d := jr{b: raw}
	if err := d.done(o.read(&d)); err != nil || o.Type != "function" {
		return nil, refuse("tool_choice", "only function tool choices can be translated")
	}
	name := o.Function.Name
	if name == "" {
		name = o.Name
	}
	return &toolChoice{Mode: "tool", Name: name}, nil
}

// chatContentParts parses alpha chat message content (string or parts) into canonical parts.
// chatContentParts appends the parts of alpha chat message content (string or parts) to dst.
func chatContentParts(raw json.RawMessage, field func() fieldPath, dst []part) ([]part, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return dst, nil
	}
	var s string
	if stringOf(raw, &s) {
		if s == "" {
			return dst, nil
		}
		return append(dst, part{Type: partText, Text: s}), nil
	}
	var arr []chatPartIn
	d := jr{b: raw}
	if err := d.done(readChatParts(&d, &arr)); err != nil {
		return nil, badRequest(field().String(), err)
	}
	out := dst
	for j, p := range arr {
		f := func() fieldPath { return field().with("", j) }
		switch p.Type {
		case "text":
			out = append(out, part{Type: partText, Text: p.Text})
		case "refusal":
			out = append(out, part{Type: partText, Text: p.Refusal})
		case "image_url":
			out = append(out, imagePart(p.ImageURL.URL, p.ImageURL.Detail))
		case "file":
			if p.File.FileData == "" {
				return nil, refuse(f().String(), "file references by id cannot be translated; send file_data")
			}
			mime, data, ok := dataURL(p.File.FileData)
			if !ok {
				mime, data = "application/pdf", p.File.FileData
			}
			out = append(out, part{Type: partFile, Data: data}.withExtra(partExtra{MediaType: mime, FileName: p.File.Filename}))
		default:
			return nil, refuse(f().String(), "content part type %q cannot be translated", p.Type)
		}
	}
	return out, nil
}

func imagePart(u, detail string) part {
	if mime, data, ok := dataURL(u); ok {
		return part{Type: partImage, Data: data}.withExtra(partExtra{MediaType: mime, Detail: detail})
	}
	return part{Type: partImage}.withExtra(partExtra{URL: u, Detail: detail})
}

// chatArena is the backing storage of a request's parts: message parts and tool result parts.
type chatArena struct{ parts, results []part }

// clipped is s[start:] with its capacity clipped, so an append to it copies instead of overwriting what
// follows in the shared backing array.
func clipped(s []part, start int) []part { return s[start:len(s):len(s)] }

func chatMessageToIR(r *request, i int, m *chatMessageIn, a *chatArena) error {
	field := func() fieldPath { return pathOf("messages", i).with(".content", -1) } // made for an error only
	switch m.Role {
	case "system", "developer":
		t, ok := m.contentText()
		if !ok {
			return refuse(field().String(), "system content must be text")
		}
		r.System = append(r.System, t)
	case "user":
		start := len(a.parts)
		parts, err := m.contentParts(field, a.parts)
		if err != nil {
			return err
		}
		a.parts = parts
		r.Messages = append(r.Messages, message{Role: "user", Parts: clipped(a.parts, start)})
	case "assistant":
		start := len(a.parts)
		if m.ReasoningContent != "" {
			a.parts = append(a.parts, part{Type: partThinking, Text: m.ReasoningContent})
		}
		parts, err := m.contentParts(field, a.parts)
		if err != nil {
			return err
		}
		a.parts = parts
		if len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" {
			return refuse(fmt.Sprintf("messages[%d].function_call", i), "legacy function_call is not supported")
		}
		for _, tc := range m.ToolCalls {
			a.parts = append(a.parts, part{Type: partToolCall, CallID: tc.ID, Name: tc.Function.Name, Args: argsObject(tc.Function.Arguments)})
		}
		r.Messages = append(r.Messages, message{Role: "assistant", Parts: clipped(a.parts, start)})
	case "tool":
		t, ok := m.contentText()
		if !ok {
			return refuse(field().String(), "tool content must be text")
		}
		a.results = append(a.results, part{Type: partText, Text: t})
		p := part{Type: partToolResult, CallID: m.ToolCallID, ResultParts: clipped(a.results, len(a.results)-1)}
		// consecutive tool messages become one user turn
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" && len(r.Messages[n-1].Parts) > 0 &&
			r.Messages[n-1].Parts[len(r.Messages[n-1].Parts)-1].Type == partToolResult {
			prev := r.Messages[n-1].Parts
			if k := len(a.parts); k > 0 && &a.parts[k-1] == &prev[len(prev)-1] { // the turn ends the arena: grow it there
				a.parts = append(a.parts, p)
				r.Messages[n-1].Parts = clipped(a.parts, len(a.parts)-len(prev)-1)
			} else {
				r.Messages[n-1].Parts = append(prev, p)
			}
		} else {
			a.parts = append(a.parts, p)
			r.Messages = append(r.Messages, message{Role: "user", Parts: clipped(a.parts, len(a.parts)-1)})
		}
	default:
		return refuse(fmt.Sprintf("messages[%d].role", i), "role %q cannot be translated", m.Role)
	}
	return nil
}

// ---- encode request ----

// chatParts writes message content: one text part as the plain string form, else the parts array.
func chatParts(w *jw, parts []part) {
	allText := true
	for _, p := range parts {
		if p.Type != partText {
			allText = false
		}
	}
	if allText && len(parts) <= 1 {
		w.str(textOf(parts))
		return
	}
	w.open('[')
	for _, p := range parts {
		switch p.Type {
		case partText:
			w.open('{')
			w.key("type")
			w.str("text")
			if p.Text != "" {
				w.key("text")
				w.str(p.Text)
			}
			w.close('}')
		case partImage:
			u := p.get().URL
			if u == "" {
				u = makeDataURL(p.get().MediaType, p.Data)
			}
			w.open('{')
			w.key("type")
			w.str("image_url")
			w.key("image_url")
			w.open('{')
			w.key("url")
			w.str(u)
			if p.get().Detail != "" {
				w.key("detail")
				w.str(p.get().Detail)
			}
			w.close('}')
			w.close('}')
		case partFile:
			w.open('{')
			w.key("type")
			w.str("file")
			w.key("file")
			w.open('{')
			w.key("file_data")
			w.str(makeDataURL(p.get().MediaType, p.Data))
			if p.get().FileName != "" {
				w.key("filename")
				w.str(p.get().FileName)
			}
			w.close('}')
			w.close('}')
		}
	}
	w.close(']')
}

// alphaTier maps a service tier of any dialect to alpha's service_tier values.
func alphaTier(t string) string {
	switch strings.ToLower(t) {
	case "auto", "default", "flex", "priority", "scale":
		return strings.ToLower(t)
	case "standard_only", "standard":
		return "default"
	}
	return ""
}

func (alphaChat) encodeRequest(r *request, model string, stream bool, st *reqState) (*UpstreamRequest, error) {
	w := &jw{b: make([]byte, 0, requestSizeHint(r))}
	w.open('{')
	w.key("model")
	w.str(model)
	w.key("messages")
	at := len(w.b)
	w.open('[')
	if len(r.System) > 0 {
		w.open('{')
		w.key("role")
		w.str("system")
		w.key("content")
		w.str(strings.Join(r.System, "\n\n"))
		w.close('}')
	}
	var user []part // reused across messages
	for _, m := range r.Messages {
		user = chatMessagesOut(w, m, user[:0])
	}
	if w.b[len(w.b)-1] == '[' { // no message: encoding/json wrote the nil slice as null
		w.b = append(w.b[:at], "null"...)
	} else {
		w.close(']')
	}
	if len(r.Tools) > 0 {
		w.key("tools")
		w.open('[')
		for _, t := range r.Tools {
			w.open('{')
			w.key("type")
			w.str("function")
			w.key("function")
			w.open('{')
			w.key("name")
			w.str(t.Name)
			if t.Description != "" {
				w.key("description")
				w.str(t.Description)
			}
			w.key("parameters")
			if len(t.Parameters) == 0 {
				w.raw(json.RawMessage(`{"type":"object","properties":{}}`))
			} else {
				w.raw(t.Parameters)
			}
			if t.Strict != nil {
				w.key("strict")
				w.bool(*t.Strict)
			}
			w.close('}')
			w.close('}')
		}
		w.close(']')
	}
	if tc := r.ToolChoice; tc != nil {
		w.key("tool_choice")
		if tc.Mode == "tool" {
			w.open('{')
			w.key("function")
			w.open('{')
			w.key("name")
			w.str(tc.Name)
			w.close('}')
			w.key("type")
			w.str("function")
			w.close('}')
		} else {
			w.str(tc.Mode)
		}
	}
	if r.ParallelToolCalls != nil {
		w.key("parallel_tool_calls")
		w.bool(*r.ParallelToolCalls)
	}
	if r.MaxTokens != nil {
		w.key("max_completion_tokens")
		w.int(int64(*r.MaxTokens))
	}
	w.optFloat("temperature", r.Temperature)
	w.optFloat("top_p", r.TopP)
	w.strList("stop", r.Stop)
	w.optInt("seed", r.Seed)
	w.optFloat("presence_penalty", r.PresencePenalty)
	w.optFloat("frequency_penalty", r.FrequencyPenalty)
	if rs := r.Reasoning; rs != nil && !rs.Disabled {
		effort := rs.Effort
		if effort == "" {
			effort = budgetEffort(rs.Budget)
		}
		if rs.Adaptive && effort == "" {
			effort = "medium"
		}
		if effort != "" {
			w.key("reasoning_effort")
			w.str(effort)
		}
	}
	if f := r.Format; f != nil {
		w.key("response_format")
		w.open('{')
		if f.Type == "json_object" {
			w.key("type")
			w.str("json_object")
		} else {
			w.key("json_schema")
			w.open('{')
			w.key("name")
			w.str(nonEmpty(f.Name, "response"))
			w.key("schema")
			w.raw(f.Schema)
			if f.Strict != nil {
				w.key("strict")
				w.bool(*f.Strict)
			}
			w.close('}')
			w.key("type")
			w.str("json_schema")
		}
		w.close('}')
	}
	if t := alphaTier(r.ServiceTier); t != "" {
		w.key("service_tier")
		w.str(t)
	}
	if r.User != "" {
		w.key("user")
		w.str(r.User)
	}
	if stream {
		w.key("stream")
		w.bool(true)
		w.key("stream_options")
		w.open('{')
		w.key("include_usage")
		w.bool(true)
		w.close('}')
	}
	w.close('}')
	return &UpstreamRequest{Method: http.MethodPost, Path: "/v1/chat/completions", Header: jsonHeader(), Body: w.b}, nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// chatMessagesOut writes one canonical message as alpha chat messages (tool results become `tool`
// messages; images inside tool results follow in a user message, since tool messages carry text only).
// user is scratch space, returned for reuse.
func chatMessagesOut(w *jw, m message, user []part) []part {
	if m.Role == "assistant" {
		w.open('{')
		w.key("role")
		w.str("assistant")
		w.key("content")
		first, n := -1, 0
		for i, p := range m.Parts {
			if p.Type == partText {
				if first < 0 {
					first = i
				}
				n++
			}
		}
		switch {
		case n == 0:
			w.b = append(w.b, "null"...)
		case n == 1:
			w.str(m.Parts[first].Text)
		default:
			var b strings.Builder
			for pi := range m.Parts {
				p := &m.Parts[pi]
				if p.Type == partText {
					b.WriteString(p.Text)
				}
			}
			w.str(b.String())
		}
		calls := false
		for pi := range m.Parts {
			p := &m.Parts[pi]
			if p.Type != partToolCall {
				continue
			}
			if !calls {
				w.key("tool_calls")
				w.open('[')
				calls = true
			}
			w.open('{')
			if p.CallID != "" {
				w.key("id")
				w.str(p.CallID)
			}
			w.key("type")
			w.str("function")
			w.key("function")
			w.open('{')
			if p.Name != "" {
				w.key("name")
				w.str(p.Name)
			}
			w.key("arguments")
			w.str(argsView(p.Args))
			w.close('}')
			w.close('}')
		}
		if calls {
			w.close(']')
		}
		w.close('}')
		return user
	}
	var late []part
	for pi := range m.Parts {
		p := &m.Parts[pi]
		if p.Type != partToolResult {
			user = append(user, *p)
			continue
		}
		text := resultText(p)
		w.open('{')
		w.key("role")
		w.str("tool")
		w.key("content")
		w.str(text)
		if p.CallID != "" {
			w.key("tool_call_id")
			w.str(p.CallID)
		}
		w.close('}')
		for _, rp := range p.ResultParts {
			if rp.Type == partImage {
				late = append(late, rp)
			}
		}
	}
	if len(late) > 0 {
		user = append(late, user...)
	}
	if len(user) > 0 {
		w.open('{')
		w.key("role")
		w.str("user")
		w.key("content")
		chatParts(w, user)
		w.close('}')
	}
	return user
}

// ---- response ----

type chatResponse struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	Model       string `json:"model"`
	ServiceTier string `json:"service_tier,omitempty"`
	Choices     []struct {
		Index        int    `json:"index"`
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Role             string         `json:"role"`
			Content          *string        `json:"content"`
			Refusal          *string        `json:"refusal"`
			ReasoningContent string         `json:"reasoning_content"`
			ToolCalls        []chatToolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

func chatFinishIn(s string) finish {
	switch s {
	case "stop":
		return finishStop
	case "length":
		return finishLength
	case "tool_calls", "function_call":
		return finishToolCalls
	case "content_filter":
		return finishContentFilter
	case "":
		return finishNone
	}
	return finishStop
}

func chatFinishOut(f finish) string {
	switch f {
	case finishLength:
		return "length"
	case finishToolCalls:
		return "tool_calls"
	case finishContentFilter:
		return "content_filter"
	}
	return "stop"
}

func (alphaChat) decodeResponse(body []byte, st *reqState) (*response, error) {
	body = ownedCopy(body)
	var in chatResponse
	if err := unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode chat completion: %w", err)
	}
	r := &response{ID: in.ID, Model: in.Model, Created: in.Created, Usage: in.Usage.canonical(), ServiceTier: in.ServiceTier}
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		if c.Message.ReasoningContent != "" {
			r.Parts = append(r.Parts, part{Type: partThinking, Text: c.Message.ReasoningContent})
		}
		if c.Message.Content != nil && *c.Message.Content != "" {
			r.Parts = append(r.Parts, part{Type: partText, Text: *c.Message.Content})
		}
		if c.Message.Refusal != nil && *c.Message.Refusal != "" {
			r.Parts = append(r.Parts, part{Type: partText, Text: *c.Message.Refusal})
		}
		for _, tc := range c.Message.ToolCalls {
			r.Parts = append(r.Parts, part{Type: partToolCall, CallID: tc.ID, Name: tc.Function.Name, Args: argsObject(tc.Function.Arguments)})
		}
		r.Finish = chatFinishIn(c.FinishReason)
	}
	return r, nil
}

type chatResponseOut struct {
	ID          string          `json:"id"`
	Object      string          `json:"object"`
	Created     int64           `json:"created"`
	Model       string          `json:"model"`
	ServiceTier string          `json:"service_tier,omitempty"`
	Choices     []chatChoiceOut `json:"choices"`
	Usage       *chatUsage      `json:"usage,omitempty"`
}

type chatChoiceOut struct {
	Index        int            `json:"index"`
	Message      chatMsgRespOut `json:"message"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type chatMsgRespOut struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	Refusal          *string        `json:"refusal"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

func (alphaChat) encodeResponse(r *response, st *reqState) ([]byte, error) {
	msg := chatMsgRespOut{Role: "assistant"}
	var text, thinking strings.Builder
	hasText := false
	for _, p := range r.Parts {
		switch p.Type {
		case partText:
			text.WriteString(p.Text)
			hasText = true
		case partThinking:
			thinking.WriteString(p.Text)
		case partToolCall:
			id := p.CallID
			if id == "" { // gamma may omit ids: synthesise them exactly as the stream encoder does
				id = fmt.Sprintf("call_%s_%d", st.respSuffix(), len(msg.ToolCalls))
			}
			tc := chatToolCall{ID: id, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = p.Name, argsString(p.Args)
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
	}
	if hasText {
		s := text.String()
		msg.Content = &s
	}
	msg.ReasoningContent = thinking.String()
	created := r.Created
	if created == 0 {
		created = st.now()
	}
	out := chatResponseOut{ID: clientID("chatcmpl-", r.ID, st), Object: "chat.completion", Created: created,
		Model: r.Model, ServiceTier: alphaTier(r.ServiceTier),
		Choices: []chatChoiceOut{{Index: 0, Message: msg, FinishReason: chatFinishOut(r.Finish)}}}
	if r.Usage.Known {
		out.Usage = toChatUsage(r.Usage)
	}
	return marshal(out)
}
