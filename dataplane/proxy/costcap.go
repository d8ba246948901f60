package proxy

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// hdrMaxCost is the request header of the cost cap (docs/cost.md, "A cost cap per request").
const hdrMaxCost = "X-Tollgate-Max-Cost"

// readCostCap parses the request's X-Tollgate-Max-Cost into c.maxCost (nil when absent); a value that is not
// a plain non-negative decimal is refused with 400 invalid_cost_cap.
func readCostCap(r *http.Request, c *call) error {
	v := r.Header[hdrMaxCost]
	if len(v) == 0 {
		return nil
	}
	limit, err := pricing.ParseCostCap(v[0])
	if err != nil || len(v) > 1 {
		return &httperr.Error{Status: http.StatusBadRequest, Code: httperr.CodeInvalidCostCap, Cause: err,
			Message: hdrMaxCost + " must be one plain non-negative decimal number of dollars (e.g. 0.50): no sign, exponent or currency"}
	}
	c.maxCost = limit
	return nil
}

// outputLimit is the request's output limit as the worst case takes it (docs/cost.md, "The worst case"):
// alpha chat max_completion_tokens, else max_tokens, times n; alpha responses max_output_tokens; beta
// max_tokens; gamma generationConfig.maxOutputTokens times candidateCount. -1 when the request sets none,
// or one that is not a non-negative integer (no finite worst case).
func outputLimit(kind vocab.Kind, body []byte) int64 {
	switch kind {
	case vocab.KindAlphaChatCompletions:
		mct, mt, ok := jsonkit.Members2(body, "max_completion_tokens", "max_tokens")
		if !ok {
			return -1
		}
		limit := count(mct)
		if jsonkit.IsNull(mct) {
			limit = count(mt)
		}
		n, ok := jsonkit.Member(body, "n")
		return times(limit, n, ok)
	case vocab.KindAlphaResponses:
		v, ok := jsonkit.Member(body, "max_output_tokens")
		if !ok {
			return -1
		}
		return count(v)
	case vocab.KindBetaMessages:
		v, ok := jsonkit.Member(body, "max_tokens")
		if !ok {
			return -1
		}
		return count(v)
	case vocab.KindGammaGenerateContent:
		camel, snake, ok := jsonkit.Members2(body, "generationConfig", "generation_config")
		if !ok || (camel != nil && snake != nil) {
			return -1 // both spellings: which one the upstream reads is not known
		}
		gc := camel
		if gc == nil {
			gc = snake
		}
		mo, moSnake, ok := jsonkit.Members2(gc, "maxOutputTokens", "max_output_tokens")
		if !ok || (mo != nil && moSnake != nil) {
			return -1
		}
		if mo == nil {
			mo = moSnake
		}
		cc, ccSnake, ok := jsonkit.Members2(gc, "candidateCount", "candidate_count")
		if cc == nil {
			cc = ccSnake
		}
		return times(count(mo), cc, ok && (cc == nil || ccSnake == nil))
	}
	return -1
}

// count reads a token count: a non-negative JSON integer, else -1.
func count(v []byte) int64 {
	if jsonkit.IsNull(v) {
		return -1
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// times multiplies a per-choice limit by a choice count above 1 (absent or null: 1), saturating; -1 stays
// -1, and a count that cannot be read makes the limit unknown (-1).
func times(limit int64, n []byte, ok bool) int64 {
	if !ok {
		return -1
	}
	if limit < 0 || jsonkit.IsNull(n) {
		return limit
	}
	k := count(n)
	switch {
	case k < 0:
		return -1
	case k <= 1:
		return limit
	case limit > math.MaxInt64/k:
		return math.MaxInt64
	}
	return limit * k
}

// worstCase is a candidate's worst case for the request (pricing.Rule.WorstCase): the admission estimate
// of prompt tokens, the request's output limit, at the requested tier, under the rule in force.
func (c *call) worstCase(u candidateCell, maxOut int64) pricing.WorstCase {
	rule := c.snap.ResolvePriceAt(u.Provider.ID, u.UpstreamModel, c.start)
	return rule.WorstCase(pricing.BytesPerTokenEstimator(len(c.body)), maxOut, tierOf(c.req))
}

// applyCostCap keeps the usable candidates whose worst case fits the request's cost cap (equal fits),
// in order; none fitting is a 402 in the caller's dialect naming the first candidate's worst case.
func (h *Handler) applyCostCap(c *call) error {
	if c.maxCost == nil || !c.billable() {
		return nil
	}
	maxOut := outputLimit(c.class.Kind, c.body)
	first := c.worstCase(c.usable[0], maxOut)
	kept := c.usable[:0]
	for _, u := range c.usable {
		if !c.worstCase(u, maxOut).Exceeds(c.maxCost) {
			kept = append(kept, u)
		}
	}
	if len(kept) > 0 {
		c.usable = kept
		return nil
	}
	c.usable = c.usable[:1] // the refused request is recorded against the first candidate
	return costCapError(c, first)
}

// costCapError is the 402 of a request no candidate can serve within its cap (docs/cost.md): the
// machine-readable object names the worst case and its rule when the key is shown its costs, else only
// the code and the cap.
func costCapError(c *call, wc pricing.WorstCase) *httperr.Error {
	capStr := pricing.FormatDecimal(c.maxCost)
	t := map[string]any{"code": httperr.CodeCostCapExceeded, "max_cost": capStr}
	msg := fmt.Sprintf("the request's worst-case cost exceeds %s (%s)", hdrMaxCost, capStr)
	if wc.Unbounded {
		msg = fmt.Sprintf("the request sets no output limit (%s), so its worst-case cost is unbounded: set it to use %s", limitName(c.class.Kind), hdrMaxCost)
	} else if c.disclose {
		msg = fmt.Sprintf("the request's worst-case cost %s exceeds %s (%s)", pricing.FormatDecimal(wc.Cost), hdrMaxCost, capStr)
	}
	if c.disclose {
		t["worst_case_cost"] = pricing.FormatDecimal(wc.Cost)
		t["unbounded"] = wc.Unbounded
		t["price_rule_id"] = wc.RuleID
		t["price_rule_version"] = wc.RuleVersion
		if tier := tierOf(c.req); tier != "" {
			t["service_tier"] = tier
		}
		t["prompt_tokens"] = wc.PromptTokens
		t["max_output_tokens"] = wc.MaxOutputTokens
	}
	return &httperr.Error{Status: http.StatusPaymentRequired, Code: httperr.CodeCostCapExceeded, Message: msg, Tollgate: t}
}

// limitName names a dialect's output limit for a client message.
func limitName(kind vocab.Kind) string {
	switch kind {
	case vocab.KindAlphaChatCompletions:
		return "max_completion_tokens or max_tokens"
	case vocab.KindAlphaResponses:
		return "max_output_tokens"
	case vocab.KindBetaMessages:
		return "max_tokens"
	case vocab.KindGammaGenerateContent:
		return "generationConfig.maxOutputTokens"
	}
	return "the output limit"
}

// estimatePath is the pre-call quote (docs/cost.md, "The pre-call quote").
const estimatePath = "/v1/cost/estimate"

// estimateCost answers POST /v1/cost/estimate: the worst case of the request in the body, for the endpoint it
// names, classified, permitted and routed like the real request, without calling an upstream or reserving.
func (h *Handler) estimateCost(w http.ResponseWriter, r *http.Request, c *call) error {
	c.class.Kind = keyFamily(r)
	if err := h.authenticate(r, c); err != nil {
		return err
	}
	if !c.snap.DisclosesCost(c.key) {
		return httperr.NotFound(r.Method, r.URL.Path) // as an unknown path (docs/cost.md, "Turning it off")
	}
	if err := h.readBody(w, r, c); err != nil {
		return err
	}
	ep, inner, ok := jsonkit.Members2(c.body, "endpoint", "request")
	var endpoint string
	if !ok || ep == nil || inner == nil || json.Unmarshal(ep, &endpoint) != nil {
		return httperr.Malformed(`the body must be {"endpoint": "<path>", "request": {…}}`, nil)
	}
	path, query, _ := strings.Cut(endpoint, "?")
	class, ok := Classify(http.MethodPost, path, query, r.Header)
	if !ok || class.Multipart || !billable(class.Op) {
		e := httperr.Malformed(fmt.Sprintf("%q is not an endpoint the gateway prices", endpoint), nil)
		e.Param = "endpoint"
		return e
	}
	c.class = class
	c.body = append([]byte(nil), inner...)
	if err := h.readRequest(r, c); err != nil {
		return err
	}
	if err := readCostCap(r, c); err != nil {
		return err
	}
	if err := h.candidates(r, c); err != nil {
		return err
	}
	maxOut := outputLimit(c.class.Kind, c.body)
	first := c.worstCase(c.usable[0], maxOut)
	highest := first.Cost
	within := false
	for _, u := range c.usable {
		wc := c.worstCase(u, maxOut)
		if wc.Cost.Cmp(highest) > 0 {
			highest = wc.Cost
		}
		within = within || (c.maxCost != nil && !wc.Exceeds(c.maxCost))
	}
	writeJSON(w, http.StatusOK, estimateJSON(first, highest, tierOf(c.req), c.maxCost, within))
	return nil
}

func estimateJSON(wc pricing.WorstCase, highest *decimal.Big, tier string, limit *decimal.Big, within bool) []byte {
	var w jsonkit.Writer
	w.Open('{')
	w.Key("object")
	w.Str("cost.estimate")
	w.Key("worst_case_cost")
	w.Str(pricing.FormatDecimal(wc.Cost))
	w.Key("max_worst_case_cost")
	w.Str(pricing.FormatDecimal(highest))
	w.Key("unbounded")
	w.Bool(wc.Unbounded)
	w.Key("price_rule_id")
	w.Int(wc.RuleID)
	w.Key("price_rule_version")
	w.Int(wc.RuleVersion)
	if tier != "" {
		w.Key("service_tier")
		w.Str(tier)
	}
	w.Key("prompt_tokens")
	w.Int(wc.PromptTokens)
	w.Key("max_output_tokens")
	w.Int(wc.MaxOutputTokens)
	if limit != nil {
		w.Key("within_cap")
		w.Bool(within)
	}
	w.Close('}')
	return w.B
}
