package pricing

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func validInput() RuleInput {
	return RuleInput{
		ID: 1, MatchType: "exact", ModelMatch: "m-1",
		InputPrice: "3", OutputPrice: "15", CacheReadPrice: "0.3", CacheCreation5mPrice: "3.75",
		CacheCreation30mPrice: "5", CacheCreation1hPrice: "6", ImageOutputPrice: "40", Enabled: true,
	}
}

func TestParseRuleValid(t *testing.T) {
	t.Parallel()
	in := validInput()
	pid := int64(7)
	in.ProviderID = &pid
	in.MatchType = "contains"
	in.PricingTiersJSON = json.RawMessage(`[
		{"min_prompt_tokens": 200000, "multiplier": "2", "output_price": "30"},
		{"service_tier": "Fast", "multiplier": 1.8},
		{"service_tier": "SERVICE_TIER_FLEX", "min_prompt_tokens": "1000", "input_price": "0.5"},
		{"min_prompt_tokens": 0, "multiplier": null, "service_tier": null}]`)
	r, err := ParseRule(in)
	if err != nil {
		t.Fatalf("ParseRule = %v", err)
	}
	if r.ProviderID != 7 || r.MatchType != MatchContains || r.ModelMatch != "m-1" || !r.Enabled || r.ID != 1 {
		t.Errorf("ParseRule = %+v", r)
	}
	var prices []string
	for _, p := range r.Prices {
		prices = append(prices, FormatDecimal(p))
	}
	if want := []string{"3", "15", "0.3", "3.75", "5", "6", "40"}; !slices.Equal(prices, want) {
		t.Errorf("prices = %v, want %v", prices, want)
	}
	if len(r.Tiers) != 4 {
		t.Fatalf("len(Tiers) = %d, want 4", len(r.Tiers))
	}
	t0, t1, t2, t3 := r.Tiers[0], r.Tiers[1], r.Tiers[2], r.Tiers[3]
	if t0.MinPromptTokens != 200000 || t0.ServiceTier != "" || FormatDecimal(t0.Multiplier) != "2" ||
		FormatDecimal(t0.Prices[CatOutput]) != "30" || t0.Prices[CatInput] != nil {
		t.Errorf("tier 0 = %+v", t0)
	}
	if t1.ServiceTier != "priority" || t1.RawServiceTier != "Fast" || FormatDecimal(t1.Multiplier) != "1.8" {
		t.Errorf("tier 1 = %+v", t1)
	}
	if t2.ServiceTier != "flex" || t2.MinPromptTokens != 1000 || t2.Multiplier != nil || FormatDecimal(t2.Prices[CatInput]) != "0.5" {
		t.Errorf("tier 2 = %+v", t2)
	}
	if t3.ServiceTier != "" || t3.MinPromptTokens != 0 || t3.Multiplier != nil {
		t.Errorf("tier 3 = %+v", t3)
	}
}

func TestParseRuleGlobalAndNoTiers(t *testing.T) {
	t.Parallel()
	for _, tiers := range []string{"", "null", "[]", "  [ ] "} {
		in := validInput()
		in.PricingTiersJSON = json.RawMessage(tiers)
		r, err := ParseRule(in)
		if err != nil || r.ProviderID != 0 || len(r.Tiers) != 0 {
			t.Errorf("ParseRule(tiers %q) = %+v, %v; want global rule without tiers", tiers, r, err)
		}
	}
}

func TestParseRuleErrors(t *testing.T) {
	t.Parallel()
	neg := int64(-1)
	tests := []struct {
		name   string
		modify func(*RuleInput)
		want   []FieldError // Field and TierIndex; Message is checked to be non-empty
	}{
		{"malformed input price", func(in *RuleInput) { in.InputPrice = "1e3" }, []FieldError{{Field: "input_price", TierIndex: -1}}},
		{"NaN output price", func(in *RuleInput) { in.OutputPrice = "NaN" }, []FieldError{{Field: "output_price", TierIndex: -1}}},
		{"negative cache read", func(in *RuleInput) { in.CacheReadPrice = "-0.1" }, []FieldError{{Field: "cache_read_price", TierIndex: -1}}},
		{"missing 30m price", func(in *RuleInput) { in.CacheCreation30mPrice = "" }, []FieldError{{Field: "cache_creation_30m_price", TierIndex: -1}}},
		{"unknown match type", func(in *RuleInput) { in.MatchType = "prefix" }, []FieldError{{Field: "match_type", TierIndex: -1}}},
		{"match type case", func(in *RuleInput) { in.MatchType = "Exact" }, []FieldError{{Field: "match_type", TierIndex: -1}}},
		{"empty model match", func(in *RuleInput) { in.ModelMatch = "" }, []FieldError{{Field: "model_match", TierIndex: -1}}},
		{"negative provider", func(in *RuleInput) { in.ProviderID = &neg }, []FieldError{{Field: "provider_id", TierIndex: -1}}},
		{"malformed tier json", func(in *RuleInput) { in.PricingTiersJSON = json.RawMessage(`[{"multiplier":"2"`) },
			[]FieldError{{Field: "pricing_tiers_json", TierIndex: -1}}},
		{"tier json not an array", func(in *RuleInput) { in.PricingTiersJSON = json.RawMessage(`{"multiplier":"2"}`) },
			[]FieldError{{Field: "pricing_tiers_json", TierIndex: -1}}},
		{"tier neither threshold nor service tier", func(in *RuleInput) {
			in.PricingTiersJSON = json.RawMessage(`[{"min_prompt_tokens":1},{"multiplier":"2","service_tier":""}]`)
		}, []FieldError{{Field: "min_prompt_tokens", TierIndex: 1}}},
		{"tier malformed multiplier and price", func(in *RuleInput) {
			in.PricingTiersJSON = json.RawMessage(`[{"service_tier":"flex","multiplier":"x2","input_price":"1e-3","output_price":"Infinity"}]`)
		}, []FieldError{{Field: "multiplier", TierIndex: 0}, {Field: "input_price", TierIndex: 0}, {Field: "output_price", TierIndex: 0}}},
		{"tier negative multiplier", func(in *RuleInput) {
			in.PricingTiersJSON = json.RawMessage(`[{"min_prompt_tokens":0},{"min_prompt_tokens":5,"multiplier":"-2"}]`)
		}, []FieldError{{Field: "multiplier", TierIndex: 1}}},
		{"tier negative price", func(in *RuleInput) {
			in.PricingTiersJSON = json.RawMessage(`[{"service_tier":"flex","image_output_price":"-1"}]`)
		}, []FieldError{{Field: "image_output_price", TierIndex: 0}}},
		{"tier float exponent number", func(in *RuleInput) {
			in.PricingTiersJSON = json.RawMessage(`[{"service_tier":"flex","multiplier":1e2}]`)
		}, []FieldError{{Field: "multiplier", TierIndex: 0}}},
		{"tier bad threshold", func(in *RuleInput) {
			in.PricingTiersJSON = json.RawMessage(`[{"min_prompt_tokens":-5},{"min_prompt_tokens":1.5},{"min_prompt_tokens":"x"}]`)
		}, []FieldError{{Field: "min_prompt_tokens", TierIndex: 0}, {Field: "min_prompt_tokens", TierIndex: 1}, {Field: "min_prompt_tokens", TierIndex: 2}}},
		{"tier unknown field", func(in *RuleInput) {
			in.PricingTiersJSON = json.RawMessage(`[{"min_prompt_token":200000,"service_tier":"flex"}]`)
		}, []FieldError{{Field: "min_prompt_token", TierIndex: 0}}},
		{"tier service tier not a string", func(in *RuleInput) {
			in.PricingTiersJSON = json.RawMessage(`[{"service_tier":3}]`)
		}, []FieldError{{Field: "service_tier", TierIndex: 0}, {Field: "min_prompt_tokens", TierIndex: 0}}},
		{"every problem listed", func(in *RuleInput) {
			in.InputPrice, in.OutputPrice, in.MatchType, in.ModelMatch = "abc", "-3", "regex", ""
			in.PricingTiersJSON = json.RawMessage(`[{"multiplier":"2"}]`)
		}, []FieldError{{Field: "match_type", TierIndex: -1}, {Field: "model_match", TierIndex: -1},
			{Field: "input_price", TierIndex: -1}, {Field: "output_price", TierIndex: -1}, {Field: "min_prompt_tokens", TierIndex: 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := validInput()
			tt.modify(&in)
			r, err := ParseRule(in)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("ParseRule = %v, %v; want *ValidationError", r, err)
			}
			if r != nil {
				t.Errorf("ParseRule returned a rule with an error")
			}
			var got []FieldError
			for _, p := range verr.Problems {
				if p.Message == "" {
					t.Errorf("problem %+v has no message", p)
				}
				got = append(got, FieldError{Field: p.Field, TierIndex: p.TierIndex})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems = %+v, want %+v (%v)", got, tt.want, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want[0].Field) {
				t.Errorf("Error() = %q, does not name %q", msg, tt.want[0].Field)
			}
		})
	}
}

func TestRuleInputJSON(t *testing.T) {
	t.Parallel()
	doc := `{"id": 9, "provider_id": null, "match_type": "contains", "model_match": "g-1",
		"input_price": "0.1", "output_price": "0.4", "cache_read_price": "0.025", "cache_creation_5m_price": "0",
		"cache_creation_30m_price": "0", "cache_creation_1h_price": "0", "image_output_price": "30", "enabled": false,
		"pricing_tiers_json": [{"min_prompt_tokens": 200000, "multiplier": "2"}]}`
	var in RuleInput
	if err := json.Unmarshal([]byte(doc), &in); err != nil {
		t.Fatalf("Unmarshal = %v", err)
	}
	r, err := ParseRule(in)
	if err != nil {
		t.Fatalf("ParseRule = %v", err)
	}
	if r.ID != 9 || r.ProviderID != 0 || r.Enabled || len(r.Tiers) != 1 || r.Tiers[0].MinPromptTokens != 200000 {
		t.Errorf("ParseRule = %+v", r)
	}
}

func TestNormalizeTier(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"": "", "  ": "", "fast": "priority", "FAST": "priority", "Priority": "priority",
		"default": "standard", "on_demand": "standard", "ON_DEMAND": "standard", "Standard": "standard",
		"ultra-fast": "ultrafast", "UltraFast": "ultrafast", "flex": "flex", "SERVICE_TIER_FLEX": "flex",
		"FLEX": "flex", "SERVICE_TIER_PRIORITY": "priority", "SERVICE_TIER_UNSPECIFIED": "", "scale": "scale",
		"batch": "batch", " auto ": "auto",
	}
	for in, want := range tests {
		if got := NormalizeTier(in); got != want {
			t.Errorf("NormalizeTier(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	f.Add("exact", "m-1", "3", "15", `[{"min_prompt_tokens":200000,"multiplier":"2","output_price":"30"},{"service_tier":"fast","multiplier":1.5}]`)
	f.Add("contains", "", "NaN", "-1", `[{"multiplier":"2"}]`)
	f.Add("regex", "x", "1e9", "0.000000000000000000000001", `[{`)
	f.Add("exact", "x", "1", "1", `[{"service_tier":null,"min_prompt_tokens":"12"},{"min_prompt_tokens":1.5}]`)
	f.Fuzz(func(t *testing.T, matchType, model, inPrice, outPrice, tiers string) {
		in := validInput()
		in.MatchType, in.ModelMatch, in.InputPrice, in.OutputPrice = matchType, model, inPrice, outPrice
		in.PricingTiersJSON = json.RawMessage(tiers)
		r, err := ParseRule(in)
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) || len(verr.Problems) == 0 {
				t.Fatalf("ParseRule error %v is not a non-empty *ValidationError", err)
			}
			return
		}
		// A valid rule must price anything without panicking, with a non-negative cost.
		q := r.Quote(sampleUsage(), "fast")
		if q.Cost.Sign() < 0 || q.Micros < 0 {
			t.Fatalf("Quote = %v, negative", q.Cost)
		}
		for _, tier := range r.Tiers {
			if tier.MinPromptTokens < 0 {
				t.Fatalf("tier threshold %d < 0", tier.MinPromptTokens)
			}
		}
		// Export and re-import is lossless.
		back, err := ParseRule(r.Input())
		if err != nil {
			t.Fatalf("ParseRule(Input()) = %v", err)
		}
		ja, _ := json.Marshal(r.Input())
		jb, _ := json.Marshal(back.Input())
		if string(ja) != string(jb) {
			t.Fatalf("round trip changed the rule:\n%s\n%s", ja, jb)
		}
	})
}

func TestSettlementTier(t *testing.T) {
	t.Parallel()
	tests := []struct{ reported, requested, want string }{
		{"standard", "priority", "standard"}, // downgraded upstream: billed at the reported tier
		{"", "flex", "flex"},
		{"SERVICE_TIER_UNSPECIFIED", "flex", "flex"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := SettlementTier(tt.reported, tt.requested); got != tt.want {
			t.Errorf("SettlementTier(%q, %q) = %q, want %q", tt.reported, tt.requested, got, tt.want)
		}
	}
}

func TestRuleInputRoundTrip(t *testing.T) {
	t.Parallel()
	r := tieredRule(t)
	pid := int64(3)
	r.ProviderID = pid
	back, err := ParseRule(r.Input())
	if err != nil {
		t.Fatalf("ParseRule(Input()) = %v", err)
	}
	a, b := r.Input(), back.Input()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("round trip changed the rule:\n%s\n%s", ja, jb)
	}
	if back.ProviderID != 3 || len(back.Tiers) != len(r.Tiers) || back.Tiers[5].RawServiceTier != "Standard" {
		t.Errorf("round trip = %+v", back)
	}
	for _, tier := range []string{"", "fast", "flex", "scale"} {
		u := sampleUsage()
		u.Input = 600_000
		if qa, qb := r.Quote(u, tier), back.Quote(u, tier); qa.Cost.Cmp(qb.Cost) != 0 {
			t.Errorf("tier %q: %s vs %s", tier, FormatDecimal(qa.Cost), FormatDecimal(qb.Cost))
		}
	}
	global := mustRule(t, validInput()).Input()
	if global.ProviderID != nil || global.PricingTiersJSON != nil || global.CacheReadPrice != "0.3" {
		t.Errorf("global Input() = %+v", global)
	}
}

// TestParseRuleTierThresholdRange: min_prompt_tokens accepts 0..999999999999999; anything outside
// (too large for the bound, for int64, negative) or not an integer is refused with a message that
// names the field, states the allowed range and echoes the value.
func TestParseRuleTierThresholdRange(t *testing.T) {
	t.Parallel()
	const rangeText = "an integer between 0 and 999999999999999"
	if MaxMinPromptTokens != 999999999999999 || MaxMinPromptTokens >= 1<<53 {
		t.Fatalf("MaxMinPromptTokens = %d, want 999999999999999 (below 2^53, exact as a JSON double)", MaxMinPromptTokens)
	}
	for _, ok := range []struct {
		raw  string
		want int64
	}{{`0`, 0}, {`1`, 1}, {`999999999999999`, 999999999999999}, {`"999999999999999"`, 999999999999999}, {`"007"`, 7}, {`-0`, 0}} {
		in := validInput()
		in.PricingTiersJSON = json.RawMessage(`[{"min_prompt_tokens":` + ok.raw + `}]`)
		r, err := ParseRule(in)
		if err != nil || r.Tiers[0].MinPromptTokens != ok.want {
			t.Errorf("min_prompt_tokens %s: ParseRule = %v; want threshold %d", ok.raw, err, ok.want)
		}
	}
	tests := []struct {
		raw  string
		want []string // substrings of the problem's message
	}{
		{`1000000000000000`, []string{"min_prompt_tokens", "too large", rangeText, "got 1000000000000000"}},
		{`"1000000000000000"`, []string{"min_prompt_tokens", "too large", rangeText, "got 1000000000000000"}},
		{`9223372036854775807`, []string{"min_prompt_tokens", "too large", rangeText, "got 9223372036854775807"}},
		{`9223372036854775808`, []string{"min_prompt_tokens", "too large", rangeText, "got 9223372036854775808"}},
		{`123456789012345678901234567890`, []string{"min_prompt_tokens", "too large", rangeText, "got 1234567890"}},
		{`-1`, []string{"min_prompt_tokens", "negative", rangeText, "got -1"}},
		{`-99999999999999999999`, []string{"min_prompt_tokens", "negative", rangeText, "got -9999"}},
		{`1.5`, []string{"min_prompt_tokens", "integer", rangeText, "got 1.5"}},
		{`1e3`, []string{"min_prompt_tokens", "integer", rangeText, "got 1e3"}},
		{`"+5"`, []string{"min_prompt_tokens", "integer", rangeText, "got +5"}},
		{`"x"`, []string{"min_prompt_tokens", "integer", rangeText, "got x"}},
		{`true`, []string{"min_prompt_tokens", "integer", rangeText, "got true"}},
	}
	for _, tt := range tests {
		in := validInput()
		in.PricingTiersJSON = json.RawMessage(`[{"multiplier":"2","min_prompt_tokens":` + tt.raw + `}]`)
		_, err := ParseRule(in)
		var verr *ValidationError
		if !errors.As(err, &verr) || len(verr.Problems) != 1 {
			t.Errorf("min_prompt_tokens %s: ParseRule = %v; want one problem", tt.raw, err)
			continue
		}
		p := verr.Problems[0]
		if p.Field != "min_prompt_tokens" || p.TierIndex != 0 {
			t.Errorf("min_prompt_tokens %s: problem at %s[%d], want min_prompt_tokens[0]", tt.raw, p.Field, p.TierIndex)
		}
		for _, w := range tt.want {
			if !strings.Contains(p.Message, w) {
				t.Errorf("min_prompt_tokens %s: message %q does not contain %q", tt.raw, p.Message, w)
			}
		}
	}
}
