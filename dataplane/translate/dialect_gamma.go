package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tollgate/tollgate/shared/vocab"
)

// gammaGen is the gamma generateContent codec: generateContent and streamGenerateContent requests,
// answers and stream chunks.
type gammaGen struct{}

type gammaBlob struct {
	MimeType string `json:"mimeType,omitempty"`
	Data     string `json:"data,omitempty"`
	FileURI  string `json:"fileUri,omitempty"`
}

type gammaCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type gammaFuncResp struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`

	result gammaResultRead // Response as gammaResultPart reads it, read with it in the same pass
}

// gammaResultRead is a functionResponse.response read as gammaResultIn in the pass that read the response (read),
// and whether that read failed (a value of another shape: gammaResultPart then keeps the response as it is).
type gammaResultRead struct {
	in           gammaResultIn
	read, failed bool
}

type gammaPart struct {
	Text                *string         `json:"text,omitempty"`
	Thought             bool            `json:"thought,omitempty"`
	InlineData          *gammaBlob      `json:"inlineData,omitempty"`
	FileData            *gammaBlob      `json:"fileData,omitempty"`
	FunctionCall        *gammaCall      `json:"functionCall,omitempty"`
	FunctionResponse    *gammaFuncResp  `json:"functionResponse,omitempty"`
	ThoughtSignature    string          `json:"thoughtSignature,omitempty"`
	ExecutableCode      json.RawMessage `json:"executableCode,omitempty"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult,omitempty"`
}

type gammaContent struct {
	Role  string      `json:"role,omitempty"`
	Parts []gammaPart `json:"parts"`
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

type gammaTool struct {
	FunctionDeclarations []gammaFuncDecl `json:"functionDeclarations"`
}

type gammaFuncDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

// gammaContentIn and gammaPartIn are the request's contents as decoded: parts are read one content at a
// time into reused storage (gammaDecodeScratch), members that are objects or strings only when present.
type gammaContentIn struct {
	Role  string          `json:"role"`
	Parts json.RawMessage `json:"parts"`
	pre   gammaPartsRead  // Parts as the one pass over the body read them
}

// gammaPartsRead is a content's parts as read in the one pass over the body, and the first error reading
// them — reported when the content is converted, where its parts were decoded when a first pass kept them
// raw (so refusals come in the same order).
type gammaPartsRead struct {
	read  bool // else the parts are decoded from Parts (absent parts)
	parts []gammaPartIn
	err   error
}

type gammaPartIn struct {
	Text                json.RawMessage `json:"text"`
	Thought             bool            `json:"thought"`
	InlineData          *gammaBlob      `json:"inlineData"`
	FileData            *gammaBlob      `json:"fileData"`
	FunctionCall        json.RawMessage `json:"functionCall"`
	FunctionResponse    json.RawMessage `json:"functionResponse"`
	ThoughtSignature    string          `json:"thoughtSignature"`
	ExecutableCode      json.RawMessage `json:"executableCode"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult"`

	fn gammaFnRead // FunctionCall and FunctionResponse as the body's one pass read them
}

// gammaFnRead is a part's functionCall and functionResponse as read in the body's one pass (they were
// kept raw and read again when the part was converted), with the error reading each (see readKept):
// reported when the part is converted, where the second read reported it.
type gammaFnRead struct {
	call    gammaCall
	resp    gammaFuncResp
	callErr error
	respErr error
}

// pendingCalls are a gamma conversation's function calls not yet answered, for the responses without an id
// (they answer the oldest unanswered call of their name). Up to len(small) calls are kept in place, in
// order, and searched (no map, no allocation); more go into a map of each name's unanswered ids.
type pendingCalls struct {
	small  [32]pendingCall
	n      int
	byName map[string][]string
}

type pendingCall struct {
	name, id string
	answered bool
}

// add records a call.
func (c *pendingCalls) add(name, id string) {
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

// answer is the id a response of name with id (maybe "") answers: id, else the oldest unanswered call of
// name ("" for none); the unanswered call of name with that id, if any, is answered.
func (c *pendingCalls) answer(name, id string) string {
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

// gammaDecodeScratch is the reused storage of gammaGen.decodeRequest.
type gammaDecodeScratch struct {
	parts []gammaPartIn
	ids   []byte // synthesised call ids, viewed as strings (only appended to)
}

// present reports whether an optional member was given a value other than null.
func present(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }

type gammaRequestIn struct {
	Contents               []gammaContentIn  `json:"contents"`
	SystemInstruction      *gammaContent     `json:"systemInstruction"`
	SystemInstructionSnake *gammaContent     `json:"system_instruction"`
	Tools                  []json.RawMessage `json:"tools"`
	ToolConfig             *gammaToolConfig  `json:"toolConfig"`
	GenerationConfig       *gammaGenConfig   `json:"generationConfig"`
	GenerationConfigSnake  *gammaGenConfig   `json:"generation_config"`
	CachedContent          string            `json:"cachedContent"`
	ServiceTier            string            `json:"service_tier"`
	ServiceTierCamel       string            `json:"serviceTier"`

	parts []gammaPartIn // storage of the contents' parts (gammaPartsRead.parts), pooled
}

type gammaToolConfig struct {
	FunctionCallingConfig gammaFuncCallingConfig `json:"functionCallingConfig"`
}

type gammaFuncCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames"`
}

// gammaResultIn is a functionResponse.response as gammaResultPart reads it: {"output": v} or {"error": v}
// alone (names matched exactly); Other reports members besides.
type gammaResultIn struct {
	Error  json.RawMessage
	Output json.RawMessage
	Other  bool
}

func (c gammaGen) decodeRequest(body []byte, st *reqState) (*request, error) {
	return c.decodeInto(body, st, nil)
}

func (gammaGen) decodeInto(body []byte, st *reqState, store *reqStore) (*request, error) {
	body = st.own(body)
	in := gammaRequestIn{Contents: gammaContentsScratch.get(), parts: gammaPartsScratch.get()}
	defer func() { gammaContentsScratch.put(in.Contents); gammaPartsScratch.put(in.parts) }()
	d := jr{b: body}
	if err := d.done(in.read(&d)); err != nil {
		return nil, badRequest("body", fmt.Errorf("invalid generateContent request: %w", err))
	}
	if in.CachedContent != "" {
		return nil, refuse("cachedContent", "explicit cached content cannot be translated")
	}
	r := &request{ServiceTier: nonEmpty(in.ServiceTier, in.ServiceTierCamel), IncludeUsage: true}
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
			return nil, refuse("generationConfig.candidateCount", "candidateCount > 1 cannot be translated")
		case gc.ResponseLogprobs != nil && *gc.ResponseLogprobs:
			return nil, refuse("generationConfig.responseLogprobs", "logprobs cannot be translated")
		case len(gc.SpeechConfig) > 0:
			return nil, refuse("generationConfig.speechConfig", "speech output cannot be translated")
		}
		for _, m := range gc.ResponseModalities {
			if !strings.EqualFold(m, "TEXT") {
				return nil, refuse("generationConfig.responseModalities", "output modality %q cannot be translated", m)
			}
		}
		r.MaxTokens, r.Temperature, r.TopP, r.TopK = gc.MaxOutputTokens, gc.Temperature, gc.TopP, gc.TopK
		r.Stop, r.Seed, r.PresencePenalty, r.FrequencyPenalty = gc.StopSequences, gc.Seed, gc.PresencePenalty, gc.FrequencyPenalty
		if gc.ResponseMimeType == "application/json" {
			schema := gc.ResponseJSONSchema
			if len(schema) == 0 && len(gc.ResponseSchema) > 0 {
				schema = lowerSchemaTypes(gc.ResponseSchema)
			}
			if len(schema) > 0 {
				r.Format = &responseFormat{Type: "json_schema", Schema: schema}
			} else {
				r.Format = &responseFormat{Type: "json_object"}
			}
		} else if gc.ResponseMimeType != "" && gc.ResponseMimeType != "text/plain" {
			return nil, refuse("generationConfig.responseMimeType", "response MIME type %q cannot be translated", gc.ResponseMimeType)
		}
		if tc := gc.ThinkingConfig; tc != nil {
			rs := &reasoning{IncludeThoughts: tc.IncludeThoughts}
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
		d := jr{b: raw}
		builtin, found, err := readGammaToolKeys(&d)
		if err := d.done(err); err != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), err)
		}
		if found {
			return nil, refuse(fmt.Sprintf("tools[%d].%s", i, builtin), "built-in tool %q cannot be translated", builtin)
		}
		var t gammaTool
		d = jr{b: raw}
		_ = t.read(&d) // a member of the wrong kind ends the declarations read so far
		for _, fd := range t.FunctionDeclarations {
			params := fd.ParametersJSONSchema
			if len(params) == 0 && len(fd.Parameters) > 0 {
				params = lowerSchemaTypes(fd.Parameters)
			}
			r.Tools = append(r.Tools, tool{Name: fd.Name, Description: fd.Description, Parameters: params})
		}
	}
	if tc := in.ToolConfig; tc != nil {
		fc := tc.FunctionCallingConfig
		switch strings.ToUpper(fc.Mode) {
		case "AUTO", "":
			r.ToolChoice = &toolChoice{Mode: "auto"}
		case "NONE":
			r.ToolChoice = &toolChoice{Mode: "none"}
		case "ANY", "VALIDATED":
			switch len(fc.AllowedFunctionNames) {
			case 0:
				r.ToolChoice = &toolChoice{Mode: "required"}
			case 1:
				r.ToolChoice = &toolChoice{Mode: "tool", Name: fc.AllowedFunctionNames[0]}
			default:
				return nil, refuse("toolConfig.functionCallingConfig.allowedFunctionNames", "more than one allowed function cannot be translated")
			}
		}
	}
	// ids: keep gamma's when present, else synthesise call_<turn>_<k>; responses without id take the
	// oldest unanswered call with the same name.
	pending := new(pendingCalls) // does not escape: on the stack
	sc := &gammaDecodeScratch{}
	s := store.take(len(in.Contents))
	r.Messages = s.msgs
	arena := s.parts     // every message's parts, from one backing array (grown by append)
	results := s.results // and every tool result's
	for i, c := range in.Contents {
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		msg := message{Role: role}
		start := len(arena)
		k := 0
		parts := c.pre.parts
		switch {
		case !c.pre.read:
			sc.parts = sc.parts[:0]
			d := jr{b: c.Parts}
			if err := d.done(readGammaPartsIn(&d, &sc.parts)); err != nil {
				return nil, badRequest(pathOf("contents", i).with(".parts", -1).String(), err)
			}
			parts = sc.parts
		case c.pre.err != nil:
			return nil, badRequest(pathOf("contents", i).with(".parts", -1).String(), c.pre.err)
		}
		for j := range parts {
			p := &parts[j]
			var text string
			hasText := present(p.Text)
			if hasText && !validStringOf(p.Text, &text) {
				return nil, badRequest(gammaPartPath(i, j).with(".text", -1).String(), errNotString)
			}
			var fc *gammaCall
			if present(p.FunctionCall) {
				if p.fn.callErr != nil {
					return nil, badRequest(gammaPartPath(i, j).with(".functionCall", -1).String(), p.fn.callErr)
				}
				fc = &p.fn.call
			}
			var fr *gammaFuncResp
			if present(p.FunctionResponse) {
				if p.fn.respErr != nil {
					return nil, badRequest(gammaPartPath(i, j).with(".functionResponse", -1).String(), p.fn.respErr)
				}
				fr = &p.fn.resp
			}
			if p.ThoughtSignature != "" && !(p.Thought && hasText) {
				// the signature covers the thought text before it: one signed thinking part
				sig := st.sigFromClient(p.ThoughtSignature)
				if n := len(arena); n > start && arena[n-1].Type == partThinking && arena[n-1].Signature == "" {
					arena[n-1].Signature = sig
				} else {
					arena = append(arena, part{Type: partThinking, Signature: sig})
				}
			}
			switch {
			case fc != nil:
				id := fc.ID
				if id == "" {
					at := len(sc.ids)
					sc.ids = append(sc.ids, "call_"...)
					sc.ids = strconv.AppendInt(sc.ids, int64(i), 10)
					sc.ids = append(sc.ids, '_')
					sc.ids = strconv.AppendInt(sc.ids, int64(k), 10)
					id = unsafe.String(&sc.ids[at], len(sc.ids)-at) // sc.ids is only appended to
				}
				k++
				pending.add(fc.Name, id)
				args := fc.Args
				if len(args) == 0 || string(args) == "null" {
					args = json.RawMessage("{}")
				}
				arena = append(arena, part{Type: partToolCall, CallID: id, Name: fc.Name, Args: compactValid(args)})
			case fr != nil:
				id := pending.answer(fr.Name, fr.ID)
				if id == "" {
					return nil, refuse(gammaPartPath(i, j).String()+".functionResponse.id", "function response %q matches no earlier function call", fr.Name)
				}
				arena = append(arena, gammaResultPart(id, fr, &results))
			case p.InlineData != nil:
				t := partImage
				if !strings.HasPrefix(p.InlineData.MimeType, "image/") {
					t = partFile
				}
				arena = append(arena, part{Type: t, Data: p.InlineData.Data}.withExtra(partExtra{MediaType: p.InlineData.MimeType}))
			case p.FileData != nil:
				t := partImage
				if !strings.HasPrefix(p.FileData.MimeType, "image/") {
					t = partFile
				}
				arena = append(arena, part{Type: t}.withExtra(partExtra{MediaType: p.FileData.MimeType, URL: p.FileData.FileURI}))
			case len(p.ExecutableCode) > 0 || len(p.CodeExecutionResult) > 0:
				return nil, refuse(gammaPartPath(i, j).String(), "code execution parts cannot be translated")
			case hasText:
				if p.Thought {
					sig := st.sigFromClient(p.ThoughtSignature)
					if n := len(arena); n > start && arena[n-1].Type == partThinking && arena[n-1].Signature == "" {
						arena[n-1].Text += text
						arena[n-1].Signature = sig
					} else {
						arena = append(arena, part{Type: partThinking, Text: text, Signature: sig})
					}
				} else {
					arena = append(arena, part{Type: partText, Text: text})
				}
			}
		}
		msg.Parts = arena[start:len(arena):len(arena)]
		r.Messages = append(r.Messages, msg)
	}
	s.keep(r.Messages, arena, results)
	return r, nil
}

// gammaPartPath is the field path of contents[i].parts[j], made only for an error.
func gammaPartPath(i, j int) fieldPath { return pathOf("contents", i).with(".parts", j) }

// gammaResultPart converts a functionResponse.response object into a tool result whose text part is
// appended to *results.
func gammaResultPart(id string, fr *gammaFuncResp, results *[]part) part {
	p := part{Type: partToolResult, CallID: id}
	// {"output": v} or {"error": v} alone carries v; any other object is the result as it is
	resp, m, failed := fr.Response, fr.result.in, fr.result.failed
	if !fr.result.read {
		m = gammaResultIn{}
		d := jr{b: resp}
		failed = d.done(m.read(&d)) != nil
	}
	var text string
	switch {
	case failed || m.Other:
		text = compactValidText(resp)
	case m.Error != nil && m.Output == nil:
		p.IsError = true
		text = jsonValueText(m.Error)
	case m.Output != nil && m.Error == nil:
		text = jsonValueText(m.Output)
	default:
		text = compactValidText(resp)
	}
	*results = append(*results, part{Type: partText, Text: text})
	p.ResultParts = clipped(*results, len(*results)-1)
	return p
}

// jsonValueText is a (valid) JSON value's text: a string's contents, else the compact JSON.
func jsonValueText(r json.RawMessage) string {
	var s string
	if validStringOf(r, &s) {
		return s
	}
	return compactValidText(r)
}

// lowerSchemaTypes converts gamma's OpenAPI-subset schema (UPPERCASE type enums) to JSON Schema spelling.
func lowerSchemaTypes(raw json.RawMessage) json.RawMessage {
	var v any
	if unmarshal(raw, &v) != nil {
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
	return mustMarshal(walk(v))
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

func gammaModelPath(model, method string) string {
	model = strings.TrimPrefix(model, "models/")
	return "/v1beta/models/" + url.PathEscape(model) + ":" + method
}

func (gammaGen) encodeRequest(r *request, model string, stream bool, st *reqState) (*UpstreamRequest, error) {
	names := new(callNames) // does not escape: on the stack
	names.toolNames(r.Messages)
	for _, m := range r.Messages {
		for pi := range m.Parts {
			p := &m.Parts[pi]
			if p.Type == partToolResult && names.get(p.CallID) == "" {
				return nil, refuse(fieldNames[st.client]["tool_result"], "tool result %q answers no earlier tool call; the destination needs the function name", p.CallID)
			}
		}
	}
	w := &jw{b: make([]byte, 0, requestSizeHint(r))}
	w.open('{')
	w.key("contents")
	at := len(w.b)
	w.open('[')
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
	if w.b[len(w.b)-1] == '[' { // no content: encoding/json wrote the nil slice as null
		w.b = append(w.b[:at], "null"...)
	} else {
		w.close(']')
	}
	if len(r.System) > 0 {
		w.key("systemInstruction")
		w.open('{')
		w.key("parts")
		w.open('[')
		for _, s := range r.System {
			w.open('{')
			w.key("text")
			w.str(s)
			w.close('}')
		}
		w.close(']')
		w.close('}')
	}
	if len(r.Tools) > 0 {
		w.key("tools")
		w.open('[')
		w.open('{')
		w.key("functionDeclarations")
		w.open('[')
		for _, t := range r.Tools {
			w.open('{')
			if t.Description != "" {
				w.key("description")
				w.str(t.Description)
			}
			w.key("name")
			w.str(t.Name)
			if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
				w.key("parametersJsonSchema")
				w.raw(t.Parameters)
			}
			w.close('}')
		}
		w.close(']')
		w.close('}')
		w.close(']')
	}
	if tc := r.ToolChoice; tc != nil {
		w.key("toolConfig")
		w.open('{')
		w.key("functionCallingConfig")
		w.open('{')
		switch tc.Mode {
		case "auto":
			w.key("mode")
			w.str("AUTO")
		case "none":
			w.key("mode")
			w.str("NONE")
		case "required":
			w.key("mode")
			w.str("ANY")
		case "tool":
			w.key("allowedFunctionNames")
			w.open('[')
			w.str(tc.Name)
			w.close(']')
			w.key("mode")
			w.str("ANY")
		}
		w.close('}')
		w.close('}')
	}
	gammaGenConfigOut(w, r, st)
	if t := gammaTier(r.ServiceTier); t != "" {
		w.key("service_tier")
		w.str(t)
	}
	w.close('}')
	path := gammaModelPath(model, "generateContent")
	if stream {
		path = gammaModelPath(model, "streamGenerateContent") + "?alt=sse"
	}
	return &UpstreamRequest{Method: http.MethodPost, Path: path, Header: jsonHeader(), Body: w.b}, nil
}

// gammaGenConfigOut writes generationConfig when any of its members is set.
func gammaGenConfigOut(w *jw, r *request, st *reqState) {
	at := len(w.b)
	w.key("generationConfig")
	w.open('{')
	if r.MaxTokens != nil {
		w.key("maxOutputTokens")
		w.int(int64(*r.MaxTokens))
	}
	w.optFloat("temperature", r.Temperature)
	w.optFloat("topP", r.TopP)
	if r.TopK != nil {
		w.key("topK")
		w.int(int64(*r.TopK))
	}
	w.strList("stopSequences", r.Stop)
	w.optInt("seed", r.Seed)
	w.optFloat("presencePenalty", r.PresencePenalty)
	w.optFloat("frequencyPenalty", r.FrequencyPenalty)
	if f := r.Format; f != nil {
		w.key("responseMimeType")
		w.str("application/json")
		if f.Type == "json_schema" && len(f.Schema) > 0 {
			w.key("responseJsonSchema")
			w.raw(f.Schema)
		}
	}
	if rs := r.Reasoning; rs != nil && !rs.Disabled {
		budget := rs.Budget
		if budget == 0 {
			budget = effortBudget(rs.Effort)
		}
		if budget == 0 && rs.Adaptive {
			budget = -1
		}
		if budget != 0 {
			w.key("thinkingConfig")
			w.open('{')
			w.key("thinkingBudget")
			w.int(int64(budget))
			if rs.IncludeThoughts || st.client == "beta_messages" || st.client == "alpha_responses" {
				w.key("includeThoughts")
				w.bool(true)
			}
			w.close('}')
		}
	}
	if w.b[len(w.b)-1] == '{' { // nothing set: no generationConfig
		w.b = w.b[:at]
		return
	}
	w.close('}')
}

// gammaBlobOut writes inlineData / fileData.
func gammaBlobOut(w *jw, mime, data, uri string) {
	w.open('{')
	if mime != "" {
		w.key("mimeType")
		w.str(mime)
	}
	if data != "" {
		w.key("data")
		w.str(data)
	}
	if uri != "" {
		w.key("fileUri")
		w.str(uri)
	}
	w.close('}')
}

// gammaTurnOut writes one turn (the parts of consecutive messages of one role);
// a turn without parts is left out.
func gammaTurnOut(w *jw, role string, msgs []message, names *callNames) {
	at := len(w.b)
	w.open('{')
	w.key("role")
	if role == "assistant" {
		w.str("model")
	} else {
		w.str("user")
	}
	w.key("parts")
	w.open('[')
	pendingSig, lastSigned := "", false
	// sig ends every part: a pending signature goes on it (thoughtSignature follows its content).
	sig := func() {
		lastSigned = pendingSig != ""
		if pendingSig != "" {
			w.key("thoughtSignature")
			w.str(pendingSig)
			pendingSig = ""
		}
	}
	for _, m := range msgs {
		for pi := range m.Parts {
			p := &m.Parts[pi]
			switch p.Type {
			case partText:
				w.open('{')
				w.key("text")
				w.str(p.Text)
				sig()
				w.close('}')
			case partImage, partFile:
				w.open('{')
				if p.get().URL != "" {
					mt := p.get().MediaType
					if mt == "" {
						mt = mimeFromURL(p.get().URL)
					}
					w.key("fileData")
					gammaBlobOut(w, mt, "", p.get().URL)
				} else {
					w.key("inlineData")
					gammaBlobOut(w, p.get().MediaType, p.Data, "")
				}
				sig()
				w.close('}')
			case partToolCall:
				w.open('{')
				w.key("functionCall")
				w.open('{')
				if p.CallID != "" {
					w.key("id")
					w.str(p.CallID)
				}
				w.key("name")
				w.str(p.Name)
				w.key("args")
				if len(p.Args) == 0 {
					w.raw(json.RawMessage("{}"))
				} else {
					w.raw(p.Args)
				}
				w.close('}')
				sig()
				w.close('}')
			case partToolResult:
				key := "output"
				if p.IsError {
					key = "error"
				}
				text := textOf(p.ResultParts)
				w.open('{')
				w.key("functionResponse")
				w.open('{')
				if p.CallID != "" {
					w.key("id")
					w.str(p.CallID)
				}
				w.key("name")
				w.str(names.get(p.CallID))
				w.key("response")
				w.open('{')
				w.key(key)
				if t := strings.TrimSpace(text); t != "" && validJSON(stringBytes(t)) {
					w.raw(stringBytes(t))
				} else {
					w.str(text)
				}
				w.close('}')
				w.close('}')
				sig()
				w.close('}')
				for _, rp := range p.ResultParts {
					if rp.Type == partImage || rp.Type == partFile {
						w.open('{')
						w.key("inlineData")
						gammaBlobOut(w, rp.get().MediaType, rp.Data, "")
						sig()
						w.close('}')
					}
				}
			case partThinking:
				if s, ok := sigForUpstream(vocab.KindGamma, p.Signature); ok {
					pendingSig = s
				}
			}
		}
	}
	if pendingSig != "" {
		// on the last part when it has none (thoughtSignature is its last member), else on an empty text part
		if n := len(w.b); w.b[n-1] == '}' && !lastSigned {
			w.b = w.b[:n-1]
			sig()
			w.close('}')
		} else {
			w.open('{')
			w.key("text")
			w.str("")
			sig()
			w.close('}')
		}
	}
	if w.b[len(w.b)-1] == '[' { // no parts: the turn is left out
		w.b = w.b[:at]
		return
	}
	w.close(']')
	w.close('}')
}

// gammaPartsOut renders canonical parts as gamma parts. A thinking part's signature goes onto the next
// non-thinking part (where gamma puts thoughtSignature), or the last part when none follows. Thought text
// is sent only when response is set (responses to gamma clients); gamma does not need it replayed.
func gammaPartsOut(parts []part, names *callNames, response bool) []gammaPart {
	out := make([]gammaPart, 0, len(parts))
	pendingSig := ""
	add := func(p gammaPart) {
		if pendingSig != "" {
			p.ThoughtSignature = pendingSig
			pendingSig = ""
		}
		out = append(out, p)
	}
	for _, p := range parts {
		switch p.Type {
		case partText:
			add(gammaPart{Text: strp(p.Text)})
		case partImage, partFile:
			if p.get().URL != "" {
				mt := p.get().MediaType
				if mt == "" {
					mt = mimeFromURL(p.get().URL)
				}
				add(gammaPart{FileData: &gammaBlob{MimeType: mt, FileURI: p.get().URL}})
			} else {
				add(gammaPart{InlineData: &gammaBlob{MimeType: p.get().MediaType, Data: p.Data}})
			}
		case partToolCall:
			args := p.Args
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			add(gammaPart{FunctionCall: &gammaCall{ID: p.CallID, Name: p.Name, Args: args}})
		case partToolResult:
			key := "output"
			if p.IsError {
				key = "error"
			}
			text := textOf(p.ResultParts)
			var val json.RawMessage
			if t := strings.TrimSpace(text); t != "" && json.Valid([]byte(t)) {
				val = compactJSON([]byte(t))
			} else {
				val = mustMarshal(text)
			}
			add(gammaPart{FunctionResponse: &gammaFuncResp{ID: p.CallID, Name: names.get(p.CallID), Response: mustMarshal(map[string]json.RawMessage{key: val})}})
			for _, rp := range p.ResultParts {
				if rp.Type == partImage || rp.Type == partFile {
					add(gammaPart{InlineData: &gammaBlob{MimeType: rp.get().MediaType, Data: rp.Data}})
				}
			}
		case partThinking:
			if response && p.Text != "" {
				out = append(out, gammaPart{Text: strp(p.Text), Thought: true})
			}
			if response {
				pendingSig = p.Signature // already rendered for the client
			} else if sig, ok := sigForUpstream(vocab.KindGamma, p.Signature); ok {
				pendingSig = sig
			}
		}
	}
	if pendingSig != "" {
		if n := len(out); n > 0 && out[n-1].ThoughtSignature == "" {
			out[n-1].ThoughtSignature = pendingSig
		} else {
			out = append(out, gammaPart{Text: strp(""), ThoughtSignature: pendingSig})
		}
	}
	return out
}

// ---- response ----

type gammaCandidate struct {
	Content      *gammaContent `json:"content,omitempty"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type gammaResponse struct {
	Candidates     []gammaCandidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback,omitempty"`
	UsageMetadata *gammaUsage     `json:"usageMetadata,omitempty"`
	ModelVersion  string          `json:"modelVersion,omitempty"`
	ResponseID    string          `json:"responseId,omitempty"`
	Error         json.RawMessage `json:"error,omitempty"`
}

func gammaFinishIn(s string) finish {
	switch s {
	case "":
		return finishNone
	case "STOP":
		return finishStop
	case "MAX_TOKENS":
		return finishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return finishContentFilter
	}
	return finishStop
}

func gammaFinishOut(f finish) string {
	switch f {
	case finishLength:
		return "MAX_TOKENS"
	case finishContentFilter:
		return "SAFETY"
	}
	return "STOP"
}

// gammaPartsIn converts response parts, merging adjacent text and thought text.
func gammaPartsIn(parts []gammaPart, dst []part) []part {
	for _, p := range parts {
		if p.ThoughtSignature != "" {
			if n := len(dst); n > 0 && dst[n-1].Type == partThinking && dst[n-1].Signature == "" && !(p.Thought && p.Text != nil) {
				dst[n-1].Signature = tagSig(vocab.KindGamma, p.ThoughtSignature)
			} else if !(p.Thought && p.Text != nil) {
				dst = append(dst, part{Type: partThinking, Signature: tagSig(vocab.KindGamma, p.ThoughtSignature)})
			}
		}
		switch {
		case p.FunctionCall != nil:
			args := p.FunctionCall.Args
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			dst = append(dst, part{Type: partToolCall, CallID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: compactJSON(args)})
		case p.Text != nil && p.Thought:
			if n := len(dst); n > 0 && dst[n-1].Type == partThinking && dst[n-1].Signature == "" {
				dst[n-1].Text += *p.Text
				dst[n-1].Signature = tagSig(vocab.KindGamma, p.ThoughtSignature)
			} else {
				dst = append(dst, part{Type: partThinking, Text: *p.Text, Signature: tagSig(vocab.KindGamma, p.ThoughtSignature)})
			}
		case p.Text != nil:
			if *p.Text == "" {
				continue
			}
			if n := len(dst); n > 0 && dst[n-1].Type == partText {
				dst[n-1].Text += *p.Text
			} else {
				dst = append(dst, part{Type: partText, Text: *p.Text})
			}
		case p.InlineData != nil:
			dst = append(dst, part{Type: partImage, Data: p.InlineData.Data}.withExtra(partExtra{MediaType: p.InlineData.MimeType}))
		}
	}
	return dst
}

func (gammaGen) decodeResponse(body []byte, st *reqState) (*response, error) {
	body = ownedCopy(body)
	var in gammaResponse
	if err := unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode generateContent response: %w", err)
	}
	r := &response{ID: in.ResponseID, Model: in.ModelVersion, Usage: in.UsageMetadata.canonical()}
	if len(in.Candidates) > 0 {
		c := in.Candidates[0]
		if c.Content != nil {
			r.Parts = gammaPartsIn(c.Content.Parts, nil)
		}
		r.Finish = gammaFinishIn(c.FinishReason)
		if r.Finish == finishStop && hasToolCall(r.Parts) {
			r.Finish = finishToolCalls
		}
	} else if in.PromptFeedback != nil && in.PromptFeedback.BlockReason != "" {
		r.Finish = finishContentFilter
	}
	return r, nil
}

type gammaResponseOut struct {
	Candidates    []gammaCandidate `json:"candidates"`
	UsageMetadata *gammaUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string           `json:"modelVersion,omitempty"`
	ResponseID    string           `json:"responseId,omitempty"`
}

func (gammaGen) encodeResponse(r *response, st *reqState) ([]byte, error) {
	in := make([]part, len(r.Parts))
	for i, p := range r.Parts {
		p.Signature = st.sigToClient(p.Signature)
		in[i] = p
	}
	parts := gammaPartsOut(in, nil, true)
	if r.Refusal != "" {
		parts = append(parts, gammaPart{Text: strp(r.Refusal)})
	}
	if len(parts) == 0 {
		parts = []gammaPart{{Text: strp("")}}
	}
	out := gammaResponseOut{Candidates: []gammaCandidate{{Content: &gammaContent{Role: "model", Parts: parts},
		FinishReason: gammaFinishOut(r.Finish), Index: 0}}, ModelVersion: r.Model, ResponseID: clientID("", r.ID, st)}
	if r.Usage.Known {
		out.UsageMetadata = toGammaUsage(r.Usage)
	}
	return marshal(out)
}
