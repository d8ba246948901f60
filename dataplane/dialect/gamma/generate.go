package gamma

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// GenerateContent is the gamma generateContent codec: generateContent and streamGenerateContent requests,
// answers and stream chunks.
type GenerateContent struct{}

type gammaBlob struct {
	MimeType string `json:"mimeType,omitempty"`
	Data     string `json:"data,omitempty"`
	FileURI  string `json:"fileUri,omitempty"`
}

type Call struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type FuncResp struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`

	Result ResultRead `json:"-"` // Response as gammaResultPart reads it, read with it in the same pass
}

// ResultRead is a functionResponse.response read as ResultIn in the pass that read the response (read),
// and whether that read failed (a value of another shape: gammaResultPart then keeps the response as it is).
type ResultRead struct {
	in           ResultIn
	read, failed bool
}

type Part struct {
	Text                *string         `json:"text,omitempty"`
	Thought             bool            `json:"thought,omitempty"`
	InlineData          *gammaBlob      `json:"inlineData,omitempty"`
	FileData            *gammaBlob      `json:"fileData,omitempty"`
	FunctionCall        *Call           `json:"functionCall,omitempty"`
	FunctionResponse    *FuncResp       `json:"functionResponse,omitempty"`
	ThoughtSignature    string          `json:"thoughtSignature,omitempty"`
	ExecutableCode      json.RawMessage `json:"executableCode,omitempty"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult,omitempty"`
}

type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts"`
}

type gammaGenConfig struct {
	MaxOutputTokens    *int                 `json:"maxOutputTokens,omitempty"`
	Temperature        *float64             `json:"temperature,omitempty"`
	TopP               *float64             `json:"topP,omitempty"`
	TopK               *int                 `json:"topK,omitempty"`
	StopSequences      []string             `json:"stopSequences,omitempty"`
	CandidateCount     *int                 `json:"candidateCount,omitempty"`
	Seed               *int64               `json:"seed,omitempty"`
	PresencePenalty    *float64             `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64             `json:"frequencyPenalty,omitempty"`
	ResponseMimeType   string               `json:"responseMimeType,omitempty"`
	ResponseSchema     json.RawMessage      `json:"responseSchema,omitempty"`
	ResponseJSONSchema json.RawMessage      `json:"responseJsonSchema,omitempty"`
	ResponseModalities []string             `json:"responseModalities,omitempty"`
	ThinkingConfig     *gammaThinkingConfig `json:"thinkingConfig,omitempty"`
	ResponseLogprobs   *bool                `json:"responseLogprobs,omitempty"`
	Logprobs           *int                 `json:"logprobs,omitempty"`
	SpeechConfig       json.RawMessage      `json:"speechConfig,omitempty"`
}

type gammaThinkingConfig struct {
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
}

type Tool struct {
	FunctionDeclarations []gammaFuncDecl `json:"functionDeclarations"`
}

type gammaFuncDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

// gammaContentIn and PartIn are the request's contents as decoded: parts are read one content at a
// time into reused storage (DecodeScratch), members that are objects or strings only when present.
type gammaContentIn struct {
	Role  string          `json:"role"`
	Parts json.RawMessage `json:"parts"`
	Pre   PartsRead       `json:"-"` // Parts as the one pass over the body read them
}

// PartsRead is a content's parts as read in the one pass over the body, and the first error reading
// them — reported when the content is converted, where its parts were decoded when a first pass kept them
// raw (so refusals come in the same order).
type PartsRead struct {
	read  bool // else the parts are decoded from Parts (absent parts)
	parts []PartIn
	err   error
}

type PartIn struct {
	Text                json.RawMessage `json:"text"`
	Thought             bool            `json:"thought"`
	InlineData          *gammaBlob      `json:"inlineData"`
	FileData            *gammaBlob      `json:"fileData"`
	FunctionCall        json.RawMessage `json:"functionCall"`
	FunctionResponse    json.RawMessage `json:"functionResponse"`
	ThoughtSignature    string          `json:"thoughtSignature"`
	ExecutableCode      json.RawMessage `json:"executableCode"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult"`

	Fn FnRead `json:"-"` // FunctionCall and FunctionResponse as the body's one pass read them
}

// FnRead is a part's functionCall and functionResponse as read in the body's one pass (they were
// kept raw and read again when the part was converted), with the error reading each (see readKept):
// reported when the part is converted, where the second read reported it.
type FnRead struct {
	call    Call
	resp    FuncResp
	callErr error
	respErr error
}

// PendingCalls are a gamma conversation's function calls not yet answered, for the responses without an id
// (they answer the oldest unanswered call of their name). Up to len(small) calls are kept in place, in
// order, and searched (no map, no allocation); more go into a map of each name's unanswered ids.
type PendingCalls struct {
	small  [32]pendingCall
	n      int
	byName map[string][]string
}

type pendingCall struct {
	name, id string
	answered bool
}

// Add records a call.
func (c *PendingCalls) Add(name, id string) {
	switch {
	case c.byName != nil:
		c.byName[name] = append(c.byName[name], id)
	case c.n < len(c.small):
		c.small[c.n] = pendingCall{name: name, id: id}
		c.n++
	default:
		c.byName = map[string][]string{}
		for _, p := range c.small {
			if !p.answered {
				c.byName[p.name] = append(c.byName[p.name], p.id)
			}
		}
		c.byName[name] = append(c.byName[name], id)
	}
}

// Answer is the id a response of name with id (maybe "") answers: id, else the oldest unanswered call of
// name ("" for none); the unanswered call of name with that id, if any, is answered.
func (c *PendingCalls) Answer(name, id string) string {
	if c.byName != nil {
		q := c.byName[name]
		if len(q) > 0 && id == "" {
			id = q[0]
		}
		for qi, v := range q {
			if v == id {
				c.byName[name] = append(q[:qi:qi], q[qi+1:]...)
				break
			}
		}
		return id
	}
	calls := c.small[:c.n]
	if id == "" {
		for i := range calls {
			if p := &calls[i]; !p.answered && p.name == name {
				p.answered = true
				return p.id
			}
		}
		return ""
	}
	for i := range calls {
		if p := &calls[i]; !p.answered && p.name == name && p.id == id {
			p.answered = true
			break
		}
	}
	return id
}

// DecodeScratch is the reused storage of GenerateContent.decodeRequest.
type DecodeScratch struct {
	Parts []PartIn `json:"-"`
	Ids   []byte   `json:"-"` // synthesised call ids, viewed as strings (only appended to)
}

// Present reports whether an optional member was given a value other than null.
func Present(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }

type RequestIn struct {
	Contents               []gammaContentIn  `json:"contents"`
	SystemInstruction      *Content          `json:"systemInstruction"`
	SystemInstructionSnake *Content          `json:"system_instruction"`
	Tools                  []json.RawMessage `json:"tools"`
	ToolConfig             *gammaToolConfig  `json:"toolConfig"`
	GenerationConfig       *gammaGenConfig   `json:"generationConfig"`
	GenerationConfigSnake  *gammaGenConfig   `json:"generation_config"`
	CachedContent          string            `json:"cachedContent"`
	ServiceTier            string            `json:"service_tier"`
	ServiceTierCamel       string            `json:"serviceTier"`

	Parts []PartIn `json:"-"` // storage of the contents' parts (gammaPartsRead.parts), pooled
}

type gammaToolConfig struct {
	FunctionCallingConfig gammaFuncCallingConfig `json:"functionCallingConfig"`
}

type gammaFuncCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames"`
}

// ResultIn is a functionResponse.response as gammaResultPart reads it: {"output": v} or {"error": v}
// alone (names matched exactly); Other reports members besides.
type ResultIn struct {
	Error  json.RawMessage
	Output json.RawMessage
	Other  bool
}

func (c GenerateContent) DecodeRequest(body []byte, st *canon.State) (*canon.Request, error) {
	return c.DecodeInto(body, st, nil)
}

func (GenerateContent) DecodeInto(body []byte, st *canon.State, store *canon.ReqStore) (*canon.Request, error) {
	body = st.Own(body)
	in := RequestIn{Contents: gammaContentsScratch.Get(), Parts: gammaPartsScratch.Get()}
	defer func() { gammaContentsScratch.Put(in.Contents); gammaPartsScratch.Put(in.Parts) }()
	d := jsonkit.Reader{B: body}
	if err := d.Done(in.Read(&d)); err != nil {
		return nil, canon.BadRequest("body", fmt.Errorf("invalid generateContent request: %w", err))
	}
	if in.CachedContent != "" {
		return nil, canon.Refuse("cachedContent", "explicit cached content cannot be translated")
	}
	r := &canon.Request{ServiceTier: canon.NonEmpty(in.ServiceTier, in.ServiceTierCamel), IncludeUsage: true}
	si := in.SystemInstruction
	if si == nil {
		si = in.SystemInstructionSnake
	}
	if si != nil {
		for _, p := range si.Parts {
			if p.Text != nil {
				r.System = append(r.System, *p.Text)
			}
		}
	}
	gc := in.GenerationConfig
	if gc == nil {
		gc = in.GenerationConfigSnake
	}
	if gc != nil {
		switch {
		case gc.CandidateCount != nil && *gc.CandidateCount > 1:
			return nil, canon.Refuse("generationConfig.candidateCount", "candidateCount > 1 cannot be translated")
		case gc.ResponseLogprobs != nil && *gc.ResponseLogprobs:
			return nil, canon.Refuse("generationConfig.responseLogprobs", "logprobs cannot be translated")
		case len(gc.SpeechConfig) > 0:
			return nil, canon.Refuse("generationConfig.speechConfig", "speech output cannot be translated")
		}
		for _, m := range gc.ResponseModalities {
			if !strings.EqualFold(m, "TEXT") {
				return nil, canon.Refuse("generationConfig.responseModalities", "output modality %q cannot be translated", m)
			}
		}
		r.MaxTokens, r.Temperature, r.TopP, r.TopK = gc.MaxOutputTokens, gc.Temperature, gc.TopP, gc.TopK
		r.Stop, r.Seed, r.PresencePenalty, r.FrequencyPenalty = gc.StopSequences, gc.Seed, gc.PresencePenalty, gc.FrequencyPenalty
		if gc.ResponseMimeType == "application/json" {
			schema := gc.ResponseJSONSchema
			if len(schema) == 0 && len(gc.ResponseSchema) > 0 {
				schema = LowerSchemaTypes(gc.ResponseSchema)
			}
			if len(schema) > 0 {
				r.Format = &canon.ResponseFormat{Type: "json_schema", Schema: schema}
			} else {
				r.Format = &canon.ResponseFormat{Type: "json_object"}
			}
		} else if gc.ResponseMimeType != "" && gc.ResponseMimeType != "text/plain" {
			return nil, canon.Refuse("generationConfig.responseMimeType", "response MIME type %q cannot be translated", gc.ResponseMimeType)
		}
		if tc := gc.ThinkingConfig; tc != nil {
			rs := &canon.Reasoning{IncludeThoughts: tc.IncludeThoughts}
			if tc.ThinkingBudget != nil {
				switch b := *tc.ThinkingBudget; {
				case b == 0:
					rs.Disabled = true
				case b < 0:
					rs.Adaptive = true
				default:
					rs.Budget = b
				}
			}
			if tc.ThinkingLevel != "" {
				rs.Effort = strings.ToLower(tc.ThinkingLevel)
			}
			r.Reasoning = rs
		}
	}
	for i, raw := range in.Tools {
		d := jsonkit.Reader{B: raw}
		builtin, found, err := ReadToolKeys(&d)
		if err := d.Done(err); err != nil {
			return nil, canon.BadRequest(fmt.Sprintf("tools[%d]", i), err)
		}
		if found {
			return nil, canon.Refuse(fmt.Sprintf("tools[%d].%s", i, builtin), "built-in tool %q cannot be translated", builtin)
		}
		var t Tool
		d = jsonkit.Reader{B: raw}
		_ = t.Read(&d) // a member of the wrong kind ends the declarations read so far
		for _, fd := range t.FunctionDeclarations {
			params := fd.ParametersJSONSchema
			if len(params) == 0 && len(fd.Parameters) > 0 {
				params = LowerSchemaTypes(fd.Parameters)
			}
			r.Tools = append(r.Tools, canon.Tool{Name: fd.Name, Description: fd.Description, Parameters: params})
		}
	}
	if tc := in.ToolConfig; tc != nil {
		fc := tc.FunctionCallingConfig
		switch strings.ToUpper(fc.Mode) {
		case "AUTO", "":
			r.ToolChoice = &canon.ToolChoice{Mode: "auto"}
		case "NONE":
			r.ToolChoice = &canon.ToolChoice{Mode: "none"}
		case "ANY", "VALIDATED":
			switch len(fc.AllowedFunctionNames) {
			case 0:
				r.ToolChoice = &canon.ToolChoice{Mode: "required"}
			case 1:
				r.ToolChoice = &canon.ToolChoice{Mode: "tool", Name: fc.AllowedFunctionNames[0]}
			default:
				return nil, canon.Refuse("toolConfig.functionCallingConfig.allowedFunctionNames", "more than one allowed function cannot be translated")
			}
		}
	}
	// ids: keep gamma's when present, else synthesise call_<turn>_<k>; responses without id take the
	// oldest unanswered call with the same name.
	pending := new(PendingCalls) // does not escape: on the stack
	sc := &DecodeScratch{}
	s := store.Take(len(in.Contents))
	r.Messages = s.Msgs
	arena := s.Parts     // every message's parts, from one backing array (grown by append)
	results := s.Results // and every tool result's
	for i, c := range in.Contents {
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		msg := canon.Message{Role: role}
		start := len(arena)
		k := 0
		parts := c.Pre.parts
		switch {
		case !c.Pre.read:
			sc.Parts = sc.Parts[:0]
			d := jsonkit.Reader{B: c.Parts}
			if err := d.Done(ReadPartsIn(&d, &sc.Parts)); err != nil {
				return nil, canon.BadRequest(canon.PathOf("contents", i).With(".parts", -1).String(), err)
			}
			parts = sc.Parts
		case c.Pre.err != nil:
			return nil, canon.BadRequest(canon.PathOf("contents", i).With(".parts", -1).String(), c.Pre.err)
		}
		for j := range parts {
			p := &parts[j]
			var text string
			hasText := Present(p.Text)
			if hasText && !jsonkit.ValidStringOf(p.Text, &text) {
				return nil, canon.BadRequest(gammaPartPath(i, j).With(".text", -1).String(), jsonkit.ErrNotString)
			}
			var fc *Call
			if Present(p.FunctionCall) {
				if p.Fn.callErr != nil {
					return nil, canon.BadRequest(gammaPartPath(i, j).With(".functionCall", -1).String(), p.Fn.callErr)
				}
				fc = &p.Fn.call
			}
			var fr *FuncResp
			if Present(p.FunctionResponse) {
				if p.Fn.respErr != nil {
					return nil, canon.BadRequest(gammaPartPath(i, j).With(".functionResponse", -1).String(), p.Fn.respErr)
				}
				fr = &p.Fn.resp
			}
			if p.ThoughtSignature != "" && !(p.Thought && hasText) {
				// the signature covers the thought text before it: one signed thinking part
				sig := st.SigFromClient(p.ThoughtSignature)
				if n := len(arena); n > start && arena[n-1].Type == canon.PartThinking && arena[n-1].Signature == "" {
					arena[n-1].Signature = sig
				} else {
					arena = append(arena, canon.Part{Type: canon.PartThinking, Signature: sig})
				}
			}
			switch {
			case fc != nil:
				id := fc.ID
				if id == "" {
					at := len(sc.Ids)
					sc.Ids = append(sc.Ids, "call_"...)
					sc.Ids = strconv.AppendInt(sc.Ids, int64(i), 10)
					sc.Ids = append(sc.Ids, '_')
					sc.Ids = strconv.AppendInt(sc.Ids, int64(k), 10)
					id = jsonkit.View(sc.Ids[at:]) // sc.Ids is only appended to
				}
				k++
				pending.Add(fc.Name, id)
				args := fc.Args
				if len(args) == 0 || string(args) == "null" {
					args = json.RawMessage("{}")
				}
				arena = append(arena, canon.Part{Type: canon.PartToolCall, CallID: id, Name: fc.Name, Args: jsonkit.CompactValid(args)})
			case fr != nil:
				id := pending.Answer(fr.Name, fr.ID)
				if id == "" {
					return nil, canon.Refuse(gammaPartPath(i, j).String()+".functionResponse.id", "function response %q matches no earlier function call", fr.Name)
				}
				arena = append(arena, gammaResultPart(id, fr, &results))
			case p.InlineData != nil:
				t := canon.PartImage
				if !strings.HasPrefix(p.InlineData.MimeType, "image/") {
					t = canon.PartFile
				}
				arena = append(arena, canon.Part{Type: t, Data: p.InlineData.Data}.WithExtra(canon.PartExtra{MediaType: p.InlineData.MimeType}))
			case p.FileData != nil:
				t := canon.PartImage
				if !strings.HasPrefix(p.FileData.MimeType, "image/") {
					t = canon.PartFile
				}
				arena = append(arena, canon.Part{Type: t}.WithExtra(canon.PartExtra{MediaType: p.FileData.MimeType, URL: p.FileData.FileURI}))
			case len(p.ExecutableCode) > 0 || len(p.CodeExecutionResult) > 0:
				return nil, canon.Refuse(gammaPartPath(i, j).String(), "code execution parts cannot be translated")
			case hasText:
				if p.Thought {
					sig := st.SigFromClient(p.ThoughtSignature)
					if n := len(arena); n > start && arena[n-1].Type == canon.PartThinking && arena[n-1].Signature == "" {
						arena[n-1].Text += text
						arena[n-1].Signature = sig
					} else {
						arena = append(arena, canon.Part{Type: canon.PartThinking, Text: text, Signature: sig})
					}
				} else {
					arena = append(arena, canon.Part{Type: canon.PartText, Text: text})
				}
			}
		}
		msg.Parts = arena[start:len(arena):len(arena)]
		r.Messages = append(r.Messages, msg)
	}
	s.Keep(r.Messages, arena, results)
	return r, nil
}

// gammaPartPath is the field path of contents[i].parts[j], made only for an error.
func gammaPartPath(i, j int) canon.FieldPath { return canon.PathOf("contents", i).With(".parts", j) }

// gammaResultPart converts a functionResponse.response object into a tool result whose text part is
// appended to *results.
func gammaResultPart(id string, fr *FuncResp, results *[]canon.Part) canon.Part {
	p := canon.Part{Type: canon.PartToolResult, CallID: id}
	// {"output": v} or {"error": v} alone carries v; any other object is the result as it is
	resp, m, failed := fr.Response, fr.Result.in, fr.Result.failed
	if !fr.Result.read {
		m = ResultIn{}
		d := jsonkit.Reader{B: resp}
		failed = d.Done(m.Read(&d)) != nil
	}
	var text string
	switch {
	case failed || m.Other:
		text = jsonkit.CompactValidText(resp)
	case m.Error != nil && m.Output == nil:
		p.IsError = true
		text = jsonValueText(m.Error)
	case m.Output != nil && m.Error == nil:
		text = jsonValueText(m.Output)
	default:
		text = jsonkit.CompactValidText(resp)
	}
	*results = append(*results, canon.Part{Type: canon.PartText, Text: text})
	p.ResultParts = canon.Clipped(*results, len(*results)-1)
	return p
}

// jsonValueText is a (valid) JSON value's text: a string's contents, else the compact JSON.
func jsonValueText(r json.RawMessage) string {
	var s string
	if jsonkit.ValidStringOf(r, &s) {
		return s
	}
	return jsonkit.CompactValidText(r)
}

// LowerSchemaTypes converts gamma's OpenAPI-subset schema (UPPERCASE type enums) to JSON Schema spelling.
func LowerSchemaTypes(raw json.RawMessage) json.RawMessage {
	var v any
	if jsonkit.Unmarshal(raw, &v) != nil {
		return raw
	}
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for k, val := range t {
				if k == "type" {
					if s, ok := val.(string); ok {
						t[k] = strings.ToLower(s)
						continue
					}
				}
				if k == "properties" {
					if props, ok := val.(map[string]any); ok {
						for pk, pv := range props {
							props[pk] = walk(pv)
						}
						continue
					}
				}
				t[k] = walk(val)
			}
			return t
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
			return t
		}
		return x
	}
	return jsonkit.MustMarshal(walk(v))
}

// ---- encode request ----

func gammaTier(t string) string {
	switch strings.ToLower(t) {
	case "default", "standard", "standard_only":
		return "standard"
	case "flex":
		return "flex"
	case "priority":
		return "priority"
	}
	return ""
}

func ModelPath(model, method string) string {
	model = strings.TrimPrefix(model, "models/")
	return "/v1beta/models/" + url.PathEscape(model) + ":" + method
}

func (GenerateContent) EncodeRequest(r *canon.Request, model string, stream bool, st *canon.State) (*canon.UpstreamRequest, error) {
	names := new(canon.CallNames) // does not escape: on the stack
	names.ToolNames(r.Messages)
	for _, m := range r.Messages {
		for pi := range m.Parts {
			p := &m.Parts[pi]
			if p.Type == canon.PartToolResult && names.Get(p.CallID) == "" {
				return nil, canon.Refuse(st.ClientField(canon.FieldToolResult), "tool result %q answers no earlier tool call; the destination needs the function name", p.CallID)
			}
		}
	}
	w := &jsonkit.Writer{B: make([]byte, 0, canon.RequestSizeHint(r))}
	w.Open('{')
	w.Key("contents")
	at := len(w.B)
	w.Open('[')
	// consecutive messages of one role are one turn (beta and gamma want alternating turns), written
	// without building merged copies; messages without parts are skipped
	for i := 0; i < len(r.Messages); {
		role := r.Messages[i].Role
		j := i
		for j < len(r.Messages) && (r.Messages[j].Role == role || len(r.Messages[j].Parts) == 0) {
			j++
		}
		gammaTurnOut(w, role, r.Messages[i:j], names)
		i = j
	}
	if w.AtArrayStart() { // no content: encoding/json wrote the nil slice as null
		w.B = append(w.B[:at], "null"...)
	} else {
		w.Close(']')
	}
	if len(r.System) > 0 {
		w.Key("systemInstruction")
		w.Open('{')
		w.Key("parts")
		w.Open('[')
		for _, s := range r.System {
			w.Open('{')
			w.Key("text")
			w.Str(s)
			w.Close('}')
		}
		w.Close(']')
		w.Close('}')
	}
	if len(r.Tools) > 0 {
		w.Key("tools")
		w.Open('[')
		w.Open('{')
		w.Key("functionDeclarations")
		w.Open('[')
		for _, t := range r.Tools {
			w.Open('{')
			if t.Description != "" {
				w.Key("description")
				w.Str(t.Description)
			}
			w.Key("name")
			w.Str(t.Name)
			if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
				w.Key("parametersJsonSchema")
				w.Raw(t.Parameters)
			}
			w.Close('}')
		}
		w.Close(']')
		w.Close('}')
		w.Close(']')
	}
	if tc := r.ToolChoice; tc != nil {
		w.Key("toolConfig")
		w.Open('{')
		w.Key("functionCallingConfig")
		w.Open('{')
		switch tc.Mode {
		case "auto":
			w.Key("mode")
			w.Str("AUTO")
		case "none":
			w.Key("mode")
			w.Str("NONE")
		case "required":
			w.Key("mode")
			w.Str("ANY")
		case "tool":
			w.Key("allowedFunctionNames")
			w.Open('[')
			w.Str(tc.Name)
			w.Close(']')
			w.Key("mode")
			w.Str("ANY")
		}
		w.Close('}')
		w.Close('}')
	}
	gammaGenConfigOut(w, r, st)
	if t := gammaTier(r.ServiceTier); t != "" {
		w.Key("service_tier")
		w.Str(t)
	}
	w.Close('}')
	path := ModelPath(model, "generateContent")
	if stream {
		path = ModelPath(model, "streamGenerateContent") + "?alt=sse"
	}
	return &canon.UpstreamRequest{Method: http.MethodPost, Path: path, Header: canon.JSONHeader(), Body: w.B}, nil
}

// gammaGenConfigOut writes generationConfig when any of its members is set.
func gammaGenConfigOut(w *jsonkit.Writer, r *canon.Request, st *canon.State) {
	at := len(w.B)
	w.Key("generationConfig")
	w.Open('{')
	if r.MaxTokens != nil {
		w.Key("maxOutputTokens")
		w.Int(int64(*r.MaxTokens))
	}
	w.OptFloat("temperature", r.Temperature)
	w.OptFloat("topP", r.TopP)
	if r.TopK != nil {
		w.Key("topK")
		w.Int(int64(*r.TopK))
	}
	w.StrList("stopSequences", r.Stop)
	w.OptInt("seed", r.Seed)
	w.OptFloat("presencePenalty", r.PresencePenalty)
	w.OptFloat("frequencyPenalty", r.FrequencyPenalty)
	if f := r.Format; f != nil {
		w.Key("responseMimeType")
		w.Str("application/json")
		if f.Type == "json_schema" && len(f.Schema) > 0 {
			w.Key("responseJsonSchema")
			w.Raw(f.Schema)
		}
	}
	if rs := r.Reasoning; rs != nil && !rs.Disabled {
		budget := rs.Budget
		if budget == 0 {
			budget = canon.EffortBudget(rs.Effort)
		}
		if budget == 0 && rs.Adaptive {
			budget = -1
		}
		if budget != 0 {
			w.Key("thinkingConfig")
			w.Open('{')
			w.Key("thinkingBudget")
			w.Int(int64(budget))
			if rs.IncludeThoughts || st.Client == "beta_messages" || st.Client == "alpha_responses" {
				w.Key("includeThoughts")
				w.Bool(true)
			}
			w.Close('}')
		}
	}
	if w.AtObjectStart() { // nothing set: no generationConfig
		w.B = w.B[:at]
		return
	}
	w.Close('}')
}

// gammaBlobOut writes inlineData / fileData.
func gammaBlobOut(w *jsonkit.Writer, mime, data, uri string) {
	w.Open('{')
	if mime != "" {
		w.Key("mimeType")
		w.Str(mime)
	}
	if data != "" {
		w.Key("data")
		w.Str(data)
	}
	if uri != "" {
		w.Key("fileUri")
		w.Str(uri)
	}
	w.Close('}')
}

// gammaTurnOut writes one turn (the parts of consecutive messages of one role);
// a turn without parts is left out.
func gammaTurnOut(w *jsonkit.Writer, role string, msgs []canon.Message, names *canon.CallNames) {
	at := len(w.B)
	w.Open('{')
	w.Key("role")
	if role == "assistant" {
		w.Str("model")
	} else {
		w.Str("user")
	}
	w.Key("parts")
	w.Open('[')
	pendingSig, lastSigned := "", false
	// sig ends every part: a pending signature goes on it (thoughtSignature follows its content).
	sig := func() {
		lastSigned = pendingSig != ""
		if pendingSig != "" {
			w.Key("thoughtSignature")
			w.Str(pendingSig)
			pendingSig = ""
		}
	}
	for _, m := range msgs {
		for pi := range m.Parts {
			p := &m.Parts[pi]
			switch p.Type {
			case canon.PartText:
				w.Open('{')
				w.Key("text")
				w.Str(p.Text)
				sig()
				w.Close('}')
			case canon.PartImage, canon.PartFile:
				w.Open('{')
				if p.Get().URL != "" {
					mt := p.Get().MediaType
					if mt == "" {
						mt = canon.MimeFromURL(p.Get().URL)
					}
					w.Key("fileData")
					gammaBlobOut(w, mt, "", p.Get().URL)
				} else {
					w.Key("inlineData")
					gammaBlobOut(w, p.Get().MediaType, p.Data, "")
				}
				sig()
				w.Close('}')
			case canon.PartToolCall:
				w.Open('{')
				w.Key("functionCall")
				w.Open('{')
				if p.CallID != "" {
					w.Key("id")
					w.Str(p.CallID)
				}
				w.Key("name")
				w.Str(p.Name)
				w.Key("args")
				if len(p.Args) == 0 {
					w.Raw(json.RawMessage("{}"))
				} else {
					w.Raw(p.Args)
				}
				w.Close('}')
				sig()
				w.Close('}')
			case canon.PartToolResult:
				key := "output"
				if p.IsError {
					key = "error"
				}
				text := canon.TextOf(p.ResultParts)
				w.Open('{')
				w.Key("functionResponse")
				w.Open('{')
				if p.CallID != "" {
					w.Key("id")
					w.Str(p.CallID)
				}
				w.Key("name")
				w.Str(names.Get(p.CallID))
				w.Key("response")
				w.Open('{')
				w.Key(key)
				if t := strings.TrimSpace(text); t != "" && jsonkit.ValidJSON(jsonkit.StringBytes(t)) {
					w.Raw(jsonkit.StringBytes(t))
				} else {
					w.Str(text)
				}
				w.Close('}')
				w.Close('}')
				sig()
				w.Close('}')
				for _, rp := range p.ResultParts {
					if rp.Type == canon.PartImage || rp.Type == canon.PartFile {
						w.Open('{')
						w.Key("inlineData")
						gammaBlobOut(w, rp.Get().MediaType, rp.Data, "")
						sig()
						w.Close('}')
					}
				}
			case canon.PartThinking:
				if s, ok := canon.SigForUpstream(vocab.KindGamma, p.Signature); ok {
					pendingSig = s
				}
			}
		}
	}
	if pendingSig != "" {
		// on the last part when it has none (thoughtSignature is its last member), else on an empty text part
		if w.AfterObject() && !lastSigned {
			w.B = w.B[:len(w.B)-1]
			sig()
			w.Close('}')
		} else {
			w.Open('{')
			w.Key("text")
			w.Str("")
			sig()
			w.Close('}')
		}
	}
	if w.AtArrayStart() { // no parts: the turn is left out
		w.B = w.B[:at]
		return
	}
	w.Close(']')
	w.Close('}')
}

// gammaPartsOut renders canonical parts as gamma parts. A thinking part's signature goes onto the next
// non-thinking part (where gamma puts thoughtSignature), or the last part when none follows. Thought text
// is sent only when response is set (responses to gamma clients); gamma does not need it replayed.
func gammaPartsOut(parts []canon.Part, names *canon.CallNames, response bool) []Part {
	out := make([]Part, 0, len(parts))
	pendingSig := ""
	add := func(p Part) {
		if pendingSig != "" {
			p.ThoughtSignature = pendingSig
			pendingSig = ""
		}
		out = append(out, p)
	}
	for _, p := range parts {
		switch p.Type {
		case canon.PartText:
			add(Part{Text: canon.Strp(p.Text)})
		case canon.PartImage, canon.PartFile:
			if p.Get().URL != "" {
				mt := p.Get().MediaType
				if mt == "" {
					mt = canon.MimeFromURL(p.Get().URL)
				}
				add(Part{FileData: &gammaBlob{MimeType: mt, FileURI: p.Get().URL}})
			} else {
				add(Part{InlineData: &gammaBlob{MimeType: p.Get().MediaType, Data: p.Data}})
			}
		case canon.PartToolCall:
			args := p.Args
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			add(Part{FunctionCall: &Call{ID: p.CallID, Name: p.Name, Args: args}})
		case canon.PartToolResult:
			key := "output"
			if p.IsError {
				key = "error"
			}
			text := canon.TextOf(p.ResultParts)
			var val json.RawMessage
			if t := strings.TrimSpace(text); t != "" && json.Valid([]byte(t)) {
				val = jsonkit.CompactJSON([]byte(t))
			} else {
				val = jsonkit.MustMarshal(text)
			}
			add(Part{FunctionResponse: &FuncResp{ID: p.CallID, Name: names.Get(p.CallID), Response: jsonkit.MustMarshal(map[string]json.RawMessage{key: val})}})
			for _, rp := range p.ResultParts {
				if rp.Type == canon.PartImage || rp.Type == canon.PartFile {
					add(Part{InlineData: &gammaBlob{MimeType: rp.Get().MediaType, Data: rp.Data}})
				}
			}
		case canon.PartThinking:
			if response && p.Text != "" {
				out = append(out, Part{Text: canon.Strp(p.Text), Thought: true})
			}
			if response {
				pendingSig = p.Signature // already rendered for the client
			} else if sig, ok := canon.SigForUpstream(vocab.KindGamma, p.Signature); ok {
				pendingSig = sig
			}
		}
	}
	if pendingSig != "" {
		if n := len(out); n > 0 && out[n-1].ThoughtSignature == "" {
			out[n-1].ThoughtSignature = pendingSig
		} else {
			out = append(out, Part{Text: canon.Strp(""), ThoughtSignature: pendingSig})
		}
	}
	return out
}

// ---- response ----

type gammaCandidate struct {
	Content      *Content `json:"content,omitempty"`
	FinishReason string   `json:"finishReason,omitempty"`
	Index        int      `json:"index"`
}

type Response struct {
	Candidates     []gammaCandidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback,omitempty"`
	UsageMetadata *usageIn        `json:"usageMetadata,omitempty"`
	ModelVersion  string          `json:"modelVersion,omitempty"`
	ResponseID    string          `json:"responseId,omitempty"`
	Error         json.RawMessage `json:"error,omitempty"`
}

func gammaFinishIn(s string) canon.Finish {
	switch s {
	case "":
		return canon.FinishNone
	case "STOP":
		return canon.FinishStop
	case "MAX_TOKENS":
		return canon.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return canon.FinishContentFilter
	}
	return canon.FinishStop
}

func gammaFinishOut(f canon.Finish) string {
	switch f {
	case canon.FinishLength:
		return "MAX_TOKENS"
	case canon.FinishContentFilter:
		return "SAFETY"
	}
	return "STOP"
}

// gammaPartsIn converts response parts, merging adjacent text and thought text.
func gammaPartsIn(parts []Part, dst []canon.Part) []canon.Part {
	for _, p := range parts {
		if p.ThoughtSignature != "" {
			if n := len(dst); n > 0 && dst[n-1].Type == canon.PartThinking && dst[n-1].Signature == "" && !(p.Thought && p.Text != nil) {
				dst[n-1].Signature = canon.TagSig(vocab.KindGamma, p.ThoughtSignature)
			} else if !(p.Thought && p.Text != nil) {
				dst = append(dst, canon.Part{Type: canon.PartThinking, Signature: canon.TagSig(vocab.KindGamma, p.ThoughtSignature)})
			}
		}
		switch {
		case p.FunctionCall != nil:
			args := p.FunctionCall.Args
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			dst = append(dst, canon.Part{Type: canon.PartToolCall, CallID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: jsonkit.CompactJSON(args)})
		case p.Text != nil && p.Thought:
			if n := len(dst); n > 0 && dst[n-1].Type == canon.PartThinking && dst[n-1].Signature == "" {
				dst[n-1].Text += *p.Text
				dst[n-1].Signature = canon.TagSig(vocab.KindGamma, p.ThoughtSignature)
			} else {
				dst = append(dst, canon.Part{Type: canon.PartThinking, Text: *p.Text, Signature: canon.TagSig(vocab.KindGamma, p.ThoughtSignature)})
			}
		case p.Text != nil:
			if *p.Text == "" {
				continue
			}
			if n := len(dst); n > 0 && dst[n-1].Type == canon.PartText {
				dst[n-1].Text += *p.Text
			} else {
				dst = append(dst, canon.Part{Type: canon.PartText, Text: *p.Text})
			}
		case p.InlineData != nil:
			dst = append(dst, canon.Part{Type: canon.PartImage, Data: p.InlineData.Data}.WithExtra(canon.PartExtra{MediaType: p.InlineData.MimeType}))
		}
	}
	return dst
}

func (GenerateContent) DecodeResponse(body []byte, st *canon.State) (*canon.Response, error) {
	body = jsonkit.OwnedCopy(body)
	var in Response
	if err := jsonkit.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode generateContent response: %w", err)
	}
	r := &canon.Response{ID: in.ResponseID, Model: in.ModelVersion, Usage: in.UsageMetadata.canonical()}
	var bill Billing
	bill.take(in.UsageMetadata)
	if u, found := bill.Usage(); found {
		r.Billed = &u
	}
	if len(in.Candidates) > 0 {
		c := in.Candidates[0]
		if c.Content != nil {
			r.Parts = gammaPartsIn(c.Content.Parts, nil)
		}
		r.Finish = gammaFinishIn(c.FinishReason)
		if r.Finish == canon.FinishStop && canon.HasToolCall(r.Parts) {
			r.Finish = canon.FinishToolCalls
		}
	} else if in.PromptFeedback != nil && in.PromptFeedback.BlockReason != "" {
		r.Finish = canon.FinishContentFilter
	}
	return r, nil
}

type gammaResponseOut struct {
	Candidates    []gammaCandidate `json:"candidates"`
	UsageMetadata *gammaUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string           `json:"modelVersion,omitempty"`
	ResponseID    string           `json:"responseId,omitempty"`
}

func (GenerateContent) EncodeResponse(r *canon.Response, st *canon.State) ([]byte, error) {
	in := make([]canon.Part, len(r.Parts))
	for i, p := range r.Parts {
		p.Signature = st.SigToClient(p.Signature)
		in[i] = p
	}
	parts := gammaPartsOut(in, nil, true)
	if r.Refusal != "" {
		parts = append(parts, Part{Text: canon.Strp(r.Refusal)})
	}
	if len(parts) == 0 {
		parts = []Part{{Text: canon.Strp("")}}
	}
	out := gammaResponseOut{Candidates: []gammaCandidate{{Content: &Content{Role: "model", Parts: parts},
		FinishReason: gammaFinishOut(r.Finish), Index: 0}}, ModelVersion: r.Model, ResponseID: canon.ClientID("", r.ID, st)}
	if r.Usage.Known {
		out.UsageMetadata = toGammaUsage(r.Usage)
	}
	return jsonkit.Marshal(out)
}

// FieldName names the generate content members other dialects may refuse.
func (GenerateContent) FieldName(f canon.Field) string {
	switch f {
	case canon.FieldStop:
		return "generationConfig.stopSequences"
	case canon.FieldFormat:
		return "generationConfig.responseMimeType"
	case canon.FieldToolResult:
		return "contents.parts.functionResponse"
	}
	return ""
}

// CheckDestination: gamma refuses a tool result without its call while encoding (it needs the name).
func (GenerateContent) CheckDestination(*canon.Request, *canon.State) error { return nil }
