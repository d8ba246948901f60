package beta

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Messages is the beta messages codec: /v1/messages requests, answers and stream events.
type Messages struct{}

type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *betaSource     `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	Title     string          `json:"title,omitempty"`
}

type betaSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type RequestIn struct {
	Model         string            `json:"model"`
	System        json.RawMessage   `json:"system"`
	Messages      []betaMessageIn   `json:"messages"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage   `json:"tool_choice"`
	MaxTokens     *int              `json:"max_tokens"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	TopK          *int              `json:"top_k"`
	StopSequences []string          `json:"stop_sequences"`
	Stream        bool              `json:"stream"`
	Thinking      *betaThinkingIn   `json:"thinking"`
	OutputConfig  *betaOutputConfig `json:"output_config"`
	Metadata      *betaMetadata     `json:"metadata"`
	ServiceTier   string            `json:"service_tier"`
	MCPServers    json.RawMessage   `json:"mcp_servers"`
	Container     json.RawMessage   `json:"container"`
	// ContextManagement is context editing (server-side clearing of old tool results and thinking): no
	// other dialect has it, so a translated request with it is refused (dropping it would send the
	// whole uncleared conversation).
	ContextManagement json.RawMessage `json:"context_management"`

	Blocks []Block `json:"-"` // storage of the messages' content blocks (betaContent.blocks), pooled
}

type betaMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Pre     Content         `json:"-"` // Content as the one pass over the body read it
}

// Content is a message's content as read in the one pass over the body: its text when it is a string,
// else its blocks, and the first error reading them — reported when the message is converted, where the
// content was decoded when a first pass kept it raw (so refusals come in the same order).
type Content struct {
	read   bool // else the content is decoded from Content (absent content)
	isText bool
	text   string
	blocks []Block
	err    error
}

type betaThinkingIn struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type betaOutputConfig struct {
	Effort string        `json:"effort"`
	Format *betaFormatIn `json:"format"`
}

type betaFormatIn struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type betaMetadata struct {
	UserID string `json:"user_id"`
}

type ToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type ToolChoiceIn struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

func (c Messages) DecodeRequest(body []byte, st *canon.State) (*canon.Request, error) {
	return c.DecodeInto(body, st, nil)
}

func (Messages) DecodeInto(body []byte, st *canon.State, store *canon.ReqStore) (*canon.Request, error) {
	body = st.Own(body)
	in := RequestIn{Messages: betaMessagesScratch.Get(), Blocks: betaBlocksScratch.Get()}
	defer func() { betaMessagesScratch.Put(in.Messages); betaBlocksScratch.Put(in.Blocks) }()
	d := jsonkit.Reader{B: body}
	if err := d.Done(in.Read(&d)); err != nil {
		return nil, canon.BadRequest("body", fmt.Errorf("invalid messages request: %w", err))
	}
	if len(in.MCPServers) > 0 && string(in.MCPServers) != "null" {
		return nil, canon.Refuse("mcp_servers", "MCP servers cannot be translated")
	}
	if len(in.Container) > 0 && string(in.Container) != "null" {
		return nil, canon.Refuse("container", "containers cannot be translated")
	}
	if len(in.ContextManagement) > 0 && string(in.ContextManagement) != "null" {
		return nil, canon.Refuse("context_management", "context editing cannot be translated: no other dialect clears a conversation's context")
	}
	r := &canon.Request{Model: in.Model, MaxTokens: in.MaxTokens, Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK,
		Stop: in.StopSequences, Stream: in.Stream, ServiceTier: in.ServiceTier, IncludeUsage: true}
	if in.Metadata != nil {
		r.User = in.Metadata.UserID
	}
	if len(in.System) > 0 && string(in.System) != "null" {
		var s string
		if jsonkit.StringOf(in.System, &s) {
			r.System = []string{s}
		} else {
			var blocks []Block
			d := jsonkit.Reader{B: in.System}
			if err := d.Done(ReadBlocks(&d, &blocks)); err != nil {
				return nil, canon.BadRequest("system", err)
			}
			for _, b := range blocks {
				r.System = append(r.System, b.Text)
			}
		}
	}
	if t := in.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			r.Reasoning = &canon.Reasoning{Budget: t.BudgetTokens, IncludeThoughts: true}
		case "adaptive":
			r.Reasoning = &canon.Reasoning{Adaptive: true, IncludeThoughts: true}
		case "disabled":
			r.Reasoning = &canon.Reasoning{Disabled: true}
		}
	}
	if oc := in.OutputConfig; oc != nil {
		if oc.Effort != "" {
			if r.Reasoning == nil {
				r.Reasoning = &canon.Reasoning{}
			}
			r.Reasoning.Effort = oc.Effort
		}
		if oc.Format != nil && oc.Format.Type == "json_schema" {
			r.Format = &canon.ResponseFormat{Type: "json_schema", Schema: oc.Format.Schema}
		}
	}
	for i, raw := range in.Tools {
		var t ToolIn
		d := jsonkit.Reader{B: raw}
		if err := d.Done(t.Read(&d)); err != nil || (t.Type != "" && t.Type != "custom") {
			return nil, canon.Refuse(fmt.Sprintf("tools[%d]", i), "server tools (type %q) cannot be translated", t.Type)
		}
		r.Tools = append(r.Tools, canon.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		var tc ToolChoiceIn
		d := jsonkit.Reader{B: in.ToolChoice}
		if err := d.Done(tc.Read(&d)); err != nil {
			return nil, canon.BadRequest("tool_choice", err)
		}
		switch tc.Type {
		case "auto", "none":
			r.ToolChoice = &canon.ToolChoice{Mode: tc.Type}
		case "any":
			r.ToolChoice = &canon.ToolChoice{Mode: "required"}
		case "tool":
			r.ToolChoice = &canon.ToolChoice{Mode: "tool", Name: tc.Name}
		default:
			return nil, canon.Refuse("tool_choice", "unknown tool_choice type %q", tc.Type)
		}
		if tc.DisableParallelToolUse {
			f := false
			r.ParallelToolCalls = &f
		}
	}
	s := store.Take(len(in.Messages))
	r.Messages = s.Msgs
	a := &Arena{Parts: s.Parts, Results: s.Results}
	for i, m := range in.Messages {
		field := canon.PathOf("messages", i).With(".content", -1)
		role := m.Role
		if role != "user" && role != "assistant" {
			return nil, canon.Refuse(fmt.Sprintf("messages[%d].role", i), "role %q cannot be translated", role)
		}
		var parts []canon.Part
		var err error
		switch c := &m.Pre; {
		case !c.read:
			parts, err = betaContentParts(m.Content, field, a, &a.Parts)
		case c.err != nil:
			err = canon.BadRequest(field.String(), c.err)
		case c.isText:
			a.Parts = append(a.Parts, canon.Part{Type: canon.PartText, Text: c.text})
			parts = a.Parts[len(a.Parts)-1 : len(a.Parts) : len(a.Parts)]
		default:
			parts, err = betaBlockParts(c.blocks, field, a, &a.Parts)
		}
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, canon.Message{Role: role, Parts: parts})
	}
	s.Keep(r.Messages, a.Parts, a.Results)
	return r, nil
}

// Arena is the backing storage of a request's parts: message parts, tool result parts and the scratch
// the content blocks of one message are decoded into.
type Arena struct {
	Parts, Results []canon.Part `json:"-"`
	Blocks         []Block      `json:"-"`
}

// betaContentParts converts message content (string or blocks) into parts appended to *dst and returns
// them (capacity clipped, so a later append copies). Tool result contents go to a.results; a result inside
// a result (invalid, but parsed) gets storage of its own.
func betaContentParts(raw json.RawMessage, field canon.FieldPath, a *Arena, dst *[]canon.Part) ([]canon.Part, error) {
	if dst == nil {
		dst = new([]canon.Part)
	}
	start := len(*dst)
	var s string
	if jsonkit.ValidStringOf(raw, &s) {
		*dst = append(*dst, canon.Part{Type: canon.PartText, Text: s})
		return (*dst)[start:len(*dst):len(*dst)], nil
	}
	blocks := &a.Blocks
	if dst != &a.Parts {
		blocks = new([]Block) // a.blocks is being read by the caller
	}
	d := jsonkit.Reader{B: raw}
	if err := d.Done(ReadBlocks(&d, blocks)); err != nil {
		return nil, canon.BadRequest(field.String(), err)
	}
	return betaBlockParts(*blocks, field, a, dst)
}

// betaBlockParts appends the parts of a message's or tool result's content blocks to *dst (see
// betaContentParts) and returns them.
func betaBlockParts(blocks []Block, field canon.FieldPath, a *Arena, dst *[]canon.Part) ([]canon.Part, error) {
	start := len(*dst)
	out := *dst
	for j, b := range blocks {
		f := field.With("", j)
		switch b.Type {
		case "text":
			out = append(out, canon.Part{Type: canon.PartText, Text: b.Text})
		case "image", "document":
			p, err := SourcePart(b, f.String())
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		case "tool_use":
			in := b.Input
			if len(in) == 0 {
				in = json.RawMessage("{}")
			}
			out = append(out, canon.Part{Type: canon.PartToolCall, CallID: b.ID, Name: b.Name, Args: jsonkit.CompactValid(in)})
		case "tool_result":
			p := canon.Part{Type: canon.PartToolResult, CallID: b.ToolUseID, IsError: b.IsError}
			if len(b.Content) > 0 && string(b.Content) != "null" {
				results := &a.Results
				if dst != &a.Parts {
					results = nil
				}
				rp, err := betaContentParts(b.Content, f.With(".content", -1), a, results)
				if err != nil {
					return nil, err
				}
				p.ResultParts = rp
			}
			out = append(out, p)
		case "thinking":
			p := canon.Part{Type: canon.PartThinking}
			if b.Thinking != nil {
				p.Text = *b.Thinking
			}
			if b.Signature != nil {
				p.Signature = *b.Signature
			}
			out = append(out, p)
		case "redacted_thinking":
			out = append(out, canon.Part{Type: canon.PartRedactedThinking, Data: b.Data})
		default:
			return nil, canon.Refuse(f.String(), "content block type %q cannot be translated", b.Type)
		}
	}
	*dst = out
	return out[start:len(out):len(out)], nil
}

func SourcePart(b Block, f string) (canon.Part, error) {
	if b.Source == nil {
		return canon.Part{}, canon.Refuse(f, "%s block without source", b.Type)
	}
	t := canon.PartImage
	if b.Type == "document" {
		t = canon.PartFile
	}
	switch b.Source.Type {
	case "base64":
		return canon.Part{Type: t, Data: b.Source.Data}.WithExtra(canon.PartExtra{MediaType: b.Source.MediaType, FileName: b.Title}), nil
	case "url":
		return canon.Part{Type: t}.WithExtra(canon.PartExtra{URL: b.Source.URL, MediaType: b.Source.MediaType}), nil
	}
	return canon.Part{}, canon.Refuse(f+".source", "source type %q cannot be translated", b.Source.Type)
}

// ---- encode request ----

func betaTier(t string) string {
	switch strings.ToLower(t) {
	case "auto", "priority":
		return "auto"
	case "default", "standard", "standard_only":
		return "standard_only"
	}
	return ""
}

func (Messages) EncodeRequest(r *canon.Request, model string, stream bool, st *canon.State) (*canon.UpstreamRequest, error) {
	maxTokens := st.Opts.BetaMaxTokens
	if r.MaxTokens != nil && *r.MaxTokens > 0 {
		maxTokens = *r.MaxTokens
	}
	temperature, topK := r.Temperature, r.TopK
	if temperature != nil {
		t := min(max(*temperature, 0), 1) // beta accepts 0..1
		temperature = &t
	}
	// thinking: "adaptive", or an enabled budget (at least 1024, below max_tokens)
	thinking, budget := "", 0
	if rs := r.Reasoning; rs != nil && !rs.Disabled {
		budget = rs.Budget
		if budget == 0 {
			budget = canon.EffortBudget(rs.Effort)
		}
		if rs.Adaptive && budget == 0 {
			thinking = "adaptive"
		} else if budget > 0 {
			budget = max(budget, 1024)
			if budget >= maxTokens {
				budget = maxTokens - 1
			}
			if budget >= 1024 {
				thinking = "enabled"
			}
		}
		if thinking != "" {
			// beta rejects sampling changes while thinking
			temperature, topK = nil, nil
		}
	}

	w := &jsonkit.Writer{B: make([]byte, 0, canon.RequestSizeHint(r))}
	w.Open('{')
	w.Key("model")
	w.Str(model)
	if len(r.System) == 1 {
		w.Key("system")
		w.Str(r.System[0])
	} else if len(r.System) > 1 {
		w.Key("system")
		w.Open('[')
		for _, s := range r.System {
			w.Open('{')
			w.Key("type")
			w.Str("text")
			if s != "" {
				w.Key("text")
				w.Str(s)
			}
			w.Close('}')
		}
		w.Close(']')
	}
	w.Key("messages")
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
		turn := len(w.B)
		w.Open('{')
		w.Key("role")
		w.Str(role)
		w.Key("content")
		w.Open('[')
		for _, m := range r.Messages[i:j] {
			for pi := range m.Parts {
				p := &m.Parts[pi]
				betaBlockWrite(w, p)
			}
		}
		if w.AtArrayStart() { // no block: the turn is left out
			w.B = w.B[:turn]
		} else {
			w.Close(']')
			w.Close('}')
		}
		i = j
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
			w.Key("name")
			w.Str(t.Name)
			if t.Description != "" {
				w.Key("description")
				w.Str(t.Description)
			}
			w.Key("input_schema")
			if schema := t.Parameters; len(schema) == 0 || string(schema) == "null" {
				w.Raw(json.RawMessage(`{"type":"object","properties":{}}`))
			} else {
				w.Raw(schema)
			}
			w.Close('}')
		}
		w.Close(']')
	}
	choice := ""
	if tc := r.ToolChoice; tc != nil {
		switch tc.Mode {
		case "auto", "none":
			choice = tc.Mode
		case "required":
			choice = "any"
		case "tool":
			choice = "tool"
		}
	}
	noParallel := r.ParallelToolCalls != nil && !*r.ParallelToolCalls && len(r.Tools) > 0
	if noParallel && choice == "" {
		choice = "auto"
	}
	if choice != "" {
		w.Key("tool_choice")
		w.Open('{')
		if noParallel && choice != "none" {
			w.Key("disable_parallel_tool_use")
			w.Bool(true)
		}
		if choice == "tool" {
			w.Key("name")
			w.Str(r.ToolChoice.Name)
		}
		w.Key("type")
		w.Str(choice)
		w.Close('}')
	}
	w.Key("max_tokens")
	w.Int(int64(maxTokens))
	if temperature != nil {
		w.Key("temperature")
		w.Float(*temperature)
	}
	w.OptFloat("top_p", r.TopP)
	if topK != nil {
		w.Key("top_k")
		w.Int(int64(*topK))
	}
	w.StrList("stop_sequences", r.Stop)
	if thinking != "" {
		w.Key("thinking")
		w.Open('{')
		if thinking == "enabled" {
			w.Key("budget_tokens")
			w.Int(int64(budget))
		}
		w.Key("type")
		w.Str(thinking)
		w.Close('}')
	}
	if f := r.Format; f != nil && f.Type == "json_schema" {
		w.Key("output_config")
		w.Open('{')
		w.Key("format")
		w.Open('{')
		w.Key("schema")
		w.Raw(f.Schema)
		w.Key("type")
		w.Str("json_schema")
		w.Close('}')
		w.Close('}')
	}
	if r.User != "" {
		w.Key("metadata")
		w.Open('{')
		w.Key("user_id")
		w.Str(r.User)
		w.Close('}')
	}
	if t := betaTier(r.ServiceTier); t != "" {
		w.Key("service_tier")
		w.Str(t)
	}
	if stream {
		w.Key("stream")
		w.Bool(true)
	}
	w.Close('}')
	h := canon.JSONHeader()
	h.Set("anthropic-version", "2023-06-01")
	return &canon.UpstreamRequest{Method: http.MethodPost, Path: "/v1/messages", Header: h, Body: w.B}, nil
}

// betaBlockWrite writes the request content block of a part as betaBlockOut builds it (field order of
// Block); it reports false, writing nothing, for a part beta does not take.
func betaBlockWrite(w *jsonkit.Writer, p *canon.Part) bool {
	switch p.Type {
	case canon.PartText:
		if p.Text == "" {
			return false // beta rejects empty text blocks
		}
		w.Open('{')
		w.Key("type")
		w.Str("text")
		w.Key("text")
		w.Str(p.Text)
		w.Close('}')
	case canon.PartImage, canon.PartFile:
		w.Open('{')
		w.Key("type")
		if p.Type == canon.PartFile {
			w.Str("document")
		} else {
			w.Str("image")
		}
		w.Key("source")
		w.Open('{')
		if p.Get().URL != "" {
			w.Key("type")
			w.Str("url")
			w.Key("url")
			w.Str(p.Get().URL)
		} else {
			w.Key("type")
			w.Str("base64")
			if p.Get().MediaType != "" {
				w.Key("media_type")
				w.Str(p.Get().MediaType)
			}
			if p.Data != "" {
				w.Key("data")
				w.Str(p.Data)
			}
		}
		w.Close('}')
		w.Close('}')
	case canon.PartToolCall:
		w.Open('{')
		w.Key("type")
		w.Str("tool_use")
		if id := canon.SanitizeID(p.CallID); id != "" {
			w.Key("id")
			w.Str(id)
		}
		if p.Name != "" {
			w.Key("name")
			w.Str(p.Name)
		}
		w.Key("input")
		if len(p.Args) == 0 {
			w.Raw(json.RawMessage("{}"))
		} else {
			w.Raw(p.Args)
		}
		w.Close('}')
	case canon.PartToolResult:
		w.Open('{')
		w.Key("type")
		w.Str("tool_result")
		if id := canon.SanitizeID(p.CallID); id != "" {
			w.Key("tool_use_id")
			w.Str(id)
		}
		w.Key("content")
		allText := true
		for _, rp := range p.ResultParts {
			if rp.Type != canon.PartText {
				allText = false
			}
		}
		if allText {
			w.Str(canon.TextOf(p.ResultParts))
		} else {
			at := len(w.B)
			w.Open('[')
			for k := range p.ResultParts {
				betaBlockWrite(w, &p.ResultParts[k])
			}
			if w.AtArrayStart() { // no block: encoding/json wrote the nil slice as null
				w.B = append(w.B[:at], "null"...)
			} else {
				w.Close(']')
			}
		}
		if p.IsError {
			w.Key("is_error")
			w.Bool(true)
		}
		w.Close('}')
	case canon.PartThinking:
		sig, ok := canon.SigForUpstream(vocab.KindBeta, p.Signature)
		if !ok {
			return false // beta verifies signatures: reasoning from another family is dropped
		}
		w.Open('{')
		w.Key("type")
		w.Str("thinking")
		w.Key("thinking")
		w.Str(p.Text)
		w.Key("signature")
		w.Str(sig)
		w.Close('}')
	case canon.PartRedactedThinking:
		w.Open('{')
		w.Key("type")
		w.Str("redacted_thinking")
		if p.Data != "" {
			w.Key("data")
			w.Str(p.Data)
		}
		w.Close('}')
	default:
		return false
	}
	return true
}

func betaBlockOut(p canon.Part) (Block, bool) {
	switch p.Type {
	case canon.PartText:
		if p.Text == "" {
			return Block{}, false // beta rejects empty text blocks
		}
		return Block{Type: "text", Text: p.Text}, true
	case canon.PartImage, canon.PartFile:
		typ := "image"
		if p.Type == canon.PartFile {
			typ = "document"
		}
		if p.Get().URL != "" {
			return Block{Type: typ, Source: &betaSource{Type: "url", URL: p.Get().URL}}, true
		}
		return Block{Type: typ, Source: &betaSource{Type: "base64", MediaType: p.Get().MediaType, Data: p.Data}}, true
	case canon.PartToolCall:
		args := p.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		return Block{Type: "tool_use", ID: canon.SanitizeID(p.CallID), Name: p.Name, Input: args}, true
	case canon.PartToolResult:
		b := Block{Type: "tool_result", ToolUseID: canon.SanitizeID(p.CallID), IsError: p.IsError}
		allText := true
		for _, rp := range p.ResultParts {
			if rp.Type != canon.PartText {
				allText = false
			}
		}
		if allText {
			b.Content = jsonkit.MustMarshal(canon.TextOf(p.ResultParts))
		} else {
			var blocks []Block
			for _, rp := range p.ResultParts {
				if bb, ok := betaBlockOut(rp); ok {
					blocks = append(blocks, bb)
				}
			}
			b.Content = jsonkit.MustMarshal(blocks)
		}
		return b, true
	case canon.PartThinking:
		sig, ok := canon.SigForUpstream(vocab.KindBeta, p.Signature)
		if !ok {
			return Block{}, false // beta verifies signatures: reasoning from another family is dropped
		}
		return Block{Type: "thinking", Thinking: canon.Strp(p.Text), Signature: canon.Strp(sig)}, true
	case canon.PartRedactedThinking:
		return Block{Type: "redacted_thinking", Data: p.Data}, true
	}
	return Block{}, false
}

// ---- response ----

type betaResponse struct {
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Role         string       `json:"role"`
	Model        string       `json:"model"`
	Content      []Block      `json:"content"`
	StopReason   *string      `json:"stop_reason"`
	StopSequence *string      `json:"stop_sequence"`
	Usage        *usageIn     `json:"usage"`
	ServiceTier  jsonkit.Name `json:"service_tier"`
}

func betaFinishIn(s string) canon.Finish {
	switch s {
	case "end_turn", "pause_turn":
		return canon.FinishStop
	case "stop_sequence":
		return canon.FinishStopSequence
	case "max_tokens", "model_context_window_exceeded":
		return canon.FinishLength
	case "tool_use":
		return canon.FinishToolCalls
	case "refusal":
		return canon.FinishContentFilter
	case "":
		return canon.FinishNone
	}
	return canon.FinishStop
}

func betaFinishOut(f canon.Finish) string {
	switch f {
	case canon.FinishStopSequence:
		return "stop_sequence"
	case canon.FinishLength:
		return "max_tokens"
	case canon.FinishToolCalls:
		return "tool_use"
	case canon.FinishContentFilter:
		return "refusal"
	}
	return "end_turn"
}

func (Messages) DecodeResponse(body []byte, st *canon.State) (*canon.Response, error) {
	body = jsonkit.OwnedCopy(body)
	var in betaResponse
	if err := jsonkit.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode message: %w", err)
	}
	r := &canon.Response{ID: in.ID, Model: in.Model, Usage: in.Usage.canonical()}
	if in.Usage != nil {
		r.ServiceTier = in.Usage.ServiceTier.S
	}
	var bill Billing
	bill.message(&in)
	if u, found := bill.Usage(); found {
		r.Billed = &u
	}
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			r.Parts = append(r.Parts, canon.Part{Type: canon.PartText, Text: b.Text})
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			r.Parts = append(r.Parts, canon.Part{Type: canon.PartToolCall, CallID: b.ID, Name: b.Name, Args: jsonkit.CompactJSON(args)})
		case "thinking":
			p := canon.Part{Type: canon.PartThinking}
			if b.Thinking != nil {
				p.Text = *b.Thinking
			}
			if b.Signature != nil {
				p.Signature = canon.TagSig(vocab.KindBeta, *b.Signature)
			}
			r.Parts = append(r.Parts, p)
		case "redacted_thinking":
			r.Parts = append(r.Parts, canon.Part{Type: canon.PartRedactedThinking, Data: b.Data})
		}
	}
	if in.StopReason != nil {
		r.Finish = betaFinishIn(*in.StopReason)
	}
	if in.StopSequence != nil {
		r.StopSequence = *in.StopSequence
	}
	return r, nil
}

type betaResponseOut struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Role         string     `json:"role"`
	Model        string     `json:"model"`
	Content      []Block    `json:"content"`
	StopReason   *string    `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        *betaUsage `json:"usage"`
}

// betaOutBlocks renders response parts as beta content blocks (tool ids synthesised when absent).
func betaOutBlocks(parts []canon.Part, st *canon.State) []Block {
	out := make([]Block, 0, len(parts))
	n := 0
	for _, p := range parts {
		switch p.Type {
		case canon.PartThinking:
			out = append(out, Block{Type: "thinking", Thinking: canon.Strp(p.Text), Signature: canon.Strp(st.SigToClient(p.Signature))})
			continue
		case canon.PartToolCall:
			if p.CallID == "" {
				p.CallID = fmt.Sprintf("toolu_%s_%d", st.RespSuffix(), n)
			}
			n++
		case canon.PartImage, canon.PartFile:
			continue // beta responses carry no image blocks
		}
		if b, ok := betaBlockOut(p); ok {
			out = append(out, b)
		}
	}
	return out
}

func (Messages) EncodeResponse(r *canon.Response, st *canon.State) ([]byte, error) {
	f := r.Finish
	if f == canon.FinishStop && canon.HasToolCall(r.Parts) {
		f = canon.FinishToolCalls
	}
	if f == canon.FinishStop && r.StopSequence != "" {
		f = canon.FinishStopSequence
	}
	out := betaResponseOut{ID: canon.ClientID("msg_", r.ID, st), Type: "message", Role: "assistant", Model: r.Model,
		Content: betaOutBlocks(r.Parts, st), StopReason: canon.Strp(betaFinishOut(f)), Usage: toBetaUsage(r.Usage)}
	if f == canon.FinishStopSequence && r.StopSequence != "" {
		out.StopSequence = canon.Strp(r.StopSequence)
	}
	if r.Refusal != "" {
		out.Content = append(out.Content, Block{Type: "text", Text: r.Refusal})
	}
	return jsonkit.Marshal(out)
}

// FieldName names the messages members other dialects may refuse.
func (Messages) FieldName(f canon.Field) string {
	switch f {
	case canon.FieldStop:
		return "stop_sequences"
	case canon.FieldFormat:
		return "output_config.format"
	case canon.FieldToolResult:
		return "messages.content.tool_use_id"
	}
	return ""
}

// CheckDestination: beta has no schema-less JSON mode.
func (Messages) CheckDestination(r *canon.Request, st *canon.State) error {
	if r.Format != nil && r.Format.Type == "json_object" {
		return canon.Refuse(st.ClientField(canon.FieldFormat), "the destination supports JSON output only with a schema (json_schema)")
	}
	return nil
}
