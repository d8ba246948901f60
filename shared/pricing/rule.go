// Package pricing owns Tollgate's pure pricing core: price-rule validation, rule selection for a
// (provider, model) pair, tier composition, exact decimal cost over the seven token categories,
// micro-dollar conversion and the admission estimate. It performs no I/O and never uses floats:
// prices are github.com/ericlagergren/decimal values computed with unlimited precision.
//
// A rule prices a (provider, model) pair per million tokens of each category, composed with its prompt-size
// and service tiers; docs/pricing.md states how a rule is selected, how tiers compose and the decisions
// taken there.
package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ericlagergren/decimal"
)

// MatchType says how a rule's model_match is compared with a model id.
type MatchType string

// Match types: how a rule's model_match is compared with the model name.
const (
	MatchExact    MatchType = "exact"
	MatchContains MatchType = "contains"
)

// Category is one of the seven disjoint token categories.
type Category int

// The seven token categories, in the spec's order.
const (
	CatInput Category = iota
	CatOutput
	CatCacheRead
	CatCacheCreation5m
	CatCacheCreation30m
	CatCacheCreation1h
	CatImageOutput
	NumCategories = 7
)

// categoryFields are the spec's price field names, indexed by Category.
var categoryFields = [NumCategories]string{
	"input_price", "output_price", "cache_read_price", "cache_creation_5m_price",
	"cache_creation_30m_price", "cache_creation_1h_price", "image_output_price",
}

// PriceField returns the spec's price field name of c (e.g. "cache_read_price").
func (c Category) PriceField() string {
	if c < 0 || c >= NumCategories {
		return fmt.Sprintf("category(%d)", int(c))
	}
	return categoryFields[c]
}

// String returns the token category name ("input_tokens", …).
func (c Category) String() string {
	return strings.TrimSuffix(c.PriceField(), "_price") + "_tokens"
}

// Prices holds one per-million price per category, indexed by Category. In a Tier a nil entry
// means "no explicit override"; in a Rule nil is treated as 0.
type Prices [NumCategories]*decimal.Big

// Rule is a validated price rule. Build it with ParseRule; treat it as immutable once it is in an
// Index (Quote only reads it).
type Rule struct {
	ID         int64
	ProviderID int64 // 0: global
	MatchType  MatchType
	ModelMatch string
	// Prices are the base per-million prices, indexed by Category.
	Prices  Prices
	Enabled bool
	Tiers   []Tier
	// Bounds are the settlement bounds in force with this rule, set by shared/snapshot.Compile from the
	// snapshot (the zero value means DefaultBounds).
	Bounds Bounds
	// Version is the rule's version in the price history (configv1.PriceRule.version), carried into the
	// settlement record beside the rule id; 0 when unknown.
	Version int64

	// rates memoises the effective rates per (prompt entry, service entry) combination; built by
	// ParseRule, nil for hand-built rules (which are then priced without the memo).
	rates *rateCache
}

// Tier is one validated pricing_tiers_json entry.
type Tier struct {
	MinPromptTokens int64
	// ServiceTier is the normalised tier name (NormalizeTier); "" for a prompt-threshold entry.
	ServiceTier string
	// RawServiceTier is the name as written.
	RawServiceTier string
	// Multiplier applies to the rates this entry does not override; nil means 1.
	Multiplier *decimal.Big
	// Prices are the explicit per-million overrides; nil entries are not overridden.
	Prices Prices
}

// IsServiceTier reports whether t is a service-tier entry (as opposed to a prompt-threshold one).
func (t *Tier) IsServiceTier() bool { return t.ServiceTier != "" }

// RuleInput is a price rule as the spec's JSON carries it (admin API, import/export).
type RuleInput struct {
	ID                    int64           `json:"id"`
	ProviderID            *int64          `json:"provider_id"`
	MatchType             string          `json:"match_type"`
	ModelMatch            string          `json:"model_match"`
	InputPrice            string          `json:"input_price"`
	OutputPrice           string          `json:"output_price"`
	CacheReadPrice        string          `json:"cache_read_price"`
	CacheCreation5mPrice  string          `json:"cache_creation_5m_price"`
	CacheCreation30mPrice string          `json:"cache_creation_30m_price"`
	CacheCreation1hPrice  string          `json:"cache_creation_1h_price"`
	ImageOutputPrice      string          `json:"image_output_price"`
	Enabled               bool            `json:"enabled"`
	PricingTiersJSON      json.RawMessage `json:"pricing_tiers_json,omitempty"`
}

func (in *RuleInput) prices() [NumCategories]string {
	return [NumCategories]string{in.InputPrice, in.OutputPrice, in.CacheReadPrice,
		in.CacheCreation5mPrice, in.CacheCreation30mPrice, in.CacheCreation1hPrice, in.ImageOutputPrice}
}

// FieldError is one validation problem.
type FieldError struct {
	Field     string `json:"field"`
	TierIndex int    `json:"tier_index"` // index in pricing_tiers_json, -1 when not a tier field
	Message   string `json:"message"`
}

func (e FieldError) String() string {
	if e.TierIndex >= 0 {
		return fmt.Sprintf("pricing_tiers_json[%d].%s: %s", e.TierIndex, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// ValidationError lists every problem of a rejected rule.
type ValidationError struct {
	RuleID   int64
	Problems []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("invalid price rule %d: %s", e.RuleID, strings.Join(parts, "; "))
}

func (e *ValidationError) add(field string, tier int, format string, args ...any) {
	e.Problems = append(e.Problems, FieldError{Field: field, TierIndex: tier, Message: fmt.Sprintf(format, args...)})
}

// ParseRule validates in and builds a Rule. On failure it returns a *ValidationError listing
// every problem: a missing or malformed decimal in any price or tier field, a negative price or
// multiplier, an unknown match_type, an empty model_match, a negative provider_id, malformed
// pricing_tiers_json, an unknown tier field, a min_prompt_tokens that is not an integer from 0 to
// MaxMinPromptTokens, and a tier entry that has neither min_prompt_tokens nor service_tier.
func ParseRule(in RuleInput) (*Rule, error) {
	verr := &ValidationError{RuleID: in.ID}
	r := &Rule{ID: in.ID, Enabled: in.Enabled, ModelMatch: in.ModelMatch}
	if in.ProviderID != nil {
		if *in.ProviderID < 0 {
			verr.add("provider_id", -1, "must not be negative, got %d", *in.ProviderID)
		}
		r.ProviderID = *in.ProviderID
	}
	switch mt := MatchType(in.MatchType); mt {
	case MatchExact, MatchContains:
		r.MatchType = mt
	default:
		verr.add("match_type", -1, "must be %q or %q, got %q", MatchExact, MatchContains, in.MatchType)
	}
	if in.ModelMatch == "" {
		verr.add("model_match", -1, "must not be empty")
	}
	for c, s := range in.prices() {
		field := categoryFields[c]
		if s == "" {
			verr.add(field, -1, "required")
			continue
		}
		r.Prices[c] = parsePrice(verr, field, -1, s)
	}
	r.Tiers = parseTiers(verr, in.PricingTiersJSON)
	if len(verr.Problems) > 0 {
		return nil, verr
	}
	r.rates = newRateCache(r.Tiers)
	return r, nil
}

// parsePrice parses a non-negative decimal, recording a problem on failure.
func parsePrice(verr *ValidationError, field string, tier int, s string) *decimal.Big {
	d, err := ParseDecimal(s)
	if err != nil {
		verr.add(field, tier, "%v", err)
		return nil
	}
	if d.Sign() < 0 {
		verr.add(field, tier, "must not be negative, got %s", s)
		return nil
	}
	return d
}

// tierFields are the accepted keys of a tier entry.
var tierFields = map[string]bool{"min_prompt_tokens": true, "service_tier": true, "multiplier": true}

func init() {
	for _, f := range categoryFields {
		tierFields[f] = true
	}
}

func parseTiers(verr *ValidationError, raw json.RawMessage) []Tier {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var entries []map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&entries); err != nil {
		verr.add("pricing_tiers_json", -1, "must be a JSON array of objects: %v", err)
		return nil
	}
	if dec.More() {
		verr.add("pricing_tiers_json", -1, "must be a single JSON array")
		return nil
	}
	tiers := make([]Tier, 0, len(entries))
	for i, e := range entries {
		tiers = append(tiers, parseTier(verr, i, e))
	}
	return tiers
}

func parseTier(verr *ValidationError, i int, e map[string]json.RawMessage) Tier {
	var t Tier
	var unknown []string
	for k := range e {
		if !tierFields[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		verr.add(k, i, "unknown tier field")
	}
	hasThreshold := false
	if v, ok := present(e, "min_prompt_tokens"); ok {
		hasThreshold = true
		n, err := parseTokenThreshold(v)
		if err != nil {
			verr.add("min_prompt_tokens", i, "%v", err)
		}
		t.MinPromptTokens = n
	}
	if v, ok := present(e, "service_tier"); ok {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			verr.add("service_tier", i, "must be a string")
		} else {
			t.RawServiceTier = s
			t.ServiceTier = NormalizeTier(s)
			if t.ServiceTier == "" && strings.TrimSpace(s) != "" {
				verr.add("service_tier", i, "%q names no tier", s)
			}
		}
	}
	if !hasThreshold && t.ServiceTier == "" {
		verr.add("min_prompt_tokens", i, "a tier entry needs min_prompt_tokens or service_tier")
	}
	if v, ok := present(e, "multiplier"); ok {
		if s, ok := decimalText(verr, "multiplier", i, v); ok {
			t.Multiplier = parsePrice(verr, "multiplier", i, s)
		}
	}
	for c, field := range categoryFields {
		if v, ok := present(e, field); ok {
			if s, ok := decimalText(verr, field, i, v); ok {
				t.Prices[c] = parsePrice(verr, field, i, s)
			}
		}
	}
	return t
}

// present returns the raw value of key unless it is absent or null.
func present(e map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := e[key]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

// decimalText accepts a JSON string or a JSON number (its literal text, never a float).
func decimalText(verr *ValidationError, field string, i int, v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	// v is a value the library delimited; it decides whether it is a string or a number (null is neither).
	var s string
	var n json.Number // a JSON number's literal text, never a float
	switch {
	case bytes.Equal(v, []byte("null")):
	case json.Unmarshal(v, &s) == nil:
		return s, true
	case json.Unmarshal(v, &n) == nil:
		return n.String(), true
	}
	verr.add(field, i, "must be a decimal string")
	return "", false
}

// MaxMinPromptTokens is the largest min_prompt_tokens a tier entry may have: 15 digits, like the
// integer part of a price (the bound validation has always applied). It is far above any context
// window and below 2^53, so a threshold stays exact wherever JSON numbers are doubles (the console,
// JavaScript clients).
const MaxMinPromptTokens int64 = 999_999_999_999_999

// parseTokenThreshold accepts an integer from 0 to MaxMinPromptTokens, written as a JSON number or
// as an integer in a JSON string (digits with an optional leading '-'). Every refusal names the
// field and the allowed range.
func parseTokenThreshold(v json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(v))
	var quoted string
	if s != "null" && json.Unmarshal(v, &quoted) == nil { // an integer in a JSON string
		s = quoted
	}
	digits, negative := strings.CutPrefix(s, "-")
	if !allDigits(digits) {
		return 0, fmt.Errorf("min_prompt_tokens must be an integer between 0 and %d, got %s", MaxMinPromptTokens, truncate(s))
	}
	if negative && strings.TrimLeft(digits, "0") != "" {
		return 0, fmt.Errorf("min_prompt_tokens is negative: must be an integer between 0 and %d, got %s", MaxMinPromptTokens, truncate(s))
	}
	n, err := strconv.ParseInt(digits, 10, 64) // only digits: the one possible error is a value beyond int64
	if err != nil || n > MaxMinPromptTokens {
		return 0, fmt.Errorf("min_prompt_tokens is too large: must be an integer between 0 and %d, got %s", MaxMinPromptTokens, truncate(s))
	}
	return n, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Input converts r back to the spec's JSON shape (for GET and export): prices as plain decimal
// strings, provider_id null for global rules, tiers re-encoded with their names as written.
// ParseRule(r.Input()) yields an equivalent rule.
func (r *Rule) Input() RuleInput {
	in := RuleInput{ID: r.ID, MatchType: string(r.MatchType), ModelMatch: r.ModelMatch, Enabled: r.Enabled}
	if r.ProviderID != 0 {
		p := r.ProviderID
		in.ProviderID = &p
	}
	prices := [NumCategories]*string{&in.InputPrice, &in.OutputPrice, &in.CacheReadPrice,
		&in.CacheCreation5mPrice, &in.CacheCreation30mPrice, &in.CacheCreation1hPrice, &in.ImageOutputPrice}
	for c, p := range prices {
		*p = FormatDecimal(r.Prices[c])
	}
	if len(r.Tiers) == 0 {
		return in
	}
	entries := make([]map[string]any, 0, len(r.Tiers))
	for _, t := range r.Tiers {
		e := map[string]any{}
		if t.ServiceTier == "" || t.MinPromptTokens != 0 {
			e["min_prompt_tokens"] = t.MinPromptTokens
		}
		if t.ServiceTier != "" {
			name := t.RawServiceTier
			if name == "" {
				name = t.ServiceTier
			}
			e["service_tier"] = name
		}
		if t.Multiplier != nil {
			e["multiplier"] = FormatDecimal(t.Multiplier)
		}
		for c, p := range t.Prices {
			if p != nil {
				e[categoryFields[c]] = FormatDecimal(p)
			}
		}
		entries = append(entries, e)
	}
	raw, err := json.Marshal(entries)
	if err != nil { // only strings and integers: cannot fail
		panic(fmt.Sprintf("encode pricing tiers of rule %d: %v", r.ID, err))
	}
	in.PricingTiersJSON = raw
	return in
}
