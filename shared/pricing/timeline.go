package pricing

import (
	"fmt"
	"slices"
	"time"
)

// Change is a scheduled version of a price rule: from At on, Rule (same ID) replaces the version in
// force. A disabled Rule takes the rule out of pricing from At on.
type Change struct {
	At   time.Time
	Rule *Rule
}

// Timeline is the price rules over time: the rules in force now and one index per distinct instant of
// the scheduled changes, each built ahead of time with every change due by then applied. Resolving at
// an instant picks the index in force at that instant and resolves in it, so a data plane switches to a
// scheduled version exactly at its instant, with no new snapshot. Immutable and safe for concurrent
// use; ResolveAt does not allocate for a memoised pair.
type Timeline struct {
	// epochs[0] is the rules without any change (from = the zero instant); later epochs start at
	// their change instant, in increasing order.
	epochs []epoch
}

type epoch struct {
	from int64 // UnixNano
	idx  *Index
}

// NewTimeline builds the timeline of the current rules and the scheduled changes (in any order). Two
// changes of one rule at the same instant, or a change without a rule or an id, are errors.
func NewTimeline(current []*Rule, changes []Change) (*Timeline, error) {
	return NewTimelineSize(current, changes, DefaultMemoSize)
}

// NewTimelineSize is NewTimeline with the memo bound of each index (NewIndexSize).
func NewTimelineSize(current []*Rule, changes []Change, memoSize int) (*Timeline, error) {
	cs := slices.Clone(changes)
	for i, c := range cs {
		if c.Rule == nil || c.Rule.ID <= 0 {
			return nil, fmt.Errorf("scheduled change %d: no rule id", i)
		}
		if y := c.At.Year(); c.At.IsZero() || y < 1678 || y > 2261 { // UnixNano's range
			return nil, fmt.Errorf("scheduled change of price rule %d: instant %v out of range", c.Rule.ID, c.At)
		}
	}
	slices.SortStableFunc(cs, func(a, b Change) int { return a.At.Compare(b.At) })
	byID := make(map[int64]*Rule, len(current))
	order := make([]int64, 0, len(current))
	for _, r := range current {
		if r == nil {
			continue
		}
		if _, dup := byID[r.ID]; !dup {
			order = append(order, r.ID)
		}
		byID[r.ID] = r
	}
	t := &Timeline{epochs: []epoch{{from: 0, idx: NewIndexSize(current, memoSize)}}}
	for i := 0; i < len(cs); {
		at := cs[i].At
		seen := map[int64]bool{}
		for ; i < len(cs) && cs[i].At.Equal(at); i++ {
			r := cs[i].Rule
			if seen[r.ID] {
				return nil, fmt.Errorf("price rule %d: two scheduled changes at %s", r.ID, at.UTC().Format(time.RFC3339Nano))
			}
			seen[r.ID] = true
			if _, ok := byID[r.ID]; !ok {
				order = append(order, r.ID)
			}
			byID[r.ID] = r
		}
		rules := make([]*Rule, 0, len(order))
		for _, id := range order {
			rules = append(rules, byID[id])
		}
		t.epochs = append(t.epochs, epoch{from: at.UnixNano(), idx: NewIndexSize(rules, memoSize)})
	}
	return t, nil
}

// ResolveAt returns the rule pricing model on providerID at the instant at (Index.Resolve in the
// rules in force then), or nil when none matches.
func (t *Timeline) ResolveAt(providerID int64, model string, at time.Time) *Rule {
	if t == nil {
		return nil
	}
	return t.IndexAt(at).Resolve(providerID, model)
}

// IndexAt returns the index of the rules in force at the instant at.
func (t *Timeline) IndexAt(at time.Time) *Index {
	if t == nil || len(t.epochs) == 0 {
		return nil
	}
	n := at.UnixNano()
	for i := len(t.epochs) - 1; i > 0; i-- {
		if n >= t.epochs[i].from {
			return t.epochs[i].idx
		}
	}
	return t.epochs[0].idx
}

// Instants returns the instants of the scheduled changes, in increasing order.
func (t *Timeline) Instants() []time.Time {
	if t == nil {
		return nil
	}
	out := make([]time.Time, 0, len(t.epochs)-1)
	for _, e := range t.epochs[1:] {
		out = append(out, time.Unix(0, e.from).UTC())
	}
	return out
}
