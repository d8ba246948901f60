package mockupstream

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/shared/vocab"
)

type betaRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Messages  []any  `json:"messages"`
	Tools     []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
	} `json:"tool_choice"`
	Stream      bool   `json:"stream"`
	ServiceTier string `json:"service_tier"`
	Speed       string `json:"speed"`
	Thinking    *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
}

type betaCacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

type betaOutputDetails struct {
	ThinkingTokens int `json:"thinking_tokens"`
}

type betaUsage struct {
	InputTokens              *int               `json:"input_tokens,omitempty"`
	CacheCreationInputTokens *int               `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int               `json:"cache_read_input_tokens,omitempty"`
	CacheCreation            *betaCacheCreation `json:"cache_creation,omitempty"`
	OutputTokens             int                `json:"output_tokens"`
	OutputDetails            *betaOutputDetails `json:"output_tokens_details,omitempty"`
	ServiceTier              string             `json:"service_tier,omitempty"`
	Speed                    string             `json:"speed,omitempty"`
}

// betaUsage builds usage with output tokens out. inputSide adds the input fields (always on message_start
// and the final body; on message_delta only in the full variants, as current API versions do).
func (x *exchange) betaUsage(p *plan, out int, inputSide bool, tier, speed string) *betaUsage {
	u := &betaUsage{OutputTokens: out}
	if inputSide {
		in := max(p.prompt-p.cacheRead-p.cacheWrite, 0)
		u.InputTokens = &in
		if x.ctl.usage != "aggregate" {
			cw, cr := p.cacheWrite, p.cacheRead
			u.CacheCreationInputTokens, u.CacheReadInputTokens = &cw, &cr
			u.CacheCreation = &betaCacheCreation{Ephemeral5m: cw}
		}
	}
	if x.ctl.usage != "aggregate" && p.reasoningN > 0 && out == p.output {
		u.OutputDetails = &betaOutputDetails{ThinkingTokens: p.reasoningN}
	}
	u.ServiceTier, u.Speed = tier, speed
	return u
}

// betaBill is the bill of what u reports (message_start's usage).
func betaBill(u *betaUsage) Bill {
	b := Bill{Output: int64(u.OutputTokens)}
	if u.InputTokens != nil {
		b.Input = int64(*u.InputTokens)
	}
	if u.CacheReadInputTokens != nil {
		b.CacheRead = int64(*u.CacheReadInputTokens)
	}
	if c := u.CacheCreation; c != nil {
		b.Cache5m, b.Cache1h = int64(c.Ephemeral5m), int64(c.Ephemeral1h)
	}
	return b
}

type betaMessage struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Role         string     `json:"role"`
	Model        string     `json:"model"`
	Content      []any      `json:"content"`
	StopReason   *string    `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        *betaUsage `json:"usage,omitempty"`
}

type betaDeltaEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta fields `json:"delta"`
}

func (x *exchange) betaMessages() {
	var req betaRequest
	if !x.decode(&req) {
		return
	}
	x.model, x.kind = req.Model, vocab.KindBetaMessages
	switch {
	case req.Model == "":
		x.fail(http.StatusBadRequest, "model: Field required")
		return
	case req.MaxTokens <= 0:
		x.fail(http.StatusBadRequest, "max_tokens: Field required")
		return
	case len(req.Messages) == 0:
		x.fail(http.StatusBadRequest, "messages: at least one message is required")
		return
	}
	tools := make([]toolDef, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, toolDef{name: t.Name, params: t.InputSchema})
	}
	forced := req.ToolChoice != nil && (req.ToolChoice.Type == "any" || req.ToolChoice.Type == "tool")
	thinking := req.Thinking != nil && (req.Thinking.Type == "enabled" || req.Thinking.Type == "adaptive")
	p := x.planFor(req.MaxTokens, tools, forced, thinking)
	stop := "end_turn"
	switch {
	case p.toolName != "":
		stop = "tool_use"
	case p.truncated:
		stop = "max_tokens"
	}
	tier := x.betaTier(req.ServiceTier)
	x.billPlan(EndpointMessages, tier, p)
	speed := ""
	if strings.EqualFold(req.Speed, "fast") {
		speed = "fast"
	}
	id, toolID := x.id("msg_"), x.id("toolu_")
	signature := base64.StdEncoding.EncodeToString([]byte(x.id("sig_")))
	x.w.Header().Set("request-id", x.requestID())
	if !req.Stream {
		var content []any
		if p.reasoning != nil {
			content = append(content, map[string]any{"type": "thinking", "thinking": p.thinkingText(),
				"signature": signature})
		}
		if p.toolName != "" {
			content = append(content, map[string]any{"type": "tool_use", "id": toolID, "name": p.toolName,
				"input": p.argsObject()})
		} else {
			content = append(content, map[string]any{"type": "text", "text": p.text()})
		}
		msg := betaMessage{ID: id, Type: "message", Role: "assistant", Model: req.Model, Content: content,
			StopReason: &stop}
		if x.ctl.usage != "none" {
			msg.Usage = x.betaUsage(p, p.output, true, tier, speed)
			x.bedrockTokenHeaders(msg.Usage)
		}
		x.writeJSON(msg)
		return
	}
	mode := framingNamed
	if x.cloud == ProviderBedrock {
		mode = framingEventStream
	}
	st := x.startStream(mode, func(int) (string, any) {
		return "error", betaError{Type: "error", Error: betaErrorBody{Type: "overloaded_error", Message: "Overloaded"}}
	})
	st.wrap = mode == framingEventStream // InvokeModelWithResponseStream: each event in a "chunk"
	start := betaMessage{ID: id, Type: "message", Role: "assistant", Model: req.Model, Content: []any{}}
	if x.ctl.usage != "none" {
		start.Usage = x.betaUsage(p, 1, true, tier, speed)
	}
	if st.event("message_start", fields{"type", "message_start", "message", start}) != nil {
		return
	}
	if u := start.Usage; u != nil {
		x.reportUsage(EndpointMessages, tier, betaBill(u))
	}
	idx := 0
	pinged := false
	block := func(cb fields, deltas []fields) error {
		if err := st.event("content_block_start", fields{"type", "content_block_start", "index", idx,
			"content_block", cb}); err != nil {
			return err
		}
		if !pinged {
			pinged = true
			if err := st.event("ping", fields{"type", "ping"}); err != nil {
				return err
			}
		}
		for _, d := range deltas {
			if err := st.event("content_block_delta", betaDeltaEvent{Type: "content_block_delta", Index: idx,
				Delta: d}); err != nil {
				return err
			}
		}
		err := st.event("content_block_stop", fields{"type", "content_block_stop", "index", idx})
		idx++
		return err
	}
	if p.reasoning != nil {
		deltas := make([]fields, 0, len(p.reasoning)+1)
		for _, w := range p.reasoning {
			deltas = append(deltas, fields{"type", "thinking_delta", "thinking", w})
		}
		deltas = append(deltas, fields{"type", "signature_delta", "signature", signature})
		if block(fields{"type", "thinking", "thinking", "", "signature", ""}, deltas) != nil {
			return
		}
	}
	if p.toolName != "" {
		deltas := []fields{{"type", "input_json_delta", "partial_json", ""}}
		for _, frag := range splitFragments(p.toolArgs, 3) {
			deltas = append(deltas, fields{"type", "input_json_delta", "partial_json", frag})
		}
		if block(fields{"type", "tool_use", "id", toolID, "name", p.toolName, "input", fields{}},
			deltas) != nil {
			return
		}
	} else {
		deltas := make([]fields, len(p.words))
		for i, w := range p.words {
			deltas[i] = fields{"type", "text_delta", "text", w}
		}
		if block(fields{"type", "text", "text", ""}, deltas) != nil {
			return
		}
	}
	md := fields{"type", "message_delta", "delta", fields{"stop_reason", stop, "stop_sequence", nil}}
	if x.ctl.usage != "none" {
		md = append(md, "usage", x.betaUsage(p, p.output, x.ctl.usage != "aggregate", "", ""))
	}
	if st.event("message_delta", md) != nil {
		return
	}
	if x.ctl.usage != "none" {
		x.reportUsage(EndpointMessages, tier, planBill(EndpointMessages, p))
	}
	stopEv := fields{"type", "message_stop"}
	if x.cloud == ProviderBedrock && x.ctl.usage != "none" {
		// Bedrock's last chunk carries the invocation's token counts (uncached input, as the headers).
		u := x.betaUsage(p, p.output, true, "", "")
		stopEv = append(stopEv, "amazon-bedrock-invocationMetrics", fields{"inputTokenCount", *u.InputTokens,
			"outputTokenCount", u.OutputTokens, "invocationLatency", 1, "firstByteLatency", 1})
	}
	if st.event("message_stop", stopEv) != nil {
		return
	}
	st.end()
}

func (x *exchange) betaCountTokens() {
	var req struct {
		Model    string `json:"model"`
		Messages []any  `json:"messages"`
	}
	if !x.decode(&req) {
		return
	}
	x.model = req.Model
	if req.Model == "" || len(req.Messages) == 0 {
		x.fail(http.StatusBadRequest, "model and messages are required")
		return
	}
	x.writeJSON(map[string]int{"input_tokens": max(tokensOf(len(x.body)), 1)})
}

type betaModel struct {
	Type           string `json:"type"`
	ID             string `json:"id"`
	DisplayName    string `json:"display_name"`
	CreatedAt      string `json:"created_at"`
	MaxInputTokens int    `json:"max_input_tokens"`
	MaxTokens      int    `json:"max_tokens"`
}

func (x *exchange) betaModel(id string) betaModel {
	name := id
	if name != "" {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	return betaModel{Type: "model", ID: id, DisplayName: name,
		CreatedAt: time.Unix(x.s.created, 0).UTC().Format(time.RFC3339), MaxInputTokens: 200000, MaxTokens: 64000}
}

func (x *exchange) betaModels(id string) {
	if id != "" {
		x.model = id
		x.writeJSON(x.betaModel(id))
		return
	}
	data := make([]betaModel, len(x.s.models))
	for i, m := range x.s.models {
		data[i] = x.betaModel(m)
	}
	resp := map[string]any{"data": data, "has_more": false, "first_id": nil, "last_id": nil}
	if len(data) > 0 {
		resp["first_id"], resp["last_id"] = data[0].ID, data[len(data)-1].ID
	}
	x.writeJSON(resp)
}
