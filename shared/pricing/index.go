package pricing

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
)

// Index resolves the price rule of a (provider, model) pair. It is immutable after NewIndex and
// safe for concurrent use. Results are memoised in a bounded, sharded cache, so a pair that has
// been seen resolves without allocating.
type Index struct {
	exact    map[ruleKey]*Rule // best exact rule per (provider, model_match)
	contains map[ruleKey]*Rule // best contains rule per (provider, model_match)
	// containsByProvider lists each provider's contains rules, best first (longer, then lower id);
	// containsLens lists each provider's distinct contains lengths, longest first.
	containsByProvider map[int64][]*Rule
	containsLens       map[int64][]int
	rules              int

	seed   maphash.Seed
	shards [memoShards]memoShard
	// shardCap bounds each shard generation; the memo holds at most 2*memoShards*shardCap pairs.
	shardCap int
}

type ruleKey struct {
	provider int64
	model    string
}

const (
	memoShards = 64
	// DefaultMemoSize bounds the resolution memo (pairs) of NewIndex.
	DefaultMemoSize = 1 << 16
)

// memoShard is a two-generation cache: lookups try cur then prev; when cur is full it becomes
// prev and a new cur starts, so the memo stays bounded (an attacker sending random model names
// only recycles generations) while pairs in use are promoted back into cur.
type memoShard struct {
	mu   sync.RWMutex
	cur  map[ruleKey]*Rule
	prev map[ruleKey]*Rule
	_    [40]byte // keep shards on separate cache lines
}

// better reports whether a ranks before b within one match class: longer model_match, then
// lower id.
func better(a, b *Rule) bool {
	if len(a.ModelMatch) != len(b.ModelMatch) {
		return len(a.ModelMatch) > len(b.ModelMatch)
	}
	return a.ID < b.ID
}

// NewIndex builds an index over the enabled rules (disabled and nil rules are ignored) with a
// memo of DefaultMemoSize pairs.
func NewIndex(rules []*Rule) *Index { return NewIndexSize(rules, DefaultMemoSize) }

// NewIndexSize is NewIndex with an explicit memo bound (pairs, at least memoShards).
func NewIndexSize(rules []*Rule, memoSize int) *Index {
	x := &Index{
		exact:              make(map[ruleKey]*Rule),
		contains:           make(map[ruleKey]*Rule),
		containsByProvider: make(map[int64][]*Rule),
		containsLens:       make(map[int64][]int),
		seed:               maphash.MakeSeed(),
		shardCap:           max(1, memoSize/(2*memoShards)),
	}
	for _, r := range rules {
		if r == nil || !r.Enabled || r.ModelMatch == "" {
			continue
		}
		x.rules++
		k := ruleKey{r.ProviderID, r.ModelMatch}
		switch r.MatchType {
		case MatchExact:
			if cur, ok := x.exact[k]; !ok || better(r, cur) {
				x.exact[k] = r
			}
		case MatchContains:
			if cur, ok := x.contains[k]; !ok || better(r, cur) {
				x.contains[k] = r
			}
		}
	}
	for k, r := range x.contains {
		x.containsByProvider[k.provider] = append(x.containsByProvider[k.provider], r)
	}
	for p, rs := range x.containsByProvider {
		slices.SortFunc(rs, func(a, b *Rule) int {
			if better(a, b) {
				return -1
			}
			if better(b, a) {
				return 1
			}
			return 0
		})
		var lens []int
		for _, r := range rs {
			if len(lens) == 0 || lens[len(lens)-1] != len(r.ModelMatch) {
				lens = append(lens, len(r.ModelMatch))
			}
		}
		x.containsLens[p] = lens
	}
	for i := range x.shards {
		x.shards[i].cur = make(map[ruleKey]*Rule)
	}
	return x
}

// Len returns the number of enabled rules in the index.
func (x *Index) Len() int { return x.rules }

// Resolve returns the rule pricing model on providerID, or nil when no enabled rule matches
// (cost 0). Rank first — provider exact, global exact, provider contains, global contains — then
// the longer model_match, then the lower id. Matching is case-sensitive. providerID 0 looks up
// global rules only.
func (x *Index) Resolve(providerID int64, model string) *Rule {
	if x == nil {
		return nil
	}
	k := ruleKey{providerID, model}
	sh := &x.shards[x.shard(k)]
	sh.mu.RLock()
	r, ok := sh.cur[k]
	if !ok {
		r, ok = sh.prev[k]
		if ok {
			sh.mu.RUnlock()
			x.remember(sh, ruleKey{providerID, strings.Clone(model)}, r) // promote
			return r
		}
	}
	sh.mu.RUnlock()
	if ok {
		return r
	}
	r = x.resolve(providerID, model)
	// Clone: model may alias a large request buffer the memo must not retain.
	x.remember(sh, ruleKey{providerID, strings.Clone(model)}, r)
	return r
}

func (x *Index) shard(k ruleKey) uint64 {
	h := maphash.String(x.seed, k.model) ^ (uint64(k.provider) * 0x9e3779b97f4a7c15)
	return h % memoShards
}

func (x *Index) remember(sh *memoShard, k ruleKey, r *Rule) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.cur) >= x.shardCap {
		sh.prev = sh.cur
		sh.cur = make(map[ruleKey]*Rule, x.shardCap)
	}
	sh.cur[k] = r
}

// resolve computes the answer without the memo.
func (x *Index) resolve(providerID int64, model string) *Rule {
	if r := x.exact[ruleKey{providerID, model}]; r != nil {
		return r
	}
	if providerID != 0 {
		if r := x.exact[ruleKey{0, model}]; r != nil {
			return r
		}
	}
	if r := x.bestContains(providerID, model); r != nil {
		return r
	}
	if providerID != 0 {
		return x.bestContains(0, model)
	}
	return nil
}

// bestContains finds the provider's best contains rule whose model_match occurs in model. It
// costs min(one map lookup per (substring of model with a pattern length), one strings.Contains
// per rule), whichever is smaller.
func (x *Index) bestContains(providerID int64, model string) *Rule {
	rs := x.containsByProvider[providerID]
	if len(rs) == 0 {
		return nil
	}
	lens := x.containsLens[providerID]
	lookups := 0
	for _, l := range lens {
		if l <= len(model) {
			lookups += len(model) - l + 1
		}
	}
	if lookups > 4*len(rs) {
		for _, r := range rs { // already best first
			if strings.Contains(model, r.ModelMatch) {
				return r
			}
		}
		return nil
	}
	for _, l := range lens { // longest first: the first length with a hit holds the winner
		var best *Rule
		for i := 0; i+l <= len(model); i++ {
			if r := x.contains[ruleKey{providerID, model[i : i+l]}]; r != nil && (best == nil || r.ID < best.ID) {
				best = r
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// memoLen returns the number of memoised pairs (tests).
func (x *Index) memoLen() int {
	n := 0
	for i := range x.shards {
		sh := &x.shards[i]
		sh.mu.RLock()
		n += len(sh.cur) + len(sh.prev)
		sh.mu.RUnlock()
	}
	return n
}
