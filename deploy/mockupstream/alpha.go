package mockupstream

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/shared/vocab"
)

// --- chat completions ---

type alphaChatRequest struct {
	Model    string `json:"model"`
	Messages []any  `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	MaxTokens           int    `json:"max_tokens"`
	ServiceTier         string `json:"service_tier"`
	ReasoningEffort     string `json:"reasoning_effort"`
}

type chatPromptDetails struct {
	CachedTokens     int `json:"cached_tokens"`
	AudioTokens      int `json:"audio_tokens"`
	ImageTokens      int `json:"image_tokens,omitempty"`
	TextTokens       int `json:"text_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

type chatCompletionDetails struct {
	ReasoningTokens          int `json:"reasoning_tokens"`
	AudioTokens              int `json:"audio_tokens"`
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
}

type chatUsage struct {
	PromptTokens      int                    `json:"prompt_tokens"`
	CompletionTokens  int                    `json:"completion_tokens"`
	TotalTokens       int                    `json:"total_tokens"`
	PromptDetails     *chatPromptDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionDetails *chatCompletionDetails `json:"completion_tokens_details,omitempty"`
}

func (x *exchange) chatUsage(p *plan) *chatUsage {
	if x.ctl.usage == "none" {
		return nil
	}
	u := &chatUsage{PromptTokens: p.prompt, CompletionTokens: p.output, TotalTokens: p.prompt + p.output}
	if x.ctl.usage == "aggregate" {
		return u
	}
	u.PromptDetails = &chatPromptDetails{CachedTokens: p.cacheRead, CacheWriteTokens: p.cacheWrite}
	if p.imageIn > 0 {
		u.PromptDetails.ImageTokens = p.imageIn
		u.PromptDetails.TextTokens = p.prompt - p.imageIn
	}
	u.CompletionDetails = &chatCompletionDetails{ReasoningTokens: p.reasoningN}
	return u
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     any         `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
	// ContentFilterResults is Azure's per-choice content-filter verdict (azure.go).
	ContentFilterResults any `json:"content_filter_results,omitempty"`
}

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *chatUsage   `json:"usage,omitempty"`
	// PromptFilterResults is Azure's content-filter verdict on the prompt (azure.go).
	PromptFilterResults any `json:"prompt_filter_results,omitempty"`
}

type chatDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatChunkChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     any       `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	ServiceTier       string            `json:"service_tier"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []chatChunkChoice `json:"choices"`
	Usage             any               `json:"usage,omitempty"`
}

var jsonNull = json.RawMessage("null")

func (x *exchange) alphaChat() {
	var req alphaChatRequest
	if !x.decode(&req) {
		return
	}
	x.model, x.kind = req.Model, vocab.KindAlphaChatCompletions
	if req.Model == "" {
		x.fail(http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	if len(req.Messages) == 0 {
		x.fail(http.StatusBadRequest, "'messages' must contain at least one message")
		return
	}
	tools := make([]toolDef, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, toolDef{name: t.Function.Name, params: t.Function.Parameters})
	}
	maxTok := req.MaxCompletionTokens
	if maxTok == 0 {
		maxTok = req.MaxTokens
	}
	p := x.planFor(maxTok, tools, forcedAlpha(req.ToolChoice), reasoningOn(req.ReasoningEffort))
	finish := "stop"
	switch {
	case p.toolName != "":
		finish = "tool_calls"
	case p.truncated:
		finish = "length"
	}
	tier := x.alphaTier(req.ServiceTier)
	x.billPlan(EndpointCompletions, tier, p)
	id := x.id("chatcmpl-")
	callID := x.id("call_")
	if !req.Stream {
		msg := chatMessage{Role: "assistant"}
		if p.toolName != "" {
			msg.ToolCalls = []chatToolCall{{ID: callID, Type: "function",
				Function: chatFunction{Name: p.toolName, Arguments: p.toolArgs}}}
		} else {
			t := p.text()
			msg.Content = &t
		}
		cc := chatCompletion{ID: id, Object: "chat.completion", Created: x.s.created, Model: req.Model,
			ServiceTier: tier, SystemFingerprint: "fp_mock", Usage: x.chatUsage(p),
			Choices: []chatChoice{{Message: msg, FinishReason: finish}}}
		if x.cloud == ProviderAzure {
			cc.PromptFilterResults = azurePromptFilterResults()
			cc.Choices[0].ContentFilterResults = azureFilterVerdict()
		}
		x.writeJSON(cc)
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	st := x.startStream(framingData, func(int) (string, any) {
		return "", alphaError{Error: alphaErrorBody(http.StatusInternalServerError, "mock mid-stream error")}
	})
	if x.cloud == ProviderAzure && st.event("", azurePromptFilterChunk()) != nil {
		return
	}
	chunk := chatChunk{ID: id, Object: "chat.completion.chunk", Created: x.s.created, Model: req.Model,
		ServiceTier: tier, SystemFingerprint: "fp_mock", Choices: make([]chatChunkChoice, 1)}
	if includeUsage {
		chunk.Usage = jsonNull
	}
	send := func(d chatDelta, fr *string) error {
		chunk.Choices[0] = chatChunkChoice{Delta: d, FinishReason: fr}
		return st.event("", chunk)
	}
	if p.toolName != "" {
		zero := 0
		if send(chatDelta{Role: "assistant", ToolCalls: []chatToolCall{{Index: &zero, ID: callID, Type: "function",
			Function: chatFunction{Name: p.toolName}}}}, nil) != nil {
			return
		}
		for _, frag := range splitFragments(p.toolArgs, 3) {
			if send(chatDelta{ToolCalls: []chatToolCall{{Index: &zero, Function: chatFunction{Arguments: frag}}}},
				nil) != nil {
				return
			}
			x.wroteText(frag)
		}
	} else {
		empty := ""
		if send(chatDelta{Role: "assistant", Content: &empty}, nil) != nil {
			return
		}
		for _, w := range p.words {
			if send(chatDelta{Content: &w}, nil) != nil {
				return
			}
			x.wroteText(w)
		}
	}
	if send(chatDelta{}, &finish) != nil {
		return
	}
	if includeUsage {
		if u := x.chatUsage(p); u != nil {
			chunk.Choices = []chatChunkChoice{}
			chunk.Usage = u
			if st.event("", chunk) != nil {
				return
			}
			x.reportUsage(EndpointCompletions, tier, planBill(EndpointCompletions, p))
		}
	}
	if st.raw("data: [DONE]\n\n") != nil {
		return
	}
	st.end()
}

func forcedAlpha(choice json.RawMessage) bool {
	var mode string
	var named map[string]json.RawMessage // {"type": "function", "function": {"name": ...}}
	return json.Unmarshal(choice, &mode) == nil && mode == "required" ||
		json.Unmarshal(choice, &named) == nil && named != nil
}

func reasoningOn(effort string) bool {
	return effort != "" && effort != "none"
}

// --- responses ---

type alphaResponsesRequest struct {
	Model        string          `json:"model"`
	Input        json.RawMessage `json:"input"`
	Instructions json.RawMessage `json:"instructions"`
	Tools        []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Stream             bool            `json:"stream"`
	PreviousResponseID string          `json:"previous_response_id"`
	MaxOutputTokens    int             `json:"max_output_tokens"`
	ServiceTier        string          `json:"service_tier"`
	Reasoning          *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
}

type respInputDetails struct {
	CachedTokens     int `json:"cached_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

type respOutputDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

type respUsage struct {
	InputTokens   int                `json:"input_tokens"`
	InputDetails  *respInputDetails  `json:"input_tokens_details,omitempty"`
	OutputTokens  int                `json:"output_tokens"`
	OutputDetails *respOutputDetails `json:"output_tokens_details,omitempty"`
	TotalTokens   int                `json:"total_tokens"`
}

func (x *exchange) respUsage(p *plan) *respUsage {
	if x.ctl.usage == "none" {
		return nil
	}
	u := &respUsage{InputTokens: p.prompt, OutputTokens: p.output, TotalTokens: p.prompt + p.output}
	if x.ctl.usage != "aggregate" {
		u.InputDetails = &respInputDetails{CachedTokens: p.cacheRead, CacheWriteTokens: p.cacheWrite}
		u.OutputDetails = &respOutputDetails{ReasoningTokens: p.reasoningN}
	}
	return u
}

type respContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type respItem struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	Status    string  `json:"status,omitempty"`
	Role      string  `json:"role,omitempty"`
	Content   any     `json:"content,omitempty"` // []respContent; any so an empty list is kept
	Summary   any     `json:"summary,omitempty"` // []any; any so an empty list is kept
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

type respObject struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	CreatedAt         int64  `json:"created_at"`
	Status            string `json:"status"`
	Model             string `json:"model"`
	ServiceTier       string `json:"service_tier"`
	Error             any    `json:"error"`
	IncompleteDetails any    `json:"incomplete_details"`
	// PreviousResponseID echoes the request's (a stored response of this server).
	PreviousResponseID *string    `json:"previous_response_id"`
	Output             []respItem `json:"output"`
	Usage              *respUsage `json:"usage"`
}

type respTextDelta struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Delta          string `json:"delta"`
	Logprobs       []any  `json:"logprobs"`
}

type respArgsDelta struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Delta          string `json:"delta"`
}

func (x *exchange) alphaResponses() {
	var req alphaResponsesRequest
	if !x.decode(&req) {
		return
	}
	x.model, x.kind = req.Model, vocab.KindAlphaResponses
	if req.Model == "" {
		x.fail(http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	tools := make([]toolDef, 0, len(req.Tools))
	for _, t := range req.Tools {
		if t.Type == "function" || t.Type == "" {
			tools = append(tools, toolDef{name: t.Name, params: t.Parameters})
		}
	}
	if req.PreviousResponseID != "" {
		if _, ok := x.s.storedResponse(req.PreviousResponseID); !ok {
			x.fail(http.StatusNotFound, fmt.Sprintf("Previous response with id '%s' not found.", req.PreviousResponseID))
			return
		}
	}
	p := x.planFor(req.MaxOutputTokens, tools, forcedAlpha(req.ToolChoice),
		req.Reasoning != nil && reasoningOn(req.Reasoning.Effort))
	resp := respObject{ID: x.id("resp_"), Object: "response", CreatedAt: x.s.created, Status: "completed",
		Model: req.Model, ServiceTier: x.alphaTier(req.ServiceTier), Output: []respItem{}}
	x.billPlan(EndpointCompletions, resp.ServiceTier, p)
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	var items []respItem
	if p.reasoning != nil {
		items = append(items, respItem{Type: "reasoning", ID: x.id("rs_"), Summary: []any{}})
	}
	msgID, fcID := x.id("msg_"), x.id("fc_")
	if p.toolName != "" {
		args := p.toolArgs
		items = append(items, respItem{Type: "function_call", ID: fcID, Status: "completed", CallID: x.id("call_"),
			Name: p.toolName, Arguments: &args})
	} else {
		items = append(items, respItem{Type: "message", ID: msgID, Status: "completed", Role: "assistant",
			Content: []respContent{{Type: "output_text", Text: p.text(), Annotations: []any{}}}})
	}
	final := resp
	final.Output = items
	final.Usage = x.respUsage(p)
	defer x.s.storeResponse(final)
	terminal := "response.completed"
	if p.truncated {
		final.Status = "incomplete"
		final.IncompleteDetails = map[string]string{"reason": "max_output_tokens"}
		terminal = "response.incomplete"
		items[len(items)-1].Status = "incomplete"
	}
	if !req.Stream {
		x.writeJSON(final)
		return
	}
	st := x.startStream(framingNamed, func(seq int) (string, any) {
		return "error", fields{"type", "error", "code", "server_error",
			"message", "mock mid-stream error", "param", nil, "sequence_number", seq}
	})
	ev := func(typ string, kv ...any) error {
		return st.event(typ, append(fields{"type", typ, "sequence_number", st.seq}, kv...))
	}
	resp.Status = "in_progress"
	if ev("response.created", "response", resp) != nil ||
		ev("response.in_progress", "response", resp) != nil {
		return
	}
	for idx, item := range items {
		done := item
		added := item
		added.Status = "in_progress"
		switch item.Type {
		case "reasoning":
			added.Status = ""
		case "message":
			added.Content = []respContent{}
		case "function_call":
			empty := ""
			added.Arguments = &empty
		}
		if ev("response.output_item.added", "output_index", idx, "item", added) != nil {
			return
		}
		switch item.Type {
		case "message":
			part := respContent{Type: "output_text", Text: "", Annotations: []any{}}
			if ev("response.content_part.added", "item_id", item.ID, "output_index", idx,
				"content_index", 0, "part", part) != nil {
				return
			}
			for _, w := range p.words {
				if st.event("response.output_text.delta", respTextDelta{Type: "response.output_text.delta",
					SequenceNumber: st.seq, ItemID: item.ID, OutputIndex: idx, Delta: w, Logprobs: []any{}}) != nil {
					return
				}
			}
			part.Text = p.text()
			if ev("response.output_text.done", "item_id", item.ID, "output_index", idx,
				"content_index", 0, "text", part.Text, "logprobs", []any{}) != nil ||
				ev("response.content_part.done", "item_id", item.ID, "output_index", idx,
					"content_index", 0, "part", part) != nil {
				return
			}
		case "function_call":
			for _, frag := range splitFragments(p.toolArgs, 3) {
				if st.event("response.function_call_arguments.delta", respArgsDelta{
					Type: "response.function_call_arguments.delta", SequenceNumber: st.seq, ItemID: item.ID,
					OutputIndex: idx, Delta: frag}) != nil {
					return
				}
			}
			if ev("response.function_call_arguments.done", "item_id", item.ID, "output_index", idx,
				"name", p.toolName, "arguments", p.toolArgs) != nil {
				return
			}
		}
		if ev("response.output_item.done", "output_index", idx, "item", done) != nil {
			return
		}
	}
	if ev(terminal, "response", final) != nil {
		return
	}
	st.end()
}

// --- stored responses ---

func (s *Server) storeResponse(r respObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.responses) >= maxStoredResponses {
		clear(s.responses) // a load test's responses are not kept forever
	}
	s.responses[r.ID] = r
}

// maxStoredResponses bounds the responses a mock server keeps.
const maxStoredResponses = 10000

func (s *Server) storedResponse(id string) (respObject, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.responses[id]
	return r, ok
}

// alphaStoredResponse serves GET/DELETE /v1/responses/{id}, POST …/cancel and GET …/input_items for the
// responses this server created.
func (x *exchange) alphaStoredResponse(rest string) {
	id, sub, _ := strings.Cut(rest, "/")
	r, ok := x.s.storedResponse(id)
	if !ok {
		x.fail(http.StatusNotFound, fmt.Sprintf("Response with id '%s' not found.", id))
		return
	}
	x.model = r.Model
	switch m := x.r.Method; {
	case sub == "" && m == http.MethodGet && x.r.URL.Query().Get("stream") == "true":
		// The stored response replayed as a stream (its created and terminal events).
		st := x.startStream(framingNamed, func(seq int) (string, any) {
			return "error", fields{"type", "error", "code", "server_error", "message", "mock mid-stream error", "sequence_number", seq}
		})
		if st.event("response.created", fields{"type", "response.created", "sequence_number", st.seq, "response", r}) != nil ||
			st.event("response.completed", fields{"type", "response.completed", "sequence_number", st.seq, "response", r}) != nil {
			return
		}
		st.end()
	case sub == "" && m == http.MethodGet:
		x.writeJSON(r)
	case sub == "" && m == http.MethodDelete:
		x.s.mu.Lock()
		delete(x.s.responses, id)
		x.s.mu.Unlock()
		x.writeJSON(map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	case sub == "cancel" && m == http.MethodPost:
		r.Status = "cancelled"
		x.writeJSON(r)
	case sub == "input_items" && m == http.MethodGet:
		x.writeJSON(map[string]any{"object": "list", "data": []any{}, "first_id": nil, "last_id": nil, "has_more": false})
	default:
		x.fail(http.StatusNotFound, "unknown responses route")
	}
}

// --- compact, input tokens ---

func (x *exchange) alphaCompact() {
	var req struct {
		Model       string          `json:"model"`
		Input       json.RawMessage `json:"input"`
		ServiceTier string          `json:"service_tier"`
	}
	if !x.decode(&req) {
		return
	}
	x.model = req.Model
	if req.Model == "" {
		x.fail(http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	output := []any{}
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		output = append(output, map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": text}}})
	} else {
		var items []map[string]any
		_ = json.Unmarshal(req.Input, &items)
		for _, it := range items {
			if it["role"] == "user" {
				output = append(output, it)
			}
		}
	}
	p := x.planFor(0, nil, false, false)
	output = append(output, map[string]any{"type": "compaction", "id": x.id("cmp_"),
		"encrypted_content": base64.StdEncoding.EncodeToString([]byte(p.text()))})
	x.writeJSON(map[string]any{"id": x.id("resp_"), "object": "response.compaction", "created_at": x.s.created,
		"output": output, "usage": x.respUsage(p)})
}

func (x *exchange) alphaInputTokens() {
	var req struct {
		Model string `json:"model"`
	}
	if !x.decode(&req) {
		return
	}
	x.model = req.Model
	x.writeJSON(map[string]any{"object": "response.input_tokens", "input_tokens": max(tokensOf(len(x.body)), 1)})
}

// --- conversations (stateless) ---

func (x *exchange) alphaConversations(rest string) {
	var body struct {
		Items    []json.RawMessage `json:"items"`
		Metadata map[string]any    `json:"metadata"`
	}
	if len(bytes.TrimSpace(x.body)) > 0 && json.Unmarshal(x.body, &body) != nil {
		x.fail(http.StatusBadRequest, "invalid JSON body")
		return
	}
	if body.Metadata == nil {
		body.Metadata = map[string]any{}
	}
	convID, sub, _ := strings.Cut(rest, "/")
	if convID == "" {
		convID = x.id("conv_")
	}
	m := x.r.Method
	list := func(items []json.RawMessage) {
		data := make([]map[string]any, 0, len(items))
		for i, raw := range items {
			var it map[string]any
			if json.Unmarshal(raw, &it) != nil || it == nil {
				it = map[string]any{}
			}
			if _, ok := it["id"]; !ok {
				it["id"] = fmt.Sprintf("msg_%016x%02d", x.hash, i)
			}
			data = append(data, it)
		}
		resp := map[string]any{"object": "list", "data": data, "has_more": false, "first_id": nil, "last_id": nil}
		if len(data) > 0 {
			resp["first_id"], resp["last_id"] = data[0]["id"], data[len(data)-1]["id"]
		}
		x.writeJSON(resp)
	}
	switch {
	case rest == "" && m == http.MethodPost, sub == "" && (m == http.MethodGet || m == http.MethodPost):
		x.writeJSON(map[string]any{"id": convID, "object": "conversation", "created_at": x.s.created,
			"metadata": body.Metadata})
	case sub == "" && m == http.MethodDelete:
		x.writeJSON(map[string]any{"id": convID, "object": "conversation.deleted", "deleted": true})
	case sub == "items" && m == http.MethodPost:
		list(body.Items)
	case sub == "items" && m == http.MethodGet:
		list(nil)
	case strings.HasPrefix(sub, "items/") && m == http.MethodGet:
		itemID := strings.TrimPrefix(sub, "items/")
		x.writeJSON(map[string]any{"type": "message", "id": itemID, "status": "completed", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": "hello"}}})
	case strings.HasPrefix(sub, "items/") && m == http.MethodDelete:
		x.writeJSON(map[string]any{"id": convID, "object": "conversation", "created_at": x.s.created,
			"metadata": map[string]any{}})
	default:
		x.fail(http.StatusNotFound, "unknown conversations route")
	}
}

// --- models ---

type alphaModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (x *exchange) alphaModels(id string) {
	if id != "" {
		x.model = id
		x.writeJSON(alphaModel{ID: id, Object: "model", Created: x.s.created, OwnedBy: "system"})
		return
	}
	data := make([]alphaModel, len(x.s.models))
	for i, m := range x.s.models {
		data[i] = alphaModel{ID: m, Object: "model", Created: x.s.created, OwnedBy: "system"}
	}
	x.writeJSON(map[string]any{"object": "list", "data": data})
}

// --- embeddings ---

// vector returns a deterministic unit-ish vector for the input.
func vector(input []byte, dims int) []float32 {
	h := fnv.New64a()
	_, _ = h.Write(input)
	seed := h.Sum64()
	v := make([]float32, dims)
	for i := range v {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		v[i] = float32(int64(seed%20001)-10000) / 10000
	}
	return v
}

func (x *exchange) alphaEmbeddings() {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if !x.decode(&req) {
		return
	}
	x.model = req.Model
	if req.Model == "" {
		x.fail(http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	// input: string | []string | []int | [][]int; each element becomes (bytes to hash, tokens).
	type in struct {
		key    []byte
		tokens int
	}
	var inputs []in
	var s string
	var ss []string
	var ints []int
	var intss [][]int
	switch {
	case json.Unmarshal(req.Input, &s) == nil:
		inputs = append(inputs, in{[]byte(s), max(tokensOf(len(s)), 1)})
	case json.Unmarshal(req.Input, &ss) == nil && len(ss) > 0:
		for _, e := range ss {
			inputs = append(inputs, in{[]byte(e), max(tokensOf(len(e)), 1)})
		}
	case json.Unmarshal(req.Input, &ints) == nil && len(ints) > 0:
		inputs = append(inputs, in{[]byte(fmt.Sprint(ints)), len(ints)})
	case json.Unmarshal(req.Input, &intss) == nil && len(intss) > 0:
		for _, e := range intss {
			inputs = append(inputs, in{[]byte(fmt.Sprint(e)), len(e)})
		}
	default:
		x.fail(http.StatusBadRequest, "'input' must be a string, an array of strings or token arrays")
		return
	}
	dims := req.Dimensions
	if dims <= 0 || dims > 8192 {
		dims = 16
	}
	b64 := req.EncodingFormat == "base64"
	data := make([]map[string]any, len(inputs))
	total := 0
	for i, e := range inputs {
		v := vector(e.key, dims)
		var emb any = v
		if b64 {
			buf := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(buf)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
		total += e.tokens
	}
	resp := map[string]any{"object": "list", "model": req.Model, "data": data}
	if x.ctl.usage != "none" {
		resp["usage"] = map[string]int{"prompt_tokens": total, "total_tokens": total}
	}
	x.billFor(EndpointEmbeddings, "", Bill{Input: int64(total)})
	x.writeJSON(resp)
}

// --- images ---

// tinyPNG is a 1x1 transparent PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

type imageRequest struct {
	Prompt         string `json:"prompt"`
	Model          string `json:"model"`
	N              int    `json:"n"`
	Size           string `json:"size"`
	Quality        string `json:"quality"`
	Background     string `json:"background"`
	OutputFormat   string `json:"output_format"`
	ResponseFormat string `json:"response_format"`
	Stream         bool   `json:"stream"`
	PartialImages  *int   `json:"partial_images"`
	images         int
}

func (x *exchange) parseImageEdit(req *imageRequest) error {
	_, params, err := mime.ParseMediaType(x.r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return fmt.Errorf("parse content type: expected multipart/form-data with a boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(x.body), params["boundary"])
	form, err := mr.ReadForm(32 << 20)
	if err != nil {
		return fmt.Errorf("read multipart form: %w", err)
	}
	defer func() { _ = form.RemoveAll() }()
	get := func(k string) string {
		if v := form.Value[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	req.Prompt, req.Model, req.Size, req.Quality = get("prompt"), get("model"), get("size"), get("quality")
	req.Background, req.OutputFormat, req.ResponseFormat = get("background"), get("output_format"),
		get("response_format")
	req.N, _ = strconv.Atoi(get("n"))
	req.Stream, _ = strconv.ParseBool(get("stream"))
	if v := get("partial_images"); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil {
			req.PartialImages = &n
		}
	}
	req.images = len(form.File["image"]) + len(form.File["image[]"])
	if req.images == 0 {
		return fmt.Errorf("read multipart form: 'image' is required")
	}
	return nil
}

type imageDetails struct {
	TextTokens  int `json:"text_tokens"`
	ImageTokens int `json:"image_tokens"`
}

type imageUsage struct {
	InputTokens   int           `json:"input_tokens"`
	InputDetails  *imageDetails `json:"input_tokens_details,omitempty"`
	OutputTokens  int           `json:"output_tokens"`
	OutputDetails *imageDetails `json:"output_tokens_details,omitempty"`
	TotalTokens   int           `json:"total_tokens"`
}

func (x *exchange) alphaImages(edit bool) {
	var req imageRequest
	if edit {
		if err := x.parseImageEdit(&req); err != nil {
			x.fail(http.StatusBadRequest, err.Error())
			return
		}
	} else if !x.decode(&req) {
		return
	}
	x.model = req.Model
	if req.Prompt == "" {
		x.fail(http.StatusBadRequest, "'prompt' is required")
		return
	}
	n := min(max(req.N, 1), 10)
	size := req.Size
	if size == "" || size == "auto" {
		size = "1024x1024"
	}
	quality := req.Quality
	perImage := 4160
	switch quality {
	case "low":
		perImage = 272
	case "medium":
		perImage = 1056
	default:
		quality = "high"
	}
	bg := req.Background
	if bg == "" || bg == "auto" {
		bg = "opaque"
	}
	format := req.OutputFormat
	if format == "" {
		format = "png"
	}
	textIn := max(tokensOf(len(req.Prompt)), 1)
	imageIn := 85 * req.images
	x.billFor(EndpointImages, "", Bill{Input: int64(textIn + imageIn), ImageOut: int64(perImage * n), Images: int64(n)})
	var usage *imageUsage
	if x.ctl.usage != "none" {
		usage = &imageUsage{InputTokens: textIn + imageIn, OutputTokens: perImage * n,
			TotalTokens: textIn + imageIn + perImage*n}
		if x.ctl.usage != "aggregate" {
			usage.InputDetails = &imageDetails{TextTokens: textIn, ImageTokens: imageIn}
			usage.OutputDetails = &imageDetails{ImageTokens: perImage * n}
		}
	}
	if !req.Stream {
		data := make([]map[string]any, n)
		for i := range data {
			if req.ResponseFormat == "url" {
				data[i] = map[string]any{"url": fmt.Sprintf("https://mock.invalid/images/%016x-%d.%s", x.hash, i,
					format), "revised_prompt": nil}
			} else {
				data[i] = map[string]any{"b64_json": tinyPNG, "revised_prompt": nil}
			}
		}
		resp := map[string]any{"created": x.s.created, "background": bg, "output_format": format,
			"quality": quality, "size": size, "data": data}
		if usage != nil {
			resp["usage"] = usage
		}
		x.writeJSON(resp)
		return
	}
	prefix := "image_generation."
	if edit {
		prefix = "image_edit."
	}
	partials := 1
	if req.PartialImages != nil {
		partials = min(max(*req.PartialImages, 0), 3)
	}
	st := x.startStream(framingNamed, func(int) (string, any) {
		return "error", fields{"type", "error",
			"error", alphaErrorBody(http.StatusInternalServerError, "mock mid-stream error")}
	})
	base := func(typ string) fields {
		return fields{"type", typ, "b64_json", tinyPNG, "created_at", x.s.created, "background", bg,
			"output_format", format, "quality", quality, "size", size}
	}
	for i := range partials {
		if st.event(prefix+"partial_image", append(base(prefix+"partial_image"), "partial_image_index", i)) != nil {
			return
		}
	}
	ev := base(prefix + "completed")
	if usage != nil {
		ev = append(ev, "usage", usage)
	}
	if st.event(prefix+"completed", ev) != nil {
		return
	}
	st.end()
}

// --- rerank ---

func (x *exchange) alphaRerank(v2 bool) {
	var req struct {
		Model           string            `json:"model"`
		Query           string            `json:"query"`
		Documents       []json.RawMessage `json:"documents"`
		TopN            int               `json:"top_n"`
		ReturnDocuments bool              `json:"return_documents"`
	}
	if !x.decode(&req) {
		return
	}
	x.model = req.Model
	if req.Query == "" || len(req.Documents) == 0 {
		x.fail(http.StatusBadRequest, "'query' and 'documents' are required")
		return
	}
	type result struct {
		Index          int               `json:"index"`
		RelevanceScore float64           `json:"relevance_score"`
		Document       map[string]string `json:"document,omitempty"`
	}
	qWords := strings.Fields(strings.ToLower(req.Query))
	results := make([]result, len(req.Documents))
	tokens := 0
	for i, raw := range req.Documents {
		var text string
		if json.Unmarshal(raw, &text) != nil {
			var obj struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(raw, &obj)
			text = obj.Text
		}
		tokens += tokensOf(len(req.Query)) + tokensOf(len(text))
		lower := strings.ToLower(text)
		hits := 0
		for _, w := range qWords {
			if strings.Contains(lower, w) {
				hits++
			}
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(text))
		score := float64(hits)/float64(max(len(qWords), 1))*0.9 + float64(h.Sum32()%1000)/10000
		results[i] = result{Index: i, RelevanceScore: math.Round(score*10000) / 10000}
		if req.ReturnDocuments {
			results[i].Document = map[string]string{"text": text}
		}
	}
	sort.SliceStable(results, func(a, b int) bool { return results[a].RelevanceScore > results[b].RelevanceScore })
	if req.TopN > 0 && req.TopN < len(results) {
		results = results[:req.TopN]
	}
	resp := map[string]any{"id": x.id("rerank-"), "model": req.Model, "results": results}
	if x.ctl.usage != "none" {
		resp["usage"] = map[string]int{"total_tokens": max(tokens, 1)}
		if v2 {
			resp["meta"] = map[string]any{"billed_units": map[string]int{"search_units": 1}}
		}
	}
	x.writeJSON(resp)
}
