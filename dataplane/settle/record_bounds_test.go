package settle_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/telemetry"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Upstream usage is checked before it becomes money: a report beyond the per-request bounds (the rule's,
// from the snapshot; the defaults without one) is recorded with cost 0 and flagged, never charged, and
// counted on the alert metric. Reports within the bounds are priced as before.
func TestBuildRecordFlagsUsageBeyondBounds(t *testing.T) {
	reg := prometheus.NewRegistry()
	settle.RegisterRecordMetrics(reg)
	rule := testRule(t) // input $2 / output $8 per million
	tight := *rule
	tight.Bounds = pricing.Bounds{MaxRequestTokens: 1_000_000, MaxRequestCostMicros: 5_000_000} // $5
	base := settle.Outcome{RequestID: "r", Start: time.Unix(1_700_000_000, 0), KeyID: 1, UserID: 3, OrgID: 1,
		ProviderID: 7, Operation: vocab.OpGenerateContent, InboundKind: vocab.KindAlphaChatCompletions,
		Implementation: vocab.ImplPassthrough, Rule: rule, EndState: vocab.EndCompleted, HTTPStatus: 200, UpstreamFound: true}
	tests := []struct {
		name     string
		rule     *pricing.Rule
		u        usage.Usage
		wantCost string
		flagged  bool
	}{
		{"9e18 output tokens", rule, usage.Usage{Input: 10, Output: 9_000_000_000_000_000_000}, "0", true},
		{"tokens summing past int64", rule, usage.Usage{Input: 1 << 62, Output: 1 << 62, CacheRead: 1 << 62}, "0", true},
		{"just over the default token bound", rule, usage.Usage{Input: 100_000_000, Output: 1}, "0", true},
		{"at the default token bound", rule, usage.Usage{Input: 50_000_000, Output: 50_000_000}, "500", false},
		{"cost over the rule's bound", &tight, usage.Usage{Output: 700_000}, "0", true},
		{"cost at the rule's bound", &tight, usage.Usage{Output: 625_000}, "5", false},
		{"tokens over the rule's bound", &tight, usage.Usage{Input: 1_000_001}, "0", true},
		{"no rule: tokens still bounded", nil, usage.Usage{Output: 1 << 40}, "0", true},
		{"honest", rule, usage.Usage{Input: 1000, Output: 500}, "0.006", false},
	}
	flaggedCount := 0
	for _, tt := range tests {
		o := base
		o.Rule, o.Upstream = tt.rule, tt.u
		rec := settle.BuildRecord(o)
		if rec.GetCost() != tt.wantCost {
			t.Errorf("%s: cost %q, want %q", tt.name, rec.GetCost(), tt.wantCost)
		}
		gotFlag := rec.GetBillingFlag() == settle.FlagOutOfBounds
		if gotFlag != tt.flagged || (tt.flagged && rec.GetFlagDetail() == "") || (!tt.flagged && rec.GetBillingFlag() != "") {
			t.Errorf("%s: billing_flag %q detail %q, want flagged=%v", tt.name, rec.GetBillingFlag(), rec.GetFlagDetail(), tt.flagged)
		}
		if tt.flagged {
			flaggedCount++
		}
	}
	b, err := telemetry.Text(reg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "tollgate_settle_usage_out_of_bounds_total " + strconv.Itoa(flaggedCount) + "\n"; !strings.Contains(b, want) {
		t.Errorf("metrics lack %q:\n%s", want, b)
	}
}
