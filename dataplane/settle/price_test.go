package settle_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Price is the record's price: for every way an outcome is priced (upstream, local, estimated, none, a tier,
// out of bounds, no rule) the cost, rule, version, tier and source Price answers are BuildRecord's; and a
// record given the price already told (Outcome.Priced) carries exactly that.
func TestPriceIsTheRecords(t *testing.T) {
	t.Parallel()
	rule := testRule(t)
	base := settle.Outcome{RequestID: "r", Start: time.Unix(1_700_000_000, 0), KeyID: 1, Operation: vocab.OpGenerateContent,
		Rule: rule, EstimateTokens: 250, EndState: vocab.EndCompleted, HTTPStatus: 200}
	local := usage.Usage{Input: 40, Output: 9}
	cases := map[string]func(o *settle.Outcome){
		"upstream": func(o *settle.Outcome) {
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 1234, Output: 77, CacheRead: 100}, true
		},
		"reported tier": func(o *settle.Outcome) {
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 10, Output: 3, ReportedTier: "priority"}, true
		},
		"requested tier": func(o *settle.Outcome) {
			o.RequestedTier, o.Upstream, o.UpstreamFound = "flex", usage.Usage{Input: 10, Output: 3}, true
		},
		"local":         func(o *settle.Outcome) { o.Local = &local },
		"estimated":     func(o *settle.Outcome) {},
		"none":          func(o *settle.Outcome) { o.EndState = vocab.EndUpstreamError },
		"no rule":       func(o *settle.Outcome) { o.Rule, o.Upstream, o.UpstreamFound = nil, usage.Usage{Input: 5}, true },
		"out of bounds": func(o *settle.Outcome) { o.Upstream, o.UpstreamFound = usage.Usage{Input: 1 << 50}, true },
		"not billed": func(o *settle.Outcome) {
			o.Operation, o.Upstream, o.UpstreamFound = vocab.OpCountTokens, usage.Usage{Input: 5}, true
		},
	}
	for name, mutate := range cases {
		o := base
		mutate(&o)
		p := settle.Price(o)
		rec := settle.BuildRecord(o)
		tier := rec.GetReportedTier()
		if tier == "" {
			tier = rec.GetRequestedTier()
		}
		if p.Cost != rec.GetCost() || p.RuleID != rec.GetPriceRuleId() || p.RuleVersion != rec.GetPriceRuleVersion() ||
			string(p.Source) != rec.GetSource() || p.Tier != tier || p.Flag != rec.GetBillingFlag() {
			t.Errorf("%s: Price %+v, record cost %s rule %d v%d source %s tier %s flag %s", name, p, rec.GetCost(),
				rec.GetPriceRuleId(), rec.GetPriceRuleVersion(), rec.GetSource(), tier, rec.GetBillingFlag())
		}
		told := p
		told.Cost = "0.5" // a distinguishable amount: the record must take the price it is given
		o.Priced = &told
		if got := settle.BuildRecord(o).GetCost(); got != "0.5" {
			t.Errorf("%s: a record given its price has cost %s", name, got)
		}
	}
}
