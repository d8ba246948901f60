package usage

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// GammaTierHeader is the gamma response header carrying the served tier.
const GammaTierHeader = "x-gamma-service-tier"

type gammaUsageJSON struct {
	PromptTokenCount        count               `json:"promptTokenCount"`
	CachedContentTokenCount count               `json:"cachedContentTokenCount"`
	CandidatesTokenCount    count               `json:"candidatesTokenCount"`
	ThoughtsTokenCount      count               `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount count               `json:"toolUsePromptTokenCount"`
	TotalTokenCount         count               `json:"totalTokenCount"`
	CandidatesTokensDetails []gammaModalityJSON `json:"candidatesTokensDetails"`
	ServiceTier             tierName            `json:"serviceTier"`
	TrafficType             tierName            `json:"trafficType"`

	// imageTokens is set by decodeGammaUsage (the stream fast path) instead of
	// CandidatesTokensDetails.
	imageTokens count
}

type gammaModalityJSON struct {
	Modality   string `json:"modality"`
	TokenCount count  `json:"tokenCount"`
}

// gammaFields is the flattened gamma usage, merged field by field (latest wins).
type gammaFields struct {
	prompt, cached, candidates, thoughts, toolUse, total, imageOut count
	bodyTier, trafficType, headerTier                              tierName
}

func (f *gammaFields) mergeUsage(u *gammaUsageJSON) {
	f.prompt.merge(u.PromptTokenCount)
	f.cached.merge(u.CachedContentTokenCount)
	f.candidates.merge(u.CandidatesTokenCount)
	f.thoughts.merge(u.ThoughtsTokenCount)
	f.toolUse.merge(u.ToolUsePromptTokenCount)
	f.total.merge(u.TotalTokenCount)
	if u.CandidatesTokensDetails != nil {
		img := count{set: true}
		for _, m := range u.CandidatesTokensDetails {
			if strings.EqualFold(m.Modality, "IMAGE") {
				img.v = satSum(img.v, m.TokenCount.v)
			}
		}
		f.imageOut = img
	} else {
		f.imageOut.merge(u.imageTokens)
	}
	f.bodyTier.merge(u.ServiceTier)
	f.trafficType.merge(u.TrafficType)
}

func (f *gammaFields) observeHeader(h http.Header) {
	if h == nil {
		return
	}
	if v := CleanTier(h.Get(GammaTierHeader)); v != "" {
		f.headerTier = tierName{s: v, set: true}
	}
}

// tier: the x-gamma-service-tier header (the served tier), then usageMetadata.serviceTier, then
// the cloud variant's usageMetadata.trafficType.
func (f *gammaFields) tier() string {
	switch {
	case f.headerTier.set:
		return f.headerTier.s
	case f.bodyTier.set:
		return f.bodyTier.s
	}
	switch f.trafficType.s {
	case "on_demand":
		return "standard"
	case "on_demand_priority":
		return "priority"
	case "on_demand_flex":
		return "flex"
	}
	return f.trafficType.s
}

// usage converts gamma usage: prompt (+ tool-use prompt) minus cached is Input, cached is
// CacheRead; candidates + thoughts is output, of which the IMAGE modality of
// candidatesTokensDetails is ImageOutput.
func (f *gammaFields) usage() Usage {
	out := satSum(f.candidates.v, f.thoughts.v)
	img := min(f.imageOut.v, out)
	return Usage{
		Input:        sub(satSum(f.prompt.v, f.toolUse.v), f.cached.v),
		CacheRead:    f.cached.v,
		Output:       out - img,
		ImageOutput:  img,
		ReportedTier: f.tier(),
	}
}

type gammaBodyJSON struct {
	UsageMetadata *gammaUsageJSON `json:"usageMetadata"`
}

func decodeGamma(body []byte, hdr http.Header, what string) (gammaFields, bool, error) {
	var b gammaBodyJSON
	var f gammaFields
	f.observeHeader(hdr)
	if err := json.Unmarshal(body, &b); err != nil {
		return f, false, fmt.Errorf("decode %s usage: %w", what, err)
	}
	if b.UsageMetadata == nil {
		return f, false, nil
	}
	f.mergeUsage(b.UsageMetadata)
	return f, true, nil
}

// FromGamma extracts usage from a non-streaming gamma generateContent body; hdr (may be nil) is
// the response header, whose x-gamma-service-tier is the reported tier.
func FromGamma(body []byte, hdr http.Header) (Usage, bool, error) {
	f, found, err := decodeGamma(body, hdr, "gamma")
	if err != nil {
		return Usage{}, false, err
	}
	return f.usage(), found, nil
}

// FromGammaEmbedding extracts usage from a gamma embedContent/batchEmbedContents body when the
// server reports usageMetadata (promptTokenCount, else totalTokenCount, minus cached → Input).
func FromGammaEmbedding(body []byte, hdr http.Header) (Usage, bool, error) {
	f, found, err := decodeGamma(body, hdr, "gamma embedding")
	if err != nil {
		return Usage{}, false, err
	}
	in := f.prompt
	if !in.set {
		in = f.total
	}
	return Usage{Input: sub(in.v, f.cached.v), CacheRead: f.cached.v, ReportedTier: f.tier()}, found, nil
}

var gammaUsageKeys = []string{"promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount",
	"thoughtsTokenCount", "toolUsePromptTokenCount", "totalTokenCount", "candidatesTokensDetails",
	"serviceTier", "trafficType"}

var modalityKeys = []string{"modality", "tokenCount"}

// decodeGammaUsage decodes a usageMetadata object without encoding/json (streams carry one on
// every chunk). Keys are matched exactly (proto3 JSON emits lowerCamelCase).
func decodeGammaUsage(raw []byte, u *gammaUsageJSON) error {
	var vals [9][]byte
	if err := objectFields(raw, gammaUsageKeys, vals[:]); err != nil {
		return err
	}
	counts := [...]*count{&u.PromptTokenCount, &u.CachedContentTokenCount, &u.CandidatesTokenCount,
		&u.ThoughtsTokenCount, &u.ToolUsePromptTokenCount, &u.TotalTokenCount}
	for i, c := range counts {
		if vals[i] != nil {
			if err := c.UnmarshalJSON(vals[i]); err != nil {
				return fmt.Errorf("%s: %w", gammaUsageKeys[i], err)
			}
		}
	}
	if !isNull(vals[6]) {
		img := count{set: true}
		err := arrayElems(vals[6], func(elem []byte) error {
			var mv [2][]byte
			if err := objectFields(elem, modalityKeys, mv[:]); err != nil {
				return err
			}
			var n count
			if mv[1] != nil {
				if err := n.UnmarshalJSON(mv[1]); err != nil {
					return err
				}
			}
			if m := mv[0]; len(m) >= 2 && m[0] == '"' && strings.EqualFold(string(m[1:len(m)-1]), "IMAGE") {
				img.v = satSum(img.v, n.v)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("candidatesTokensDetails: %w", err)
		}
		u.imageTokens = img
	}
	u.ServiceTier.mergeRaw(vals[7])
	u.TrafficType.mergeRaw(vals[8])
	return nil
}
