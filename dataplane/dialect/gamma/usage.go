package gamma

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// usageIn is a usageMetadata object as an upstream writes it: every count with whether it was reported,
// the modality details and the tier. The canonical usage (canonical) and the billed usage (Billing) both
// come from this one reading.
type usageIn struct {
	PromptTokenCount        jsonkit.Count `json:"promptTokenCount"`
	CachedContentTokenCount jsonkit.Count `json:"cachedContentTokenCount"`
	CandidatesTokenCount    jsonkit.Count `json:"candidatesTokenCount"`
	ToolUsePromptTokenCount jsonkit.Count `json:"toolUsePromptTokenCount"`
	ThoughtsTokenCount      jsonkit.Count `json:"thoughtsTokenCount"`
	TotalTokenCount         jsonkit.Count `json:"totalTokenCount"`
	PromptTokensDetails     []modalityIn  `json:"promptTokensDetails"`
	CandidatesTokensDetails []modalityIn  `json:"candidatesTokensDetails"`
	ServiceTier             jsonkit.Name  `json:"serviceTier"`
	TrafficType             jsonkit.Name  `json:"trafficType"`
}

type modalityIn struct {
	Modality   string        `json:"modality"`
	TokenCount jsonkit.Count `json:"tokenCount"`
}

func (g *usageIn) canonical() canon.Usage {
	if g == nil {
		return canon.Usage{}
	}
	u := canon.Usage{Known: true, InputTotal: g.PromptTokenCount.V + g.ToolUsePromptTokenCount.V, CacheRead: g.CachedContentTokenCount.V,
		OutputTotal: g.CandidatesTokenCount.V + g.ThoughtsTokenCount.V, Reasoning: g.ThoughtsTokenCount.V, ToolPrompt: g.ToolUsePromptTokenCount.V}
	for _, m := range g.PromptTokensDetails {
		switch m.Modality {
		case "TEXT":
			u.InputText += m.TokenCount.V
		case "IMAGE":
			u.InputImage += m.TokenCount.V
		case "AUDIO":
			u.InputAudio += m.TokenCount.V
		}
	}
	return u
}

// TierHeader is the response header carrying the served tier, which wins over the body's.
const TierHeader = "x-gamma-service-tier"

// Billing is the billed usage of a generateContent answer or stream, read from the translator's own
// decoding of it. Each usageMetadata is the running tally and proto3 JSON omits zero members, so a member
// absent from a later snapshot is 0 there: each snapshot replaces the one before whole, never merged field
// by field. The zero value is ready.
type Billing struct {
	prompt, cached, candidates, thoughts, toolUse, image int64
	bodyTier, trafficType, headerTier                    string
	found                                                bool
	in                                                   snapshotIn // a relayed chunk's usageMetadata, decoded
}

// snapshotIn is what billing reads of a usageMetadata: usageIn without the input modality details, which
// billing does not need (every relayed chunk carries them).
type snapshotIn struct {
	PromptTokenCount        jsonkit.Count `json:"promptTokenCount"`
	CachedContentTokenCount jsonkit.Count `json:"cachedContentTokenCount"`
	CandidatesTokenCount    jsonkit.Count `json:"candidatesTokenCount"`
	ToolUsePromptTokenCount jsonkit.Count `json:"toolUsePromptTokenCount"`
	ThoughtsTokenCount      jsonkit.Count `json:"thoughtsTokenCount"`
	TotalTokenCount         jsonkit.Count `json:"totalTokenCount"`
	CandidatesTokensDetails []modalityIn  `json:"candidatesTokensDetails"`
	ServiceTier             jsonkit.Name  `json:"serviceTier"`
	TrafficType             jsonkit.Name  `json:"trafficType"`
}

func (s *snapshotIn) usage() usageIn {
	return usageIn{PromptTokenCount: s.PromptTokenCount, CachedContentTokenCount: s.CachedContentTokenCount,
		CandidatesTokenCount: s.CandidatesTokenCount, ToolUsePromptTokenCount: s.ToolUsePromptTokenCount,
		ThoughtsTokenCount: s.ThoughtsTokenCount, TotalTokenCount: s.TotalTokenCount,
		CandidatesTokensDetails: s.CandidatesTokensDetails, ServiceTier: s.ServiceTier, TrafficType: s.TrafficType}
}

// Reset forgets a stream, keeping the decoding buffer for the next one.
func (b *Billing) Reset() {
	*b = Billing{in: snapshotIn{CandidatesTokensDetails: b.in.CandidatesTokensDetails[:0]}}
}

// ObserveRelay bills one relayed (passthrough) chunk from the members its relay reader found (ReadRelay): the
// last usageMetadata, decoded alone and taken whole. A chunk that is not a sound object, or a usageMetadata
// that does not decode, bills nothing.
func (b *Billing) ObserveRelay(r *jsonkit.Relay) {
	if !r.Whole || jsonkit.IsNull(r.UsageMetadataValue) {
		return
	}
	b.in = snapshotIn{CandidatesTokensDetails: b.in.CandidatesTokensDetails[:0]}
	if jsonkit.UnmarshalEvent(r.UsageMetadataValue, &b.in) != nil {
		return
	}
	u := b.in.usage()
	b.take(&u)
}

// bodyIn is what billing reads of a buffered generateContent or embedContent answer.
type bodyIn struct {
	UsageMetadata *snapshotIn `json:"usageMetadata"`
}

// BillBody returns the billed usage of a buffered gamma answer of kind and op, reading only its usageMetadata
// member; hdr (may be nil) is the response header, whose TierHeader wins. generateContent is billed as Billing
// bills a stream's last snapshot; an embedding (embedContent, batchEmbedContents) bills promptTokenCount, else
// totalTokenCount, less cached, as input. found is false when it reported no usage and for operations that are
// not billed; a body that is not a JSON object is an error.
func BillBody(kind vocab.Kind, op vocab.Operation, body []byte, hdr http.Header) (usage.Usage, bool, error) {
	embedding := kind != vocab.KindGammaGenerateContent
	if embedding && op != vocab.OpCreateEmbedding {
		return usage.Usage{}, false, nil
	}
	var in bodyIn
	if err := jsonkit.UnmarshalEvent(body, &in); err != nil {
		return usage.Usage{}, false, fmt.Errorf("decode gamma usage: %w", err)
	}
	var b Billing
	if hdr != nil {
		b.ObserveHeader(hdr)
	}
	if in.UsageMetadata == nil {
		u, _ := b.Usage() // the header's tier alone
		return u, false, nil
	}
	s := in.UsageMetadata
	u := s.usage()
	b.take(&u)
	billed, _ := b.Usage()
	if embedding {
		n := s.PromptTokenCount
		if !n.Set {
			n = s.TotalTokenCount
		}
		return usage.Usage{Input: max(n.V-max(s.CachedContentTokenCount.V, 0), 0), CacheRead: s.CachedContentTokenCount.V,
			ReportedTier: billed.ReportedTier}, true, nil
	}
	return billed, true, nil
}

// tier keeps a reported tier name, cleaned, when it says one.
func tier(dst *string, n jsonkit.Name) {
	if c := canon.CleanTier(n.S); n.Set && c != "" {
		*dst = c
	}
}

// take replaces the snapshot with u (nil: the chunk reported none).
func (b *Billing) take(u *usageIn) {
	if u == nil {
		return
	}
	*b = Billing{headerTier: b.headerTier, found: true, prompt: u.PromptTokenCount.V, cached: u.CachedContentTokenCount.V,
		candidates: u.CandidatesTokenCount.V, thoughts: u.ThoughtsTokenCount.V, toolUse: u.ToolUsePromptTokenCount.V}
	for _, m := range u.CandidatesTokensDetails {
		if strings.EqualFold(m.Modality, "IMAGE") {
			b.image = sum(b.image, m.TokenCount.V)
		}
	}
	tier(&b.bodyTier, u.ServiceTier)
	tier(&b.trafficType, u.TrafficType)
}

// BillHeader implements canon.HeaderBiller: the response header's served tier wins over the body's.
func (GenerateContent) BillHeader(u *usage.Usage, h http.Header) {
	if v := canon.CleanTier(h.Get(TierHeader)); v != "" {
		u.ReportedTier = v
	}
}

// ObserveHeader takes the served tier of the response header (TierHeader).
func (b *Billing) ObserveHeader(h http.Header) {
	if v := canon.CleanTier(h.Get(TierHeader)); v != "" {
		b.headerTier = v
	}
}

// Usage returns the billed usage; found is false while no usageMetadata was read. prompt (+ tool-use prompt)
// less cached is input, cached is cache read; candidates + thoughts is output, of which the IMAGE modality
// of candidatesTokensDetails is image output. The tier: the header's, then serviceTier, then the cloud
// variant's trafficType.
func (b *Billing) Usage() (usage.Usage, bool) {
	out := sum(b.candidates, b.thoughts)
	img := min(b.image, out)
	in := sum(b.prompt, b.toolUse)
	return usage.Usage{Input: max(in-max(b.cached, 0), 0), CacheRead: b.cached, Output: out - img, ImageOutput: img,
		ReportedTier: b.tier()}, b.found
}

func (b *Billing) tier() string {
	switch {
	case b.headerTier != "":
		return b.headerTier
	case b.bodyTier != "":
		return b.bodyTier
	}
	switch b.trafficType {
	case "on_demand":
		return "standard"
	case "on_demand_priority":
		return "priority"
	case "on_demand_flex":
		return "flex"
	}
	return b.trafficType
}

// sum adds two non-negative counts, saturating.
func sum(a, b int64) int64 {
	return (usage.Usage{Input: a, Output: b}).TotalTokens()
}

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

func toGammaUsage(u canon.Usage) *gammaUsage {
	cand := u.OutputTotal - u.Reasoning
	if cand < 0 {
		cand = 0
	}
	return &gammaUsage{PromptTokenCount: u.InputTotal - u.ToolPrompt, CachedContentTokenCount: u.CacheRead, CandidatesTokenCount: cand,
		ToolUsePromptTokenCount: u.ToolPrompt, ThoughtsTokenCount: u.Reasoning, TotalTokenCount: u.InputTotal + u.OutputTotal}
}
