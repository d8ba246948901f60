package mockupstream

import (
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/shared/vocab"
)

// EndpointConverse is Bedrock's Converse API (converse, converse-stream): its cache writes are 5-minute
// writes, as Bedrock's default prompt cache lives 5 minutes.
const EndpointConverse = "converse"

type converseRequest struct {
	Messages []struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	} `json:"messages"`
	InferenceConfig *struct {
		MaxTokens int `json:"maxTokens"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
		ToolChoice map[string]json.RawMessage `json:"toolChoice"`
	} `json:"toolConfig"`
	AdditionalModelRequestFields struct {
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
	} `json:"additionalModelRequestFields"`
	ServiceTier *struct {
		Type string `json:"type"`
	} `json:"serviceTier"`
}

// converseUsage is Converse's TokenUsage: inputTokens is the uncached input, totalTokens the sum of all four.
type converseUsage struct {
	InputTokens           int `json:"inputTokens"`
	OutputTokens          int `json:"outputTokens"`
	TotalTokens           int `json:"totalTokens"`
	CacheReadInputTokens  int `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens int `json:"cacheWriteInputTokens,omitempty"`
}

func converseUsageOf(p *plan) *converseUsage {
	u := &converseUsage{InputTokens: max(p.prompt-p.cacheRead-p.cacheWrite, 0), OutputTokens: p.output,
		CacheReadInputTokens: p.cacheRead, CacheWriteInputTokens: p.cacheWrite}
	u.TotalTokens = u.InputTokens + u.OutputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	return u
}

// bedrockConverse answers Converse and ConverseStream for the path's model.
func (x *exchange) bedrockConverse(stream bool) {
	var req converseRequest
	if !x.decode(&req) {
		return
	}
	x.kind = vocab.KindBetaMessages // a cut stream without usage is counted as the nearest dialect's prompt
	if len(req.Messages) == 0 {
		x.fail(http.StatusBadRequest, "A conversation must start with a user message. Try again with a conversation that starts with a user message.")
		return
	}
	var tools []toolDef
	forced := false
	if tc := req.ToolConfig; tc != nil {
		for _, t := range tc.Tools {
			if t.ToolSpec != nil {
				tools = append(tools, toolDef{name: t.ToolSpec.Name, params: t.ToolSpec.InputSchema.JSON})
			}
		}
		_, anyTool := tc.ToolChoice["any"]
		_, oneTool := tc.ToolChoice["tool"]
		forced = anyTool || oneTool
	}
	maxTokens := 0
	if req.InferenceConfig != nil {
		maxTokens = req.InferenceConfig.MaxTokens
	}
	th := req.AdditionalModelRequestFields.Thinking
	p := x.planFor(maxTokens, tools, forced, th != nil && (th.Type == "enabled" || th.Type == "adaptive"))
	stop := "end_turn"
	switch {
	case p.toolName != "":
		stop = "tool_use"
	case p.truncated:
		stop = "max_tokens"
	}
	// The served tier as Converse reports it (serviceTier.type: default, priority, flex), billed as such.
	tier := "default"
	if req.ServiceTier != nil && req.ServiceTier.Type != "" {
		tier = req.ServiceTier.Type
	}
	switch {
	case x.ctl.servedTier != "":
		tier = x.ctl.servedTier
	case x.ctl.downgrade && tier == "priority":
		tier = "default"
	}
	x.billPlan(EndpointConverse, tier, p)
	toolID := x.id("tooluse_")
	signature := base64.StdEncoding.EncodeToString([]byte(x.id("sig_")))
	x.w.Header().Set("x-amzn-RequestId", x.bedrockRequestID())
	if !stream {
		var content []any
		if p.reasoning != nil {
			content = append(content, fields{"reasoningContent", fields{"reasoningText",
				fields{"text", p.thinkingText(), "signature", signature}}})
		}
		if p.toolName != "" {
			content = append(content, fields{"toolUse", fields{"toolUseId", toolID, "name", p.toolName,
				"input", p.argsObject()}})
		} else {
			content = append(content, fields{"text", p.text()})
		}
		out := fields{"output", fields{"message", fields{"role", "assistant", "content", content}},
			"stopReason", stop}
		if x.ctl.usage != "none" {
			out = append(out, "usage", converseUsageOf(p))
		}
		out = append(out, "metrics", fields{"latencyMs", 1}, "serviceTier", fields{"type", tier})
		x.writeJSON(out)
		return
	}
	st := x.startStream(framingEventStream, func(int) (string, any) { return "", nil })
	if st.event("messageStart", fields{"role", "assistant"}) != nil {
		return
	}
	idx := 0
	block := func(start fields, deltas []fields) error {
		if start != nil {
			if err := st.event("contentBlockStart", fields{"contentBlockIndex", idx, "start", start}); err != nil {
				return err
			}
		}
		for _, d := range deltas {
			if err := st.event("contentBlockDelta", fields{"contentBlockIndex", idx, "delta", d}); err != nil {
				return err
			}
		}
		err := st.event("contentBlockStop", fields{"contentBlockIndex", idx})
		idx++
		return err
	}
	if p.reasoning != nil {
		deltas := make([]fields, 0, len(p.reasoning)+1)
		for _, w := range p.reasoning {
			deltas = append(deltas, fields{"reasoningContent", fields{"text", w}})
		}
		deltas = append(deltas, fields{"reasoningContent", fields{"signature", signature}})
		if block(nil, deltas) != nil {
			return
		}
	}
	if p.toolName != "" {
		var deltas []fields
		for _, frag := range splitFragments(p.toolArgs, 3) {
			deltas = append(deltas, fields{"toolUse", fields{"input", frag}})
		}
		if block(fields{"toolUse", fields{"toolUseId", toolID, "name", p.toolName}}, deltas) != nil {
			return
		}
	} else {
		deltas := make([]fields, len(p.words))
		for i, w := range p.words {
			deltas[i] = fields{"text", w}
		}
		if block(nil, deltas) != nil {
			return
		}
	}
	if st.event("messageStop", fields{"stopReason", stop}) != nil {
		return
	}
	if x.ctl.usage != "none" {
		md := fields{"usage", converseUsageOf(p), "metrics", fields{"latencyMs", 1}, "serviceTier", fields{"type", tier}}
		if st.event("metadata", md) != nil {
			return
		}
		x.reportUsage(EndpointConverse, tier, planBill(EndpointConverse, p))
	}
	st.end()
}
