package usage

import (
	"encoding/json"
	"fmt"
)

type betaUsageJSON struct {
	InputTokens              count               `json:"input_tokens"`
	OutputTokens             count               `json:"output_tokens"`
	CacheCreationInputTokens count               `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     count               `json:"cache_read_input_tokens"`
	CacheCreation            *betaCacheSplitJSON `json:"cache_creation"`
	ServiceTier              tierName            `json:"service_tier"`
	Speed                    tierName            `json:"speed"`
}

type betaCacheSplitJSON struct {
	Ephemeral5m count `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h count `json:"ephemeral_1h_input_tokens"`
}

// betaFields is the flattened beta usage, merged field by field (latest wins).
type betaFields struct {
	input, output, cacheCreation, cacheRead, cc5m, cc1h count
	usageTier, speed, topTier                           tierName
}

func (f *betaFields) mergeUsage(u *betaUsageJSON) {
	f.input.merge(u.InputTokens)
	f.output.merge(u.OutputTokens)
	f.cacheCreation.merge(u.CacheCreationInputTokens)
	f.cacheRead.merge(u.CacheReadInputTokens)
	if u.CacheCreation != nil {
		f.cc5m.merge(u.CacheCreation.Ephemeral5m)
		f.cc1h.merge(u.CacheCreation.Ephemeral1h)
	}
	f.usageTier.merge(u.ServiceTier)
	f.speed.merge(u.Speed)
}

// usage converts beta usage. input_tokens already excludes cache reads and writes. The
// cache_creation split gives 5m and 1h; without it cache_creation_input_tokens is 5m; when the
// aggregate exceeds the split, the remainder is billed as 5m.
func (f *betaFields) usage() Usage {
	u := Usage{
		Input:        f.input.v,
		Output:       f.output.v,
		CacheRead:    f.cacheRead.v,
		ReportedTier: PickTier(f.speed.s, f.topTier.s, f.usageTier.s),
	}
	if f.cc5m.set || f.cc1h.set {
		u.CacheCreation5m, u.CacheCreation1h = f.cc5m.v, f.cc1h.v
		if split := satSum(f.cc5m.v, f.cc1h.v); f.cacheCreation.v > split {
			u.CacheCreation5m += f.cacheCreation.v - split
		}
	} else {
		u.CacheCreation5m = f.cacheCreation.v
	}
	return u
}

type betaBodyJSON struct {
	ServiceTier tierName       `json:"service_tier"`
	Usage       *betaUsageJSON `json:"usage"`
}

// FromBeta extracts usage from a non-streaming beta_messages response body.
func FromBeta(body []byte) (Usage, bool, error) {
	var b betaBodyJSON
	if err := json.Unmarshal(body, &b); err != nil {
		return Usage{}, false, fmt.Errorf("decode beta usage: %w", err)
	}
	var f betaFields
	f.topTier = b.ServiceTier
	if b.Usage == nil {
		return f.usage(), false, nil
	}
	f.mergeUsage(b.Usage)
	return f.usage(), true, nil
}
