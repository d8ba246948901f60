package pricing

import (
	"errors"
	"fmt"

	"github.com/ericlagergren/decimal"
)

// WorstCase is the most one request can be billed under a rule before it is sent: the cost-cap check at
// admission and the pre-call estimate (docs/cost.md, "The worst case").
//
// Every prompt token is priced at the dearest prompt category the rule bills (input, cache read or one of
// the cache creations: a request may write its whole prompt to a cache), and every output token at the
// dearest output category (output or image output: an alpha chat answer may report its completion as image
// tokens, an image operation bills it all as image output). Rates are the effective ones after tiers: the
// prompt-threshold entry the prompt estimate reaches and the requested service tier's entry, exactly as
// Rule.Quote would select them for a usage with that many prompt tokens.
type WorstCase struct {
	// RuleID and RuleVersion name the rule (0 when no rule matched: cost 0).
	RuleID      int64
	RuleVersion int64
	// PromptTokens and MaxOutputTokens are the inputs (negative prompt estimates are taken as 0).
	PromptTokens    int64
	MaxOutputTokens int64
	// Unbounded is set when the request has no output limit (MaxOutputTokens < 0) and the rule bills output
	// at a non-zero rate: no finite worst case exists. Cost is then the prompt part only.
	Unbounded bool
	// Cost is the exact worst-case cost in dollars (never nil).
	Cost *decimal.Big
	// PromptCategory and OutputCategory are the categories whose rates were used; PromptRate and
	// OutputRate those per-million rates (never nil).
	PromptCategory, OutputCategory Category
	PromptRate, OutputRate         *decimal.Big
	// PromptTier and ServiceTier index Rule.Tiers as in Quote (-1: none).
	PromptTier, ServiceTier int
}

// promptCategories and outputCategories are the categories a prompt or an answer token may be billed at.
var (
	promptCategories = []Category{CatInput, CatCacheRead, CatCacheCreation5m, CatCacheCreation30m, CatCacheCreation1h}
	outputCategories = []Category{CatOutput, CatImageOutput}
)

// WorstCase answers the worst case of a request under r: promptTokens is the prompt estimate,
// maxOutputTokens the request's output limit (max_tokens, max_completion_tokens, max_output_tokens,
// maxOutputTokens; negative when the request sets none) and serviceTier the requested tier. A nil rule
// (no rule matched) costs 0: such a request is served at cost 0 (SPEC, "Rule selection").
func (r *Rule) WorstCase(promptTokens, maxOutputTokens int64, serviceTier string) WorstCase {
	promptTokens = max(promptTokens, 0)
	w := WorstCase{PromptTokens: promptTokens, MaxOutputTokens: maxOutputTokens, Cost: newExact(),
		PromptCategory: CatInput, OutputCategory: CatOutput, PromptRate: newExact(), OutputRate: newExact(),
		PromptTier: -1, ServiceTier: -1}
	if r == nil {
		return w
	}
	w.RuleID, w.RuleVersion = r.ID, r.Version
	w.PromptTier, w.ServiceTier = r.SelectTiers(promptTokens, serviceTier)
	rates := r.Rates(w.PromptTier, w.ServiceTier)
	w.PromptCategory, w.PromptRate = dearest(&rates, promptCategories)
	w.OutputCategory, w.OutputRate = dearest(&rates, outputCategories)

	var term, tokens decimal.Big
	term.Context, tokens.Context = exact, exact
	tokens.SetMantScale(promptTokens, 0)
	exact.Mul(w.Cost, &tokens, w.PromptRate)
	switch {
	case maxOutputTokens >= 0:
		tokens.SetMantScale(maxOutputTokens, 0)
		exact.Mul(&term, &tokens, w.OutputRate)
		exact.Add(w.Cost, w.Cost, &term)
	case w.OutputRate.Sign() > 0:
		w.Unbounded = true
	}
	exact.Mul(w.Cost, w.Cost, perMillion)
	return w
}

// dearest answers the category of cats with the highest rate (the earlier one on ties) and a copy of it.
func dearest(rates *Prices, cats []Category) (Category, *decimal.Big) {
	best := cats[0]
	for _, c := range cats[1:] {
		if rates[c].Cmp(rates[best]) > 0 {
			best = c
		}
	}
	return best, newExact().Copy(rates[best])
}

// Exceeds reports whether the worst case is over limit (a cost cap): an unbounded worst case exceeds every
// limit; a worst case equal to the limit does not exceed it.
func (w WorstCase) Exceeds(limit *decimal.Big) bool {
	return w.Unbounded || w.Cost.Cmp(limit) > 0
}

// ErrInvalidCostCap is returned (wrapped) by ParseCostCap.
var ErrInvalidCostCap = errors.New("invalid cost cap")

// ParseCostCap parses a cost cap (the request header of docs/cost.md, "Cost cap"): a plain non-negative
// decimal number of dollars in the money parser's syntax (ParseDecimal), surrounding spaces allowed.
func ParseCostCap(s string) (*decimal.Big, error) {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	d, err := ParseDecimal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCostCap, err)
	}
	if d.Sign() < 0 {
		return nil, fmt.Errorf("%w: negative", ErrInvalidCostCap)
	}
	return d, nil
}
