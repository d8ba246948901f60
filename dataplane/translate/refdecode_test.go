package translate

// The request decoders as they were before the hand-written readers (git 22ed226), decoding with the
// go-json-experiment decoder (unmarshal): the reference of FuzzRequestDecodersAgree. Generated from that
// commit's dialect files with the helpers renamed ref*; not edited by hand.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

func refChatDecodeRequest(body []byte, st *reqState) (*request, error) {
	body = ownedCopy(body)
	var in chatRequestIn
	if err := unmarshal(body, &in); err != nil {
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
	if r.Stop, err = refStopList(in.Stop); err != nil {
		return nil, badRequest("stop", err)
	}
	if in.ReasoningEffort != "" {
		if in.ReasoningEffort == "none" {
			r.Reasoning = &reasoning{Disabled: true}
		} else {
			r.Reasoning = &reasoning{Effort: in.ReasoningEffort}
		}
	}
	if r.Format, err = refChatFormat(in.ResponseFormat); err != nil {
		return nil, err
	}
	for i, raw := range in.Tools {
		var t struct {
			Type     string `json:"type"`
			Function tool   `json:"function"`
		}
		if err := unmarshal(raw, &t); err != nil || t.Type != "function" {
			return nil, refuse(fmt.Sprintf("tools[%d]", i), "only function tools can be translated")
		}
		r.Tools = append(r.Tools, t.Function)
	}
	if r.ToolChoice, err = refChatToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	r.Messages = make([]message, 0, len(in.Messages))
	a := &chatArena{parts: make([]part, 0, len(in.Messages)+len(in.Messages)/2+4)}
	for i, m := range in.Messages {
		if err := refChatMessageToIR(r, i, m, a); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func refChatFormat(raw json.RawMessage) (*responseFormat, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := unmarshal(raw, &f); err != nil {
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

func refChatToolChoice(raw json.RawMessage) (*toolChoice, error) {
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
	var o struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := unmarshal(raw, &o); err != nil || o.Type != "function" {
		return nil, refuse("tool_choice", "only function tool choices can be translated")
	}
	name := o.Function.Name
	if name == "" {
		name = o.Name
	}
	return &toolChoice{Mode: "tool", Name: name}, nil
}

func refChatContentParts(raw json.RawMessage, field fieldPath, dst []part) ([]part, error) {
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
	var arr []struct {
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
	if err := unmarshal(raw, &arr); err != nil {
		return nil, badRequest(field.String(), err)
	}
	out := dst
	for j, p := range arr {
		f := field.with("", j)
		switch p.Type {
		case "text":
			out = append(out, part{Type: partText, Text: p.Text})
		case "refusal":
			out = append(out, part{Type: partText, Text: p.Refusal})
		case "image_url":
			out = append(out, imagePart(p.ImageURL.URL, p.ImageURL.Detail))
		case "file":
			if p.File.FileData == "" {
				return nil, refuse(f.String(), "file references by id cannot be translated; send file_data")
			}
			mime, data, ok := dataURL(p.File.FileData)
			if !ok {
				mime, data = "application/pdf", p.File.FileData
			}
			out = append(out, part{Type: partFile, Data: data}.withExtra(partExtra{MediaType: mime, FileName: p.File.Filename}))
		default:
			return nil, refuse(f.String(), "content part type %q cannot be translated", p.Type)
		}
	}
	return out, nil
}

func refChatMessageToIR(r *request, i int, m chatMessageIn, a *chatArena) error {
	field := pathOf("messages", i).with(".content", -1)
	switch m.Role {
	case "system", "developer":
		t, ok := refRawText(m.Content)
		if !ok {
			return refuse(field.String(), "system content must be text")
		}
		r.System = append(r.System, t)
	case "user":
		start := len(a.parts)
		parts, err := refChatContentParts(m.Content, field, a.parts)
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
		parts, err := refChatContentParts(m.Content, field, a.parts)
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
		t, ok := refRawText(m.Content)
		if !ok {
			return refuse(field.String(), "tool content must be text")
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

func refRespDecodeRequest(body []byte, st *reqState) (*request, error) {
	body = ownedCopy(body)
	var in respRequestIn
	if err := unmarshal(body, &in); err != nil {
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
		t, ok := refRawText(in.Instructions)
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
		var t struct {
			Type string `json:"type"`
			tool
		}
		if err := unmarshal(raw, &t); err != nil || t.Type != "function" {
			return nil, refuse(fmt.Sprintf("tools[%d]", i), "only function tools can be translated (got %q)", t.Type)
		}
		r.Tools = append(r.Tools, t.tool)
	}
	var err error
	if r.ToolChoice, err = refChatToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	if err := refRespInputToIR(r, in.Input); err != nil {
		return nil, err
	}
	return r, nil
}

func refRespInputToIR(r *request, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if stringOf(raw, &s) {
		r.Messages = append(r.Messages, message{Role: "user", Parts: []part{{Type: partText, Text: s}}})
		return nil
	}
	var items []respItem
	if err := unmarshal(raw, &items); err != nil {
		return badRequest("input", err)
	}
	r.Messages = make([]message, 0, len(items))
	a := &respArena{parts: make([]part, 0, len(items)+4)}
	for i, it := range items {
		f := pathOf("input", i)
		switch it.Type {
		case "message", "":
			switch it.Role {
			case "system", "developer":
				t, ok := refRespText(it.Content)
				if !ok {
					return refuse(f.String()+".content", "system content must be text")
				}
				r.System = append(r.System, t)
			case "user", "assistant":
				if it.Role == "assistant" {
					parts, err := refRespContentParts(it.Content, f.with(".content", -1), a.tmp[:0], &a.content)
					if err != nil {
						return err
					}
					a.tmp = parts
					for _, p := range parts {
						a.appendPart(r, "assistant", p)
					}
				} else {
					start := len(a.parts)
					parts, err := refRespContentParts(it.Content, f.with(".content", -1), a.parts, &a.content)
					if err != nil {
						return err
					}
					a.parts = parts
					r.Messages = append(r.Messages, message{Role: "user", Parts: clipped(a.parts, start)})
				}
			default:
				return refuse(f.String()+".role", "role %q cannot be translated", it.Role)
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
			if stringOf(it.Output, &out) {
				a.results = append(a.results, part{Type: partText, Text: out})
			} else {
				rp, err := refRespContentParts(it.Output, f.with(".output", -1), a.results, &a.content)
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
			var sum []struct {
				Text string `json:"text"`
			}
			_ = unmarshal(it.Summary, &sum)
			var b strings.Builder
			for j, s := range sum {
				if j > 0 {
					b.WriteString("\n\n")
				}
				b.WriteString(s.Text)
			}
			a.appendPart(r, "assistant", part{Type: partThinking, Text: b.String(), Signature: it.EncryptedContent}.withExtra(partExtra{ItemID: it.ID}))
		default:
			return refuse(f.String()+".type", "input item type %q cannot be translated", it.Type)
		}
	}
	return nil
}

func refRespText(raw json.RawMessage) (string, bool) {
	return refRawText(raw)
}

func refRespContentParts(raw json.RawMessage, field fieldPath, dst []part, scratch *[]respContentPart) ([]part, error) {
	var s string
	if stringOf(raw, &s) {
		return append(dst, part{Type: partText, Text: s}), nil
	}
	if scratch == nil {
		scratch = new([]respContentPart)
	}
	*scratch = (*scratch)[:0]
	if err := unmarshal(raw, scratch); err != nil {
		return nil, badRequest(field.String(), err)
	}
	arr := *scratch
	out := dst
	for j, p := range arr {
		f := field.with("", j)
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, part{Type: partText, Text: p.Text})
		case "refusal":
			out = append(out, part{Type: partText, Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				return nil, refuse(f.String(), "images by file_id cannot be translated; send image_url")
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
				return nil, refuse(f.String(), "files by file_id cannot be translated; send file_data")
			}
		default:
			return nil, refuse(f.String(), "content part type %q cannot be translated", p.Type)
		}
	}
	return out, nil
}

func refBetaDecodeRequest(body []byte, st *reqState) (*request, error) {
	body = ownedCopy(body)
	var in betaRequestIn
	if err := unmarshal(body, &in); err != nil {
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
			if err := unmarshal(in.System, &blocks); err != nil {
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
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := unmarshal(raw, &t); err != nil || (t.Type != "" && t.Type != "custom") {
			return nil, refuse(fmt.Sprintf("tools[%d]", i), "server tools (type %q) cannot be translated", t.Type)
		}
		r.Tools = append(r.Tools, tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		var tc struct {
			Type                   string `json:"type"`
			Name                   string `json:"name"`
			DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
		}
		if err := unmarshal(in.ToolChoice, &tc); err != nil {
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
	r.Messages = make([]message, 0, len(in.Messages))
	a := &betaArena{parts: make([]part, 0, 2*len(in.Messages)+4)}
	for i, m := range in.Messages {
		field := pathOf("messages", i).with(".content", -1)
		role := m.Role
		if role != "user" && role != "assistant" {
			return nil, refuse(fmt.Sprintf("messages[%d].role", i), "role %q cannot be translated", role)
		}
		parts, err := refBetaContentParts(m.Content, field, a, &a.parts)
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, message{Role: role, Parts: parts})
	}
	return r, nil
}

func refBetaContentParts(raw json.RawMessage, field fieldPath, a *betaArena, dst *[]part) ([]part, error) {
	if dst == nil {
		dst = new([]part)
	}
	start := len(*dst)
	var s string
	if stringOf(raw, &s) {
		*dst = append(*dst, part{Type: partText, Text: s})
		return (*dst)[start:len(*dst):len(*dst)], nil
	}
	blocks := &a.blocks
	if dst != &a.parts {
		blocks = new([]betaBlock) // a.blocks is being read by the caller
	}
	*blocks = (*blocks)[:0]
	if err := unmarshal(raw, blocks); err != nil {
		return nil, badRequest(field.String(), err)
	}
	out := *dst
	for j, b := range *blocks {
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
			out = append(out, part{Type: partToolCall, CallID: b.ID, Name: b.Name, Args: compactJSON(in)})
		case "tool_result":
			p := part{Type: partToolResult, CallID: b.ToolUseID, IsError: b.IsError}
			if len(b.Content) > 0 && string(b.Content) != "null" {
				results := &a.results
				if dst != &a.parts {
					results = nil
				}
				rp, err := refBetaContentParts(b.Content, f.with(".content", -1), a, results)
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

func refGammaDecodeRequest(body []byte, st *reqState) (*request, error) {
	body = ownedCopy(body)
	var in gammaRequestIn
	if err := unmarshal(body, &in); err != nil {
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
		var probe map[string]json.RawMessage
		if err := unmarshal(raw, &probe); err != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), err)
		}
		for k := range probe {
			if k != "functionDeclarations" && k != "function_declarations" {
				return nil, refuse(fmt.Sprintf("tools[%d].%s", i, k), "built-in tool %q cannot be translated", k)
			}
		}
		var t gammaTool
		_ = unmarshal(raw, &t)
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
	pending := map[string][]string{}
	sc := &gammaDecodeScratch{}
	r.Messages = make([]message, 0, len(in.Contents))
	arena := make([]part, 0, 2*len(in.Contents)+4) // every message's parts, from one backing array
	var results []part                             // and every tool result's
	for i, c := range in.Contents {
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		msg := message{Role: role}
		start := len(arena)
		k := 0
		sc.parts = sc.parts[:0]
		if err := unmarshal(c.Parts, &sc.parts); err != nil {
			return nil, badRequest(pathOf("contents", i).with(".parts", -1).String(), err)
		}
		for j, p := range sc.parts {
			f := pathOf("contents", i).with(".parts", j)
			var text string
			hasText := present(p.Text)
			if hasText && !stringOf(p.Text, &text) {
				return nil, badRequest(f.with(".text", -1).String(), errNotString)
			}
			var fc *gammaCall
			if present(p.FunctionCall) {
				fc = &gammaCall{}
				if err := unmarshal(p.FunctionCall, fc); err != nil {
					return nil, badRequest(f.with(".functionCall", -1).String(), err)
				}
			}
			var fr *gammaFuncResp
			if present(p.FunctionResponse) {
				fr = &gammaFuncResp{}
				if err := unmarshal(p.FunctionResponse, fr); err != nil {
					return nil, badRequest(f.with(".functionResponse", -1).String(), err)
				}
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
				pending[fc.Name] = append(pending[fc.Name], id)
				args := fc.Args
				if len(args) == 0 || string(args) == "null" {
					args = json.RawMessage("{}")
				}
				arena = append(arena, part{Type: partToolCall, CallID: id, Name: fc.Name, Args: compactJSON(args)})
			case fr != nil:
				id := fr.ID
				if q := pending[fr.Name]; len(q) > 0 {
					if id == "" {
						id = q[0]
					}
					for qi, v := range q {
						if v == id {
							pending[fr.Name] = append(q[:qi:qi], q[qi+1:]...)
							break
						}
					}
				}
				if id == "" {
					return nil, refuse(f.String()+".functionResponse.id", "function response %q matches no earlier function call", fr.Name)
				}
				arena = append(arena, refGammaResultPart(id, fr.Response, &results))
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
				return nil, refuse(f.String(), "code execution parts cannot be translated")
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
	return r, nil
}

func refGammaResultPart(id string, resp json.RawMessage, results *[]part) part {
	p := part{Type: partToolResult, CallID: id}
	// {"output": v} or {"error": v} alone carries v; any other object is the result as it is
	var m struct {
		Error  json.RawMessage `json:"error,case:strict"`
		Output json.RawMessage `json:"output,case:strict"`
		Other  jsontext.Value  `json:",unknown"`
	}
	text := compactText(resp)
	if unmarshal(resp, &m) == nil && len(m.Other) == 0 {
		if m.Error != nil && m.Output == nil {
			p.IsError = true
			text = refJsonValueText(m.Error)
		} else if m.Output != nil && m.Error == nil {
			text = refJsonValueText(m.Output)
		}
	}
	*results = append(*results, part{Type: partText, Text: text})
	p.ResultParts = clipped(*results, len(*results)-1)
	return p
}

func refJsonValueText(r json.RawMessage) string {
	var s string
	if stringOf(r, &s) {
		return s
	}
	return compactText(r)
}

func refRawText(r json.RawMessage) (string, bool) {
	if len(r) == 0 || string(r) == "null" {
		return "", true
	}
	var s string
	if stringOf(r, &s) {
		return s, true
	}
	var arr []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if unmarshal(r, &arr) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range arr {
		b.WriteString(p.Text)
	}
	return b.String(), true
}

func refStopList(r json.RawMessage) ([]string, error) {
	if len(r) == 0 || string(r) == "null" {
		return nil, nil
	}
	var s string
	if stringOf(r, &s) {
		return []string{s}, nil
	}
	var arr []string
	if err := unmarshal(r, &arr); err != nil {
		return nil, fmt.Errorf("stop: %w", err)
	}
	return arr, nil
}
