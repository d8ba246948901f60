package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// alphaResp is the alpha responses codec: /v1/responses requests, answers and stream events.
type alphaResp struct{}

// respSigPrefix marks a thinking signature that carries an alpha responses reasoning item (id and
// encrypted_content) through a beta or gamma client, so it can be replayed to an alpha responses upstream.
const respSigPrefix = "tgrs1."

type respContentPart struct {
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

type respItem struct {
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

	content, output respValueRead // Content and Output as the body's one pass read them
	args            string        // where Arguments points when the body's one pass read it
}

// respValueRead is an input item's content or output as read in the one pass over the body (readRespItemsIn):
// its text when it is a string, else its parts (parts[lo:hi] of respInputRead), and the error reading it —
// reported by respInputToIR where it read the raw value before (so refusals come in the same order).
type respValueRead struct {
	read   bool // else the value is read from the raw Content or Output
	isText bool
	text   string
	lo, hi int
	err    error
}

type respRequestIn struct {
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

	input respInputRead // Input as the one pass over the body read it
}

// respInputRead is the input as read in the one pass over the body: its text when it is a string, else its
// items (storage from respItemsScratch), and the first error reading them — reported by respInputToIR,
// where the input was decoded when a first pass kept it raw (so refusals come in the same order).
type respInputRead struct {
	read   bool // else the input is decoded from Input
	isText bool
	text   string
	items  []respItem
	parts  []respContentPart // the items' content and output parts (storage from respPartsScratch)
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

// respToolIn is a tools[] entry: a function tool's members are the tool's.
type respToolIn struct {
	Type string `json:"type"`
	tool
}

// respSummaryIn is a reasoning item's summary part.
type respSummaryIn struct {
	Text string `json:"text"`
}

func (c alphaResp) decodeRequest(body []byte, st *reqState) (*request, error) {
	return c.decodeInto(body, st, nil)
}

func (alphaResp) decodeInto(body []byte, st *reqState, store *reqStore) (*request, error) {
	body = st.own(body)
	in := respRequestIn{input: respInputRead{items: respItemsScratch.get(), parts: respPartsScratch.get()}}
	defer func() { respItemsScratch.put(in.input.items); respPartsScratch.put(in.input.parts) }()
	d := jr{b: body}
	if err := d.done(in.read(&d)); err != nil {
		return nil, badRequest("body", fmt.Errorf("invalid responses request: %w", err))
	}
	switch {
	case in.PreviousResponseID != "":
		return nil, refuse("previous_response_id", "stored conversation state cannot be translated; send the full input")
	case len(in.Conversation) > 0 && string(in.Conversation) != "null":
		return nil, refuse("conversation", "stored conversations cannot be translated; send the full input")
	case in.Background != nil && *in.Background:
		return nil, refuse("background", "background responses cannot be translated")
	case len(in.Prompt) > 0 && string(in.Prompt) != "null":
		return nil, refuse("prompt", "stored prompt templates cannot be translated")
	case in.TopLogprobs != nil && *in.TopLogprobs > 0:
		return nil, refuse("top_logprobs", "logprobs cannot be translated")
	}
	r := &request{Model: in.Model, ParallelToolCalls: in.ParallelToolCalls, MaxTokens: in.MaxOutputTokens, Temperature: in.Temperature,
		TopP: in.TopP, Stream: in.Stream, ServiceTier: in.ServiceTier, User: nonEmpty(in.User, in.SafetyIdentifier), IncludeUsage: true}
	if len(in.Instructions) > 0 && string(in.Instructions) != "null" {
		t, ok := rawText(in.Instructions)
		if !ok {
			return nil, refuse("instructions", "instructions must be text")
		}
		if t != "" {
			r.System = append(r.System, t)
		}
	}
	if rs := in.Reasoning; rs != nil && rs.Effort != "" {
		if rs.Effort == "none" {
			r.Reasoning = &reasoning{Disabled: true}
		} else {
			r.Reasoning = &reasoning{Effort: rs.Effort, IncludeThoughts: rs.Summary != "" && rs.Summary != "none"}
		}
	}
	if in.Text != nil && in.Text.Format != nil {
		f := in.Text.Format
		switch f.Type {
		case "json_schema":
			r.Format = &responseFormat{Type: "json_schema", Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		case "json_object":
			r.Format = &responseFormat{Type: "json_object"}
		}
	}
	for i, raw := range in.Tools {
		var t respToolIn
		d := jr{b: raw}
		if err := d.done(t.read(&d)); err != nil || t.Type != "function" {
			return nil, refuse(fmt.Sprintf("tools[%d]", i), "only function tools can be translated (got %q)", t.Type)
		}
		r.Tools = append(r.Tools, t.tool)
	}
	var err error
	if r.ToolChoice, err = chatToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	if err := respInputToIR(r, in.Input, &in.input, store); err != nil {
		return nil, err
	}
	return r, nil
}

// respArena is the backing storage of a request's parts: message parts, tool result parts and the scratch
// an assistant message's content is read into.
type respArena struct {
	parts, results, tmp []part
	content             []respContentPart // scratch for one message's content parts
}

// appendPart adds p to the last message when it has the role, else starts a message.
func (a *respArena) appendPart(r *request, role string, p part) {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
		prev := r.Messages[n-1].Parts
		if k := len(a.parts); k > 0 && len(prev) > 0 && &a.parts[k-1] == &prev[len(prev)-1] { // it ends the arena: grow it there
			a.parts = append(a.parts, p)
			r.Messages[n-1].Parts = clipped(a.parts, len(a.parts)-len(prev)-1)
			return
		}
		r.Messages[n-1].Parts = append(prev, p)
		return
	}
	a.parts = append(a.parts, p)
	r.Messages = append(r.Messages, message{Role: role, Parts: clipped(a.parts, len(a.parts)-1)})
}

func respInputToIR(r *request, raw json.RawMessage, pre *respInputRead, store *reqStore) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if pre.isText || !pre.read && stringOf(raw, &s) {
		if pre.isText {
			s = pre.text
		}
		r.Messages = append(r.Messages, message{Role: "user", Parts: []part{{Type: partText, Text: s}}})
		return nil
	}
	if pre.err != nil {
		return badRequest("input", pre.err)
	}
	items := pre.items
	if !pre.read {
		items = respItemsScratch.get()
		defer func() { respItemsScratch.put(items) }()
		d := jr{b: raw}
		if err := d.done(readRespItems(&d, &items)); err != nil {
			return badRequest("input", err)
		}
	}
	st := store.take(len(items))
	r.Messages = st.msgs
	a := &respArena{parts: st.parts, results: st.results}
	for i := range items {
		it := &items[i]
		switch it.Type {
		case "message", "":
			switch it.Role {
			case "system", "developer":
				t, ok := respItemText(it.Content, &it.content, pre.parts)
				if !ok {
					return refuse(pathOf("input", i).String()+".content", "system content must be text")
				}
				r.System = append(r.System, t)
			case "user", "assistant":
				if it.Role == "assistant" {
					parts, err := a.contentParts(it.Content, &it.content, pre.parts, i, ".content", a.tmp[:0])
					if err != nil {
						return err
					}
					a.tmp = parts
					for _, p := range parts {
						a.appendPart(r, "assistant", p)
					}
				} else {
					start := len(a.parts)
					parts, err := a.contentParts(it.Content, &it.content, pre.parts, i, ".content", a.parts)
					if err != nil {
						return err
					}
					a.parts = parts
					r.Messages = append(r.Messages, message{Role: "user", Parts: clipped(a.parts, start)})
				}
			default:
				return refuse(pathOf("input", i).String()+".role", "role %q cannot be translated", it.Role)
			}
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			a.appendPart(r, "assistant", part{Type: partToolCall, CallID: it.CallID, Name: it.Name, Args: argsObject(args)}.withExtra(partExtra{ItemID: it.ID}))
		case "function_call_output":
			p := part{Type: partToolResult, CallID: it.CallID}
			start := len(a.results)
			var out string
			if !it.output.read && validStringOf(it.Output, &out) {
				a.results = append(a.results, part{Type: partText, Text: out})
			} else {
				rp, err := a.contentParts(it.Output, &it.output, pre.parts, i, ".output", a.results)
				if err != nil {
					return err
				}
				a.results = rp
			}
			p.ResultParts = clipped(a.results, start)
			if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" && len(r.Messages[n-1].Parts) > 0 &&
				r.Messages[n-1].Parts[len(r.Messages[n-1].Parts)-1].Type == partToolResult {
				a.appendPart(r, "user", p)
			} else {
				a.parts = append(a.parts, p)
				r.Messages = append(r.Messages, message{Role: "user", Parts: clipped(a.parts, len(a.parts)-1)})
			}
		case "reasoning":
			var sum []respSummaryIn
			d := jr{b: it.Summary}
			_ = readRespSummary(&d, &sum) // a part of the wrong kind ends the summary read so far
			var b strings.Builder
			for j, s := range sum {
				if j > 0 {
					b.WriteString("\n\n")
				}
				b.WriteString(s.Text)
			}
			a.appendPart(r, "assistant", part{Type: partThinking, Text: b.String(), Signature: it.EncryptedContent}.withExtra(partExtra{ItemID: it.ID}))
		default:
			return refuse(pathOf("input", i).String()+".type", "input item type %q cannot be translated", it.Type)
		}
	}
	st.keep(r.Messages, a.parts, a.results)
	return nil
}

// hasToolResult reports whether parts hold a tool result.
func hasToolResult(parts []part) bool {
	for i := range parts {
		if parts[i].Type == partToolResult {
			return true
		}
	}
	return false
}

func respText(raw json.RawMessage) (string, bool) {
	return rawText(raw)
}

// respItemText is an item's system content as text (respText), from what the body's one pass read when it
// read it.
func respItemText(raw json.RawMessage, v *respValueRead, parts []respContentPart) (string, bool) {
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
func (a *respArena) contentParts(raw json.RawMessage, v *respValueRead, parts []respContentPart, i int, member string, dst []part) ([]part, error) {
	switch {
	case !v.read:
		return respContentParts(raw, pathOf("input", i).with(member, -1), dst, &a.content)
	case v.err != nil:
		return nil, badRequest(pathOf("input", i).with(member, -1).String(), v.err)
	case v.isText:
		return append(dst, part{Type: partText, Text: v.text}), nil
	}
	return respPartsIR(parts[v.lo:v.hi], func() fieldPath { return pathOf("input", i).with(member, -1) }, dst)
}

// respContentParts appends the parts of message content (string or parts) to dst.
// scratch, when not nil, is reused storage for the decoded content parts.
func respContentParts(raw json.RawMessage, field fieldPath, dst []part, scratch *[]respContentPart) ([]part, error) {
	var s string
	if stringOf(raw, &s) {
		return append(dst, part{Type: partText, Text: s}), nil
	}
	if scratch == nil {
		scratch = new([]respContentPart)
	}
	d := jr{b: raw}
	if err := d.done(readRespContent(&d, scratch)); err != nil {
		return nil, badRequest(field.String(), err)
	}
	return respPartsIR(*scratch, func() fieldPath { return field }, dst)
}

// respPartsIR appends the canonical parts of content parts to dst (field: their path, made for an error).
func respPartsIR(arr []respContentPart, field func() fieldPath, dst []part) ([]part, error) {
	out := dst
	for j := range arr {
		p := &arr[j]
		f := func() string { return field().with("", j).String() } // made for an error only
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, part{Type: partText, Text: p.Text})
		case "refusal":
			out = append(out, part{Type: partText, Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				return nil, refuse(f(), "images by file_id cannot be translated; send image_url")
			}
			out = append(out, imagePart(p.ImageURL, p.Detail))
		case "input_file":
			switch {
			case p.FileData != "":
				mime, data, ok := dataURL(p.FileData)
				if !ok {
					mime, data = "application/pdf", p.FileData
				}
				out = append(out, part{Type: partFile, Data: data}.withExtra(partExtra{MediaType: mime, FileName: p.Filename}))
			case p.FileURL != "":
				out = append(out, part{Type: partFile}.withExtra(partExtra{URL: p.FileURL, MediaType: mimeFromURL(p.FileURL), FileName: p.Filename}))
			default:
				return nil, refuse(f(), "files by file_id cannot be translated; send file_data")
			}
		default:
			return nil, refuse(f(), "content part type %q cannot be translated", p.Type)
		}
	}
	return out, nil
}

// ---- encode request ----

// respPartsOut writes a message's content parts (maps' key order: sorted, as encoding/json wrote them).
func respPartsOut(w *jw, parts []part, assistant bool) {
	w.open('[')
	for pi := range parts {
		p := &parts[pi]
		switch p.Type {
		case partText:
			w.open('{')
			w.key("text")
			w.str(p.Text)
			w.key("type")
			if assistant {
				w.str("output_text")
			} else {
				w.str("input_text")
			}
			w.close('}')
		case partImage:
			u := p.get().URL
			if u == "" {
				u = makeDataURL(p.get().MediaType, p.Data)
			}
			w.open('{')
			w.key("detail")
			w.str(nonEmpty(p.get().Detail, "auto"))
			w.key("image_url")
			w.str(u)
			w.key("type")
			w.str("input_image")
			w.close('}')
		case partFile:
			w.open('{')
			if p.get().URL != "" {
				w.key("file_url")
				w.str(p.get().URL)
			} else {
				w.key("file_data")
				w.str(makeDataURL(p.get().MediaType, p.Data))
				w.key("filename")
				w.str(nonEmpty(p.get().FileName, "file"))
			}
			w.key("type")
			w.str("input_file")
			w.close('}')
		}
	}
	w.close(']')
}

func (alphaResp) encodeRequest(r *request, model string, stream bool, st *reqState) (*UpstreamRequest, error) {
	w := &jw{b: make([]byte, 0, requestSizeHint(r))}
	w.open('{')
	w.key("model")
	w.str(model)
	if len(r.System) > 0 {
		if ins := strings.Join(r.System, "\n\n"); ins != "" {
			w.key("instructions")
			w.str(ins)
		}
	}
	w.key("input")
	w.open('[')
	var text []part // an assistant turn's text parts, sent as one message item before its next other item
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			for pi := range m.Parts {
				p := &m.Parts[pi]
				switch p.Type {
				case partText:
					text = append(text, *p)
				case partToolCall:
					flushParts(w, &text)
					w.open('{')
					w.key("arguments")
					w.str(argsView(p.Args))
					w.key("call_id")
					w.str(p.CallID)
					w.key("name")
					w.str(p.Name)
					w.key("type")
					w.str("function_call")
					w.close('}')
				case partThinking:
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
		var late []part
		if hasToolResult(m.Parts) {
			user = nil
			for pi := range m.Parts {
				p := &m.Parts[pi]
				if p.Type != partToolResult {
					user = append(user, *p)
					continue
				}
				text := resultText(p)
				w.open('{')
				w.key("call_id")
				w.str(p.CallID)
				w.key("output")
				w.str(text)
				w.key("type")
				w.str("function_call_output")
				w.close('}')
				for _, rp := range p.ResultParts {
					if rp.Type == partImage {
						late = append(late, rp)
					}
				}
			}
		}
		if len(late) > 0 {
			user = append(late, user...)
		}
		if len(user) > 0 {
			w.open('{')
			w.key("content")
			respPartsOut(w, user, false)
			w.key("role")
			w.str("user")
			w.close('}')
		}
	}
	w.close(']')
	if len(r.Tools) > 0 {
		w.key("tools")
		w.open('[')
		for _, t := range r.Tools {
			w.open('{')
			if t.Description != "" {
				w.key("description")
				w.str(t.Description)
			}
			w.key("name")
			w.str(t.Name)
			w.key("parameters")
			if params := t.Parameters; len(params) == 0 || string(params) == "null" {
				w.raw(json.RawMessage(`{"type":"object","properties":{}}`))
			} else {
				w.raw(params)
			}
			w.key("strict")
			w.bool(t.Strict != nil && *t.Strict)
			w.key("type")
			w.str("function")
			w.close('}')
		}
		w.close(']')
	}
	if tc := r.ToolChoice; tc != nil {
		w.key("tool_choice")
		if tc.Mode == "tool" {
			w.open('{')
			w.key("name")
			w.str(tc.Name)
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
		w.key("max_output_tokens")
		w.int(int64(*r.MaxTokens))
	}
	w.optFloat("temperature", r.Temperature)
	w.optFloat("top_p", r.TopP)
	if rs := r.Reasoning; rs != nil && !rs.Disabled {
		effort := rs.Effort
		if effort == "" {
			effort = budgetEffort(rs.Budget)
		}
		if effort == "" {
			effort = "medium"
		}
		w.key("reasoning")
		w.open('{')
		w.key("effort")
		w.str(effort)
		summary := st.client != "alpha_chat_completions"
		if summary {
			w.key("summary")
			w.str("auto")
		}
		w.close('}')
		if summary {
			w.key("include")
			w.open('[')
			w.str("reasoning.encrypted_content")
			w.close(']')
		}
	}
	if f := r.Format; f != nil {
		w.key("text")
		w.open('{')
		w.key("format")
		w.open('{')
		if f.Type == "json_object" {
			w.key("type")
			w.str("json_object")
		} else {
			w.key("name")
			w.str(nonEmpty(f.Name, "response"))
			w.key("schema")
			w.raw(f.Schema)
			if f.Strict != nil {
				w.key("strict")
				w.bool(*f.Strict)
			}
			w.key("type")
			w.str("json_schema")
		}
		w.close('}')
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
	w.key("store")
	w.bool(false)
	if stream {
		w.key("stream")
		w.bool(true)
	}
	w.close('}')
	return &UpstreamRequest{Method: http.MethodPost, Path: "/v1/responses", Header: jsonHeader(), Body: w.b}, nil
}

// flushParts writes the pending assistant text parts as one message item and empties them.
func flushParts(w *jw, text *[]part) {
	if len(*text) == 0 {
		return
	}
	w.open('{')
	w.key("content")
	respPartsOut(w, *text, true)
	w.key("role")
	w.str("assistant")
	w.key("type")
	w.str("message")
	w.close('}')
	*text = (*text)[:0]
}

// respReasoningReplay writes the reasoning input item rebuilt from a signature minted by respSignature (w
// nil: only reports whether there is one; foreign reasoning cannot be verified by alpha responses and is
// dropped).
func respReasoningReplay(w *jw, p *part) bool {
	rest, ok := strings.CutPrefix(p.Signature, respSigPrefix)
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
	w.open('{')
	if enc != "" {
		w.key("encrypted_content")
		w.str(enc)
	}
	w.key("id")
	w.str(id)
	w.key("summary")
	w.open('[')
	if p.Text != "" {
		w.open('{')
		w.key("text")
		w.str(p.Text)
		w.key("type")
		w.str("summary_text")
		w.close('}')
	}
	w.close(']')
	w.key("type")
	w.str("reasoning")
	w.close('}')
	return true
}

// respSignature packs a reasoning item id and encrypted content as one opaque signature.
func respSignature(id, enc string) string {
	if id == "" && enc == "" {
		return ""
	}
	return respSigPrefix + id + "." + enc
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
	Usage *respUsage `json:"usage"`
}

func respFinishIn(status, reason string, calls bool) finish {
	switch status {
	case "incomplete":
		if reason == "content_filter" {
			return finishContentFilter
		}
		return finishLength
	case "failed", "cancelled":
		return finishError
	}
	if calls {
		return finishToolCalls
	}
	return finishStop
}

// respOutItem is one output item of an alpha answer (a buffered body's, or a stream event's item or
// response): an item of a kind the translator carries (respCarried) is decoded into respItem; an item of any
// other kind — server-side tool calls and their outputs (tool_search_call, web_search_call, …), kinds added
// after this code — keeps only its type and is dropped from the client's answer, and its members are never
// decoded, so no shape of theirs can fail the answer (docs/translation.md "Output items the translator does
// not know"). An item whose type cannot be read is such an item too.
type respOutItem struct{ respItem }

// respCarried reports whether the translator carries output items of kind typ.
func respCarried(typ string) bool {
	switch typ {
	case "message", "reasoning", "function_call":
		return true
	}
	return false
}

// UnmarshalJSONFrom decodes the item with the caller's options (decodeOpts or eventOpts): the value read
// points into the caller's input, so views into it stay valid as for any other member.
func (o *respOutItem) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	o.respItem = respItem{}
	switch v.Kind() {
	case 'n':
		return nil
	case '{':
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
	return jsonv2.Unmarshal(v, &o.respItem, dec.Options())
}

var errNotObject = errors.New("not a JSON object")

func respOutputToParts(items []respOutItem) []part {
	var parts []part
	for _, it := range items {
		switch it.Type {
		case "reasoning":
			var sum []struct {
				Text string `json:"text"`
			}
			_ = unmarshal(it.Summary, &sum)
			if len(sum) == 0 {
				_ = unmarshal(it.Content, &sum)
			}
			var b strings.Builder
			for j, s := range sum {
				if j > 0 {
					b.WriteString("\n\n")
				}
				b.WriteString(s.Text)
			}
			parts = append(parts, part{Type: partThinking, Text: b.String(), Signature: respSignature(it.ID, it.EncryptedContent)}.withExtra(partExtra{ItemID: it.ID}))
		case "message":
			cp, _ := respContentParts(it.Content, pathOf("output", -1), nil, nil)
			for _, p := range cp {
				if p.Type == partText {
					x := p.get()
					x.ItemID = it.ID
					p = p.withExtra(x)
					parts = append(parts, p)
				}
			}
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			parts = append(parts, part{Type: partToolCall, CallID: it.CallID, Name: it.Name, Args: argsObject(args)}.withExtra(partExtra{ItemID: it.ID}))
		}
	}
	return parts
}

func (alphaResp) decodeResponse(body []byte, st *reqState) (*response, error) {
	body = ownedCopy(body)
	var in respResponse
	if err := unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return respToIR(&in), nil
}

func respToIR(in *respResponse) *response {
	r := &response{ID: in.ID, Model: in.Model, Created: in.CreatedAt, ServiceTier: in.ServiceTier, Usage: in.Usage.canonical()}
	r.Parts = respOutputToParts(in.Output)
	reason := ""
	if in.IncompleteDetails != nil {
		reason = in.IncompleteDetails.Reason
	}
	r.Finish = respFinishIn(in.Status, reason, hasToolCall(r.Parts))
	return r
}

type respResponseOut struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	CreatedAt         int64      `json:"created_at"`
	Status            string     `json:"status"`
	Error             any        `json:"error"`
	IncompleteDetails any        `json:"incomplete_details"`
	Model             string     `json:"model"`
	Output            []obj      `json:"output"`
	ParallelToolCalls bool       `json:"parallel_tool_calls"`
	ToolChoice        string     `json:"tool_choice"`
	Tools             []any      `json:"tools"`
	ServiceTier       string     `json:"service_tier,omitempty"`
	Usage             *respUsage `json:"usage"`
}

// respItemIDs are the client-visible item ids, shared by the streamed events and the final object.
func respItemID(prefix string, st *reqState, i int) string {
	return fmt.Sprintf("%s_%s_%d", prefix, st.respSuffix(), i)
}

// respOutputItem renders one canonical part as a completed output item.
func respOutputItem(p part, i int, st *reqState) obj {
	switch p.Type {
	case partText:
		return obj{"id", nonEmpty(p.get().ItemID, respItemID("msg", st, i)), "type", "message", "status", "completed", "role", "assistant",
			"content", []obj{{"type", "output_text", "text", p.Text, "annotations", []any{}}}}
	case partThinking:
		summary := []obj{}
		if p.Text != "" {
			summary = append(summary, obj{"type", "summary_text", "text", p.Text})
		}
		m := obj{"id", nonEmpty(p.get().ItemID, respItemID("rs", st, i)), "type", "reasoning", "summary", summary}
		if sig := st.sigToClient(p.Signature); sig != "" {
			m = append(m, "encrypted_content", sig)
		}
		return m
	case partToolCall:
		id := p.CallID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d", st.respSuffix(), i)
		}
		return obj{"id", nonEmpty(p.get().ItemID, respItemID("fc", st, i)), "type", "function_call", "status", "completed", "call_id", id,
			"name", p.Name, "arguments", nonEmpty(p.get().RawArgs, argsString(p.Args))}
	}
	return nil
}

func respStatusOut(f finish) (string, any) {
	switch f {
	case finishLength:
		return "incomplete", map[string]string{"reason": "max_output_tokens"}
	case finishContentFilter:
		return "incomplete", map[string]string{"reason": "content_filter"}
	}
	return "completed", nil
}

func respBuildResponse(r *response, st *reqState, id string, created int64) respResponseOut {
	status, inc := respStatusOut(r.Finish)
	out := respResponseOut{ID: id, Object: "response", CreatedAt: created, Status: status, IncompleteDetails: inc,
		Model: r.Model, Output: []obj{}, ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{},
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

func (alphaResp) encodeResponse(r *response, st *reqState) ([]byte, error) {
	created := r.Created
	if created == 0 {
		created = st.now()
	}
	parts := r.Parts
	if r.Refusal != "" {
		parts = append(parts, part{Type: partText, Text: r.Refusal})
	}
	rr := *r
	rr.Parts = mergeAdjacentText(parts)
	return marshal(respBuildResponse(&rr, st, clientID("resp_", r.ID, st), created))
}

func mergeAdjacentText(parts []part) []part {
	out := make([]part, 0, len(parts))
	for _, p := range parts {
		if n := len(out); n > 0 && p.Type == partText && out[n-1].Type == partText {
			out[n-1].Text += p.Text
			continue
		}
		out = append(out, p)
	}
	return out
}
