package catalog

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/tollgate/tollgate/shared/pricing"
)

// literal captures the literal text of a TOML value (go-toml's unmarshaler interface hands over
// the raw bytes), so numbers are never decoded through a float.
type literal string

func (l *literal) UnmarshalTOML(b []byte) error {
	*l = literal(strings.TrimSpace(string(b)))
	return nil
}

type mdCost struct {
	Input      *literal `toml:"input"`
	Output     *literal `toml:"output"`
	CacheRead  *literal `toml:"cache_read"`
	CacheWrite *literal `toml:"cache_write"`
	Tiers      []mdTier `toml:"tiers"`
}

type mdTier struct {
	Tier struct {
		Size *literal `toml:"size"`
		Type *literal `toml:"type"`
	} `toml:"tier"`
	Input      *literal `toml:"input"`
	Output     *literal `toml:"output"`
	CacheRead  *literal `toml:"cache_read"`
	CacheWrite *literal `toml:"cache_write"`
}

type mdModel struct {
	BaseModel    *literal `toml:"base_model"`
	Cost         *mdCost  `toml:"cost"`
	Experimental struct {
		Modes map[string]struct {
			Cost *mdCost `toml:"cost"`
		} `toml:"modes"`
	} `toml:"experimental"`
}

// mdKnownCost are the cost keys the mapping reads; mdIgnoredCost those it imports around with a
// note (modalities Tollgate bills at the text prices).
var (
	mdKnownCost   = map[string]bool{"input": true, "output": true, "cache_read": true, "cache_write": true, "tiers": true}
	mdIgnoredCost = map[string]bool{"input_audio": true, "output_audio": true}
)

// mdServiceTiers maps models.dev mode names to service tiers.
var mdServiceTiers = map[string]string{"fast": "priority"}

// ParseModelsDev maps a models.dev tree given as file path → TOML text. Model files are
// ".../<provider>/models/<model id>.toml" (the model id may contain '/'); provider.toml files and
// files that are not TOML are ignored; other TOML files are reported as skipped.
func ParseModelsDev(files map[string][]byte, opt Options) (*Result, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("models.dev: no files")
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	parts := make([][]byte, 0, 4*len(paths))
	for _, p := range paths {
		parts = append(parts, []byte(strconv.Itoa(len(p))), []byte(p), []byte(strconv.Itoa(len(files[p]))), files[p])
	}
	c := newCollector(FormatModelsDev, digestOf(parts...), opt)
	for _, p := range paths {
		clean := path.Clean(strings.ReplaceAll(p, "\\", "/"))
		if !strings.HasSuffix(clean, ".toml") || path.Base(clean) == "provider.toml" {
			continue
		}
		provider, model, ok := mdSplit(clean)
		if !ok {
			c.skip(p, "not a model file (.../<provider>/models/<model>.toml)")
			continue
		}
		c.res.Entries++
		c.mdEntry(provider+"/"+model, provider, model, files[p])
	}
	return &c.res, nil
}

// mdSplit finds "<provider>/models/<model>.toml" in a path.
func mdSplit(p string) (provider, model string, ok bool) {
	segs := strings.Split(p, "/")
	for i := len(segs) - 2; i >= 1; i-- {
		if segs[i] == "models" {
			provider = segs[i-1]
			model = strings.TrimSuffix(strings.Join(segs[i+1:], "/"), ".toml")
			return provider, model, provider != "" && model != "" && provider != "." && provider != ".."
		}
	}
	return "", "", false
}

func (c *collector) mdEntry(entry, provider, model string, text []byte) {
	targets := c.targets(provider)
	if targets == nil {
		c.skip(entry, "catalog provider %q is not mapped to a Tollgate provider (only mapped providers are imported)", provider)
		return
	}
	var m mdModel
	if err := toml.NewDecoder(bytes.NewReader(text)).EnableUnmarshalerInterface().Decode(&m); err != nil {
		c.skip(entry, "not valid TOML: %v", err)
		return
	}
	if m.Cost == nil {
		if m.BaseModel != nil {
			c.skip(entry, "no [cost] table: its price is inherited from base_model %s, which this mapping does not resolve", *m.BaseModel)
		} else {
			c.skip(entry, "no [cost] table: the catalog has no price for this model")
		}
		return
	}
	var loose struct {
		Cost map[string]any `toml:"cost"`
	}
	if err := toml.Unmarshal(text, &loose); err != nil { // key names only; numbers are read from literals
		c.skip(entry, "not valid TOML: %v", err)
		return
	}
	p := &prices{}
	var ignored []string
	keys := make([]string, 0, len(loose.Cost))
	for k := range loose.Cost {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case mdKnownCost[k]:
		case mdIgnoredCost[k]:
			ignored = append(ignored, "cost."+k)
		default:
			c.skip(entry, "cost.%s has no Tollgate category", k)
			return
		}
	}
	if len(ignored) > 0 {
		p.notes = append(p.notes, fmt.Sprintf("ignored %s: Tollgate bills those tokens at the text prices", strings.Join(ignored, ", ")))
	}
	if err := mdCategories(&p.cat, m.Cost.Input, m.Cost.Output, m.Cost.CacheRead, m.Cost.CacheWrite, "cost"); err != nil {
		c.skip(entry, "%v", err)
		return
	}
	for i, t := range m.Cost.Tiers {
		if t.Tier.Type != nil && strings.Trim(string(*t.Tier.Type), `"'`) != "context" {
			c.skip(entry, "cost.tiers[%d]: tier type %s cannot be expressed (only prompt-size tiers)", i, *t.Tier.Type)
			return
		}
		if t.Tier.Size == nil {
			c.skip(entry, "cost.tiers[%d]: no tier.size", i)
			return
		}
		size, err := strconv.ParseInt(strings.ReplaceAll(string(*t.Tier.Size), "_", ""), 10, 64)
		if err != nil || size < 0 || size >= pricing.MaxMinPromptTokens {
			c.skip(entry, "cost.tiers[%d].tier.size: %s is not a token count", i, *t.Tier.Size)
			return
		}
		var tp pricing.Prices
		if err := mdCategories(&tp, t.Input, t.Output, t.CacheRead, t.CacheWrite, fmt.Sprintf("cost.tiers[%d]", i)); err != nil {
			c.skip(entry, "%v", err)
			return
		}
		for cat, d := range tp {
			if d != nil {
				p.setTier(size+1, pricing.Category(cat), d)
			}
		}
	}
	modes := make([]string, 0, len(m.Experimental.Modes))
	for name := range m.Experimental.Modes {
		modes = append(modes, name)
	}
	sort.Strings(modes)
	for _, name := range modes {
		mode := m.Experimental.Modes[name]
		tier, ok := mdServiceTiers[name]
		if !ok || mode.Cost == nil {
			p.notes = append(p.notes, fmt.Sprintf("experimental mode %q has no Tollgate service tier: not imported", name))
			continue
		}
		var tp pricing.Prices
		if err := mdCategories(&tp, mode.Cost.Input, mode.Cost.Output, mode.Cost.CacheRead, mode.Cost.CacheWrite, "experimental.modes."+name+".cost"); err != nil {
			c.skip(entry, "%v", err)
			return
		}
		if p.service == nil {
			p.service = map[string]*pricing.Prices{}
		}
		p.service[tier] = &tp
	}
	for _, t := range targets {
		if mt, match, note, ok := cloudMatch(t.channel, "exact", model); ok {
			c.add(entryIn(entry, t, len(targets)), p, t.providerID, mt, match, note)
			continue
		}
		c.add(entryIn(entry, t, len(targets)), p, t.providerID, pricing.MatchExact, model)
	}
}

// mdCategories reads the four models.dev cost keys into dst.
func mdCategories(dst *pricing.Prices, input, output, cacheRead, cacheWrite *literal, where string) error {
	for _, f := range []struct {
		lit  *literal
		cat  pricing.Category
		name string
	}{{input, pricing.CatInput, "input"}, {output, pricing.CatOutput, "output"},
		{cacheRead, pricing.CatCacheRead, "cache_read"}, {cacheWrite, pricing.CatCacheCreation5m, "cache_write"}} {
		if f.lit == nil {
			continue
		}
		d, err := price(string(*f.lit))
		if err != nil {
			return fmt.Errorf("%s.%s: %w", where, f.name, err)
		}
		dst[f.cat] = d
	}
	return nil
}
