package pricing

import (
	"math"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/usage"
)

// Quote is the priced result of one usage under one rule.
type Quote struct {
	// RuleID is the rule used; 0 when no rule matched (cost 0).
	RuleID int64
	// Cost is the exact cost in dollars (never nil).
	Cost *decimal.Big
	// Micros is Cost in integer micro-dollars rounded half up. When Cost exceeds int64
	// micro-dollars it saturates at math.MaxInt64 and Saturated is set.
	Micros    int64
	Saturated bool
	// Rates are the effective per-million rates after tiers, indexed by Category (never nil).
	// They may be shared with other quotes of the same rule: read them, never modify them
	// (Rule.Rates returns fresh copies).
	Rates Prices
	// PromptTier and ServiceTier index Rule.Tiers: the selected prompt-threshold entry and the
	// selected service-tier entry; -1 when none.
	PromptTier  int
	ServiceTier int
}

// perMillion is 10^-6: per-million price × tokens × perMillion = dollars.
var perMillion = decimal.New(1, 6)

// QuoteFor prices u with rule r at the given service tier; a nil rule (no match) gives a zero
// quote with RuleID 0 and zero rates.
func QuoteFor(r *Rule, u usage.Usage, serviceTier string) Quote {
	return r.Quote(u, serviceTier)
}

func zeroQuote() Quote {
	q := Quote{Cost: newExact(), PromptTier: -1, ServiceTier: -1}
	for c := range q.Rates {
		q.Rates[c] = newExact()
	}
	return q
}

// SelectTiers returns the indexes (-1: none) of the prompt-threshold entry and the service-tier
// entry that apply to promptTokens and serviceTier (normalised here). An entry is reached when
// promptTokens >= min_prompt_tokens; among reached entries the highest threshold wins, ties going
// to the earlier entry. An empty or unknown tier selects no service-tier entry.
func (r *Rule) SelectTiers(promptTokens int64, serviceTier string) (prompt, service int) {
	prompt, service = -1, -1
	st := NormalizeTier(serviceTier)
	for i := range r.Tiers {
		t := &r.Tiers[i]
		if promptTokens < t.MinPromptTokens {
			continue
		}
		if t.ServiceTier == "" {
			if prompt < 0 || t.MinPromptTokens > r.Tiers[prompt].MinPromptTokens {
				prompt = i
			}
		} else if st != "" && t.ServiceTier == st {
			if service < 0 || t.MinPromptTokens > r.Tiers[service].MinPromptTokens {
				service = i
			}
		}
	}
	return prompt, service
}

// Rates returns the effective per-million rates for the given prompt-threshold and service-tier
// entries (indexes into r.Tiers, -1 for none): base; then the prompt entry's explicit price, else
// base × its multiplier; then the service entry's explicit price as is, else the prompt-adjusted
// rate × its multiplier. The returned values are fresh.
func (r *Rule) Rates(prompt, service int) Prices {
	var out Prices
	for c := range out {
		rate := newExact()
		if b := r.Prices[c]; b != nil {
			rate.Copy(b)
		}
		rate = applyTier(r, prompt, Category(c), rate)
		rate = applyTier(r, service, Category(c), rate)
		out[c] = rate
	}
	return out
}

func applyTier(r *Rule, i int, c Category, rate *decimal.Big) *decimal.Big {
	if i < 0 || i >= len(r.Tiers) {
		return rate
	}
	t := &r.Tiers[i]
	if p := t.Prices[c]; p != nil {
		return newExact().Copy(p)
	}
	if t.Multiplier != nil {
		exact.Mul(rate, rate, t.Multiplier)
	}
	return rate
}

// Quote prices u under r at serviceTier (the reported tier at settlement, the requested one at
// admission). Negative token counts are treated as 0. The arithmetic is exact: cost = Σ tokens ×
// rate / 1,000,000.
//
// A nil rule (no rule matched) gives a zero quote with RuleID 0.
func (r *Rule) Quote(u usage.Usage, serviceTier string) Quote {
	if r == nil {
		return zeroQuote()
	}
	q := Quote{RuleID: r.ID}
	q.PromptTier, q.ServiceTier = r.SelectTiers(u.PromptTokens(), serviceTier)
	e := r.sharedRates(q.PromptTier, q.ServiceTier)
	q.Rates = e.prices
	if e.fast.ok {
		if c, m, sat, ok := e.fast.quote(u); ok {
			q.Cost, q.Micros, q.Saturated = c, m, sat
			return q
		}
	}
	q.Cost = cost(&q.Rates, u)
	m, err := ToMicros(q.Cost)
	if err != nil {
		m, q.Saturated = math.MaxInt64, true
	}
	q.Micros = m
	return q
}

// cost is Σ tokens × rate / 1,000,000, exact.
func cost(rates *Prices, u usage.Usage) *decimal.Big {
	sum := newExact()
	var term, tokens decimal.Big
	term.Context, tokens.Context = exact, exact
	for c, n := range u.Counts() {
		rate := rates[c]
		if n <= 0 || rate == nil || rate.Sign() == 0 {
			continue
		}
		tokens.SetMantScale(n, 0)
		exact.Mul(&term, &tokens, rate)
		exact.Add(sum, sum, &term)
	}
	return exact.Mul(sum, sum, perMillion)
}

// TokenEstimator turns a request body length into estimated input tokens (quota admission).
type TokenEstimator func(bodyBytes int) int64

// BytesPerTokenEstimator is the default estimator: ceil(bodyBytes / 4); negative lengths give 0.
func BytesPerTokenEstimator(bodyBytes int) int64 {
	if bodyBytes <= 0 {
		return 0
	}
	return (int64(bodyBytes) + 3) / 4
}

// EstimateMicros is the admission estimate with the default estimator: ceil(bodyBytes/4) input
// tokens priced at the tier-adjusted input rate (prompt tiers evaluated with that estimate as the
// prompt tokens, service tier from the request), in micro-dollars rounded half up. A nil rule
// gives 0.
func EstimateMicros(rule *Rule, bodyBytes int, tier string) int64 {
	return EstimateMicrosWith(BytesPerTokenEstimator, rule, bodyBytes, tier)
}

// EstimateMicrosWith is EstimateMicros with a pluggable token estimator (nil: the default).
func EstimateMicrosWith(est TokenEstimator, rule *Rule, bodyBytes int, tier string) int64 {
	if rule == nil {
		return 0
	}
	if est == nil {
		est = BytesPerTokenEstimator
	}
	tokens := est(bodyBytes)
	if tokens <= 0 {
		return 0
	}
	return rule.Quote(usage.Usage{Input: tokens}, tier).Micros
}
