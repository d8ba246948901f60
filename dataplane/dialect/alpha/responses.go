package alpha

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Responses is the alpha responses codec: /v1/responses requests, answers and stream events.
type Responses struct{}

type RespContentPart struct {
	Type        string          `json:"type"`
	Text        string          `json:"text,omitempty"`
	Refusal     string          `json:"refusal,omitempty"`
	ImageURL    string          `json:"image_url,omitempty"`
	FileID      string          `json:"file_id,omitempty"`
	Detail      string          `json:"detail,omitempty"`
	FileData    string          `json:"file_data,omitempty"`
	FileURL     string          `json:"file_url,omitempty"`
	Filename    string          `json:"filename,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

type RespItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id,omitempty"`
	Role             string          `json:"role,omitempty"`
	Status           string          `json:"status,omitempty"`
	Content          json.RawMessage `json:"content,omitempty"`
	CallID           string          `json:"call_id,omitempty"`
	Name             string          `json:"name,omitempty"`
	Arguments        *string         `json:"arguments,omitempty"`
	Output           json.RawMessage `json:"output,omitempty"`
	Summary          json.RawMessage `json:"summary,omitempty"`
	EncryptedContent string          `json:"encrypted_content,omitempty"`

	ContentRead, OutputRead RespValueRead `json:"-"` // Content and Output as the body's one pass read them
	Args                    string        `json:"-"` // where Arguments points when the body's one pass read it
}

// RespValueRead is an input item's content or output as read in the one pass over the body (ReadRespItemsIn):
// its text when it is a string, else its parts (parts[lo:hi] of RespInputRead), and the error reading it —
// reported by respInputToIR where it read the raw value before (so refusals come in the same order).
type RespValueRead struct {
	read   bool // else the value is read from the raw Content or Output
	isText bool
	text   string
	lo, hi int
	err    error
}

type RespRequestIn struct {
	Model              string            `json:"model"`
	Instructions       json.RawMessage   `json:"instructions"`
	Input              json.RawMessage   `json:"input"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Reasoning          *respReasoningIn  `json:"reasoning"`
	Text               *respTextIn       `json:"text"`
	Stream             bool              `json:"stream"`
	ServiceTier        string            `json:"service_tier"`
	User               string            `json:"user"`
	SafetyIdentifier   string            `json:"safety_identifier"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Background         *bool             `json:"background"`
	Prompt             json.RawMessage   `json:"prompt"`
	TopLogprobs        *int              `json:"top_logprobs"`

	InputRead RespInputRead `json:"-"` // Input as the one pass over the body read it
}

// RespInputRead is the input as read in the one pass over the body: its text when it is a string, else its
// items (storage from respItemsScratch), and the first error reading them — reported by respInputToIR,
// where the input was decoded when a first pass kept it raw (so refusals come in the same order).
type RespInputRead struct {
	read   bool // else the input is decoded from Input
	isText bool
	text   string
	items  []RespItem
	parts  []RespContentPart // the items' content and output parts (storage from respPartsScratch)
	err    error
}

type respReasoningIn struct {
	Effort  string `json:"effort"`
	Summary string `json:"summary"`
}

type respTextIn struct {
	Format *respFormatIn `json:"format"`
}

type respFormatIn struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict *bool           `json:"strict"`
}

// RespToolIn is a tools[] entry: a function tool's members are the tool's.
type RespToolIn struct {
	Type string `json:"type"`
	canon.Tool
}

// respSummaryIn is a reasoning item's summary part.
type respSummaryIn struct {
	Text string `json:"text"`
}

func (c Responses) DecodeRequest(body []byte, st *canon.State) (*canon.Request, error) {
	return c.DecodeInto(body, st, nil)
}

func (Responses) DecodeInto(body []byte, st *canon.State, store *canon.ReqStore) (*canon.Request, error) {
	body = st.Own(body)
	in := RespRequestIn{InputRead: RespInputRead{items: respItemsScratch.Get(), parts: respPartsScratch.Get()}}
	defer func() { respItemsScratch.Put(in.InputRead.items); respPartsScratch.Put(in.InputRead.parts) }()
	d := jsonkit.Reader{B: body}
	if err := d.Done(in.Read(&d)); err != nil {
		return nil, canon.BadRequest("body", fmt.Errorf("invalid responses request: %w", err))
	}
	switch {
	case in.PreviousResponseID != "":
		return nil, canon.Refuse("previous_response_id", "stored conversation state cannot be translated; send the full input")
	case len(in.Conversation) > 0 && string(in.Conversation) != "null":
		return nil, canon.Refuse("conversation", "stored conversations cannot be translated; send the full input")
	case in.Background != nil && *in.Background:
		return nil, canon.Refuse("background", "background responses cannot be translated")
	case len(in.Prompt) > 0 && string(in.Prompt) != "null":
		return nil, canon.Refuse("prompt", "stored prompt templates cannot be translated")
	case in.TopLogprobs != nil && *in.TopLogprobs > 0:
		return nil, canon.Refuse("top_logprobs", "logprobs cannot be translated")
	}
	r := &canon.Request{Model: in.Model, ParallelToolCalls: in.ParallelToolCalls, MaxTokens: in.MaxOutputTokens, Temperature: in.Temperature,
		TopP: in.TopP, Stream: in.Stream, ServiceTier: in.ServiceTier, User: canon.NonEmpty(in.User, in.SafetyIdentifier), IncludeUsage: true}
	if len(in.Instructions) > 0 && string(in.Instructions) != "null" {
		t, ok := canon.RawText(in.Instructions)
		if !ok {
			return nil, canon.Refuse("instructions", "instructions must be text")
		}
		if t != "" {
			r.System = append(r.System, t)
		}
	}
	if rs := in.Reasoning; rs != nil && rs.Effort != "" {
		if rs.Effort == "none" {
			r.Reasoning = &canon.Reasoning{Disabled: true}
		} else {
			r.Reasoning = &canon.Reasoning{Effort: rs.Effort, IncludeThoughts: rs.Summary != "" && rs.Summary != "none"}
		}
	}
	if in.Text != nil && in.Text.Format != nil {
		f := in.Text.Format
		switch f.Type {
		case "json_schema":
			r.Format = &canon.ResponseFormat{Type: "json_schema", Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		case "json_object":
			r.Format = &canon.ResponseFormat{Type: "json_object"}
		}
	}
	for i, raw := range in.Tools {
		var t RespToolIn
		d := jsonkit.Reader{B: raw}
		if err := d.Done(t.Read(&d)); err != nil || t.Type != "function" {
			return nil, canon.Refuse(fmt.Sprintf("tools[%d]", i), "only function tools can be translated (got %q)", t.Type)
		}
		r.Tools = append(r.Tools, t.Tool)
	}
	var err error
	if r.ToolChoice, err = chatToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	if err := respInputToIR(r, in.Input, &in.InputRead, store); err != nil {
		return nil, err
	}
	return r, nil
}

// RespArena is the backing storage of a request's parts: message parts, tool result parts and the scratch
// an assistant message's content is read into.
type RespArena struct {
	Parts, Results, Tmp []canon.Part      `json:"-"`
	ContentRead         []RespContentPart `json:"-"` // scratch for one message's content parts
}

// AppendPart adds p to the last message when it has the role, else starts a message.
func (a *RespArena) AppendPart(r *canon.Request, role string, p canon.Part) {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
		prev := r.Messages[n-1].Parts
		if k := len(a.Parts); k > 0 && len(prev) > 0 && &a.Parts[k-1] == &prev[len(prev)-1] { // it ends the arena: grow it there
			a.Parts = append(a.Parts, p)
			r.Messages[n-1].Parts = canon.Clipped(a.Parts, len(a.Parts)-len(prev)-1)
			return
		}
		r.Messages[n-1].Parts = append(prev, p)
		return
	}
	a.Parts = append(a.Parts, p)
	r.Messages = append(r.Messages, canon.Message{Role: role, Parts: canon.Clipped(a.Parts, len(a.Parts)-1)})
}

func respInputToIR(r *canon.Request, raw json.RawMessage, pre *RespInputRead, store *canon.ReqStore) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if pre.isText || !pre.read && jsonkit.StringOf(raw, &s) {
		if pre.isText {
			s = pre.text
		}
		r.Messages = append(r.Messages, canon.Message{Role: "user", Parts: []canon.Part{{Type: canon.PartText, Text: s}}})
		return nil
	}
	if pre.err != nil {
		return canon.BadRequest("input", pre.err)
	}
	items := pre.items
	if !pre.read {
		items = respItemsScratch.Get()
		defer func() { respItemsScratch.Put(items) }()
		d := jsonkit.Reader{B: raw}
		if err := d.Done(ReadRespItems(&d, &items)); err != nil {
			return canon.BadRequest("input", err)
		}
	}
	st := store.Take(len(items))
	r.Messages = st.Msgs
	a := &RespArena{Parts: st.Parts, Results: st.Results}
	for i := range items {
		it := &items[i]
		switch it.Type {
		case "message", "":
			switch it.Role {
			case "system", "developer":
				t, ok := respItemText(it.Content, &it.ContentRead, pre.parts)
				if !ok {
					return canon.Refuse(canon.PathOf("input", i).String()+".content", "system content must be text")
				}
				r.System = append(r.System, t)
			case "user", "assistant":
				if it.Role == "assistant" {
					parts, err := a.contentParts(it.Content, &it.ContentRead, pre.parts, i, ".content", a.Tmp[:0])
					if err != nil {
						return err
					}
					a.Tmp = parts
					for _, p := range parts {
						a.AppendPart(r, "assistant", p)
					}
				} else {
					start := len(a.Parts)
					parts, err := a.contentParts(it.Content, &it.ContentRead, pre.parts, i, ".content", a.Parts)
					if err != nil {
						return err
					}
					a.Parts = parts
					r.Messages = append(r.Messages, canon.Message{Role: "user", Parts: canon.Clipped(a.Parts, start)})
				}
			default:
				return canon.Refuse(canon.PathOf("input", i).String()+".role", "role %q cannot be translated", it.Role)
			}
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			a.AppendPart(r, "assistant", canon.Part{Type: canon.PartToolCall, CallID: it.CallID, Name: it.Name, Args: jsonkit.ArgsObject(args)}.WithExtra(canon.PartExtra{ItemID: it.ID}))
		case "function_call_output":
			p := canon.Part{Type: canon.PartToolResult, CallID: it.CallID}
			start := len(a.Results)
			var out string
			if !it.OutputRead.read && jsonkit.ValidStringOf(it.Output, &out) {
				a.Results = append(a.Results, canon.Part{Type: canon.PartText, Text: out})
			} else {
				rp, err := a.contentParts(it.Output, &it.OutputRead, pre.parts, i, ".output", a.Results)
				if err != nil {
					return err
				}
				a.Results = rp
			}
			p.ResultParts = canon.Clipped(a.Results, start)
			if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" && len(r.Messages[n-1].Parts) > 0 &&
				r.Messages[n-1].Parts[len(r.Messages[n-1].Parts)-1].Type == canon.PartToolResult {
				a.AppendPart(r, "user", p)
			} else {
				a.Parts = append(a.Parts, p)
				r.Messages = append(r.Messages, canon.Message{Role: "user", Parts: canon.Clipped(a.Parts, len(a.Parts)-1)})
			}
		case "reasoning":
			var sum []respSummaryIn
			d := jsonkit.Reader{B: it.Summary}
			_ = ReadRespSummary(&d, &sum) // a part of the wrong kind ends the summary read so far
			var b strings.Builder
			for j, s := range sum {
				if j > 0 {
					b.WriteString("\n\n")
				}
				b.WriteString(s.Text)
			}
			a.AppendPart(r, "assistant", canon.Part{Type: canon.PartThinking, Text: b.String(), Signature: it.EncryptedContent}.WithExtra(canon.PartExtra{ItemID: it.ID}))
		default:
			return canon.Refuse(canon.PathOf("input", i).String()+".type", "input item type %q cannot be translated", it.Type)
		}
	}
	st.Keep(r.Messages, a.Parts, a.Results)
	return nil
}

// hasToolResult reports whether parts hold a tool result.
func hasToolResult(parts []canon.Part) bool {
	for i := range parts {
		if parts[i].Type == canon.PartToolResult {
			return true
		}
	}
	return false
}

func respText(raw json.RawMessage) (string, bool) {
	return canon.RawText(raw)
}

// respItemText is an item's system content as text (respText), from what the body's one pass read when it
// read it.
func respItemText(raw json.RawMessage, v *RespValueRead, parts []RespContentPart) (string, bool) {
	if !v.read || v.err != nil {
		return respText(raw)
	}
	if v.isText {
		return v.text, true
	}
	var b strings.Builder
	for _, p := range parts[v.lo:v.hi] {
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// contentParts appends the parts of item i's content or output (member; v as the body's one pass read it,
// else its raw value) to dst. The field path is made for an error only.
func (a *RespArena) contentParts(raw json.RawMessage, v *RespValueRead, parts []RespContentPart, i int, member string, dst []canon.Part) ([]canon.Part, error) {
	switch {
	case !v.read:
		return respContentParts(raw, canon.PathOf("input", i).With(member, -1), dst, &a.ContentRead)
	case v.err != nil:
		return nil, canon.BadRequest(canon.PathOf("input", i).With(member, -1).String(), v.err)
	case v.isText:
		return append(dst, canon.Part{Type: canon.PartText, Text: v.text}), nil
	}
	return respPartsIR(parts[v.lo:v.hi], func() canon.FieldPath { return canon.PathOf("input", i).With(member, -1) }, dst)
}

// respContentParts appends the parts of message content (string or parts) to dst.
// scratch, when not nil, is reused storage for the decoded content parts.
func respContentParts(raw json.RawMessage, field canon.FieldPath, dst []canon.Part, scratch *[]RespContentPart) ([]canon.Part, error) {
	var s string
	if jsonkit.StringOf(raw, &s) {
		return append(dst, canon.Part{Type: canon.PartText, Text: s}), nil
	}
	if scratch == nil {
		scratch = new([]RespContentPart)
	}
	d := jsonkit.Reader{B: raw}
	if err := d.Done(ReadRespContent(&d, scratch)); err != nil {
		return nil, canon.BadRequest(field.String(), err)
	}
	return respPartsIR(*scratch, func() canon.FieldPath { return field }, dst)
}

// respPartsIR appends the canonical parts of content parts to dst (field: their path, made for an error).
func respPartsIR(arr []RespContentPart, field func() canon.FieldPath, dst []canon.Part) ([]canon.Part, error) {
	out := dst
	for j := range arr {
		p := &arr[j]
		f := func() string { return field().With("", j).String() } // made for an error only
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, canon.Part{Type: canon.PartText, Text: p.Text})
		case "refusal":
			out = append(out, canon.Part{Type: canon.PartText, Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				return nil, canon.Refuse(f(), "images by file_id cannot be translated; send image_url")
			}
			out = append(out, ImagePart(p.ImageURL, p.Detail))
		case "input_file":
			switch {
			case p.FileData != "":
				mime, data, ok := canon.DataURL(p.FileData)
				if !ok {
					mime, data = "application/pdf", p.FileData
				}
				out = append(out, canon.Part{Type: canon.PartFile, Data: data}.WithExtra(canon.PartExtra{MediaType: mime, FileName: p.Filename}))
			case p.FileURL != "":
				out = append(out, canon.Part{Type: canon.PartFile}.WithExtra(canon.PartExtra{URL: p.FileURL, MediaType: canon.MimeFromURL(p.FileURL), FileName: p.Filename}))
			default:
				return nil, canon.Refuse(f(), "files by file_id cannot be translated; send file_data")
			}
		default:
			return nil, canon.Refuse(f(), "content part type %q cannot be translated", p.Type)
		}
	}
	return out, nil
}

// ---- encode request ----

// respPartsOut writes a message's content parts (maps' key order: sorted, as encoding/json wrote them).
func respPartsOut(w *jsonkit.Writer, parts []canon.Part, assistant bool) {
	w.Open('[')
	for pi := range parts {
		p := &parts[pi]
		switch p.Type {
		case canon.PartText:
			w.Open('{')
			w.Key("text")
			w.Str(p.Text)
			w.Key("type")
			if assistant {
				w.Str("output_text")
			} else {
				w.Str("input_text")
			}
			w.Close('}')
		case canon.PartImage:
			u := p.Get().URL
			if u == "" {
				u = canon.MakeDataURL(p.Get().MediaType, p.Data)
			}
			w.Open('{')
			w.Key("detail")
			w.Str(canon.NonEmpty(p.Get().Detail, "auto"))
			w.Key("image_url")
			w.Str(u)
			w.Key("type")
			w.Str("input_image")
			w.Close('}')
		case canon.PartFile:
			w.Open('{')
			if p.Get().URL != "" {
				w.Key("file_url")
				w.Str(p.Get().URL)
			} else {
				w.Key("file_data")
				w.Str(canon.MakeDataURL(p.Get().MediaType, p.Data))
				w.Key("filename")
				w.Str(canon.NonEmpty(p.Get().FileName, "file"))
			}
			w.Key("type")
			w.Str("input_file")
			w.Close('}')
		}
	}
	w.Close(']')
}

func (Responses) EncodeRequest(r *canon.Request, model string, stream bool, st *canon.State) (*canon.UpstreamRequest, error) {
	w := &jsonkit.Writer{B: make([]byte, 0, canon.RequestSizeHint(r))}
	w.Open('{')
	w.Key("model")
	w.Str(model)
	if len(r.System) > 0 {
		if ins := strings.Join(r.System, "\n\n"); ins != "" {
			w.Key("instructions")
			w.Str(ins)
		}
	}
	w.Key("input")
	w.Open('[')
	var text []canon.Part // an assistant turn's text parts, sent as one message item before its next other item
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			for pi := range m.Parts {
				p := &m.Parts[pi]
				switch p.Type {
				case canon.PartText:
					text = append(text, *p)
				case canon.PartToolCall:
					flushParts(w, &text)
					w.Open('{')
					w.Key("arguments")
					w.Str(jsonkit.ArgsView(p.Args))
					w.Key("call_id")
					w.Str(p.CallID)
					w.Key("name")
					w.Str(p.Name)
					w.Key("type")
					w.Str("function_call")
					w.Close('}')
				case canon.PartThinking:
					if respReasoningReplay(nil, p) {
						flushParts(w, &text)
						respReasoningReplay(w, p)
					}
				}
			}
			flushParts(w, &text)
			continue
		}
		user := m.Parts // a message without tool results is sent as it is, not copied
		var late []canon.Part
		if hasToolResult(m.Parts) {
			user = nil
			for pi := range m.Parts {
				p := &m.Parts[pi]
				if p.Type != canon.PartToolResult {
					user = append(user, *p)
					continue
				}
				text := canon.ResultText(p)
				w.Open('{')
				w.Key("call_id")
				w.Str(p.CallID)
				w.Key("output")
				w.Str(text)
				w.Key("type")
				w.Str("function_call_output")
				w.Close('}')
				for _, rp := range p.ResultParts {
					if rp.Type == canon.PartImage {
						late = append(late, rp)
					}
				}
			}
		}
		if len(late) > 0 {
			user = append(late, user...)
		}
		if len(user) > 0 {
			w.Open('{')
			w.Key("content")
			respPartsOut(w, user, false)
			w.Key("role")
			w.Str("user")
			w.Close('}')
		}
	}
	w.Close(']')
	if len(r.Tools) > 0 {
		w.Key("tools")
		w.Open('[')
		for _, t := range r.Tools {
			w.Open('{')
			if t.Description != "" {
				w.Key("description")
				w.Str(t.Description)
			}
			w.Key("name")
			w.Str(t.Name)
			w.Key("parameters")
			if params := t.Parameters; len(params) == 0 || string(params) == "null" {
				w.Raw(json.RawMessage(`{"type":"object","properties":{}}`))
			} else {
				w.Raw(params)
			}
			w.Key("strict")
			w.Bool(t.Strict != nil && *t.Strict)
			w.Key("type")
			w.Str("function")
			w.Close('}')
		}
		w.Close(']')
	}
	if tc := r.ToolChoice; tc != nil {
		w.Key("tool_choice")
		if tc.Mode == "tool" {
			w.Open('{')
			w.Key("name")
			w.Str(tc.Name)
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
		w.Key("max_output_tokens")
		w.Int(int64(*r.MaxTokens))
	}
	w.OptFloat("temperature", r.Temperature)
	w.OptFloat("top_p", r.TopP)
	if rs := r.Reasoning; rs != nil && !rs.Disabled {
		effort := rs.Effort
		if effort == "" {
			effort = canon.BudgetEffort(rs.Budget)
		}
		if effort == "" {
			effort = "medium"
		}
		w.Key("reasoning")
		w.Open('{')
		w.Key("effort")
		w.Str(effort)
		summary := st.Client != "alpha_chat_completions"
		if summary {
			w.Key("summary")
			w.Str("auto")
		}
		w.Close('}')
		if summary {
			w.Key("include")
			w.Open('[')
			w.Str("reasoning.encrypted_content")
			w.Close(']')
		}
	}
	if f := r.Format; f != nil {
		w.Key("text")
		w.Open('{')
		w.Key("format")
		w.Open('{')
		if f.Type == "json_object" {
			w.Key("type")
			w.Str("json_object")
		} else {
			w.Key("name")
			w.Str(canon.NonEmpty(f.Name, "response"))
			w.Key("schema")
			w.Raw(f.Schema)
			if f.Strict != nil {
				w.Key("strict")
				w.Bool(*f.Strict)
			}
			w.Key("type")
			w.Str("json_schema")
		}
		w.Close('}')
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
	w.Key("store")
	w.Bool(false)
	if stream {
		w.Key("stream")
		w.Bool(true)
	}
	w.Close('}')
	return &canon.UpstreamRequest{Method: http.MethodPost, Path: "/v1/responses", Header: canon.JSONHeader(), Body: w.B}, nil
}

// flushParts writes the pending assistant text parts as one message item and empties them.
func flushParts(w *jsonkit.Writer, text *[]canon.Part) {
	if len(*text) == 0 {
		return
	}
	w.Open('{')
	w.Key("content")
	respPartsOut(w, *text, true)
	w.Key("role")
	w.Str("assistant")
	w.Key("type")
	w.Str("message")
	w.Close('}')
	*text = (*text)[:0]
}

// respReasoningReplay writes the reasoning input item rebuilt from a signature minted by respSignature (w
// nil: only reports whether there is one; foreign reasoning cannot be verified by alpha responses and is
// dropped).
func respReasoningReplay(w *jsonkit.Writer, p *canon.Part) bool {
	rest, ok := strings.CutPrefix(p.Signature, canon.RespSigPrefix)
	if !ok {
		return false
	}
	id, enc, ok := strings.Cut(rest, ".")
	if !ok || id == "" {
		return false
	}
	if w == nil {
		return true
	}
	w.Open('{')
	if enc != "" {
		w.Key("encrypted_content")
		w.Str(enc)
	}
	w.Key("id")
	w.Str(id)
	w.Key("summary")
	w.Open('[')
	if p.Text != "" {
		w.Open('{')
		w.Key("text")
		w.Str(p.Text)
		w.Key("type")
		w.Str("summary_text")
		w.Close('}')
	}
	w.Close(']')
	w.Key("type")
	w.Str("reasoning")
	w.Close('}')
	return true
}

// respSignature packs a reasoning item id and encrypted content as one opaque signature.
func respSignature(id, enc string) string {
	if id == "" && enc == "" {
		return ""
	}
	return canon.RespSigPrefix + id + "." + enc
}

// ---- response ----

type respResponse struct {
	ID                string        `json:"id"`
	CreatedAt         int64         `json:"created_at"`
	Status            string        `json:"status"`
	Model             string        `json:"model"`
	ServiceTier       string        `json:"service_tier"`
	Output            []respOutItem `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Usage *chatUsageIn `json:"usage"` // read as billing reads it: the canonical and the billed usage come from it
}

func respFinishIn(status, reason string, calls bool) canon.Finish {
	switch status {
	case "incomplete":
		if reason == "content_filter" {
			return canon.FinishContentFilter
		}
		return canon.FinishLength
	case "failed", "cancelled":
		return canon.FinishError
	}
	if calls {
		return canon.FinishToolCalls
	}
	return canon.FinishStop
}

// respOutItem is one output item of an alpha answer (a buffered body's, or a stream event's item or
// response): an item of a kind the translator carries (respCarried) is decoded into RespItem; an item of any
// other kind — server-side tool calls and their outputs (tool_search_call, web_search_call, …), kinds added
// after this code — keeps only its type and is dropped from the client's answer, and its members are never
// decoded, so no shape of theirs can fail the answer (docs/translation.md "Output items the translator does
// not know"). An item whose type cannot be read is such an item too.
type respOutItem struct{ RespItem }

// respCarried reports whether the translator carries output items of kind typ.
func respCarried(typ string) bool {
	switch typ {
	case "message", "reasoning", "function_call":
		return true
	}
	return false
}

// UnmarshalJSONFrom decodes the item with the caller's options (the Unmarshal options or eventOpts): the value read
// points into the caller's input, so views into it stay valid as for any other member.
func (o *respOutItem) UnmarshalJSONFrom(dec *jsonkit.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	o.RespItem = RespItem{}
	switch v.Kind() {
	case jsonkit.KindNull:
		return nil
	case jsonkit.KindObject:
	default:
		return fmt.Errorf("cannot unmarshal %s into an output item: %w", v.Kind(), errNotObject)
	}
	var probe struct {
		Type string `json:"type"`
	}
	if err := jsonv2.Unmarshal(v, &probe, dec.Options()); err != nil || !respCarried(probe.Type) {
		o.Type = probe.Type
		return nil
	}
	return jsonv2.Unmarshal(v, &o.RespItem, dec.Options())
}

var errNotObject = errors.New("not a JSON object")

func respOutputToParts(items []respOutItem) []canon.Part {
	var parts []canon.Part
	for _, it := range items {
		switch it.Type {
		case "reasoning":
			var sum []struct {
				Text string `json:"text"`
			}
			_ = jsonkit.Unmarshal(it.Summary, &sum)
			if len(sum) == 0 {
				_ = jsonkit.Unmarshal(it.Content, &sum)
			}
			var b strings.Builder
			for j, s := range sum {
				if j > 0 {
					b.WriteString("\n\n")
				}
				b.WriteString(s.Text)
			}
			parts = append(parts, canon.Part{Type: canon.PartThinking, Text: b.String(), Signature: respSignature(it.ID, it.EncryptedContent)}.WithExtra(canon.PartExtra{ItemID: it.ID}))
		case "message":
			cp, _ := respContentParts(it.Content, canon.PathOf("output", -1), nil, nil)
			for _, p := range cp {
				if p.Type == canon.PartText {
					x := p.Get()
					x.ItemID = it.ID
					p = p.WithExtra(x)
					parts = append(parts, p)
				}
			}
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			parts = append(parts, canon.Part{Type: canon.PartToolCall, CallID: it.CallID, Name: it.Name, Args: jsonkit.ArgsObject(args)}.WithExtra(canon.PartExtra{ItemID: it.ID}))
		}
	}
	return parts
}

func (Responses) DecodeResponse(body []byte, st *canon.State) (*canon.Response, error) {
	body = jsonkit.OwnedCopy(body)
	var in respResponse
	if err := jsonkit.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	r := respToIR(&in)
	bill := ResponsesBilling()
	bill.top(in.ServiceTier)
	bill.add(in.Usage)
	if u, found := bill.Usage(); found {
		r.Billed = &u
	}
	return r, nil
}

func respToIR(in *respResponse) *canon.Response {
	r := &canon.Response{ID: in.ID, Model: in.Model, Created: in.CreatedAt, ServiceTier: in.ServiceTier, Usage: in.Usage.canonical()}
	r.Parts = respOutputToParts(in.Output)
	reason := ""
	if in.IncompleteDetails != nil {
		reason = in.IncompleteDetails.Reason
	}
	r.Finish = respFinishIn(in.Status, reason, canon.HasToolCall(r.Parts))
	return r
}

type respResponseOut struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	CreatedAt         int64         `json:"created_at"`
	Status            string        `json:"status"`
	Error             any           `json:"error"`
	IncompleteDetails any           `json:"incomplete_details"`
	Model             string        `json:"model"`
	Output            []jsonkit.Obj `json:"output"`
	ParallelToolCalls bool          `json:"parallel_tool_calls"`
	ToolChoice        string        `json:"tool_choice"`
	Tools             []any         `json:"tools"`
	ServiceTier       string        `json:"service_tier,omitempty"`
	Usage             *respUsage    `json:"usage"`
}

// respItemIDs are the client-visible item ids, shared by the streamed events and the final object.
func respItemID(prefix string, st *canon.State, i int) string {
	return fmt.Sprintf("%s_%s_%d", prefix, st.RespSuffix(), i)
}

// respOutputItem renders one canonical part as a completed output item.
func respOutputItem(p canon.Part, i int, st *canon.State) jsonkit.Obj {
	switch p.Type {
	case canon.PartText:
		return jsonkit.Obj{"id", canon.NonEmpty(p.Get().ItemID, respItemID("msg", st, i)), "type", "message", "status", "completed", "role", "assistant",
			"content", []jsonkit.Obj{{"type", "output_text", "text", p.Text, "annotations", []any{}}}}
	case canon.PartThinking:
		summary := []jsonkit.Obj{}
		if p.Text != "" {
			summary = append(summary, jsonkit.Obj{"type", "summary_text", "text", p.Text})
		}
		m := jsonkit.Obj{"id", canon.NonEmpty(p.Get().ItemID, respItemID("rs", st, i)), "type", "reasoning", "summary", summary}
		if sig := st.SigToClient(p.Signature); sig != "" {
			m = append(m, "encrypted_content", sig)
		}
		return m
	case canon.PartToolCall:
		id := p.CallID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d", st.RespSuffix(), i)
		}
		return jsonkit.Obj{"id", canon.NonEmpty(p.Get().ItemID, respItemID("fc", st, i)), "type", "function_call", "status", "completed", "call_id", id,
			"name", p.Name, "arguments", canon.NonEmpty(p.Get().RawArgs, jsonkit.ArgsString(p.Args))}
	}
	return nil
}

func respStatusOut(f canon.Finish) (string, any) {
	switch f {
	case canon.FinishLength:
		return "incomplete", map[string]string{"reason": "max_output_tokens"}
	case canon.FinishContentFilter:
		return "incomplete", map[string]string{"reason": "content_filter"}
	}
	return "completed", nil
}

func respBuildResponse(r *canon.Response, st *canon.State, id string, created int64) respResponseOut {
	status, inc := respStatusOut(r.Finish)
	out := respResponseOut{ID: id, Object: "response", CreatedAt: created, Status: status, IncompleteDetails: inc,
		Model: r.Model, Output: []jsonkit.Obj{}, ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{},
		ServiceTier: alphaTier(r.ServiceTier)}
	for i, p := range r.Parts {
		if item := respOutputItem(p, i, st); item != nil {
			out.Output = append(out.Output, item)
		}
	}
	if r.Usage.Known {
		out.Usage = toRespUsage(r.Usage)
	}
	return out
}

func (Responses) EncodeResponse(r *canon.Response, st *canon.State) ([]byte, error) {
	created := r.Created
	if created == 0 {
		created = st.Now()
	}
	parts := r.Parts
	if r.Refusal != "" {
		parts = append(parts, canon.Part{Type: canon.PartText, Text: r.Refusal})
	}
	rr := *r
	rr.Parts = mergeAdjacentText(parts)
	return jsonkit.Marshal(respBuildResponse(&rr, st, canon.ClientID("resp_", r.ID, st), created))
}

func mergeAdjacentText(parts []canon.Part) []canon.Part {
	out := make([]canon.Part, 0, len(parts))
	for _, p := range parts {
		if n := len(out); n > 0 && p.Type == canon.PartText && out[n-1].Type == canon.PartText {
			out[n-1].Text += p.Text
			continue
		}
		out = append(out, p)
	}
	return out
}

// FieldName names the responses members other dialects may refuse.
func (Responses) FieldName(f canon.Field) string {
	switch f {
	case canon.FieldStop:
		return "stop"
	case canon.FieldFormat:
		return "text.format"
	case canon.FieldToolResult:
		return "input.function_call_output.call_id"
	}
	return ""
}

// CheckDestination: responses has no stop sequences.
func (Responses) CheckDestination(r *canon.Request, st *canon.State) error {
	if len(r.Stop) > 0 {
		return canon.Refuse(st.ClientField(canon.FieldStop), "the destination has no stop sequences; remove them or route to another provider")
	}
	return nil
}
