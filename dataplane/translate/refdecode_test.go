package translate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

func refChatDecodeRequest(body []byte, st *canon.State) (*canon.Request, error) {
	body = jsonkit.OwnedCopy(body)
	var in alpha.ChatRequestIn
	if err := jsonkit.Unmarshal(body, &in); err != nil {
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
	if r.Stop, err = refStopList(in.Stop); err != nil {
		return nil, canon.BadRequest("stop", err)
	}
	if in.ReasoningEffort != "" {
		if in.ReasoningEffort == "none" {
			r.Reasoning = &canon.Reasoning{Disabled: true}
		} else {
			r.Reasoning = &canon.Reasoning{Effort: in.ReasoningEffort}
		}
	}
	if r.Format, err = refChatFormat(in.ResponseFormat); err != nil {
		return nil, err
	}
	for i, raw := range in.Tools {
		var t struct {
			Type     string     `json:"type"`
			Function canon.Tool `json:"function"`
		}
		if err := jsonkit.Unmarshal(raw, &t); err != nil || t.Type != "function" {
			return nil, canon.Refuse(fmt.Sprintf("tools[%d]", i), "only function tools can be translated")
		}
		r.Tools = append(r.Tools, t.Function)
	}
	if r.ToolChoice, err = refChatToolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	r.Messages = make([]canon.Message, 0, len(in.Messages))
	a := &alpha.ChatArena{Parts: make([]canon.Part, 0, len(in.Messages)+len(in.Messages)/2+4)}
	for i, m := range in.Messages {
		if err := refChatMessageToIR(r, i, m, a); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func refChatFormat(raw json.RawMessage) (*canon.ResponseFormat, error) {
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
	if err := jsonkit.Unmarshal(raw, &f); err != nil {
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

func refChatToolChoice(raw json.RawMessage) (*canon.ToolChoice, error) {
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
	var o struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := jsonkit.Unmarshal(raw, &o); err != nil || o.Type != "function" {
		return nil, canon.Refuse("tool_choice", "only function tool choices can be translated")
	}
	name := o.Function.Name
	if name == "" {
		name = o.Name
	}
	return &canon.ToolChoice{Mode: "tool", Name: name}, nil
}

func refChatContentParts(raw json.RawMessage, field canon.FieldPath, dst []canon.Part) ([]canon.Part, error) {
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
	if err := jsonkit.Unmarshal(raw, &arr); err != nil {
		return nil, canon.BadRequest(field.String(), err)
	}
	out := dst
	for j, p := range arr {
		f := field.With("", j)
		switch p.Type {
		case "text":
			out = append(out, canon.Part{Type: canon.PartText, Text: p.Text})
		case "refusal":
			out = append(out, canon.Part{Type: canon.PartText, Text: p.Refusal})
		case "image_url":
			out = append(out, alpha.ImagePart(p.ImageURL.URL, p.ImageURL.Detail))
		case "file":
			if p.File.FileData == "" {
				return nil, canon.Refuse(f.String(), "file references by id cannot be translated; send file_data")
			}
			mime, data, ok := canon.DataURL(p.File.FileData)
			if !ok {
				mime, data = "application/pdf", p.File.FileData
			}
			out = append(out, canon.Part{Type: canon.PartFile, Data: data}.WithExtra(canon.PartExtra{MediaType: mime, FileName: p.File.Filename}))
		default:
			return nil, canon.Refuse(f.String(), "content part type %q cannot be translated", p.Type)
		}
	}
	return out, nil
}

func refChatMessageToIR(r *canon.Request, i int, m alpha.ChatMessageIn, a *alpha.ChatArena) error {
	field := canon.PathOf("messages", i).With(".content", -1)
	switch m.Role {
	case "system", "developer":
		t, ok := refRawText(m.Content)
		if !ok {
			return canon.Refuse(field.String(), "system content must be text")
		}
		r.System = append(r.System, t)
	case "user":
		start := len(a.Parts)
		parts, err := refChatContentParts(m.Content, field, a.Parts)
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
		parts, err := refChatContentParts(m.Content, field, a.Parts)
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
		t, ok := refRawText(m.Content)
		if !ok {
			return canon.Refuse(field.String(), "tool content must be text")
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

func refRespDecodeRequest(body []byte, st *canon.State) (*canon.Request, error) {
	body = jsonkit.OwnedCopy(body)
	var in alpha.RespRequestIn
	if err := jsonkit.Unmarshal(body, &in); err != nil {
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
		t, ok := refRawText(in.Instructions)
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
		var t struct {
			Type string `json:"type"`
			canon.Tool
		}
		if err := jsonkit.Unmarshal(raw, &t); err != nil || t.Type != "function" {
			return nil, canon.Refuse(fmt.Sprintf("tools[%d]", i), "only function tools can be translated (got %q)", t.Type)
		}
		r.Tools = append(r.Tools, t.Tool)
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

func refRespInputToIR(r *canon.Request, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if jsonkit.StringOf(raw, &s) {
		r.Messages = append(r.Messages, canon.Message{Role: "user", Parts: []canon.Part{{Type: canon.PartText, Text: s}}})
		return nil
	}
	var items []alpha.RespItem
	if err := jsonkit.Unmarshal(raw, &items); err != nil {
		return canon.BadRequest("input", err)
	}
	r.Messages = make([]canon.Message, 0, len(items))
	a := &alpha.RespArena{Parts: make([]canon.Part, 0, len(items)+4)}
	for i, it := range items {
		f := canon.PathOf("input", i)
		switch it.Type {
		case "message", "":
			switch it.Role {
			case "system", "developer":
				t, ok := refRespText(it.Content)
				if !ok {
					return canon.Refuse(f.String()+".content", "system content must be text")
				}
				r.System = append(r.System, t)
			case "user", "assistant":
				if it.Role == "assistant" {
					parts, err := refRespContentParts(it.Content, f.With(".content", -1), a.Tmp[:0], &a.ContentRead)
					if err != nil {
						return err
					}
					a.Tmp = parts
					for _, p := range parts {
						a.AppendPart(r, "assistant", p)
					}
				} else {
					start := len(a.Parts)
					parts, err := refRespContentParts(it.Content, f.With(".content", -1), a.Parts, &a.ContentRead)
					if err != nil {
						return err
					}
					a.Parts = parts
					r.Messages = append(r.Messages, canon.Message{Role: "user", Parts: canon.Clipped(a.Parts, start)})
				}
			default:
				return canon.Refuse(f.String()+".role", "role %q cannot be translated", it.Role)
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
			if jsonkit.StringOf(it.Output, &out) {
				a.Results = append(a.Results, canon.Part{Type: canon.PartText, Text: out})
			} else {
				rp, err := refRespContentParts(it.Output, f.With(".output", -1), a.Results, &a.ContentRead)
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
			var sum []struct {
				Text string `json:"text"`
			}
			_ = jsonkit.Unmarshal(it.Summary, &sum)
			var b strings.Builder
			for j, s := range sum {
				if j > 0 {
					b.WriteString("\n\n")
				}
				b.WriteString(s.Text)
			}
			a.AppendPart(r, "assistant", canon.Part{Type: canon.PartThinking, Text: b.String(), Signature: it.EncryptedContent}.WithExtra(canon.PartExtra{ItemID: it.ID}))
		default:
			return canon.Refuse(f.String()+".type", "input item type %q cannot be translated", it.Type)
		}
	}
	return nil
}

func refRespText(raw json.RawMessage) (string, bool) {
	return refRawText(raw)
}

func refRespContentParts(raw json.RawMessage, field canon.FieldPath, dst []canon.Part, scratch *[]alpha.RespContentPart) ([]canon.Part, error) {
	var s string
	if jsonkit.StringOf(raw, &s) {
		return append(dst, canon.Part{Type: canon.PartText, Text: s}), nil
	}
	if scratch == nil {
		scratch = new([]alpha.RespContentPart)
	}
	*scratch = (*scratch)[:0]
	if err := jsonkit.Unmarshal(raw, scratch); err != nil {
		return nil, canon.BadRequest(field.String(), err)
	}
	arr := *scratch
	out := dst
	for j, p := range arr {
		f := field.With("", j)
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, canon.Part{Type: canon.PartText, Text: p.Text})
		case "refusal":
			out = append(out, canon.Part{Type: canon.PartText, Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				return nil, canon.Refuse(f.String(), "images by file_id cannot be translated; send image_url")
			}
			out = append(out, alpha.ImagePart(p.ImageURL, p.Detail))
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
				return nil, canon.Refuse(f.String(), "files by file_id cannot be translated; send file_data")
			}
		default:
			return nil, canon.Refuse(f.String(), "content part type %q cannot be translated", p.Type)
		}
	}
	return out, nil
}

func refBetaDecodeRequest(body []byte, st *canon.State) (*canon.Request, error) {
	body = jsonkit.OwnedCopy(body)
	var in beta.RequestIn
	if err := jsonkit.Unmarshal(body, &in); err != nil {
		return nil, canon.BadRequest("body", fmt.Errorf("invalid messages request: %w", err))
	}
	if len(in.MCPServers) > 0 && string(in.MCPServers) != "null" {
		return nil, canon.Refuse("mcp_servers", "MCP servers cannot be translated")
	}
	if len(in.Container) > 0 && string(in.Container) != "null" {
		return nil, canon.Refuse("container", "containers cannot be translated")
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
			var blocks []beta.Block
			if err := jsonkit.Unmarshal(in.System, &blocks); err != nil {
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
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := jsonkit.Unmarshal(raw, &t); err != nil || (t.Type != "" && t.Type != "custom") {
			return nil, canon.Refuse(fmt.Sprintf("tools[%d]", i), "server tools (type %q) cannot be translated", t.Type)
		}
		r.Tools = append(r.Tools, canon.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		var tc struct {
			Type                   string `json:"type"`
			Name                   string `json:"name"`
			DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
		}
		if err := jsonkit.Unmarshal(in.ToolChoice, &tc); err != nil {
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
	r.Messages = make([]canon.Message, 0, len(in.Messages))
	a := &beta.Arena{Parts: make([]canon.Part, 0, 2*len(in.Messages)+4)}
	for i, m := range in.Messages {
		field := canon.PathOf("messages", i).With(".content", -1)
		role := m.Role
		if role != "user" && role != "assistant" {
			return nil, canon.Refuse(fmt.Sprintf("messages[%d].role", i), "role %q cannot be translated", role)
		}
		parts, err := refBetaContentParts(m.Content, field, a, &a.Parts)
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, canon.Message{Role: role, Parts: parts})
	}
	return r, nil
}

func refBetaContentParts(raw json.RawMessage, field canon.FieldPath, a *beta.Arena, dst *[]canon.Part) ([]canon.Part, error) {
	if dst == nil {
		dst = new([]canon.Part)
	}
	start := len(*dst)
	var s string
	if jsonkit.StringOf(raw, &s) {
		*dst = append(*dst, canon.Part{Type: canon.PartText, Text: s})
		return (*dst)[start:len(*dst):len(*dst)], nil
	}
	blocks := &a.Blocks
	if dst != &a.Parts {
		blocks = new([]beta.Block) // a.blocks is being read by the caller
	}
	*blocks = (*blocks)[:0]
	if err := jsonkit.Unmarshal(raw, blocks); err != nil {
		return nil, canon.BadRequest(field.String(), err)
	}
	out := *dst
	for j, b := range *blocks {
		f := field.With("", j)
		switch b.Type {
		case "text":
			out = append(out, canon.Part{Type: canon.PartText, Text: b.Text})
		case "image", "document":
			p, err := beta.SourcePart(b, f.String())
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		case "tool_use":
			in := b.Input
			if len(in) == 0 {
				in = json.RawMessage("{}")
			}
			out = append(out, canon.Part{Type: canon.PartToolCall, CallID: b.ID, Name: b.Name, Args: jsonkit.CompactJSON(in)})
		case "tool_result":
			p := canon.Part{Type: canon.PartToolResult, CallID: b.ToolUseID, IsError: b.IsError}
			if len(b.Content) > 0 && string(b.Content) != "null" {
				results := &a.Results
				if dst != &a.Parts {
					results = nil
				}
				rp, err := refBetaContentParts(b.Content, f.With(".content", -1), a, results)
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

func refGammaDecodeRequest(body []byte, st *canon.State) (*canon.Request, error) {
	body = jsonkit.OwnedCopy(body)
	var in gamma.RequestIn
	if err := jsonkit.Unmarshal(body, &in); err != nil {
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
				schema = gamma.LowerSchemaTypes(gc.ResponseSchema)
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
		var probe map[string]json.RawMessage
		if err := jsonkit.Unmarshal(raw, &probe); err != nil {
			return nil, canon.BadRequest(fmt.Sprintf("tools[%d]", i), err)
		}
		for k := range probe {
			if k != "functionDeclarations" && k != "function_declarations" {
				return nil, canon.Refuse(fmt.Sprintf("tools[%d].%s", i, k), "built-in tool %q cannot be translated", k)
			}
		}
		var t gamma.Tool
		_ = jsonkit.Unmarshal(raw, &t)
		for _, fd := range t.FunctionDeclarations {
			params := fd.ParametersJSONSchema
			if len(params) == 0 && len(fd.Parameters) > 0 {
				params = gamma.LowerSchemaTypes(fd.Parameters)
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
	pending := map[string][]string{}
	sc := &gamma.DecodeScratch{}
	r.Messages = make([]canon.Message, 0, len(in.Contents))
	arena := make([]canon.Part, 0, 2*len(in.Contents)+4) // every message's parts, from one backing array
	var results []canon.Part                             // and every tool result's
	for i, c := range in.Contents {
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		msg := canon.Message{Role: role}
		start := len(arena)
		k := 0
		sc.Parts = sc.Parts[:0]
		if err := jsonkit.Unmarshal(c.Parts, &sc.Parts); err != nil {
			return nil, canon.BadRequest(canon.PathOf("contents", i).With(".parts", -1).String(), err)
		}
		for j, p := range sc.Parts {
			f := canon.PathOf("contents", i).With(".parts", j)
			var text string
			hasText := gamma.Present(p.Text)
			if hasText && !jsonkit.StringOf(p.Text, &text) {
				return nil, canon.BadRequest(f.With(".text", -1).String(), jsonkit.ErrNotString)
			}
			var fc *gamma.Call
			if gamma.Present(p.FunctionCall) {
				fc = &gamma.Call{}
				if err := jsonkit.Unmarshal(p.FunctionCall, fc); err != nil {
					return nil, canon.BadRequest(f.With(".functionCall", -1).String(), err)
				}
			}
			var fr *gamma.FuncResp
			if gamma.Present(p.FunctionResponse) {
				fr = &gamma.FuncResp{}
				if err := jsonkit.Unmarshal(p.FunctionResponse, fr); err != nil {
					return nil, canon.BadRequest(f.With(".functionResponse", -1).String(), err)
				}
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
					id = unsafe.String(&sc.Ids[at], len(sc.Ids)-at) // sc.ids is only appended to
				}
				k++
				pending[fc.Name] = append(pending[fc.Name], id)
				args := fc.Args
				if len(args) == 0 || string(args) == "null" {
					args = json.RawMessage("{}")
				}
				arena = append(arena, canon.Part{Type: canon.PartToolCall, CallID: id, Name: fc.Name, Args: jsonkit.CompactJSON(args)})
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
					return nil, canon.Refuse(f.String()+".functionResponse.id", "function response %q matches no earlier function call", fr.Name)
				}
				arena = append(arena, refGammaResultPart(id, fr.Response, &results))
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
				return nil, canon.Refuse(f.String(), "code execution parts cannot be translated")
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
	return r, nil
}

func refGammaResultPart(id string, resp json.RawMessage, results *[]canon.Part) canon.Part {
	p := canon.Part{Type: canon.PartToolResult, CallID: id}
	// {"output": v} or {"error": v} alone carries v; any other object is the result as it is
	var m struct {
		Error  json.RawMessage `json:"error,case:strict"`
		Output json.RawMessage `json:"output,case:strict"`
		Other  jsontext.Value  `json:",unknown"`
	}
	text := jsonkit.CompactText(resp)
	if jsonkit.Unmarshal(resp, &m) == nil && len(m.Other) == 0 {
		if m.Error != nil && m.Output == nil {
			p.IsError = true
			text = refJsonValueText(m.Error)
		} else if m.Output != nil && m.Error == nil {
			text = refJsonValueText(m.Output)
		}
	}
	*results = append(*results, canon.Part{Type: canon.PartText, Text: text})
	p.ResultParts = canon.Clipped(*results, len(*results)-1)
	return p
}

func refJsonValueText(r json.RawMessage) string {
	var s string
	if jsonkit.StringOf(r, &s) {
		return s
	}
	return jsonkit.CompactText(r)
}

func refRawText(r json.RawMessage) (string, bool) {
	if len(r) == 0 || string(r) == "null" {
		return "", true
	}
	var s string
	if jsonkit.StringOf(r, &s) {
		return s, true
	}
	var arr []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if jsonkit.Unmarshal(r, &arr) != nil {
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
	if jsonkit.StringOf(r, &s) {
		return []string{s}, nil
	}
	var arr []string
	if err := jsonkit.Unmarshal(r, &arr); err != nil {
		return nil, fmt.Errorf("stop: %w", err)
	}
	return arr, nil
}
