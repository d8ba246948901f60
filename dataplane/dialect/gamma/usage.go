package gamma

import (
	"github.com/tollgate/tollgate/dataplane/canon"
)

type modalityCount struct {
	Modality   string `json:"modality"`
	TokenCount int64  `json:"tokenCount"`
}

type gammaUsage struct {
	PromptTokenCount        int64           `json:"promptTokenCount,omitempty"`
	CachedContentTokenCount int64           `json:"cachedContentTokenCount,omitempty"`
	CandidatesTokenCount    int64           `json:"candidatesTokenCount,omitempty"`
	ToolUsePromptTokenCount int64           `json:"toolUsePromptTokenCount,omitempty"`
	ThoughtsTokenCount      int64           `json:"thoughtsTokenCount,omitempty"`
	TotalTokenCount         int64           `json:"totalTokenCount,omitempty"`
	PromptTokensDetails     []modalityCount `json:"promptTokensDetails,omitempty"`
}

func (g *gammaUsage) canonical() canon.Usage {
	if g == nil {
		return canon.Usage{}
	}
	u := canon.Usage{Known: true, InputTotal: g.PromptTokenCount + g.ToolUsePromptTokenCount, CacheRead: g.CachedContentTokenCount,
		OutputTotal: g.CandidatesTokenCount + g.ThoughtsTokenCount, Reasoning: g.ThoughtsTokenCount, ToolPrompt: g.ToolUsePromptTokenCount}
	for _, m := range g.PromptTokensDetails {
		switch m.Modality {
		case "TEXT":
			u.InputText += m.TokenCount
		case "IMAGE":
			u.InputImage += m.TokenCount
		case "AUDIO":
			u.InputAudio += m.TokenCount
		}
	}
	return u
}

func toGammaUsage(u canon.Usage) *gammaUsage {
	cand := u.OutputTotal - u.Reasoning
	if cand < 0 {
		cand = 0
	}
	return &gammaUsage{PromptTokenCount: u.InputTotal - u.ToolPrompt, CachedContentTokenCount: u.CacheRead, CandidatesTokenCount: cand,
		ToolUsePromptTokenCount: u.ToolPrompt, ThoughtsTokenCount: u.Reasoning, TotalTokenCount: u.InputTotal + u.OutputTotal}
}
