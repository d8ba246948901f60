package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/shared/vocab"
)

// betaMsgs is the beta messages codec: /v1/messages requests, answers and stream events.
type betaMsgs struct{}

type betaBlock struct {
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

type betaRequestIn struct {
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

	blocks []betaBlock // storage of the messages' content blocks (betaContent.blocks), pooled
}

type betaMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	pre     betaContent     // Content as the one pass over the body read it
}

// betaContent is a message's content as read in the one pass over the body: its text when it is a string,
// else its blocks, and the first error reading them — reported when the message is converted, where the
// content was decoded when a first pass kept it raw (so refusals come in the same order).
type betaContent struct {
	read   bool // else the content is decoded from Content (absent content)
	isText bool
	text   string
	blocks []betaBlock
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

type betaToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type betaToolChoiceIn struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

func (c betaMsgs) decodeRequest(body []byte, st *reqState) (*request, error) {
	return c.decodeInto(body, st, nil)
}

func (betaMsgs) decodeInto(body []byte, st *reqState, store *reqStore) (*request, error) {
	body = st.own(body)
	in := betaRequestIn{Messages: betaMessagesScratch.get(), blocks: betaBlocksScratch.get()}
	defer func() { betaMessagesScratch.put(in.Messages); betaBlocksScratch.put(in.blocks) }()
	d := jr{b: body}
	if err := d.done(in.read(&d)); err != nil {
		return nil, badRequest("body", fmt.Errorf("invalid messages request: %w", err))
	}
	if len(in.MCPServers) > 0 && string(in.MCPServers) != "null" {
		return nil, refuse("mcp_servers", "MCP servers cannot be translated")
	}
	if len(in.Container) > 0 && string(in.Container) != "null" {
		return nil, refuse("container", "containers cannot be translated")
	}
	r := &request{Model: in.Model, MaxTokens: in.MaxTokens, Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK,
		Stop: in.StopSequences, Stream: in.Stream, ServiceTier: in.ServiceTier, IncludeUsage: true}
	if in.Metadata != nil {
		r.User = in.Metadata.UserID
	}
	if len(in.System) > 0 && string(in.System) != "null" {
		var s string
		if stringOf(in.System, &s) {
			r.System = []string{s}
		} else {
			var blocks []betaBlock
			d := jr{b: in.System}
			if err := d.done(readBetaBlocks(&d, &blocks)); err != nil {
				return nil, badRequest("system", err)
			}
			for _, b := range blocks {
				r.System = append(r.System, b.Text)
			}
		}
	}
	if t := in.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			r.Reasoning = &reasoning{Budget: t.BudgetTokens, IncludeThoughts: true}
		case "adaptive":
			r.Reasoning = &reasoning{Adaptive: true, IncludeThoughts: true}
		case "disabled":
			r.Reasoning = &reasoning{Disabled: true}
		}
	}
	if oc := in.OutputConfig; oc != nil {
		if oc.Effort != "" {
			if r.Reasoning == nil {
				r.Reasoning = &reasoning{}
			}
			r.Reasoning.Effort = oc.Effort
		}
		if oc.Format != nil && oc.Format.Type == "json_schema" {
			r.Format = &responseFormat{Type: "json_schema", Schema: oc.Format.Schema}
		}
	}
	for i, raw := range in.Tools {
		var t betaToolIn
		d := jr{b: raw}
		if err := d.done(t.read(&d)); err != nil || (t.Type != "" && t.Type != "custom") {
			return nil, refuse(fmt.Sprintf("tools[%d]", i), "server tools (type %q) cannot be translated", t.Type)
		}
		r.Tools = append(r.Tools, tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		var tc betaToolChoiceIn
		d := jr{b: in.ToolChoice}
		if err := d.done(tc.read(&d)); err != nil {
			return nil, badRequest("tool_choice", err)
		}
		switch tc.Type {
		case "auto", "none":
			r.ToolChoice = &toolChoice{Mode: tc.Type}
		case "any":
			r.ToolChoice = &toolChoice{Mode: "required"}
		case "tool":
			r.ToolChoice = &toolChoice{Mode: "tool", Name: tc.Name}
		default:
			return nil, refuse("tool_choice", "unknown tool_choice type %q", tc.Type)
		}
		if tc.DisableParallelToolUse {
			f := false
			r.ParallelToolCalls = &f
		}
	}
	s := store.take(len(in.Messages))
	r.Messages = s.msgs
	a := &betaArena{parts: s.parts, results: s.results}
	for i, m := range in.Messages {
		field := pathOf("messages", i).with(".content", -1)
		role := m.Role
		if role != "user" && role != "assistant" {
			return nil, refuse(fmt.Sprintf("messages[%d].role", i), "role %q cannot be translated", role)
		}
		var parts []part
		var err error
		switch c := &m.pre; {
		case !c.read:
			parts, err = betaContentParts(m.Content, field, a, &a.parts)
		case c.err != nil:
			err = badRequest(field.String(), c.err)
		case c.isText:
			a.parts = append(a.parts, part{Type: partText, Text: c.text})
			parts = a.parts[len(a.parts)-1 : len(a.parts) : len(a.parts)]
		default:
			parts, err = betaBlockParts(c.blocks, field, a, &a.parts)
		}
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, message{Role: role, Parts: parts})
	}
	s.keep(r.Messages, a.parts, a.results)
	return r, nil
}

// betaArena is the backing storage of a request's parts: message parts, tool result parts and the scratch
// the content blocks of one message are decoded into.
type betaArena struct {
	parts, results []part
	blocks         []betaBlock
}

// betaContentParts converts message content (string or blocks) into parts appended to *dst and returns
// them (capacity clipped, so a later append copies). Tool result contents go to a.results; a result inside
// a result (invalid, but parsed) gets storage of its own.
func betaContentParts(raw json.RawMessage, field fieldPath, a *betaArena, dst *[]part) ([]part, error) {
	if dst == nil {
		dst = new([]part)
	}
	start := len(*dst)
	var s string
	if validStringOf(raw, &s) {
		*dst = append(*dst, part{Type: partText, Text: s})
		return (*dst)[start:len(*dst):len(*dst)], nil
	}
	blocks := &a.blocks
	if dst != &a.parts {
		blocks = new([]betaBlock) // a.blocks is being read by the caller
	}
	d := jr{b: raw}
	if err := d.done(readBetaBlocks(&d, blocks)); err != nil {
		return nil, badRequest(field.String(), err)
	}
	return betaBlockParts(*blocks, field, a, dst)
}

// betaBlockParts appends the parts of a message's or tool result's content blocks to *dst (see
// betaContentParts) and returns them.
func betaBlockParts(blocks []betaBlock, field fieldPath, a *betaArena, dst *[]part) ([]part, error) {
	start := len(*dst)
	out := *dst
	for j, b := range blocks {
		f := field.with("", j)
		switch b.Type {
		case "text":
			out = append(out, part{Type: partText, Text: b.Text})
		case "image", "document":
			p, err := betaSourcePart(b, f.String())
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		case "tool_use":
			in := b.Input
			if len(in) == 0 {
				in = json.RawMessage("{}")
			}
			out = append(out, part{Type: partToolCall, CallID: b.ID, Name: b.Name, Args: compactValid(in)})
		case "tool_result":
			p := part{Type: partToolResult, CallID: b.ToolUseID, IsError: b.IsError}
			if len(b.Content) > 0 && string(b.Content) != "null" {
				results := &a.results
				if dst != &a.parts {
					results = nil
				}
				rp, err := betaContentParts(b.Content, f.with(".content", -1), a, results)
				if err != nil {
					return nil, err
				}
				p.ResultParts = rp
			}
			out = append(out, p)
		case "thinking":
			p := part{Type: partThinking}
			if b.Thinking != nil {
				p.Text = *b.Thinking
			}
			if b.Signature != nil {
				p.Signature = *b.Signature
			}
			out = append(out, p)
		case "redacted_thinking":
			out = append(out, part{Type: partRedactedThinking, Data: b.Data})
		default:
			return nil, refuse(f.String(), "content block type %q cannot be translated", b.Type)
		}
	}
	*dst = out
	return out[start:len(out):len(out)], nil
}

func betaSourcePart(b betaBlock, f string) (part, error) {
	if b.Source == nil {
		return part{}, refuse(f, "%s block without source", b.Type)
	}
	t := partImage
	if b.Type == "document" {
		t = partFile
	}
	switch b.Source.Type {
	case "base64":
		return part{Type: t, Data: b.Source.Data}.withExtra(partExtra{MediaType: b.Source.MediaType, FileName: b.Title}), nil
	case "url":
		return part{Type: t}.withExtra(partExtra{URL: b.Source.URL, MediaType: b.Source.MediaType}), nil
	}
	return part{}, refuse(f+".source", "source type %q cannot be translated", b.Source.Type)
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

func (betaMsgs) encodeRequest(r *request, model string, stream bool, st *reqState) (*UpstreamRequest, error) {
	maxTokens := st.opts.BetaMaxTokens
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
			budget = effortBudget(rs.Effort)
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

	w := &jw{b: make([]byte, 0, requestSizeHint(r))}
	w.open('{')
	w.key("model")
	w.str(model)
	if len(r.System) == 1 {
		w.key("system")
		w.str(r.System[0])
	} else if len(r.System) > 1 {
		w.key("system")
		w.open('[')
		for _, s := range r.System {
			w.open('{')
			w.key("type")
			w.str("text")
			if s != "" {
				w.key("text")
				w.str(s)
			}
			w.close('}')
		}
		w.close(']')
	}
	w.key("messages")
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
		turn := len(w.b)
		w.open('{')
		w.key("role")
		w.str(role)
		w.key("content")
		w.open('[')
		for _, m := range r.Messages[i:j] {
			for pi := range m.Parts {
				p := &m.Parts[pi]
				betaBlockWrite(w, p)
			}
		}
		if w.b[len(w.b)-1] == '[' { // no block: the turn is left out
			w.b = w.b[:turn]
		} else {
			w.close(']')
			w.close('}')
		}
		i = j
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
			w.key("name")
			w.str(t.Name)
			if t.Description != "" {
				w.key("description")
				w.str(t.Description)
			}
			w.key("input_schema")
			if schema := t.Parameters; len(schema) == 0 || string(schema) == "null" {
				w.raw(json.RawMessage(`{"type":"object","properties":{}}`))
			} else {
				w.raw(schema)
			}
			w.close('}')
		}
		w.close(']')
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
		w.key("tool_choice")
		w.open('{')
		if noParallel && choice != "none" {
			w.key("disable_parallel_tool_use")
			w.bool(true)
		}
		if choice == "tool" {
			w.key("name")
			w.str(r.ToolChoice.Name)
		}
		w.key("type")
		w.str(choice)
		w.close('}')
	}
	w.key("max_tokens")
	w.int(int64(maxTokens))
	if temperature != nil {
		w.key("temperature")
		w.float(*temperature)
	}
	w.optFloat("top_p", r.TopP)
	if topK != nil {
		w.key("top_k")
		w.int(int64(*topK))
	}
	w.strList("stop_sequences", r.Stop)
	if thinking != "" {
		w.key("thinking")
		w.open('{')
		if thinking == "enabled" {
			w.key("budget_tokens")
			w.int(int64(budget))
		}
		w.key("type")
		w.str(thinking)
		w.close('}')
	}
	if f := r.Format; f != nil && f.Type == "json_schema" {
		w.key("output_config")
		w.open('{')
		w.key("format")
		w.open('{')
		w.key("schema")
		w.raw(f.Schema)
		w.key("type")
		w.str("json_schema")
		w.close('}')
		w.close('}')
	}
	if r.User != "" {
		w.key("metadata")
		w.open('{')
		w.key("user_id")
		w.str(r.User)
		w.close('}')
	}
	if t := betaTier(r.ServiceTier); t != "" {
		w.key("service_tier")
		w.str(t)
	}
	if stream {
		w.key("stream")
		w.bool(true)
	}
	w.close('}')
	h := jsonHeader()
	h.Set("anthropic-version", "2023-06-01")
	return &UpstreamRequest{Method: http.MethodPost, Path: "/v1/messages", Header: h, Body: w.b}, nil
}

// betaBlockWrite writes the request content block of a part as betaBlockOut builds it (field order of
// betaBlock); it reports false, writing nothing, for a part beta does not take.
func betaBlockWrite(w *jw, p *part) bool {
	switch p.Type {
	case partText:
		if p.Text == "" {
			return false // beta rejects empty text blocks
		}
		w.open('{')
		w.key("type")
		w.str("text")
		w.key("text")
		w.str(p.Text)
		w.close('}')
	case partImage, partFile:
		w.open('{')
		w.key("type")
		if p.Type == partFile {
			w.str("document")
		} else {
			w.str("image")
		}
		w.key("source")
		w.open('{')
		if p.get().URL != "" {
			w.key("type")
			w.str("url")
			w.key("url")
			w.str(p.get().URL)
		} else {
			w.key("type")
			w.str("base64")
			if p.get().MediaType != "" {
				w.key("media_type")
				w.str(p.get().MediaType)
			}
			if p.Data != "" {
				w.key("data")
				w.str(p.Data)
			}
		}
		w.close('}')
		w.close('}')
	case partToolCall:
		w.open('{')
		w.key("type")
		w.str("tool_use")
		if id := sanitizeID(p.CallID); id != "" {
			w.key("id")
			w.str(id)
		}
		if p.Name != "" {
			w.key("name")
			w.str(p.Name)
		}
		w.key("input")
		if len(p.Args) == 0 {
			w.raw(json.RawMessage("{}"))
		} else {
			w.raw(p.Args)
		}
		w.close('}')
	case partToolResult:
		w.open('{')
		w.key("type")
		w.str("tool_result")
		if id := sanitizeID(p.CallID); id != "" {
			w.key("tool_use_id")
			w.str(id)
		}
		w.key("content")
		allText := true
		for _, rp := range p.ResultParts {
			if rp.Type != partText {
				allText = false
			}
		}
		if allText {
			w.str(textOf(p.ResultParts))
		} else {
			at := len(w.b)
			w.open('[')
			for k := range p.ResultParts {
				betaBlockWrite(w, &p.ResultParts[k])
			}
			if w.b[len(w.b)-1] == '[' { // no block: encoding/json wrote the nil slice as null
				w.b = append(w.b[:at], "null"...)
			} else {
				w.close(']')
			}
		}
		if p.IsError {
			w.key("is_error")
			w.bool(true)
		}
		w.close('}')
	case partThinking:
		sig, ok := sigForUpstream(vocab.KindBeta, p.Signature)
		if !ok {
			return false // beta verifies signatures: reasoning from another family is dropped
		}
		w.open('{')
		w.key("type")
		w.str("thinking")
		w.key("thinking")
		w.str(p.Text)
		w.key("signature")
		w.str(sig)
		w.close('}')
	case partRedactedThinking:
		w.open('{')
		w.key("type")
		w.str("redacted_thinking")
		if p.Data != "" {
			w.key("data")
			w.str(p.Data)
		}
		w.close('}')
	default:
		return false
	}
	return true
}

func strp(s string) *string { return &s }

func betaBlockOut(p part) (betaBlock, bool) {
	switch p.Type {
	case partText:
		if p.Text == "" {
			return betaBlock{}, false // beta rejects empty text blocks
		}
		return betaBlock{Type: "text", Text: p.Text}, true
	case partImage, partFile:
		typ := "image"
		if p.Type == partFile {
			typ = "document"
		}
		if p.get().URL != "" {
			return betaBlock{Type: typ, Source: &betaSource{Type: "url", URL: p.get().URL}}, true
		}
		return betaBlock{Type: typ, Source: &betaSource{Type: "base64", MediaType: p.get().MediaType, Data: p.Data}}, true
	case partToolCall:
		args := p.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		return betaBlock{Type: "tool_use", ID: sanitizeID(p.CallID), Name: p.Name, Input: args}, true
	case partToolResult:
		b := betaBlock{Type: "tool_result", ToolUseID: sanitizeID(p.CallID), IsError: p.IsError}
		allText := true
		for _, rp := range p.ResultParts {
			if rp.Type != partText {
				allText = false
			}
		}
		if allText {
			b.Content = mustMarshal(textOf(p.ResultParts))
		} else {
			var blocks []betaBlock
			for _, rp := range p.ResultParts {
				if bb, ok := betaBlockOut(rp); ok {
					blocks = append(blocks, bb)
				}
			}
			b.Content = mustMarshal(blocks)
		}
		return b, true
	case partThinking:
		sig, ok := sigForUpstream(vocab.KindBeta, p.Signature)
		if !ok {
			return betaBlock{}, false // beta verifies signatures: reasoning from another family is dropped
		}
		return betaBlock{Type: "thinking", Thinking: strp(p.Text), Signature: strp(sig)}, true
	case partRedactedThinking:
		return betaBlock{Type: "redacted_thinking", Data: p.Data}, true
	}
	return betaBlock{}, false
}

// ---- response ----

type betaResponse struct {
	ID           string      `json:"id"`
	Type         string      `json:"type"`
	Role         string      `json:"role"`
	Model        string      `json:"model"`
	Content      []betaBlock `json:"content"`
	StopReason   *string     `json:"stop_reason"`
	StopSequence *string     `json:"stop_sequence"`
	Usage        *betaUsage  `json:"usage"`
}

func betaFinishIn(s string) finish {
	switch s {
	case "end_turn", "pause_turn":
		return finishStop
	case "stop_sequence":
		return finishStopSequence
	case "max_tokens", "model_context_window_exceeded":
		return finishLength
	case "tool_use":
		return finishToolCalls
	case "refusal":
		return finishContentFilter
	case "":
		return finishNone
	}
	return finishStop
}

func betaFinishOut(f finish) string {
	switch f {
	case finishStopSequence:
		return "stop_sequence"
	case finishLength:
		return "max_tokens"
	case finishToolCalls:
		return "tool_use"
	case finishContentFilter:
		return "refusal"
	}
	return "end_turn"
}

func (betaMsgs) decodeResponse(body []byte, st *reqState) (*response, error) {
	body = ownedCopy(body)
	var in betaResponse
	if err := unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode message: %w", err)
	}
	r := &response{ID: in.ID, Model: in.Model, Usage: in.Usage.canonical()}
	if in.Usage != nil {
		r.ServiceTier = in.Usage.ServiceTier
	}
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			r.Parts = append(r.Parts, part{Type: partText, Text: b.Text})
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			r.Parts = append(r.Parts, part{Type: partToolCall, CallID: b.ID, Name: b.Name, Args: compactJSON(args)})
		case "thinking":
			p := part{Type: partThinking}
			if b.Thinking != nil {
				p.Text = *b.Thinking
			}
			if b.Signature != nil {
				p.Signature = tagSig(vocab.KindBeta, *b.Signature)
			}
			r.Parts = append(r.Parts, p)
		case "redacted_thinking":
			r.Parts = append(r.Parts, part{Type: partRedactedThinking, Data: b.Data})
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
	ID           string      `json:"id"`
	Type         string      `json:"type"`
	Role         string      `json:"role"`
	Model        string      `json:"model"`
	Content      []betaBlock `json:"content"`
	StopReason   *string     `json:"stop_reason"`
	StopSequence *string     `json:"stop_sequence"`
	Usage        *betaUsage  `json:"usage"`
}

// betaOutBlocks renders response parts as beta content blocks (tool ids synthesised when absent).
func betaOutBlocks(parts []part, st *reqState) []betaBlock {
	out := make([]betaBlock, 0, len(parts))
	n := 0
	for _, p := range parts {
		switch p.Type {
		case partThinking:
			out = append(out, betaBlock{Type: "thinking", Thinking: strp(p.Text), Signature: strp(st.sigToClient(p.Signature))})
			continue
		case partToolCall:
			if p.CallID == "" {
				p.CallID = fmt.Sprintf("toolu_%s_%d", st.respSuffix(), n)
			}
			n++
		case partImage, partFile:
			continue // beta responses carry no image blocks
		}
		if b, ok := betaBlockOut(p); ok {
			out = append(out, b)
		}
	}
	return out
}

func (betaMsgs) encodeResponse(r *response, st *reqState) ([]byte, error) {
	f := r.Finish
	if f == finishStop && hasToolCall(r.Parts) {
		f = finishToolCalls
	}
	if f == finishStop && r.StopSequence != "" {
		f = finishStopSequence
	}
	out := betaResponseOut{ID: clientID("msg_", r.ID, st), Type: "message", Role: "assistant", Model: r.Model,
		Content: betaOutBlocks(r.Parts, st), StopReason: strp(betaFinishOut(f)), Usage: toBetaUsage(r.Usage)}
	if f == finishStopSequence && r.StopSequence != "" {
		out.StopSequence = strp(r.StopSequence)
	}
	if r.Refusal != "" {
		out.Content = append(out.Content, betaBlock{Type: "text", Text: r.Refusal})
	}
	return marshal(out)
}

func hasToolCall(parts []part) bool {
	for _, p := range parts {
		if p.Type == partToolCall {
			return true
		}
	}
	return false
}
