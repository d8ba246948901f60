package pricing

import "strings"

// NormalizeTier maps a tier name to its canonical form, on both sides of a comparison (request
// or reported tier, and tier entries): trimmed, lower-case, gamma's "service_tier_" enum prefix
// removed, then fast→priority, default/on_demand→standard, ultra-fast→ultrafast. Other names are
// kept (provider-defined). "" and "unspecified" normalise to "".
func NormalizeTier(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "service_tier_")
	switch s {
	case "fast":
		return "priority"
	case "default", "on_demand":
		return "standard"
	case "ultra-fast":
		return "ultrafast"
	case "unspecified":
		return ""
	}
	return s
}

// SettlementTier is the tier that prices a settled request: the tier the upstream reported,
// else the requested one (a request downgraded upstream is billed at the reported rate).
func SettlementTier(reported, requested string) string {
	if NormalizeTier(reported) != "" {
		return reported
	}
	return requested
}
