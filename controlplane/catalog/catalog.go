// Package catalog maps open price catalogs (genai-prices data.json, models.dev TOML trees) to
// Tollgate price rules. It is pure: it reads the file text it is given and never fetches anything.
// Every number is read from the file's literal text as an exact decimal (pricing.ParseNumberLiteral),
// never through a float. Each catalog entry either becomes one or more rules or is reported as
// Skipped with the reason; docs/pricing.md documents the mapping per format.
package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Formats.
const (
	FormatGenAIPrices = "genai-prices"
	FormatModelsDev   = "models.dev"
)

// Options steer the mapping.
type Options struct {
	// ProviderMap maps a catalog provider id ("anthropic") to a Tollgate provider id: the entries of
	// a mapped provider become provider-scoped rules; the others global ones.
	ProviderMap map[string]int64
	// ProviderTypes gives the channel type of every Tollgate provider (id → type). With it, a catalog
	// provider that prices a cloud channel type and is absent from ProviderMap (genai-prices "aws",
	// "google", "azure"; ChannelTypeMap) is scoped to every provider of that type, one rule per
	// provider, and rules for a cloud provider match the ids that cloud bills (cloudMatch).
	ProviderTypes map[int64]vocab.ChannelType
	// OnlyMapped skips (with a reason) the entries of catalog providers neither in ProviderMap nor
	// mapped by channel type.
	OnlyMapped bool
	// StartsWithAsContains imports a starts_with clause as a contains rule (which matches more
	// model ids); without it such clauses are skipped with a reason.
	StartsWithAsContains bool
	// At picks, among dated conditional prices, the one in force at that time (zero: now).
	At time.Time
}

// Rule is a catalog entry (or one clause of it) mapped to a price rule.
type Rule struct {
	// EntryID names the catalog entry: "<provider>/<model id>", plus "#<n>" for the n-th clause
	// of an "or" match.
	EntryID string `json:"entry_id"`
	// Rule has ID 0 and Enabled true; prices are canonical decimal strings.
	Rule pricing.RuleInput `json:"rule"`
	// Notes say what the mapping had to decide (a defaulted category, an ignored price, a widened
	// match, a dated price not in force).
	Notes []string `json:"notes,omitempty"`
}

// Key identifies a rule by what it matches: the scope, the match type and the pattern.
type Key struct {
	ProviderID int64  `json:"provider_id"` // 0: global
	MatchType  string `json:"match_type"`
	ModelMatch string `json:"model_match"`
}

// KeyOf returns the key of a rule.
func KeyOf(r pricing.RuleInput) Key {
	k := Key{MatchType: r.MatchType, ModelMatch: r.ModelMatch}
	if r.ProviderID != nil {
		k.ProviderID = *r.ProviderID
	}
	return k
}

// Skipped is a catalog entry (or clause) that could not be mapped, and why.
type Skipped struct {
	EntryID string `json:"entry_id"`
	Reason  string `json:"reason"`
}

// Result is a mapped catalog.
type Result struct {
	Format string `json:"format"`
	// Digest is the sha256 (hex) of the catalog text (for models.dev: of the sorted file paths and
	// contents).
	Digest string `json:"digest"`
	// Entries counts the catalog's model entries.
	Entries int       `json:"entries"`
	Rules   []Rule    `json:"rules"`
	Skipped []Skipped `json:"skipped"`
	// ChannelTypeScopes lists the catalog providers mapped by channel type (not by ProviderMap) and
	// the Tollgate providers their entries were scoped to.
	ChannelTypeScopes map[string][]int64 `json:"channel_type_scopes,omitempty"`
}

// prices collects the per-category prices of one entry while it is mapped.
type prices struct {
	cat     pricing.Prices
	tiers   map[int64]*pricing.Prices // prompt threshold → explicit prices
	service map[string]*pricing.Prices
	notes   []string
}

// defaultsFrom says which priced category stands in for one the catalog does not price: never 0,
// so a catalog gap never bills tokens for free.
var defaultsFrom = [pricing.NumCategories]pricing.Category{
	pricing.CatInput:            -1,
	pricing.CatOutput:           pricing.CatInput,
	pricing.CatCacheRead:        pricing.CatInput,
	pricing.CatCacheCreation5m:  pricing.CatInput,
	pricing.CatCacheCreation30m: pricing.CatCacheCreation5m,
	pricing.CatCacheCreation1h:  pricing.CatCacheCreation5m,
	pricing.CatImageOutput:      pricing.CatOutput,
}

// ruleInput builds the rule; it fails when there is no input price.
func (p *prices) ruleInput(providerID int64, matchType pricing.MatchType, match string) (pricing.RuleInput, []string, error) {
	if p.cat[pricing.CatInput] == nil {
		return pricing.RuleInput{}, nil, fmt.Errorf("no input price")
	}
	notes := append([]string(nil), p.notes...)
	cat := p.cat
	for c := pricing.Category(0); c < pricing.NumCategories; c++ {
		if cat[c] == nil {
			cat[c] = cat[defaultsFrom[c]]
			notes = append(notes, fmt.Sprintf("%s not in the catalog: set to %s (%s)", c.PriceField(), defaultsFrom[c].PriceField(), pricing.FormatDecimal(cat[c])))
		}
	}
	r := &pricing.Rule{MatchType: matchType, ModelMatch: match, Enabled: true, ProviderID: providerID, Prices: pricing.Prices(cat)}
	thresholds := make([]int64, 0, len(p.tiers))
	for t := range p.tiers {
		thresholds = append(thresholds, t)
	}
	sort.Slice(thresholds, func(i, j int) bool { return thresholds[i] < thresholds[j] })
	// The engine applies only the highest reached prompt entry, so each entry carries forward the
	// tier prices of lower thresholds for the categories it does not set itself.
	var carry pricing.Prices
	for _, t := range thresholds {
		for c, d := range p.tiers[t] {
			if d != nil {
				carry[c] = d
			}
		}
		entry := carry
		// A category the catalog does not price follows the one standing in for it in each entry too (an
		// alpha model's cache write is its 30-minute write: its tier price is the 30m tier price).
		for c := pricing.CatInput + 1; c < pricing.NumCategories; c++ {
			if p.cat[c] == nil && entry[c] == nil {
				entry[c] = entry[defaultsFrom[c]]
			}
		}
		r.Tiers = append(r.Tiers, pricing.Tier{MinPromptTokens: t, Prices: entry})
	}
	names := make([]string, 0, len(p.service))
	for n := range p.service {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r.Tiers = append(r.Tiers, pricing.Tier{ServiceTier: pricing.NormalizeTier(n), RawServiceTier: n, Prices: *p.service[n]})
	}
	in := r.Input()
	if in.PricingTiersJSON == nil {
		in.PricingTiersJSON = json.RawMessage("[]")
	}
	if _, err := pricing.ParseRule(in); err != nil { // the engine's own check: never hand over a rule it refuses
		return pricing.RuleInput{}, nil, err
	}
	return in, notes, nil
}

// collector gathers rules and skips, refusing a second rule with the key of an earlier one.
type collector struct {
	res  Result
	seen map[Key]int // key → index in res.Rules
	opt  Options
}

func newCollector(format, digest string, opt Options) *collector {
	if opt.At.IsZero() {
		opt.At = time.Now()
	}
	return &collector{res: Result{Format: format, Digest: digest, Rules: []Rule{}, Skipped: []Skipped{}}, seen: map[Key]int{}, opt: opt}
}

func (c *collector) skip(entry, format string, args ...any) {
	c.res.Skipped = append(c.res.Skipped, Skipped{EntryID: entry, Reason: fmt.Sprintf(format, args...)})
}

func (c *collector) add(entry string, p *prices, providerID int64, mt pricing.MatchType, match string, extra ...string) {
	in, notes, err := p.ruleInput(providerID, mt, match)
	if err != nil {
		c.skip(entry, "%v", err)
		return
	}
	k := KeyOf(in)
	if i, dup := c.seen[k]; dup {
		c.skip(entry, "matches the same models as entry %s (%s %q), which is imported", c.res.Rules[i].EntryID, k.MatchType, k.ModelMatch)
		return
	}
	c.seen[k] = len(c.res.Rules)
	c.res.Rules = append(c.res.Rules, Rule{EntryID: entry, Rule: in, Notes: append(notes, extra...)})
}

func digestOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// price parses one literal number of the catalog as an exact non-negative decimal.
func price(lit string) (*decimal.Big, error) {
	d, err := pricing.ParseNumberLiteral(strings.TrimSpace(lit))
	if err != nil {
		return nil, err
	}
	if d.Sign() < 0 {
		return nil, fmt.Errorf("negative price %s", lit)
	}
	return d, nil
}
