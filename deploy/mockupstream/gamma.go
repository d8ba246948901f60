package mockupstream

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/shared/vocab"
)

// TierHeader is the gamma served-tier response header: gamma reports the tier that served a request in
// this header, not in the body's usage.
const TierHeader = "x-gamma-service-tier"

type gammaRequest struct {
	Contents []struct {
		Role  string           `json:"role"`
		Parts []map[string]any `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig *struct {
			Mode string `json:"mode"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig *struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
		ThinkingConfig  *struct {
			ThinkingBudget  *int   `json:"thinkingBudget"`
			ThinkingLevel   string `json:"thinkingLevel"`
			IncludeThoughts bool   `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
	ServiceTier      string `json:"service_tier"`
	ServiceTierCamel string `json:"serviceTier"`
}

type modalityCount struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

type gammaUsage struct {
	PromptTokenCount        int             `json:"promptTokenCount,omitempty"`
	CachedContentTokenCount int             `json:"cachedContentTokenCount,omitempty"`
	CandidatesTokenCount    int             `json:"candidatesTokenCount,omitempty"`
	ThoughtsTokenCount      int             `json:"thoughtsTokenCount,omitempty"`
	TotalTokenCount         int             `json:"totalTokenCount,omitempty"`
	PromptTokensDetails     []modalityCount `json:"promptTokensDetails,omitempty"`
	CacheTokensDetails      []modalityCount `json:"cacheTokensDetails,omitempty"`
	CandidatesTokensDetails []modalityCount `json:"candidatesTokensDetails,omitempty"`
}

func (x *exchange) gammaUsage(p *plan, candidates, thoughts int) *gammaUsage {
	u := &gammaUsage{PromptTokenCount: p.prompt, CachedContentTokenCount: p.cacheRead,
		CandidatesTokenCount: candidates, ThoughtsTokenCount: thoughts, TotalTokenCount: p.prompt + candidates + thoughts}
	if x.ctl.usage == "aggregate" {
		return u
	}
	u.PromptTokensDetails = []modalityCount{{Modality: "TEXT", TokenCount: p.prompt - p.imageIn}}
	if p.imageIn > 0 {
		u.PromptTokensDetails = append(u.PromptTokensDetails, modalityCount{Modality: "IMAGE", TokenCount: p.imageIn})
	}
	if p.cacheRead > 0 {
		u.CacheTokensDetails = []modalityCount{{Modality: "TEXT", TokenCount: p.cacheRead}}
	}
	if candidates > 0 {
		u.CandidatesTokensDetails = []modalityCount{{Modality: "TEXT", TokenCount: candidates}}
	}
	return u
}

type gammaContent struct {
	Role  string           `json:"role"`
	Parts []map[string]any `json:"parts"`
}

type gammaCandidate struct {
	Content      gammaContent `json:"content"`
	FinishReason string       `json:"finishReason,omitempty"`
	Index        int          `json:"index"`
}

type gammaResponse struct {
	Candidates    []gammaCandidate `json:"candidates"`
	UsageMetadata *gammaUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string           `json:"modelVersion"`
	ResponseID    string           `json:"responseId"`
}

func (x *exchange) gammaMethod(model, method string) {
	x.model = model
	switch method {
	case "generateContent":
		x.gammaGenerate(model, false)
	case "streamGenerateContent":
		x.gammaGenerate(model, true)
	case "countTokens":
		x.gammaCountTokens()
	case "embedContent":
		x.gammaEmbed(false)
	case "batchEmbedContents":
		x.gammaEmbed(true)
	case "batchGenerateContent":
		x.gammaBatchCreate(model)
	default:
		x.fail(http.StatusNotFound, fmt.Sprintf("method %q not found for models/%s", method, model))
	}
}

func (x *exchange) gammaGenerate(model string, stream bool) {
	var req gammaRequest
	if !x.decode(&req) {
		return
	}
	if len(req.Contents) == 0 {
		x.fail(http.StatusBadRequest, "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	var tools []toolDef
	for _, t := range req.Tools {
		for _, fd := range t.FunctionDeclarations {
			params := fd.Parameters
			if len(params) == 0 {
				params = fd.ParametersJSONSchema
			}
			tools = append(tools, toolDef{name: fd.Name, params: params})
		}
	}
	forced := req.ToolConfig != nil && req.ToolConfig.FunctionCallingConfig != nil &&
		strings.EqualFold(req.ToolConfig.FunctionCallingConfig.Mode, "ANY")
	maxTok, thinking, includeThoughts := 0, false, false
	if gc := req.GenerationConfig; gc != nil {
		maxTok = gc.MaxOutputTokens
		if tc := gc.ThinkingConfig; tc != nil {
			thinking = (tc.ThinkingBudget != nil && *tc.ThinkingBudget != 0) || tc.ThinkingLevel != "" ||
				tc.IncludeThoughts
			includeThoughts = tc.IncludeThoughts
		}
	}
	p := x.planFor(maxTok, tools, forced, thinking)
	tierReq := req.ServiceTier
	if tierReq == "" {
		tierReq = req.ServiceTierCamel
	}
	tier := x.gammaTier(tierReq)
	x.w.Header().Set(TierHeader, tier)
	x.kind = vocab.KindGammaGenerateContent
	x.billPlan(EndpointGenerateContent, tier, p)
	finish := "STOP"
	if p.truncated {
		finish = "MAX_TOKENS"
	}
	visible := p.output - p.reasoningN
	respID := fmt.Sprintf("%016x", x.hash)
	var thoughtPart, toolPart map[string]any
	if p.reasoning != nil && includeThoughts {
		thoughtPart = map[string]any{"text": p.thinkingText(), "thought": true}
	}
	if p.toolName != "" {
		toolPart = map[string]any{"functionCall": map[string]any{"name": p.toolName, "args": p.argsObject()}}
		if p.reasoning != nil {
			toolPart["thoughtSignature"] = base64.StdEncoding.EncodeToString([]byte(x.id("sig_")))
		}
	}
	if !stream {
		var parts []map[string]any
		if thoughtPart != nil {
			parts = append(parts, thoughtPart)
		}
		if toolPart != nil {
			parts = append(parts, toolPart)
		} else {
			parts = append(parts, map[string]any{"text": p.text()})
		}
		resp := gammaResponse{Candidates: []gammaCandidate{{Content: gammaContent{Role: "model", Parts: parts},
			FinishReason: finish}}, ModelVersion: model, ResponseID: respID}
		if x.ctl.usage != "none" {
			resp.UsageMetadata = x.gammaUsage(p, visible, p.reasoningN)
		}
		x.writeJSON(resp)
		return
	}
	mode := framingJSONArray
	if x.r.URL.Query().Get("alt") == "sse" {
		mode = framingData
	}
	st := x.startStream(mode, func(int) (string, any) {
		return "", gammaError{Error: x.gammaErrorBody(http.StatusInternalServerError, "mock mid-stream error", "")}
	})
	// chunks: [thought], then the tool call or one chunk per word; cumulative usage on each.
	type chunk struct {
		part       map[string]any
		candidates int
	}
	var chunks []chunk
	if thoughtPart != nil {
		chunks = append(chunks, chunk{part: thoughtPart})
	}
	if toolPart != nil {
		chunks = append(chunks, chunk{part: toolPart, candidates: visible})
	} else {
		for i, w := range p.words {
			chunks = append(chunks, chunk{part: map[string]any{"text": w}, candidates: i + 1})
		}
		if len(p.words) == 0 {
			chunks = append(chunks, chunk{part: map[string]any{"text": ""}})
		}
	}
	resp := gammaResponse{Candidates: make([]gammaCandidate, 1), ModelVersion: model, ResponseID: respID}
	for i, c := range chunks {
		last := i == len(chunks)-1
		resp.Candidates[0] = gammaCandidate{Content: gammaContent{Role: "model", Parts: []map[string]any{c.part}}}
		if last {
			resp.Candidates[0].FinishReason = finish
		}
		resp.UsageMetadata = nil
		if x.ctl.usage != "none" && (last || x.ctl.usage != "aggregate") {
			resp.UsageMetadata = x.gammaUsage(p, c.candidates, p.reasoningN)
		}
		if st.event("", resp) != nil {
			return
		}
		if u := resp.UsageMetadata; u != nil { // the running tally: the latest replaces the one before
			x.reportUsage(EndpointGenerateContent, tier, Bill{Input: int64(u.PromptTokenCount - u.CachedContentTokenCount),
				CacheRead: int64(u.CachedContentTokenCount), Output: int64(u.CandidatesTokenCount + u.ThoughtsTokenCount)})
		}
	}
	st.end()
}

func (x *exchange) gammaCountTokens() {
	var req struct {
		Contents               []any          `json:"contents"`
		GenerateContentRequest map[string]any `json:"generateContentRequest"`
	}
	if !x.decode(&req) {
		return
	}
	if len(req.Contents) == 0 && req.GenerateContentRequest == nil {
		x.fail(http.StatusBadRequest, "contents or generateContentRequest is required")
		return
	}
	p := x.planFor(0, nil, false, false)
	resp := map[string]any{"totalTokens": p.prompt,
		"promptTokensDetails": []modalityCount{{Modality: "TEXT", TokenCount: p.prompt}}}
	if p.cacheRead > 0 {
		resp["cachedContentTokenCount"] = p.cacheRead
		resp["cacheTokensDetails"] = []modalityCount{{Modality: "TEXT", TokenCount: p.cacheRead}}
	}
	x.writeJSON(resp)
}

type gammaEmbedRequest struct {
	Model   string `json:"model"`
	Content struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"content"`
	OutputDimensionality int `json:"outputDimensionality"`
}

func (x *exchange) gammaEmbed(batch bool) {
	var reqs []gammaEmbedRequest
	if batch {
		var req struct {
			Requests []gammaEmbedRequest `json:"requests"`
		}
		if !x.decode(&req) {
			return
		}
		reqs = req.Requests
	} else {
		var req gammaEmbedRequest
		if !x.decode(&req) {
			return
		}
		reqs = []gammaEmbedRequest{req}
	}
	if len(reqs) == 0 {
		x.fail(http.StatusBadRequest, "* BatchEmbedContentsRequest.requests: requests is not specified")
		return
	}
	embs := make([]map[string]any, len(reqs))
	tokens := 0
	for i, r := range reqs {
		var sb strings.Builder
		for _, part := range r.Content.Parts {
			sb.WriteString(part.Text)
		}
		if sb.Len() == 0 {
			x.fail(http.StatusBadRequest, "* EmbedContentRequest.content: content is not specified")
			return
		}
		dims := r.OutputDimensionality
		if dims <= 0 || dims > 8192 {
			dims = 16
		}
		embs[i] = map[string]any{"values": vector([]byte(sb.String()), dims)}
		tokens += max(tokensOf(sb.Len()), 1)
	}
	var resp map[string]any
	if batch {
		resp = map[string]any{"embeddings": embs}
	} else {
		resp = map[string]any{"embedding": embs[0]}
	}
	// Real gamma embedding answers carry no usageMetadata; the mock adds it only when a test asks for it.
	if x.ctl.usageSet && x.ctl.usage == "full" {
		resp["usageMetadata"] = map[string]int{"promptTokenCount": tokens, "totalTokenCount": tokens}
	}
	x.writeJSON(resp)
}

type gammaModel struct {
	Name                       string   `json:"name"`
	BaseModelID                string   `json:"baseModelId"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	Temperature                float64  `json:"temperature"`
	MaxTemperature             float64  `json:"maxTemperature"`
	TopP                       float64  `json:"topP"`
	TopK                       int      `json:"topK"`
	Thinking                   bool     `json:"thinking"`
}

func gammaModelOf(id string) gammaModel {
	id = strings.TrimPrefix(id, "models/")
	return gammaModel{Name: "models/" + id, BaseModelID: id, Version: "001", DisplayName: id,
		Description: "mock model " + id, InputTokenLimit: 1048576, OutputTokenLimit: 65536,
		SupportedGenerationMethods: []string{"generateContent", "countTokens", "embedContent", "batchEmbedContents"},
		Temperature:                1, MaxTemperature: 2, TopP: 0.95, TopK: 64, Thinking: true}
}

func (x *exchange) gammaModels(id string) {
	if id != "" {
		x.model = id
		x.writeJSON(gammaModelOf(id))
		return
	}
	models := make([]gammaModel, len(x.s.models))
	for i, m := range x.s.models {
		models[i] = gammaModelOf(m)
	}
	x.writeJSON(map[string]any{"models": models})
}
