package pricing

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/usage"
)

func priced(t testing.TB, id int64, match, input string, version int64, enabled bool) *Rule {
	t.Helper()
	in := validInput()
	in.ID, in.MatchType, in.ModelMatch, in.InputPrice, in.Enabled = id, "exact", match, input, enabled
	in.PricingTiersJSON = []byte(`[]`)
	r := mustRule(t, in)
	r.Version = version
	return r
}

// TestTimelineAcrossTheInstant: the version in force is picked by the instant given (the request's
// admission time), switching exactly at the change's instant — T-1ns is the old price, T the new one.
func TestTimelineAcrossTheInstant(t *testing.T) {
	t.Parallel()
	T := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	T2 := T.Add(time.Hour)
	tl, err := NewTimeline(
		[]*Rule{priced(t, 1, "m", "2", 1, true), priced(t, 2, "other", "5", 3, true), priced(t, 3, "later-on", "1", 1, false)},
		[]Change{
			{At: T2, Rule: priced(t, 1, "m", "4", 3, true)},          // a second change of rule 1, given first
			{At: T, Rule: priced(t, 1, "m", "3", 2, true)},           // price change
			{At: T, Rule: priced(t, 2, "other", "5", 4, false)},      // disabled at T
			{At: T2, Rule: priced(t, 3, "later-on", "1.5", 2, true)}, // enabled at T2
		})
	if err != nil {
		t.Fatal(err)
	}
	u := usage.Usage{Input: 1_000_000}
	for _, c := range []struct {
		name      string
		model     string
		at        time.Time
		rule, ver int64
		cost      string
	}{
		{"long before", "m", T.Add(-24 * time.Hour), 1, 1, "2"},
		{"one nanosecond before", "m", T.Add(-time.Nanosecond), 1, 1, "2"},
		{"at the instant", "m", T, 1, 2, "3"},
		{"just after", "m", T.Add(time.Microsecond), 1, 2, "3"},
		{"second instant", "m", T2, 1, 3, "4"},
		{"disabled rule before", "other", T.Add(-time.Nanosecond), 2, 3, "5"},
		{"disabled rule at the instant", "other", T, 0, 0, "0"},
		{"enabled later: not before", "later-on", T2.Add(-time.Nanosecond), 0, 0, "0"},
		{"enabled later: from its instant", "later-on", T2, 3, 2, "1.5"},
		{"instant in another zone", "m", T.In(time.FixedZone("x", 3600)), 1, 2, "3"},
	} {
		r := tl.ResolveAt(0, c.model, c.at)
		q := QuoteFor(r, u, "")
		var ver int64
		if r != nil {
			ver = r.Version
		}
		if q.RuleID != c.rule || ver != c.ver || FormatDecimal(q.Cost) != c.cost {
			t.Errorf("%s: rule %d version %d cost %s, want rule %d version %d cost %s", c.name, q.RuleID, ver,
				FormatDecimal(q.Cost), c.rule, c.ver, c.cost)
		}
	}
	if got := tl.Instants(); len(got) != 2 || !got[0].Equal(T) || !got[1].Equal(T2) {
		t.Errorf("Instants = %v, want [%v %v]", got, T, T2)
	}
}

// TestTimelineChangesMatching: a scheduled version that changes the match moves the resolution too.
func TestTimelineChangesMatching(t *testing.T) {
	t.Parallel()
	T := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	contains := priced(t, 1, "gpt", "1", 2, true)
	contains.MatchType = MatchContains
	tl, err := NewTimeline([]*Rule{priced(t, 1, "gpt-x", "1", 1, true)}, []Change{{At: T, Rule: contains}})
	if err != nil {
		t.Fatal(err)
	}
	if r := tl.ResolveAt(0, "gpt-y", T.Add(-time.Second)); r != nil {
		t.Errorf("before: gpt-y resolves to rule %d, want none", r.ID)
	}
	if r := tl.ResolveAt(0, "gpt-y", T); r == nil || r.Version != 2 {
		t.Errorf("at T: gpt-y resolves to %+v, want rule 1 version 2", r)
	}
}

func TestTimelineErrors(t *testing.T) {
	t.Parallel()
	T := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		changes []Change
		want    string
	}{
		{"no rule", []Change{{At: T}}, "no rule id"},
		{"no instant", []Change{{Rule: priced(t, 1, "m", "1", 2, true)}}, "out of range"},
		{"beyond UnixNano", []Change{{At: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), Rule: priced(t, 1, "m", "1", 2, true)}}, "out of range"},
		{"two at one instant", []Change{{At: T, Rule: priced(t, 1, "m", "1", 2, true)}, {At: T, Rule: priced(t, 1, "m", "2", 3, true)}}, "two scheduled changes"},
	} {
		if _, err := NewTimeline(nil, c.changes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	var nilTL *Timeline
	if nilTL.ResolveAt(0, "m", T) != nil || nilTL.Instants() != nil {
		t.Error("a nil timeline resolves something")
	}
}

// TestTimelineWithoutChanges: with no scheduled change every instant uses the current index.
func TestTimelineWithoutChanges(t *testing.T) {
	t.Parallel()
	cur := []*Rule{priced(t, 1, "m", "2", 1, true)}
	tl, err := NewTimeline(cur, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{{}, time.Unix(0, 0), time.Now(), time.Date(2261, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if r := tl.ResolveAt(0, "m", at); r == nil || r.Version != 1 {
			t.Errorf("at %v: %+v, want version 1", at, r)
		}
	}
}

func TestResolveAtZeroAllocsWhenSeen(t *testing.T) {
	tl := benchTimeline(t, 2000)
	models := []string{"model-0001", "vendor-model-1999-latest", "unknown"}
	ats := []time.Time{benchT.Add(-time.Second), benchT, benchT.Add(time.Hour)}
	for _, at := range ats {
		for _, m := range models {
			tl.ResolveAt(3, m, at)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, at := range ats {
			for _, m := range models {
				tl.ResolveAt(3, m, at)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("ResolveAt of seen pairs allocates %v times, want 0", allocs)
	}
}

var benchT = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

// benchTimeline is benchRules(n) with every tenth rule changed at benchT and every hundredth again an
// hour later.
func benchTimeline(t testing.TB, n int) *Timeline {
	t.Helper()
	rules := benchRules(n)
	var changes []Change
	for i, r := range rules {
		if i%10 == 0 {
			c := *r
			c.Version = 2
			changes = append(changes, Change{At: benchT, Rule: &c})
		}
		if i%100 == 0 {
			c := *r
			c.Version = 3
			changes = append(changes, Change{At: benchT.Add(time.Hour), Rule: &c})
		}
	}
	tl, err := NewTimeline(rules, changes)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}
