package pricing

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/usage"
)

func TestWorstCase(t *testing.T) {
	t.Parallel()
	tiered := tieredRule(t)
	plain := mustRule(t, RuleInput{ID: 7, MatchType: "exact", ModelMatch: "m", Enabled: true,
		InputPrice: "3", OutputPrice: "15", CacheReadPrice: "0.3", CacheCreation5mPrice: "3.75",
		CacheCreation30mPrice: "0", CacheCreation1hPrice: "6", ImageOutputPrice: "0"})
	plain.Version = 4
	imageDear := mustRule(t, RuleInput{ID: 8, MatchType: "exact", ModelMatch: "m", Enabled: true,
		InputPrice: "5", OutputPrice: "10", CacheReadPrice: "0", CacheCreation5mPrice: "0",
		CacheCreation30mPrice: "0", CacheCreation1hPrice: "0", ImageOutputPrice: "40"})
	freeOutput := mustRule(t, RuleInput{ID: 9, MatchType: "exact", ModelMatch: "m", Enabled: true,
		InputPrice: "1", OutputPrice: "0", CacheReadPrice: "0", CacheCreation5mPrice: "0",
		CacheCreation30mPrice: "0", CacheCreation1hPrice: "0", ImageOutputPrice: "0"})
	explicitTier := mustRule(t, RuleInput{ID: 10, MatchType: "exact", ModelMatch: "m", Enabled: true,
		InputPrice: "1", OutputPrice: "2", CacheReadPrice: "0", CacheCreation5mPrice: "0",
		CacheCreation30mPrice: "0", CacheCreation1hPrice: "0", ImageOutputPrice: "0",
		PricingTiersJSON: json.RawMessage(`[{"service_tier":"batch","multiplier":"0.5","image_output_price":"100"}]`)})

	tests := []struct {
		name                 string
		rule                 *Rule
		prompt, maxOut       int64
		tier                 string
		want                 string
		unbounded            bool
		promptCat, outputCat Category
		promptTier, svcTier  int
	}{
		// 1000 × 6 (1h creation is the dearest prompt rate) + 500 × 15, per million.
		{name: "dearest prompt category is a cache creation", rule: plain, prompt: 1000, maxOut: 500,
			want: "0.0135", promptCat: CatCacheCreation1h, outputCat: CatOutput, promptTier: -1, svcTier: -1},
		// 1000 × 5 + 100 × 40: image output is dearer than output.
		{name: "dearest output category is image output", rule: imageDear, prompt: 1000, maxOut: 100,
			want: "0.009", promptCat: CatInput, outputCat: CatImageOutput, promptTier: -1, svcTier: -1},
		{name: "no output limit is unbounded", rule: plain, prompt: 1000, maxOut: -1,
			want: "0.006", unbounded: true, promptCat: CatCacheCreation1h, outputCat: CatOutput, promptTier: -1, svcTier: -1},
		{name: "no output limit with free output is bounded", rule: freeOutput, prompt: 2000, maxOut: -1,
			want: "0.002", promptCat: CatInput, outputCat: CatOutput, promptTier: -1, svcTier: -1},
		{name: "zero output limit", rule: plain, prompt: 10, maxOut: 0,
			want: "0.00006", promptCat: CatCacheCreation1h, outputCat: CatOutput, promptTier: -1, svcTier: -1},
		{name: "negative prompt estimate is zero", rule: plain, prompt: -5, maxOut: 1,
			want: "0.000015", promptCat: CatCacheCreation1h, outputCat: CatOutput, promptTier: -1, svcTier: -1},
		// Base rates ×1.8 (priority): 1h creation 7.2, image output 36. 1000 × 7.2 + 1000 × 36.
		{name: "requested tier multiplies", rule: tiered, prompt: 1000, maxOut: 1000, tier: "fast",
			want: "0.0432", promptCat: CatCacheCreation1h, outputCat: CatImageOutput, promptTier: -1, svcTier: 2},
		// Prompt ≥ 200,000: ×2 with output explicit 30; 1h creation 8, image 40.
		// 200,000 × 8 + 10 × 40 = 1,600,400 → 1.6004.
		{name: "prompt threshold reached by the estimate", rule: tiered, prompt: 200000, maxOut: 10,
			want: "1.6004", promptCat: CatCacheCreation1h, outputCat: CatImageOutput, promptTier: 1, svcTier: -1},
		// Priority at ≥ 200,000: entry 4, input explicit 7; other categories prompt-adjusted (×2) only.
		// Prompt: max(7, 0.4, 5, 6, 8) = 8; output: max(30, 40) = 40.
		{name: "service tier entry with explicit input price", rule: tiered, prompt: 250000, maxOut: 0, tier: "priority",
			want: "2", promptCat: CatCacheCreation1h, outputCat: CatImageOutput, promptTier: 1, svcTier: 4},
		// batch ×0.5 with explicit image output 100: output rate 100 beats 2 × 0.5.
		{name: "explicit tier price on an output category", rule: explicitTier, prompt: 0, maxOut: 10, tier: "batch",
			want: "0.001", promptCat: CatInput, outputCat: CatImageOutput, promptTier: -1, svcTier: 0},
		{name: "unknown tier uses base", rule: explicitTier, prompt: 1000000, maxOut: 1000000, tier: "turbo",
			want: "3", promptCat: CatInput, outputCat: CatOutput, promptTier: -1, svcTier: -1},
		{name: "no rule costs nothing", rule: nil, prompt: 1000, maxOut: 1000,
			want: "0", promptCat: CatInput, outputCat: CatOutput, promptTier: -1, svcTier: -1},
		{name: "huge counts stay exact", rule: plain, prompt: 1 << 62, maxOut: 1 << 62,
			want: "96845406386975.145984", promptCat: CatCacheCreation1h, outputCat: CatOutput, promptTier: -1, svcTier: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := tt.rule.WorstCase(tt.prompt, tt.maxOut, tt.tier)
			if got := FormatDecimal(w.Cost); got != tt.want {
				t.Errorf("WorstCase(%d, %d, %q).Cost = %s, want %s", tt.prompt, tt.maxOut, tt.tier, got, tt.want)
			}
			if w.Unbounded != tt.unbounded {
				t.Errorf("WorstCase(%d, %d, %q).Unbounded = %v, want %v", tt.prompt, tt.maxOut, tt.tier, w.Unbounded, tt.unbounded)
			}
			if w.PromptCategory != tt.promptCat || w.OutputCategory != tt.outputCat {
				t.Errorf("categories = %v, %v, want %v, %v", w.PromptCategory, w.OutputCategory, tt.promptCat, tt.outputCat)
			}
			if w.PromptTier != tt.promptTier || w.ServiceTier != tt.svcTier {
				t.Errorf("tiers = %d, %d, want %d, %d", w.PromptTier, w.ServiceTier, tt.promptTier, tt.svcTier)
			}
			if tt.rule != nil && (w.RuleID != tt.rule.ID || w.RuleVersion != tt.rule.Version) {
				t.Errorf("rule = %d v%d, want %d v%d", w.RuleID, w.RuleVersion, tt.rule.ID, tt.rule.Version)
			}
		})
	}
}

func TestWorstCaseExceeds(t *testing.T) {
	t.Parallel()
	r := mustRule(t, RuleInput{ID: 1, MatchType: "exact", ModelMatch: "m", Enabled: true,
		InputPrice: "1", OutputPrice: "2", CacheReadPrice: "0", CacheCreation5mPrice: "0",
		CacheCreation30mPrice: "0", CacheCreation1hPrice: "0", ImageOutputPrice: "0"})
	w := r.WorstCase(1000, 1000, "") // 0.001 + 0.002
	for _, tt := range []struct {
		limit string
		want  bool
	}{{"0.003", false}, {"0.0030000", false}, {"0.0029999999", true}, {"1", false}, {"0", true}} {
		limit, err := ParseCostCap(tt.limit)
		if err != nil {
			t.Fatalf("ParseCostCap(%q) = %v", tt.limit, err)
		}
		if got := w.Exceeds(limit); got != tt.want {
			t.Errorf("WorstCase 0.003 Exceeds(%s) = %v, want %v", tt.limit, got, tt.want)
		}
	}
	unbounded := r.WorstCase(0, -1, "")
	if !unbounded.Exceeds(decimalOf(t, "1000000")) {
		t.Error("an unbounded worst case does not exceed 1000000")
	}
}

func decimalOf(t *testing.T, s string) *decimal.Big {
	t.Helper()
	d, err := ParseDecimal(s)
	if err != nil {
		t.Fatalf("ParseDecimal(%q) = %v", s, err)
	}
	return d
}

func TestParseCostCap(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"5", "5", true}, {" 0.25 ", "0.25", true}, {"0", "0", true}, {"1.000000000000000000000001", "1.000000000000000000000001", true},
		{"-1", "", false}, {"", "", false}, {"1e3", "", false}, {"NaN", "", false}, {"$5", "", false}, {"5,00", "", false},
	} {
		got, err := ParseCostCap(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseCostCap(%q) error = %v, want ok %v", tt.in, err, tt.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidCostCap) {
				t.Errorf("ParseCostCap(%q) = %v, want ErrInvalidCostCap", tt.in, err)
			}
			continue
		}
		if FormatDecimal(got) != tt.want {
			t.Errorf("ParseCostCap(%q) = %s, want %s", tt.in, FormatDecimal(got), tt.want)
		}
	}
}

// FuzzWorstCase checks that the worst case bounds every usage the request could settle with at the
// requested tier (prompt tokens equal to the estimate, spread over the prompt categories; output within the
// limit, spread over output and image output), and that the bound is reached by one of them.
func FuzzWorstCase(f *testing.F) {
	f.Add(int64(1000), int64(500), "", uint8(0), int64(300), int64(200), int64(100))
	f.Add(int64(250000), int64(10), "priority", uint8(3), int64(1), int64(2), int64(3))
	f.Add(int64(0), int64(0), "flex", uint8(255), int64(0), int64(0), int64(0))
	f.Add(int64(1<<40), int64(1<<40), "ultra-fast", uint8(7), int64(1<<39), int64(1<<38), int64(1<<39))
	rule := tieredRule(f)
	f.Fuzz(func(t *testing.T, prompt, maxOut int64, tier string, split uint8, a, b, c int64) {
		if prompt < 0 || maxOut < 0 || prompt > 1<<50 || maxOut > 1<<50 {
			return
		}
		w := rule.WorstCase(prompt, maxOut, tier)
		if w.Unbounded {
			t.Fatalf("WorstCase(%d, %d, %q) unbounded with an output limit", prompt, maxOut, tier)
		}
		// A usage with exactly prompt prompt tokens and at most maxOut output tokens.
		a, b, c = clamp(a, prompt), clamp(b, prompt), clamp(c, prompt)
		u := usage.Usage{}
		rest := prompt
		for i, n := range []int64{a, b, c} {
			n = min(n, rest)
			rest -= n
			switch (int(split) + i) % 5 {
			case 0:
				u.Input += n
			case 1:
				u.CacheRead += n
			case 2:
				u.CacheCreation5m += n
			case 3:
				u.CacheCreation30m += n
			default:
				u.CacheCreation1h += n
			}
		}
		u.Input += rest
		out := clamp(a+b, maxOut)
		u.Output, u.ImageOutput = out/2, out-out/2
		if q := rule.Quote(u, tier); q.Cost.Cmp(w.Cost) > 0 {
			t.Fatalf("Quote(%+v, %q) = %s > WorstCase(%d, %d) = %s", u, tier, FormatDecimal(q.Cost), prompt, maxOut, FormatDecimal(w.Cost))
		}
		// The bound is reached: the whole prompt in the dearest prompt category, the whole limit in the
		// dearest output category.
		var counts [NumCategories]int64
		counts[w.PromptCategory] += prompt
		counts[w.OutputCategory] += maxOut
		worst := usage.Usage{Input: counts[CatInput], Output: counts[CatOutput], CacheRead: counts[CatCacheRead],
			CacheCreation5m: counts[CatCacheCreation5m], CacheCreation30m: counts[CatCacheCreation30m],
			CacheCreation1h: counts[CatCacheCreation1h], ImageOutput: counts[CatImageOutput]}
		if q := rule.Quote(worst, tier); q.Cost.Cmp(w.Cost) != 0 {
			t.Fatalf("Quote(%+v, %q) = %s, want the worst case %s", worst, tier, FormatDecimal(q.Cost), FormatDecimal(w.Cost))
		}
	})
}

func clamp(n, hi int64) int64 {
	if n < 0 {
		return 0
	}
	return min(n, hi)
}
