package pricing

import "sync/atomic"

// maxRateSlots bounds the per-rule rate memo; rules with more tier combinations are priced
// without it.
const maxRateSlots = 256

// rateCache memoises the effective rates of a rule per (prompt entry, service entry) pair, so
// pricing a request multiplies only tokens × rates. Slots fill lazily and race benignly (every
// writer stores the same value).
type rateCache struct {
	pos      []int // tier index → 1 + position within its group (prompt or service entries)
	nService int
	slots    []atomic.Pointer[rateEntry]
}

// rateEntry is one memoised combination: the exact rates and, when they allow it, the same rates
// as integers over a common scale for the fast path of Quote.
type rateEntry struct {
	prices Prices
	fast   fastRates
}

func newRateCache(tiers []Tier) *rateCache {
	c := &rateCache{pos: make([]int, len(tiers))}
	nPrompt := 0
	for i := range tiers {
		if tiers[i].ServiceTier == "" {
			nPrompt++
			c.pos[i] = nPrompt
		} else {
			c.nService++
			c.pos[i] = c.nService
		}
	}
	n := (nPrompt + 1) * (c.nService + 1)
	if n > maxRateSlots {
		return nil
	}
	c.slots = make([]atomic.Pointer[rateEntry], n)
	return c
}

// sharedRates returns the effective rates for the selected entries. The values may be shared
// between quotes and must not be modified.
func (r *Rule) sharedRates(prompt, service int) *rateEntry {
	c := r.rates
	if c == nil || len(c.pos) != len(r.Tiers) {
		return &rateEntry{prices: r.Rates(prompt, service)}
	}
	slot := &c.slots[c.at(prompt)*(c.nService+1)+c.at(service)]
	if e := slot.Load(); e != nil {
		return e
	}
	e := &rateEntry{prices: r.Rates(prompt, service)}
	e.fast = newFastRates(&e.prices)
	slot.Store(e)
	return e
}

func (c *rateCache) at(i int) int {
	if i < 0 {
		return 0
	}
	return c.pos[i]
}
