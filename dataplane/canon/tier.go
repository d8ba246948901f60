package canon

import "strings"

// The reported tier: every dialect's billing and the proxy's requested tier clean the names the same way and
// apply one precedence (docs/pricing.md).

// CleanTier lower-cases and trims a tier name and strips gamma's enum prefix, so that
// "SERVICE_TIER_FLEX", "FLEX" and "flex" all become "flex". "unspecified" becomes "".
// Synonyms (fast→priority, …) are the pricing package's business (pricing.NormalizeTier).
func CleanTier(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "service_tier_")
	if s == "unspecified" {
		return ""
	}
	return s
}

// isStandardSpeed reports whether a speed value means "no speed premium".
func isStandardSpeed(s string) bool {
	switch s {
	case "", "standard", "default", "on_demand", "auto", "normal":
		return true
	}
	return false
}

// PickTier applies the reported-tier precedence (docs/pricing.md): a non-standard speed
// ("fast") wins, then the top-level service_tier, then usage.service_tier, then a standard speed.
func PickTier(speed, top, usageTier string) string {
	switch {
	case !isStandardSpeed(speed):
		return speed
	case top != "":
		return top
	case usageTier != "":
		return usageTier
	}
	return speed
}
