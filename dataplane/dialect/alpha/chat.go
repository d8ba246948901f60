package alpha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Chat is the alpha chat completions codec: /v1/chat/completions requests, answers and stream chunks.
type Chat struct{}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type ChatMessageIn struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        []chatToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
	Refusal          *string         `json:"refusal"`
	FunctionCall     json.RawMessage `json:"function_call"`

	// Text is Content's value when it is a string (IsText), read in the one pass over the body.
	Text   string `json:"-"`
	IsText bool   `json:"-"`
}

// contentText is the message's text content: its string, or its text parts joined (canon.RawText).
func (m *ChatMessageIn) contentText() (string, bool) {
	if m.IsText {
		return m.Text, true
	}
	return canon.RawText(m.Content)
}

// contentParts appends the parts of the message's content to dst (chatContentParts; field is made for an
// error only).
func (m *ChatMessageIn) contentParts(field func() canon.FieldPath, dst []canon.Part) ([]canon.Part, error) {
	if !m.IsText {
		return chatContentParts(m.Content, field, dst)
	}
	if m.Text == "" {
		return dst, nil
	}
	return append(dst, canon.Part{Type: canon.PartText, Text: m.Text}), nil
}

type ChatRequestIn struct {
	Model               string          `json:"model"`
	Messages            []ChatMessageIn `json:"messages"`
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

	Calls []chatToolCall `json:"-"` // the messages' tool calls, one array (storage from chatCallsScratch)
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type ChatToolIn struct {
	Type     string     `json:"type"`
	Function canon.Tool `json:"function"`
}

type ChatFormatIn struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

type ChatToolChoiceIn struct {
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

func (c Chat) DecodeRequest(body []byte, st *canon.State) (*canon.Request, error) {
	return c.DecodeInto(body, st, nil)
}

func (Chat) DecodeInto(body []byte, st *canon.State, store *canon.ReqStore) (*canon.Request, error) {
	body = st.Own(body)
	in := ChatRequestIn{Messages: chatMessagesScratch.Get(), Calls: chatCallsScratch.Get()}
	defer func() { chatMessagesScratch.Put(in.Messages); chatCallsScratch.Put(in.Calls) }()
	d := jsonkit.Reader{B: body}
	if err := d.Done(in.Read(&d)); err != nil {
		return nil, canon.BadRequest("body", fmt.Errorf("invalid chat completions request: %w", err))
	}
	switch {
	case in.N != nil && *in.N > 1:
		return nil, canon.Refuse("n", "n > 1 (several choices) cannot be translated")
	case in.Logprobs != nil && *in.Logprobs:
		return nil, canon.Refuse("logprobs", "logprobs cannot be translated")
	case len(in.LogitBias) > 0 && string(in.LogitBias) != "null" && string(in.LogitBias) != "{}":
		return nil, canon.Refuse("logit_bias", "logit_bias cannot be translated")
	case len(in.Audio) > 0 && string(in.Audio) != "null":
		return nil, canon.Refuse("audio", "audio output cannot be translated")
	case len(in.WebSearchOptions) > 0 && string(in.WebSearchOptions) != "null":
		return nil, canon.Refuse("web_search_options", "built-in web search cannot be translated")
	case len(in.Functions) > 0 && string(in.Functions) != "null":
		return nil, canon.Refuse("functions", "legacy functions are not supported; use tools")
	}
	for _, m := range in.Modalities {
		if m != "text" {
			return nil, canon.Refuse("modalities", "output modality %q cannot be translated", m)
		}
	}
	r := &canon.Request{Model: in.Model, ParallelToolCalls: in.ParallelToolCalls, Temperature: in.Temperature, TopP: in.TopP,
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
	if r.Stop, err = canon.StopList(in.Stop); err != nil {
		return nil, canon.BadRequest("stop", err)
	}
	if in.ReasoningEffort != "" {
		if in.ReasoningEffort == "none" {
			r.Reasoning = &canon.Reasoning{Disabled: true}
		} else {
			r.Reasoning = &canon.Reasoning{Effort: in.ReasoningEffort}
		}
	}
	if r.Format, err = chatFormat(in.ResponseFormat); err != nil {
		return nil, err
	}
	for i, raw := range in.Tools {
		var t ChatToolIn
		d := jsonkit.Reader{B: raw}
		if err := d.Done(t.Read(&d)); err != nil || t.Type != "function" {
			return nil, canon.Refuse(fmt.Sprintf("tools[%d]", i), "only function tools can be translated")
		}
		r.Tools = append(r.Tools, t.Function)
	}
	if r.ToolChoice, err = chatToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	s := store.Take(len(in.Messages))
	r.Messages = s.Msgs
	a := &ChatArena{Parts: s.Parts, Results: s.Results}
	for i := range in.Messages {
		if err := chatMessageToIR(r, i, &in.Messages[i], a); err != nil {
			return nil, err
		}
	}
	s.Keep(r.Messages, a.Parts, a.Results)
	return r, nil
}

func chatFormat(raw json.RawMessage) (*canon.ResponseFormat, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f ChatFormatIn
	d := jsonkit.Reader{B: raw}
	if err := d.Done(f.Read(&d)); err != nil {
		return nil, canon.BadRequest("response_format", err)
	}
	switch f.Type {
	case "text", "":
		return nil, nil
	case "json_object":
		return &canon.ResponseFormat{Type: "json_object"}, nil
	case "json_schema":
		return &canon.ResponseFormat{Type: "json_schema", Name: f.JSONSchema.Name, Schema: f.JSONSchema.Schema, Strict: f.JSONSchema.Strict}, nil
	}
	return nil, canon.Refuse("response_format", "response_format type %q cannot be translated", f.Type)
}

func chatToolChoice(raw json.RawMessage) (*canon.ToolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if jsonkit.StringOf(raw, &s) {
		switch s {
		case "auto", "none", "required":
			return &canon.ToolChoice{Mode: s}, nil
		}
		return nil, canon.Refuse("tool_choice", "unknown tool_choice %q", s)
	}
	var o ChatToolChoiceIn
	d := jsonkit.Reader{B: raw}
	if err := d.Done(o.Read(&d)); err != nil || o.Type != "function" {
		return nil, canon.Refuse("tool_choice", "only function tool choices can be translated")
	}
	name := o.Function.Name
	if name == "" {
		name = o.Name
	}
	return &canon.ToolChoice{Mode: "tool", Name: name}, nil
}

// chatContentParts parses alpha chat message content (string or parts) into canonical parts.
// chatContentParts appends the parts of alpha chat message content (string or parts) to dst.
func chatContentParts(raw json.RawMessage, field func() canon.FieldPath, dst []canon.Part) ([]canon.Part, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return dst, nil
	}
	var s string
	if jsonkit.StringOf(raw, &s) {
		if s == "" {
			return dst, nil
		}
		return append(dst, canon.Part{Type: canon.PartText, Text: s}), nil
	}
	var arr []chatPartIn
	d := jsonkit.Reader{B: raw}
	if err := d.Done(ReadChatParts(&d, &arr)); err != nil {
		return nil, canon.BadRequest(field().String(), err)
	}
	out := dst
	for j, p := range arr {
		f := func() canon.FieldPath { return field().With("", j) }
		switch p.Type {
		case "text":
			out = append(out, canon.Part{Type: canon.PartText, Text: p.Text})
		case "refusal":
			out = append(out, canon.Part{Type: canon.PartText, Text: p.Refusal})
		case "image_url":
			out = append(out, ImagePart(p.ImageURL.URL, p.ImageURL.Detail))
		case "file":
			if p.File.FileData == "" {
				return nil, canon.Refuse(f().String(), "file references by id cannot be translated; send file_data")
			}
			mime, data, ok := canon.DataURL(p.File.FileData)
			if !ok {
				mime, data = "application/pdf", p.File.FileData
			}
			out = append(out, canon.Part{Type: canon.PartFile, Data: data}.WithExtra(canon.PartExtra{MediaType: mime, FileName: p.File.Filename}))
		default:
			return nil, canon.Refuse(f().String(), "content part type %q cannot be translated", p.Type)
		}
	}
	return out, nil
}

func ImagePart(u, detail string) canon.Part {
	if mime, data, ok := canon.DataURL(u); ok {
		return canon.Part{Type: canon.PartImage, Data: data}.WithExtra(canon.PartExtra{MediaType: mime, Detail: detail})
	}
	return canon.Part{Type: canon.PartImage}.WithExtra(canon.PartExtra{URL: u, Detail: detail})
}

// ChatArena is the backing storage of a request's parts: message parts and tool result parts.
type ChatArena struct {
	Parts, Results []canon.Part `json:"-"`
}

func chatMessageToIR(r *canon.Request, i int, m *ChatMessageIn, a *ChatArena) error {
	field := func() canon.FieldPath { return canon.PathOf("messages", i).With(".content", -1) } // made for an error only
	switch m.Role {
	case "system", "developer":
		t, ok := m.contentText()
		if !ok {
			return canon.Refuse(field().String(), "system content must be text")
		}
		r.System = append(r.System, t)
	case "user":
		start := len(a.Parts)
		parts, err := m.contentParts(field, a.Parts)
		if err != nil {
			return err
		}
		a.Parts = parts
		r.Messages = append(r.Messages, canon.Message{Role: "user", Parts: canon.Clipped(a.Parts, start)})
	case "assistant":
		start := len(a.Parts)
		if m.ReasoningContent != "" {
			a.Parts = append(a.Parts, canon.Part{Type: canon.PartThinking, Text: m.ReasoningContent})
		}
		parts, err := m.contentParts(field, a.Parts)
		if err != nil {
			return err
		}
		a.Parts = parts
		if len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" {
			return canon.Refuse(fmt.Sprintf("messages[%d].function_call", i), "legacy function_call is not supported")
		}
		for _, tc := range m.ToolCalls {
			a.Parts = append(a.Parts, canon.Part{Type: canon.PartToolCall, CallID: tc.ID, Name: tc.Function.Name, Args: jsonkit.ArgsObject(tc.Function.Arguments)})
		}
		r.Messages = append(r.Messages, canon.Message{Role: "assistant", Parts: canon.Clipped(a.Parts, start)})
	case "tool":
		t, ok := m.contentText()
		if !ok {
			return canon.Refuse(field().String(), "tool content must be text")
		}
		a.Results = append(a.Results, canon.Part{Type: canon.PartText, Text: t})
		p := canon.Part{Type: canon.PartToolResult, CallID: m.ToolCallID, ResultParts: canon.Clipped(a.Results, len(a.Results)-1)}
		// consecutive tool messages become one user turn
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" && len(r.Messages[n-1].Parts) > 0 &&
			r.Messages[n-1].Parts[len(r.Messages[n-1].Parts)-1].Type == canon.PartToolResult {
			prev := r.Messages[n-1].Parts
			if k := len(a.Parts); k > 0 && &a.Parts[k-1] == &prev[len(prev)-1] { // the turn ends the arena: grow it there
				a.Parts = append(a.Parts, p)
				r.Messages[n-1].Parts = canon.Clipped(a.Parts, len(a.Parts)-len(prev)-1)
			} else {
				r.Messages[n-1].Parts = append(prev, p)
			}
		} else {
			a.Parts = append(a.Parts, p)
			r.Messages = append(r.Messages, canon.Message{Role: "user", Parts: canon.Clipped(a.Parts, len(a.Parts)-1)})
		}
	default:
		return canon.Refuse(fmt.Sprintf("messages[%d].role", i), "role %q cannot be translated", m.Role)
	}
	return nil
}

// ---- encode request ----

// chatParts writes message content: one text part as the plain string form, else the parts array.
func chatParts(w *jsonkit.Writer, parts []canon.Part) {
	allText := true
	for _, p := range parts {
		if p.Type != canon.PartText {
			allText = false
		}
	}
	if allText && len(parts) <= 1 {
		w.Str(canon.TextOf(parts))
		return
	}
	w.Open('[')
	for _, p := range parts {
		switch p.Type {
		case canon.PartText:
			w.Open('{')
			w.Key("type")
			w.Str("text")
			if p.Text != "" {
				w.Key("text")
				w.Str(p.Text)
			}
			w.Close('}')
		case canon.PartImage:
			u := p.Get().URL
			if u == "" {
				u = canon.MakeDataURL(p.Get().MediaType, p.Data)
			}
			w.Open('{')
			w.Key("type")
			w.Str("image_url")
			w.Key("image_url")
			w.Open('{')
			w.Key("url")
			w.Str(u)
			if p.Get().Detail != "" {
				w.Key("detail")
				w.Str(p.Get().Detail)
			}
			w.Close('}')
			w.Close('}')
		case canon.PartFile:
			w.Open('{')
			w.Key("type")
			w.Str("file")
			w.Key("file")
			w.Open('{')
			w.Key("file_data")
			w.Str(canon.MakeDataURL(p.Get().MediaType, p.Data))
			if p.Get().FileName != "" {
				w.Key("filename")
				w.Str(p.Get().FileName)
			}
			w.Close('}')
			w.Close('}')
		}
	}
	w.Close(']')
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

func (Chat) EncodeRequest(r *canon.Request, model string, stream bool, st *canon.State) (*canon.UpstreamRequest, error) {
	w := &jsonkit.Writer{B: make([]byte, 0, canon.RequestSizeHint(r))}
	w.Open('{')
	w.Key("model")
	w.Str(model)
	w.Key("messages")
	at := len(w.B)
	w.Open('[')
	if len(r.System) > 0 {
		w.Open('{')
		w.Key("role")
		w.Str("system")
		w.Key("content")
		w.Str(strings.Join(r.System, "\n\n"))
		w.Close('}')
	}
	var user []canon.Part // reused across messages
	for _, m := range r.Messages {
		user = chatMessagesOut(w, m, user[:0])
	}
	if w.AtArrayStart() { // no message: encoding/json wrote the nil slice as null
		w.B = append(w.B[:at], "null"...)
	} else {
		w.Close(']')
	}
	if len(r.Tools) > 0 {
		w.Key("tools")
		w.Open('[')
		for _, t := range r.Tools {
			w.Open('{')
			w.Key("type")
			w.Str("function")
			w.Key("function")
			w.Open('{')
			w.Key("name")
			w.Str(t.Name)
			if t.Description != "" {
				w.Key("description")
				w.Str(t.Description)
			}
			w.Key("parameters")
			if len(t.Parameters) == 0 {
				w.Raw(json.RawMessage(`{"type":"object","properties":{}}`))
			} else {
				w.Raw(t.Parameters)
			}
			if t.Strict != nil {
				w.Key("strict")
				w.Bool(*t.Strict)
			}
			w.Close('}')
			w.Close('}')
		}
		w.Close(']')
	}
	if tc := r.ToolChoice; tc != nil {
		w.Key("tool_choice")
		if tc.Mode == "tool" {
			w.Open('{')
			w.Key("function")
			w.Open('{')
			w.Key("name")
			w.Str(tc.Name)
			w.Close('}')
			w.Key("type")
			w.Str("function")
			w.Close('}')
		} else {
			w.Str(tc.Mode)
		}
	}
	if r.ParallelToolCalls != nil {
		w.Key("parallel_tool_calls")
		w.Bool(*r.ParallelToolCalls)
	}
	if r.MaxTokens != nil {
		w.Key("max_completion_tokens")
		w.Int(int64(*r.MaxTokens))
	}
	w.OptFloat("temperature", r.Temperature)
	w.OptFloat("top_p", r.TopP)
	w.StrList("stop", r.Stop)
	w.OptInt("seed", r.Seed)
	w.OptFloat("presence_penalty", r.PresencePenalty)
	w.OptFloat("frequency_penalty", r.FrequencyPenalty)
	if rs := r.Reasoning; rs != nil && !rs.Disabled {
		effort := rs.Effort
		if effort == "" {
			effort = canon.BudgetEffort(rs.Budget)
		}
		if rs.Adaptive && effort == "" {
			effort = "medium"
		}
		if effort != "" {
			w.Key("reasoning_effort")
			w.Str(effort)
		}
	}
	if f := r.Format; f != nil {
		w.Key("response_format")
		w.Open('{')
		if f.Type == "json_object" {
			w.Key("type")
			w.Str("json_object")
		} else {
			w.Key("json_schema")
			w.Open('{')
			w.Key("name")
			w.Str(canon.NonEmpty(f.Name, "response"))
			w.Key("schema")
			w.Raw(f.Schema)
			if f.Strict != nil {
				w.Key("strict")
				w.Bool(*f.Strict)
			}
			w.Close('}')
			w.Key("type")
			w.Str("json_schema")
		}
		w.Close('}')
	}
	if t := alphaTier(r.ServiceTier); t != "" {
		w.Key("service_tier")
		w.Str(t)
	}
	if r.User != "" {
		w.Key("user")
		w.Str(r.User)
	}
	if stream {
		w.Key("stream")
		w.Bool(true)
		w.Key("stream_options")
		w.Open('{')
		w.Key("include_usage")
		w.Bool(true)
		w.Close('}')
	}
	w.Close('}')
	return &canon.UpstreamRequest{Method: http.MethodPost, Path: "/v1/chat/completions", Header: canon.JSONHeader(), Body: w.B}, nil
}

// chatMessagesOut writes one canonical message as alpha chat messages (tool results become `tool`
// messages; images inside tool results follow in a user message, since tool messages carry text only).
// user is scratch space, returned for reuse.
func chatMessagesOut(w *jsonkit.Writer, m canon.Message, user []canon.Part) []canon.Part {
	if m.Role == "assistant" {
		w.Open('{')
		w.Key("role")
		w.Str("assistant")
		w.Key("content")
		first, n := -1, 0
		for i, p := range m.Parts {
			if p.Type == canon.PartText {
				if first < 0 {
					first = i
				}
				n++
			}
		}
		switch {
		case n == 0:
			w.B = append(w.B, "null"...)
		case n == 1:
			w.Str(m.Parts[first].Text)
		default:
			var b strings.Builder
			for pi := range m.Parts {
				p := &m.Parts[pi]
				if p.Type == canon.PartText {
					b.WriteString(p.Text)
				}
			}
			w.Str(b.String())
		}
		calls := false
		for pi := range m.Parts {
			p := &m.Parts[pi]
			if p.Type != canon.PartToolCall {
				continue
			}
			if !calls {
				w.Key("tool_calls")
				w.Open('[')
				calls = true
			}
			w.Open('{')
			if p.CallID != "" {
				w.Key("id")
				w.Str(p.CallID)
			}
			w.Key("type")
			w.Str("function")
			w.Key("function")
			w.Open('{')
			if p.Name != "" {
				w.Key("name")
				w.Str(p.Name)
			}
			w.Key("arguments")
			w.Str(jsonkit.ArgsView(p.Args))
			w.Close('}')
			w.Close('}')
		}
		if calls {
			w.Close(']')
		}
		w.Close('}')
		return user
	}
	var late []canon.Part
	for pi := range m.Parts {
		p := &m.Parts[pi]
		if p.Type != canon.PartToolResult {
			user = append(user, *p)
			continue
		}
		text := canon.ResultText(p)
		w.Open('{')
		w.Key("role")
		w.Str("tool")
		w.Key("content")
		w.Str(text)
		if p.CallID != "" {
			w.Key("tool_call_id")
			w.Str(p.CallID)
		}
		w.Close('}')
		for _, rp := range p.ResultParts {
			if rp.Type == canon.PartImage {
				late = append(late, rp)
			}
		}
	}
	if len(late) > 0 {
		user = append(late, user...)
	}
	if len(user) > 0 {
		w.Open('{')
		w.Key("role")
		w.Str("user")
		w.Key("content")
		chatParts(w, user)
		w.Close('}')
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
	Usage *chatUsageIn `json:"usage"`
}

func chatFinishIn(s string) canon.Finish {
	switch s {
	case "stop":
		return canon.FinishStop
	case "length":
		return canon.FinishLength
	case "tool_calls", "function_call":
		return canon.FinishToolCalls
	case "content_filter":
		return canon.FinishContentFilter
	case "":
		return canon.FinishNone
	}
	return canon.FinishStop
}

func chatFinishOut(f canon.Finish) string {
	switch f {
	case canon.FinishLength:
		return "length"
	case canon.FinishToolCalls:
		return "tool_calls"
	case canon.FinishContentFilter:
		return "content_filter"
	}
	return "stop"
}

func (Chat) DecodeResponse(body []byte, st *canon.State) (*canon.Response, error) {
	body = jsonkit.OwnedCopy(body)
	var in chatResponse
	if err := jsonkit.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode chat completion: %w", err)
	}
	r := &canon.Response{ID: in.ID, Model: in.Model, Created: in.Created, Usage: in.Usage.canonical(), ServiceTier: in.ServiceTier}
	var bill Billing
	bill.top(in.ServiceTier)
	bill.add(in.Usage)
	if u, found := bill.Usage(); found {
		r.Billed = &u
	}
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		if c.Message.ReasoningContent != "" {
			r.Parts = append(r.Parts, canon.Part{Type: canon.PartThinking, Text: c.Message.ReasoningContent})
		}
		if c.Message.Content != nil && *c.Message.Content != "" {
			r.Parts = append(r.Parts, canon.Part{Type: canon.PartText, Text: *c.Message.Content})
		}
		if c.Message.Refusal != nil && *c.Message.Refusal != "" {
			r.Parts = append(r.Parts, canon.Part{Type: canon.PartText, Text: *c.Message.Refusal})
		}
		for _, tc := range c.Message.ToolCalls {
			r.Parts = append(r.Parts, canon.Part{Type: canon.PartToolCall, CallID: tc.ID, Name: tc.Function.Name, Args: jsonkit.ArgsObject(tc.Function.Arguments)})
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

func (Chat) EncodeResponse(r *canon.Response, st *canon.State) ([]byte, error) {
	msg := chatMsgRespOut{Role: "assistant"}
	var text, thinking strings.Builder
	hasText := false
	for _, p := range r.Parts {
		switch p.Type {
		case canon.PartText:
			text.WriteString(p.Text)
			hasText = true
		case canon.PartThinking:
			thinking.WriteString(p.Text)
		case canon.PartToolCall:
			id := p.CallID
			if id == "" { // gamma may omit ids: synthesise them exactly as the stream encoder does
				id = fmt.Sprintf("call_%s_%d", st.RespSuffix(), len(msg.ToolCalls))
			}
			tc := chatToolCall{ID: id, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = p.Name, jsonkit.ArgsString(p.Args)
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
		created = st.Now()
	}
	out := chatResponseOut{ID: canon.ClientID("chatcmpl-", r.ID, st), Object: "chat.completion", Created: created,
		Model: r.Model, ServiceTier: alphaTier(r.ServiceTier),
		Choices: []chatChoiceOut{{Index: 0, Message: msg, FinishReason: chatFinishOut(r.Finish)}}}
	if r.Usage.Known {
		out.Usage = toChatUsage(r.Usage)
	}
	return jsonkit.Marshal(out)
}

// FieldName names the chat completions members other dialects may refuse.
func (Chat) FieldName(f canon.Field) string {
	switch f {
	case canon.FieldStop:
		return "stop"
	case canon.FieldFormat:
		return "response_format"
	case canon.FieldToolResult:
		return "messages.tool_call_id"
	}
	return ""
}

// CheckDestination: chat completions carries everything the canonical form does.
func (Chat) CheckDestination(*canon.Request, *canon.State) error { return nil }
