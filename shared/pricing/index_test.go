package pricing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func idx(id, provider int64, mt MatchType, match string, enabled bool) *Rule {
	return &Rule{ID: id, ProviderID: provider, MatchType: mt, ModelMatch: match, Enabled: enabled}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	rules := []*Rule{
		idx(1, 0, MatchExact, "gpt-4o", true),
		idx(2, 7, MatchExact, "gpt-4o", true),
		idx(3, 0, MatchContains, "gpt-4", true),
		idx(4, 7, MatchContains, "gpt", true),
		idx(5, 7, MatchContains, "gpt-4o", true),
		idx(6, 0, MatchContains, "gpt-4o-mini", true),
		idx(7, 7, MatchExact, "gpt-4o-mini", false), // disabled
		idx(8, 0, MatchContains, "4o", true),
		idx(9, 0, MatchContains, "mi", true),
		idx(10, 7, MatchExact, "GPT-4O", true),
		idx(12, 0, MatchContains, "claude", true),
		idx(11, 0, MatchContains, "claude", true),
		idx(21, 9, MatchExact, "b-1", true),
		idx(20, 9, MatchExact, "b-1", true),
		idx(30, 9, MatchContains, "zz", false), // disabled contains
		idx(31, 0, MatchContains, "only-disabled", false),
		nil,
	}
	x := NewIndex(rules)
	tests := []struct {
		name     string
		provider int64
		model    string
		want     int64 // 0: no match
	}{
		{"provider exact beats global exact", 7, "gpt-4o", 2},
		{"global exact for another provider", 8, "gpt-4o", 1},
		{"global exact beats provider contains", 8, "gpt-4o", 1},
		{"disabled exact skipped, provider contains longer wins", 7, "gpt-4o-mini", 5},
		{"provider contains beats longer global contains", 7, "gpt-4o-mini-2024", 5},
		{"global contains longest", 8, "gpt-4o-mini", 6},
		{"global contains", 8, "gpt-4-turbo", 3},
		{"case-sensitive exact", 7, "GPT-4O", 10},
		{"case-sensitive contains: no match", 8, "GPT-4O", 0},
		{"equal length contains: lower id", 8, "x-4o-mi", 8},
		{"same pattern: lower id", 8, "claude-3", 11},
		{"same exact: lower id", 9, "b-1", 20},
		{"provider-scoped exact only for its provider", 8, "b-1", 0},
		{"disabled contains skipped", 9, "zz", 0},
		{"only disabled", 1, "only-disabled", 0},
		{"provider 0 = global", 0, "gpt-4o", 1},
		{"no match", 7, "llama", 0},
		{"empty model", 7, "", 0},
	}
	for _, tt := range tests {
		for pass := 0; pass < 2; pass++ { // second pass hits the memo
			r := x.Resolve(tt.provider, tt.model)
			var got int64
			if r != nil {
				got = r.ID
			}
			if got != tt.want {
				t.Errorf("%s (pass %d): Resolve(%d, %q) = %d, want %d", tt.name, pass, tt.provider, tt.model, got, tt.want)
			}
		}
	}
	if x.Len() != 13 {
		t.Errorf("Len() = %d, want 13 enabled rules", x.Len())
	}
	var nilIndex *Index
	if r := nilIndex.Resolve(1, "gpt-4o"); r != nil {
		t.Errorf("nil Index: Resolve = %v, want nil", r)
	}
}

// reference is the obvious definition of resolution, used to check the index.
func reference(rules []*Rule, provider int64, model string) *Rule {
	rank := func(r *Rule) int {
		switch {
		case r.MatchType == MatchExact && r.ProviderID == provider && r.ModelMatch == model:
			return 1
		case r.MatchType == MatchExact && r.ProviderID == 0 && r.ModelMatch == model:
			return 2
		case r.MatchType == MatchContains && r.ProviderID == provider && strings.Contains(model, r.ModelMatch):
			return 3
		case r.MatchType == MatchContains && r.ProviderID == 0 && strings.Contains(model, r.ModelMatch):
			return 4
		}
		return 0
	}
	var best *Rule
	bestRank := 0
	for _, r := range rules {
		if !r.Enabled || r.ModelMatch == "" {
			continue
		}
		k := rank(r)
		if k == 0 {
			continue
		}
		if best == nil || k < bestRank || (k == bestRank && better(r, best)) {
			best, bestRank = r, k
		}
	}
	return best
}

// Property: the index agrees with the reference on random rule sets and models, through both
// contains strategies (substring lookups for short models, a scan for long ones).
func TestResolveMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcAB-"[rng.IntN(6)]
		}
		return string(b)
	}
	for round := 0; round < 200; round++ {
		var rules []*Rule
		for i := range 1 + rng.IntN(60) {
			mt := MatchExact
			if rng.IntN(2) == 0 {
				mt = MatchContains
			}
			rules = append(rules, idx(int64(rng.IntN(1000)+1), int64(rng.IntN(3)), mt, word(1+rng.IntN(4)), rng.IntN(5) > 0))
			_ = i
		}
		x := NewIndexSize(rules, 256)
		for q := 0; q < 100; q++ {
			n := rng.IntN(8)
			if rng.IntN(10) == 0 {
				n = 200 + rng.IntN(400) // long: forces the scan strategy
			}
			model, provider := word(n), int64(rng.IntN(3))
			got, want := x.Resolve(provider, model), reference(rules, provider, model)
			if got != want {
				t.Fatalf("round %d: Resolve(%d, %q) = %+v, want %+v", round, provider, model, got, want)
			}
		}
	}
}

func TestResolveConcurrentAndBounded(t *testing.T) {
	t.Parallel()
	rules := make([]*Rule, 0, 200)
	for i := range 200 {
		mt := MatchExact
		if i%2 == 1 {
			mt = MatchContains
		}
		rules = append(rules, idx(int64(i+1), int64(i%4), mt, fmt.Sprintf("model-%d", i), true))
	}
	x := NewIndexSize(rules, 1024)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := 0; i < 2000; i++ {
				p := int64(rng.IntN(4))
				var model string
				if rng.IntN(2) == 0 {
					model = fmt.Sprintf("model-%d", rng.IntN(200))
				} else {
					model = fmt.Sprintf("random-%d-%d", g, rng.Int64()) // attacker-style names
				}
				if got, want := x.Resolve(p, model), reference(rules, p, model); got != want {
					t.Errorf("Resolve(%d, %q) = %v, want %v", p, model, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := x.memoLen(); n > 1024 {
		t.Errorf("memo holds %d pairs after 16,000 lookups, want <= 1024", n)
	}
}

func TestResolveZeroAllocsWhenSeen(t *testing.T) {
	rules := benchRules(2000)
	x := NewIndex(rules)
	models := []string{"model-0001", "vendor-model-1999-latest", "unknown"}
	for _, m := range models {
		x.Resolve(3, m)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, m := range models {
			x.Resolve(3, m)
		}
	})
	if allocs != 0 {
		t.Errorf("Resolve of seen pairs allocates %v times, want 0", allocs)
	}
}

// benchRules builds n rules, half exact and half contains, over 8 providers plus global.
func benchRules(n int) []*Rule {
	rules := make([]*Rule, 0, n)
	for i := range n {
		mt := MatchExact
		match := fmt.Sprintf("model-%04d", i)
		if i%2 == 1 {
			mt = MatchContains
			match = fmt.Sprintf("model-%d-", i)
		}
		r := mustBenchRule(int64(i+1), int64(i%9), mt, match)
		rules = append(rules, r)
	}
	return rules
}

func mustBenchRule(id, provider int64, mt MatchType, match string) *Rule {
	in := validInput()
	in.ID, in.MatchType, in.ModelMatch = id, string(mt), match
	in.ProviderID = &provider
	in.PricingTiersJSON = []byte(`[{"min_prompt_tokens": 200000, "multiplier": "2"}, {"service_tier": "priority", "multiplier": "1.8"}]`)
	r, err := ParseRule(in)
	if err != nil {
		panic(err)
	}
	return r
}

func TestIndexIgnoresOrder(t *testing.T) {
	t.Parallel()
	rules := benchRules(300)
	shuffled := slices.Clone(rules)
	rand.New(rand.NewPCG(8, 9)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	a, b := NewIndex(rules), NewIndex(shuffled)
	for _, m := range []string{"model-0004", "x-model-15-y", "model-299-", "model-1-model-3-"} {
		for p := int64(0); p < 9; p++ {
			if a.Resolve(p, m) != b.Resolve(p, m) {
				t.Errorf("Resolve(%d, %q) depends on rule order", p, m)
			}
		}
	}
}
