package pricing

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/quick"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/usage"
)

func sampleUsage() usage.Usage {
	return usage.Usage{Input: 1000, Output: 500, CacheRead: 2000, CacheCreation5m: 100, CacheCreation30m: 10,
		CacheCreation1h: 50, ImageOutput: 1000}
}

func mustRule(t testing.TB, in RuleInput) *Rule {
	t.Helper()
	r, err := ParseRule(in)
	if err != nil {
		t.Fatalf("ParseRule = %v", err)
	}
	return r
}

// tieredRule: base input 2, output 10, cache read 0.2, 5m 2.5, 30m 3, 1h 4, image 20, with
//
//	0: prompt ≥ 100,000 ×1.5
//	1: prompt ≥ 200,000 ×2, output explicit 30
//	2: priority ×1.8
//	3: flex ×0.5
//	4: priority, prompt ≥ 200,000, input explicit 7
//	5: Standard ×1
//	6: ultra-fast ×6
//	7: prompt ≥ 100,000 ×9 (same threshold as 0: the earlier entry wins)
//	8: "Scale" prompt ≥ 500,000 ×3
func tieredRule(t testing.TB) *Rule {
	return mustRule(t, RuleInput{
		ID: 42, MatchType: "exact", ModelMatch: "m", Enabled: true,
		InputPrice: "2", OutputPrice: "10", CacheReadPrice: "0.2", CacheCreation5mPrice: "2.5",
		CacheCreation30mPrice: "3", CacheCreation1hPrice: "4", ImageOutputPrice: "20",
		PricingTiersJSON: json.RawMessage(`[
			{"min_prompt_tokens": 100000, "multiplier": "1.5"},
			{"min_prompt_tokens": 200000, "multiplier": "2", "output_price": "30"},
			{"service_tier": "priority", "multiplier": "1.8"},
			{"service_tier": "flex", "multiplier": "0.5"},
			{"service_tier": "priority", "min_prompt_tokens": 200000, "input_price": "7"},
			{"service_tier": "Standard", "multiplier": "1"},
			{"service_tier": "ultra-fast", "multiplier": "6"},
			{"min_prompt_tokens": 100000, "multiplier": "9"},
			{"service_tier": "Scale", "min_prompt_tokens": 500000, "multiplier": "3"}]`),
	})
}

func TestQuoteBase(t *testing.T) {
	t.Parallel()
	r := mustRule(t, validInput())
	// 1000×3 + 500×15 + 2000×0.3 + 100×3.75 + 10×5 + 50×6 + 1000×40 = 51,825 → $0.051825
	q := r.Quote(sampleUsage(), "")
	if got := FormatDecimal(q.Cost); got != "0.051825" || q.Micros != 51825 || q.RuleID != 1 ||
		q.PromptTier != -1 || q.ServiceTier != -1 || q.Saturated {
		t.Errorf("Quote = %s, %d µ$, %+v; want 0.051825, 51825", got, q.Micros, q)
	}
	want := []string{"3", "15", "0.3", "3.75", "5", "6", "40"}
	for c, rate := range q.Rates {
		if FormatDecimal(rate) != want[c] {
			t.Errorf("Rates[%s] = %s, want %s", Category(c), FormatDecimal(rate), want[c])
		}
	}
}

func TestQuoteTiers(t *testing.T) {
	t.Parallel()
	r := tieredRule(t)
	in := func(input, cacheRead int64) usage.Usage {
		return usage.Usage{Input: input, CacheRead: cacheRead, Output: 1000}
	}
	tests := []struct {
		name          string
		u             usage.Usage
		tier          string
		wantCost      string
		wantMicros    int64
		wantPrompt    int
		wantService   int
		wantInputRate string
	}{
		// 99,999×2 + 1000×10 = 209,998
		{"below first threshold", in(99_999, 0), "", "0.209998", 209998, -1, -1, "2"},
		// reached at equality: 100,000×3 + 1000×15 = 315,000
		{"threshold reached at equality", in(100_000, 0), "", "0.315", 315000, 0, -1, "3"},
		// prompt tokens include cache: 50,000×3 + 50,000×0.3 + 1000×15 = 180,000
		{"cache counts toward prompt", in(50_000, 50_000), "", "0.18", 180000, 0, -1, "3"},
		// highest threshold, explicit output: 200,000×4 + 1000×30 = 830,000
		{"highest prompt threshold wins", in(200_000, 0), "", "0.83", 830000, 1, -1, "4"},
		// priority over prompt-adjusted: 100,000×5.4 + 1000×27 = 567,000
		{"fast → priority multiplier over prompt tier", in(100_000, 0), "fast", "0.567", 567000, 0, 2, "5.4"},
		{"case-insensitive tier", in(150_000, 0), "PRIORITY", "0.837", 837000, 0, 2, "5.4"},
		// long context priority: explicit input 7 as is; output 30 × (no multiplier) = 30: 1,400,000 + 30,000
		{"explicit override beats multiplier in long context", in(200_000, 0), "priority", "1.43", 1430000, 1, 4, "7"},
		// flex: 1000×1 + 1000×5 = 6,000
		{"flex multiplier", in(1000, 0), "flex", "0.006", 6000, -1, 3, "1"},
		{"gamma enum spelling", in(1000, 0), "SERVICE_TIER_FLEX", "0.006", 6000, -1, 3, "1"},
		// unknown tier: base 1000×2 + 1000×10 = 12,000
		{"unknown tier uses base", in(1000, 0), "batch", "0.012", 12000, -1, -1, "2"},
		{"unknown tier keeps prompt adjustment", in(100_000, 0), "batch", "0.315", 315000, 0, -1, "3"},
		{"default → standard", in(1000, 0), "default", "0.012", 12000, -1, 5, "2"},
		{"on_demand → standard", in(1000, 0), "on_demand", "0.012", 12000, -1, 5, "2"},
		{"null tier does not select standard", in(1000, 0), "", "0.012", 12000, -1, -1, "2"},
		// ultra-fast ×6: 1000×12 + 1000×60 = 72,000
		{"ultra-fast synonym", in(1000, 0), "ultra-fast", "0.072", 72000, -1, 6, "12"},
		{"ultrafast", in(1000, 0), "ULTRAFAST", "0.072", 72000, -1, 6, "12"},
		// service entry with threshold not reached: no service adjustment
		// 499,999×4 + 1000×30 = 2,029,996
		{"service threshold not reached", in(499_999, 0), "scale", "2.029996", 2029996, 1, -1, "4"},
		// 500,000×(4×3) + 1000×(30×3) = 6,000,000 + 90,000
		{"service threshold reached", in(500_000, 0), "scale", "6.09", 6090000, 1, 8, "12"},
		{"zero usage", usage.Usage{}, "priority", "0", 0, -1, 2, "3.6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := r.Quote(tt.u, tt.tier)
			if got := FormatDecimal(q.Cost); got != tt.wantCost || q.Micros != tt.wantMicros ||
				q.PromptTier != tt.wantPrompt || q.ServiceTier != tt.wantService || FormatDecimal(q.Rates[CatInput]) != tt.wantInputRate {
				t.Errorf("Quote(%+v, %q) = cost %s, %d µ$, tiers (%d, %d), input rate %s; want %s, %d, (%d, %d), %s",
					tt.u, tt.tier, got, q.Micros, q.PromptTier, q.ServiceTier, FormatDecimal(q.Rates[CatInput]),
					tt.wantCost, tt.wantMicros, tt.wantPrompt, tt.wantService, tt.wantInputRate)
			}
		})
	}
}

func TestQuoteAllCategoriesTiered(t *testing.T) {
	t.Parallel()
	r := tieredRule(t)
	// prompt = 100,000 + 50,000 + 30,000 + 15,000 + 5,000 = 200,000 → tier 1 (×2, output 30), priority → tier 4
	// (input 7, others ×1). Rates: input 7, output 30, cache read 0.4, 5m 5, 30m 6, 1h 8, image 40.
	u := usage.Usage{Input: 100_000, CacheRead: 50_000, CacheCreation5m: 30_000, CacheCreation30m: 15_000,
		CacheCreation1h: 5_000, Output: 2_000, ImageOutput: 1_000}
	// 700,000 + 60,000 + 20,000 + 150,000 + 90,000 + 40,000 + 40,000 = 1,100,000
	q := r.Quote(u, "fast")
	if got := FormatDecimal(q.Cost); got != "1.1" || q.Micros != 1_100_000 {
		t.Errorf("Quote = %s, %d; want 1.1, 1100000", got, q.Micros)
	}
	want := []string{"7", "30", "0.4", "5", "6", "8", "40"}
	for c, rate := range q.Rates {
		if FormatDecimal(rate) != want[c] {
			t.Errorf("Rates[%s] = %s, want %s", Category(c), FormatDecimal(rate), want[c])
		}
	}
}

func TestQuoteHugeAndPrecise(t *testing.T) {
	t.Parallel()
	tera := int64(1_000_000_000_000)
	all := usage.Usage{Input: tera, Output: tera, CacheRead: tera, CacheCreation5m: tera, CacheCreation30m: tera,
		CacheCreation1h: tera, ImageOutput: tera}
	// 10^12 × (3+15+0.3+3.75+5+6+40 = 73.05) / 10^6 = 73,050,000 dollars
	q := mustRule(t, validInput()).Quote(all, "")
	if got := FormatDecimal(q.Cost); got != "73050000" || q.Micros != 73_050_000_000_000 {
		t.Errorf("10^12 tokens: Quote = %s, %d", got, q.Micros)
	}

	in := validInput()
	in.InputPrice = "0.000000000000000000000001"
	in.OutputPrice = "123456789012345.123456789012345678901234"
	in.CacheReadPrice = "0.333333333333333333333333"
	in.CacheCreation5mPrice, in.CacheCreation30mPrice, in.CacheCreation1hPrice, in.ImageOutputPrice = "0", "0", "0", "0"
	in.PricingTiersJSON = json.RawMessage(`[{"min_prompt_tokens": 1, "multiplier": "1.000000000000000000000001"}]`)
	r := mustRule(t, in)
	q = r.Quote(usage.Usage{Input: tera, CacheRead: tera}, "")
	// (10^12 × 10^-24 + 10^12 × 0.333…(24)) × 1.000…001 / 10^6
	//   = (10^-12 + 333333333333.333333333333) × (1 + 10^-24) / 10^6
	const want = "333333.333333333333333334333333333333333333333334"
	if got := FormatDecimal(q.Cost); got != want {
		t.Errorf("many decimals: Quote = %s, want %s", got, want)
	}
	if q.Micros != 333_333_333_333 {
		t.Errorf("many decimals: Micros = %d, want 333333333333", q.Micros)
	}

	// MaxInt64 output tokens at the largest price: exact cost, micro-dollars saturate.
	q = r.Quote(usage.Usage{Output: math.MaxInt64}, "")
	if !q.Saturated || q.Micros != math.MaxInt64 || q.Cost.Sign() <= 0 {
		t.Errorf("saturation: Quote = %s, %d, saturated %v", FormatDecimal(q.Cost), q.Micros, q.Saturated)
	}
	// (2^63-1) × 123456789012345.123456789012345678901234 / 10^6, exactly
	const wantHuge = "1138687895536343946929971466.686485000733392138189165645838"
	if got := FormatDecimal(q.Cost); got != wantHuge {
		t.Errorf("saturation: Cost = %s, want %s", got, wantHuge)
	}
}

func TestQuoteNilRuleAndNegatives(t *testing.T) {
	t.Parallel()
	q := QuoteFor(nil, sampleUsage(), "priority")
	if q.RuleID != 0 || q.Cost.Sign() != 0 || q.Micros != 0 || q.PromptTier != -1 || q.ServiceTier != -1 {
		t.Errorf("QuoteFor(nil) = %+v", q)
	}
	for c, r := range q.Rates {
		if r == nil || r.Sign() != 0 {
			t.Errorf("QuoteFor(nil).Rates[%d] = %v, want 0", c, r)
		}
	}
	var none *Rule
	if q := none.Quote(sampleUsage(), ""); q.RuleID != 0 || q.Cost.Sign() != 0 || q.Micros != 0 {
		t.Errorf("(*Rule)(nil).Quote = %+v", q)
	}
	r := mustRule(t, validInput())
	if q := QuoteFor(r, usage.Usage{Input: -5, Output: 1_000_000}, ""); q.Micros != 15_000_000 {
		t.Errorf("negative input: Micros = %d, want 15000000", q.Micros)
	}
	var zero Rule // a hand-built rule with nil prices prices at 0
	if q := zero.Quote(sampleUsage(), "x"); q.Cost.Sign() != 0 || q.Micros != 0 {
		t.Errorf("zero Rule: Quote = %+v", q)
	}
}

func TestRatesAreFresh(t *testing.T) {
	t.Parallel()
	r := tieredRule(t)
	before := r.Quote(sampleUsage(), "flex")
	rates := r.Rates(before.PromptTier, before.ServiceTier)
	for _, rate := range rates {
		rate.SetMantScale(999, 0)
	}
	after := r.Quote(sampleUsage(), "flex")
	if after.Cost.Cmp(before.Cost) != 0 || FormatDecimal(after.Rates[CatInput]) != "1" {
		t.Errorf("mutating Rule.Rates changed later quotes: %s → %s", FormatDecimal(before.Cost), FormatDecimal(after.Cost))
	}
	if got := FormatDecimal(r.Prices[CatInput]); got != "2" {
		t.Errorf("mutating Rule.Rates changed the rule: input price %s", got)
	}
	if got := FormatDecimal(r.Tiers[1].Prices[CatOutput]); got != "30" {
		t.Errorf("mutating Rule.Rates changed the rule: tier output price %s", got)
	}
}

// A hand-built rule (no rate memo) and a parsed one price the same.
func TestHandBuiltRuleMatchesParsed(t *testing.T) {
	t.Parallel()
	r := tieredRule(t)
	hand := &Rule{ID: r.ID, Prices: r.Prices, Tiers: r.Tiers, Enabled: true}
	rng := rand.New(rand.NewPCG(10, 11))
	for range 200 {
		u, tier := randomUsage(rng), tierNames[rng.IntN(len(tierNames))]
		if a, b := r.Quote(u, tier), hand.Quote(u, tier); a.Cost.Cmp(b.Cost) != 0 || a.Micros != b.Micros {
			t.Fatalf("Quote(%+v, %q): parsed %s, hand-built %s", u, tier, FormatDecimal(a.Cost), FormatDecimal(b.Cost))
		}
	}
}

func TestEstimateMicros(t *testing.T) {
	t.Parallel()
	r := tieredRule(t)
	tests := []struct {
		name  string
		rule  *Rule
		bytes int
		tier  string
		want  int64
	}{
		{"nil rule", nil, 1000, "", 0},
		{"empty body", r, 0, "", 0},
		{"negative length", r, -4, "", 0},
		// ceil(401/4) = 101 tokens × 2 = 202 µ$
		{"ceil bytes/4", r, 401, "", 202},
		{"exact multiple", r, 400, "", 200},
		// 1 token × 3.6 = 3.6 µ$ → 4
		{"requested tier, half up", r, 1, "fast", 4},
		// 1 token × 1 (flex) = 1 µ$
		{"flex", r, 3, "flex", 1},
		// 400,000 bytes = 100,000 tokens → prompt tier 0: × 3 = 300,000 µ$
		{"prompt tier from the estimate", r, 400_000, "", 300_000},
		// 800,000 bytes = 200,000 tokens, priority long context: explicit 7 → 1,400,000 µ$
		{"long-context priority override", r, 800_000, "priority", 1_400_000},
	}
	for _, tt := range tests {
		if got := EstimateMicros(tt.rule, tt.bytes, tt.tier); got != tt.want {
			t.Errorf("%s: EstimateMicros(%d, %q) = %d, want %d", tt.name, tt.bytes, tt.tier, got, tt.want)
		}
	}
	double := func(n int) int64 { return int64(n) * 2 }
	if got := EstimateMicrosWith(double, r, 100, ""); got != 400 {
		t.Errorf("EstimateMicrosWith(2 tokens/byte, 100) = %d, want 400", got)
	}
	if got := EstimateMicrosWith(nil, r, 401, ""); got != 202 {
		t.Errorf("EstimateMicrosWith(nil estimator) = %d, want 202", got)
	}
}

// randomUsage draws usage with counts up to 10^12.
func randomUsage(rng *rand.Rand) usage.Usage {
	n := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return rng.Int64N(1000)
		case 2:
			return rng.Int64N(1_000_000)
		}
		return rng.Int64N(1_000_000_000_001)
	}
	return usage.Usage{Input: n(), Output: n(), CacheRead: n(), CacheCreation5m: n(), CacheCreation30m: n(),
		CacheCreation1h: n(), ImageOutput: n()}
}

var tierNames = []string{"", "fast", "priority", "flex", "standard", "default", "ultra-fast", "scale", "batch"}

// Property: with the tiers fixed (same prompt tokens, same service tier), cost is additive across
// categories: the cost of the whole equals the sum of the costs of each category alone, priced
// at the rates the whole selected.
func TestQuoteAdditiveProperty(t *testing.T) {
	t.Parallel()
	r := tieredRule(t)
	rng := rand.New(rand.NewPCG(1, 2))
	f := func() bool {
		u := randomUsage(rng)
		tier := tierNames[rng.IntN(len(tierNames))]
		whole := r.Quote(u, tier)
		sum := newExact()
		counts := u.Counts()
		for c := range counts {
			var one usage.Usage
			set(&one, Category(c), counts[c])
			// Keep the tier selection of the whole by pricing at its rates directly.
			part := priceAt(whole.Rates, one)
			exact.Add(sum, sum, part)
		}
		if sum.Cmp(whole.Cost) != 0 {
			t.Logf("usage %+v tier %q: whole %s, sum of parts %s", u, tier, FormatDecimal(whole.Cost), FormatDecimal(sum))
			return false
		}
		// Without tiers in play (no tier entries reached) the per-category quotes add up too.
		base := mustRule(t, validInput())
		bsum := newExact()
		for c := range counts {
			var one usage.Usage
			set(&one, Category(c), counts[c])
			exact.Add(bsum, bsum, base.Quote(one, tier).Cost)
		}
		return bsum.Cmp(base.Quote(u, tier).Cost) == 0
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 500}); err != nil {
		t.Error(err)
	}
}

// Property: adding tokens to any category never lowers the cost when tiers do not change, and
// the base rule (no tiers) is monotone everywhere.
func TestQuoteMonotoneProperty(t *testing.T) {
	t.Parallel()
	base := mustRule(t, validInput())
	flat := tieredRule(t)
	// Only service-tier entries without thresholds, so the selection does not depend on tokens.
	// (Thresholds can make cost non-monotone by design: an explicit price or a missing multiplier
	// in a higher entry may be cheaper; see docs/pricing.md.)
	flat.Tiers = []Tier{flat.Tiers[2], flat.Tiers[3], flat.Tiers[5], flat.Tiers[6]}
	rng := rand.New(rand.NewPCG(3, 4))
	f := func() bool {
		u := randomUsage(rng)
		tier := tierNames[rng.IntN(len(tierNames))]
		c := Category(rng.IntN(NumCategories))
		more := u
		set(&more, c, get(u, c)+rng.Int64N(1_000_000)+1)
		for _, r := range []*Rule{base, flat} {
			a, b := r.Quote(u, tier), r.Quote(more, tier)
			if b.Cost.Cmp(a.Cost) < 0 || b.Micros < a.Micros {
				t.Logf("rule %d, %+v → %+v (%s): %s → %s", r.ID, u, more, tier, FormatDecimal(a.Cost), FormatDecimal(b.Cost))
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 1000}); err != nil {
		t.Error(err)
	}
}

func priceAt(rates Prices, u usage.Usage) *decimal.Big {
	q := (&Rule{Prices: rates}).Quote(u, "")
	return q.Cost
}

func set(u *usage.Usage, c Category, n int64) {
	switch c {
	case CatInput:
		u.Input = n
	case CatOutput:
		u.Output = n
	case CatCacheRead:
		u.CacheRead = n
	case CatCacheCreation5m:
		u.CacheCreation5m = n
	case CatCacheCreation30m:
		u.CacheCreation30m = n
	case CatCacheCreation1h:
		u.CacheCreation1h = n
	case CatImageOutput:
		u.ImageOutput = n
	}
}

func get(u usage.Usage, c Category) int64 { return u.Counts()[c] }

// The integer fast path (parsed rules) and the decimal path (hand-built rules) agree exactly on
// random prices, tiers and usage, including saturation.
func TestFastPathMatchesDecimalPath(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(12, 13))
	price := func() string {
		switch rng.IntN(6) {
		case 0:
			return "0"
		case 1:
			return fmt.Sprint(rng.IntN(100))
		case 2:
			return fmt.Sprintf("%d.%03d", rng.IntN(100), rng.IntN(1000))
		case 3:
			return fmt.Sprintf("0.%018d", rng.Int64N(1e18))
		case 4:
			return fmt.Sprintf("%d.%06d", rng.Int64N(1e15), rng.IntN(1e6))
		}
		return fmt.Sprintf("%d", rng.Int64N(1e15))
	}
	fastUsed := 0
	for range 2000 {
		in := validInput()
		in.InputPrice, in.OutputPrice, in.CacheReadPrice = price(), price(), price()
		in.CacheCreation5mPrice, in.CacheCreation30mPrice, in.CacheCreation1hPrice, in.ImageOutputPrice = price(), price(), price(), price()
		in.PricingTiersJSON = json.RawMessage(fmt.Sprintf(
			`[{"min_prompt_tokens": 1000, "multiplier": "%s"}, {"service_tier": "priority", "multiplier": "%s", "output_price": "%s"}]`,
			price(), price(), price()))
		r := mustRule(t, in)
		hand := &Rule{ID: r.ID, Prices: r.Prices, Tiers: r.Tiers}
		u := randomUsage(rng)
		if rng.IntN(10) == 0 {
			u.Output = math.MaxInt64
		}
		tier := []string{"", "priority"}[rng.IntN(2)]
		a, b := r.Quote(u, tier), hand.Quote(u, tier)
		if a.Cost.Cmp(b.Cost) != 0 || a.Micros != b.Micros || a.Saturated != b.Saturated {
			t.Fatalf("Quote(%+v, %q) with %+v: fast %s/%d/%v, decimal %s/%d/%v", u, tier, in,
				FormatDecimal(a.Cost), a.Micros, a.Saturated, FormatDecimal(b.Cost), b.Micros, b.Saturated)
		}
		if e := r.sharedRates(a.PromptTier, a.ServiceTier); e.fast.ok {
			fastUsed++
		}
	}
	if fastUsed < 200 {
		t.Errorf("fast path used %d times out of 2000, want it exercised", fastUsed)
	}
}
