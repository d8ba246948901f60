package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
)

// genai-prices data.json: an array of providers, each with models (data.schema.json).
type gpProvider struct {
	ID     string    `json:"id"`
	Models []gpModel `json:"models"`
}

type gpModel struct {
	ID     string          `json:"id"`
	Match  json.RawMessage `json:"match"`
	Prices json.RawMessage `json:"prices"`
}

type gpConditional struct {
	Constraint *struct {
		StartDate *string `json:"start_date"`
		StartTime *string `json:"start_time"`
		EndTime   *string `json:"end_time"`
	} `json:"constraint"`
	Prices json.RawMessage `json:"prices"`
}

type gpTiered struct {
	Base  json.Number `json:"base"`
	Tiers []struct {
		Start json.Number `json:"start"`
		Price json.Number `json:"price"`
	} `json:"tiers"`
}

// gpCategories maps genai-prices price keys to categories.
var gpCategories = map[string]pricing.Category{
	"input_mtok":       pricing.CatInput,
	"output_mtok":      pricing.CatOutput,
	"cache_read_mtok":  pricing.CatCacheRead,
	"cache_write_mtok": pricing.CatCacheCreation5m,
}

// gpIgnored are per-token prices of modalities Tollgate does not count apart: audio and text
// tokens are billed at the input / output / cache prices. The rule is imported with a note.
var gpIgnored = map[string]bool{
	"input_audio_mtok": true, "cache_audio_read_mtok": true, "output_audio_mtok": true,
	"input_text_mtok": true, "output_text_mtok": true, "cache_text_read_mtok": true, "cache_text_write_mtok": true,
}

// ParseGenAIPrices maps a genai-prices data.json document. An error means the document as a whole
// is unusable (not the expected JSON); a bad entry is reported in Result.Skipped.
func ParseGenAIPrices(doc []byte, opt Options) (*Result, error) {
	var providers []gpProvider
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&providers); err != nil {
		return nil, fmt.Errorf("genai-prices document: not a JSON array of providers: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("genai-prices document: data after the JSON array")
	}
	c := newCollector(FormatGenAIPrices, digestOf(doc), opt)
	for _, p := range providers {
		if p.ID == "" {
			c.skip("(provider without id)", "provider without id: its %d model(s) are not imported", len(p.Models))
			c.res.Entries += len(p.Models)
			continue
		}
		for _, m := range p.Models {
			c.res.Entries++
			c.gpEntry(p.ID, m)
		}
	}
	return &c.res, nil
}

func (c *collector) gpEntry(provider string, m gpModel) {
	entry := provider + "/" + m.ID
	targets := c.targets(provider)
	if targets == nil {
		c.skip(entry, "catalog provider %q is not mapped to a Tollgate provider (only mapped providers are imported)", provider)
		return
	}
	if m.ID == "" {
		c.skip(entry, "entry without id")
		return
	}
	p, err := c.gpPrices(m.Prices)
	if err != nil {
		c.skip(entry, "%v", err)
		return
	}
	clauses, err := gpClauses(m.Match)
	if err != nil {
		c.skip(entry, "match: %v", err)
		return
	}
	for _, t := range targets {
		for i, cl := range clauses {
			id := entry
			if len(clauses) > 1 {
				id = entry + "#" + strconv.Itoa(i)
			}
			c.gpClause(entryIn(id, t, len(targets)), p, t, cl)
		}
	}
}

// gpClause imports one clause of an entry into one target.
func (c *collector) gpClause(id string, p *prices, t target, cl gpClause) {
	if mt, match, note, ok := cloudMatch(t.channel, cl.op, cl.value); ok {
		var extra []string
		if note != "" {
			extra = append(extra, note)
		}
		c.add(id, p, t.providerID, mt, match, extra...)
		return
	}
	switch {
	case cl.op == "equals":
		c.add(id, p, t.providerID, pricing.MatchExact, cl.value)
	case cl.op == "contains":
		c.add(id, p, t.providerID, pricing.MatchContains, cl.value)
	case cl.op == "starts_with" && c.opt.StartsWithAsContains:
		c.add(id, p, t.providerID, pricing.MatchContains, cl.value,
			fmt.Sprintf("starts_with %q imported as contains (also matches ids that only contain it)", cl.value))
	case cl.op == "starts_with":
		c.skip(id, "match starts_with %q cannot be expressed (Tollgate matches exact or contains); plan with starts_with_as_contains to import it as contains", cl.value)
	default:
		c.skip(id, "match %s cannot be expressed (Tollgate matches exact or contains)", cl.describe())
	}
}

type gpClause struct {
	op, value string
	raw       json.RawMessage
}

func (cl gpClause) describe() string {
	if cl.value != "" {
		return fmt.Sprintf("%s %q", cl.op, cl.value)
	}
	s := string(cl.raw)
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return fmt.Sprintf("%s %s", cl.op, s)
}

// gpClauses flattens a match: an "or" becomes its clauses (nested "or"s too); any other clause is
// itself. Unknown or malformed clauses are an error.
func gpClauses(raw json.RawMessage) ([]gpClause, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return nil, fmt.Errorf("not a match clause (an object with one key): %s", truncate(raw))
	}
	for op, v := range m {
		switch op {
		case "or":
			var items []json.RawMessage
			if err := json.Unmarshal(v, &items); err != nil || len(items) == 0 {
				return nil, fmt.Errorf("\"or\" is not a non-empty array")
			}
			var out []gpClause
			for _, it := range items {
				cs, err := gpClauses(it)
				if err != nil {
					return nil, err
				}
				out = append(out, cs...)
			}
			return out, nil
		case "equals", "contains", "starts_with", "ends_with", "regex":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("%q is not a string", op)
			}
			if s == "" {
				return nil, fmt.Errorf("%q is empty", op)
			}
			return []gpClause{{op: op, value: s}}, nil
		case "and":
			return []gpClause{{op: op, raw: v}}, nil
		default:
			return nil, fmt.Errorf("unknown match clause %q", op)
		}
	}
	panic("unreachable")
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// gpPrices reads an entry's prices: one price set, or conditional prices of which the one in
// force at c.opt.At is taken (time-of-day prices cannot be expressed).
func (c *collector) gpPrices(raw json.RawMessage) (*prices, error) {
	raw = bytes.TrimSpace(raw)
	var elems []json.RawMessage // the library decides what an array is
	if json.Unmarshal(raw, &elems) != nil {
		return gpPriceSet(raw) // not an array: one price set
	}
	var conds []gpConditional
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&conds); err != nil || len(conds) == 0 {
		return nil, fmt.Errorf("prices: not a non-empty array of conditional prices")
	}
	chosen, notes := 0, []string(nil)
	var chosenStart time.Time
	for i, cp := range conds {
		if cp.Constraint == nil {
			continue
		}
		if cp.Constraint.StartTime != nil || cp.Constraint.EndTime != nil {
			return nil, fmt.Errorf("prices depend on the time of day (%s–%s): cannot be expressed", deref(cp.Constraint.StartTime), deref(cp.Constraint.EndTime))
		}
		if cp.Constraint.StartDate == nil {
			return nil, fmt.Errorf("prices[%d]: constraint without start_date", i)
		}
		d, err := time.Parse(time.DateOnly, *cp.Constraint.StartDate)
		if err != nil {
			return nil, fmt.Errorf("prices[%d]: start_date %q is not a date", i, *cp.Constraint.StartDate)
		}
		if !d.After(c.opt.At) && !d.Before(chosenStart) {
			chosen, chosenStart = i, d
		} else if d.After(c.opt.At) {
			notes = append(notes, fmt.Sprintf("prices from %s (prices[%d]) are not in force yet at %s: not imported", *cp.Constraint.StartDate, i, c.opt.At.UTC().Format(time.DateOnly)))
		}
	}
	p, err := gpPriceSet(conds[chosen].Prices)
	if err != nil {
		return nil, fmt.Errorf("prices[%d]: %w", chosen, err)
	}
	p.notes = append(p.notes, notes...)
	return p, nil
}

func deref(s *string) string {
	if s == nil {
		return "?"
	}
	return *s
}

// gpPriceSet maps one ModelPrice object.
func gpPriceSet(raw json.RawMessage) (*prices, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("prices: not an object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p := &prices{}
	var ignored []string
	for _, k := range keys {
		v := bytes.TrimSpace(m[k])
		if k == "requests_kcount" {
			return nil, fmt.Errorf("a per-request price (requests_kcount) cannot be expressed: Tollgate prices tokens only")
		}
		if gpIgnored[k] {
			ignored = append(ignored, k)
			continue
		}
		cat, ok := gpCategories[k]
		if !ok {
			return nil, fmt.Errorf("price %q has no Tollgate category", k)
		}
		var tiers map[string]json.RawMessage
		if json.Unmarshal(v, &tiers) == nil && tiers != nil {
			if err := p.gpTiered(cat, k, v); err != nil {
				return nil, err
			}
			continue
		}
		d, err := price(string(v))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		p.cat[cat] = d
	}
	if len(ignored) > 0 {
		p.notes = append(p.notes, fmt.Sprintf("ignored %s: Tollgate bills those tokens at the text prices", strings.Join(ignored, ", ")))
	}
	return p, nil
}

// gpTiered maps a TieredPrices value: its base is the category's price, each tier (the price of
// every token once the prompt exceeds start) a prompt-threshold entry at start+1 tokens.
func (p *prices) gpTiered(cat pricing.Category, key string, v json.RawMessage) error {
	var t gpTiered
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return fmt.Errorf("%s: not a tiered price {base, tiers}: %v", key, err)
	}
	base, err := price(t.Base.String())
	if err != nil {
		return fmt.Errorf("%s.base: %w", key, err)
	}
	p.cat[cat] = base
	for i, tier := range t.Tiers {
		start, err := strconv.ParseInt(tier.Start.String(), 10, 64)
		if err != nil || start < 0 || start >= pricing.MaxMinPromptTokens {
			return fmt.Errorf("%s.tiers[%d].start: %q is not a token count", key, i, tier.Start)
		}
		d, err := price(tier.Price.String())
		if err != nil {
			return fmt.Errorf("%s.tiers[%d].price: %w", key, i, err)
		}
		p.setTier(start+1, cat, d)
	}
	return nil
}

// setTier sets the explicit price of cat from a prompt threshold on.
func (p *prices) setTier(min int64, cat pricing.Category, d *decimal.Big) {
	if p.tiers == nil {
		p.tiers = map[int64]*pricing.Prices{}
	}
	if p.tiers[min] == nil {
		p.tiers[min] = new(pricing.Prices)
	}
	p.tiers[min][cat] = d
}
