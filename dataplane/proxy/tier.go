package proxy

import (
	"bytes"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// requestedTier returns the service tier a request body asks for (used by quota admission and pricing),
// cleaned like CleanTier, or "" when it names none or jsonkit.ParseRequest refuses the body: the body is
// read exactly as the data plane reads it, so the tier is the one the upstream reads (a tier member
// written with escapes counts, a case-folded one is refused). tierOf is the same for a body already read.
func requestedTier(body []byte) string {
	if !mayNameTier(body) {
		return ""
	}
	req, err := jsonkit.ParseRequest(body)
	if err != nil {
		return ""
	}
	return tierOf(req)
}

// mayNameTier is requestedTier's prefilter: ParseRequest reads a tier only from a member spelled exactly
// "speed", "service_tier" or "serviceTier", or written with \u escapes; a body with neither names none.
func mayNameTier(body []byte) bool {
	return bytes.Contains(body, []byte("speed")) || bytes.Contains(body, []byte("service_tier")) ||
		bytes.Contains(body, []byte("serviceTier")) || bytes.Contains(body, []byte(`\u`))
}

// tierOf returns the requested tier of a body read by jsonkit.ParseRequest. Precedence: a non-standard speed
// ("fast") wins, then service_tier, then serviceTier, then a standard speed.
func tierOf(req jsonkit.Request) string {
	speed, snake, camel := canon.CleanTier(req.Speed), canon.CleanTier(req.ServiceTier), canon.CleanTier(req.ServiceTierCamel)
	top := snake
	if top == "" {
		top = camel
	}
	return canon.PickTier(speed, top, "")
}
