package watch

import (
	"google.golang.org/protobuf/proto"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// step is one published delta with the elements it added: upserts of keys its base did not hold. A
// combined delta needs them to leave out an element added and removed again within its range, so that
// a removal always names an element the data plane holds.
type step struct {
	d     *snapshotv1.SnapshotDelta
	added map[elemKey]bool
	size  int // encoded size of d
}

// elemKey names one element of a snapshot: its kind and its key (id, or scope and id for quotas).
type elemKey struct {
	kind  byte
	scope string
	id    int64
}

const (
	kindPriceRule byte = iota
	kindRoutingRule
	kindProvider
	kindRoute
	kindAPIKey
	kindQuota
	kindScheduled
)

// kindOf is how one kind is found in snapshots and deltas.
type kindOf[T any, R any] struct {
	kind   byte
	all    func(*snapshotv1.Snapshot) []T
	ups    func(*snapshotv1.SnapshotDelta) []T
	rems   func(*snapshotv1.SnapshotDelta) []R
	upKey  func(T) elemKey
	remKey func(R) elemKey
	ref    func(elemKey) R
	set    func(*snapshotv1.SnapshotDelta, []T, []R)
}

func idKey(kind byte) func(int64) elemKey {
	return func(id int64) elemKey { return elemKey{kind: kind, id: id} }
}
func idRef(k elemKey) int64 { return k.id }

var (
	priceRules = kindOf[*configv1.PriceRule, int64]{kindPriceRule,
		(*snapshotv1.Snapshot).GetPriceRules, (*snapshotv1.SnapshotDelta).GetUpsertPriceRules,
		(*snapshotv1.SnapshotDelta).GetRemovePriceRuleIds,
		func(e *configv1.PriceRule) elemKey { return elemKey{kind: kindPriceRule, id: e.GetId()} }, idKey(kindPriceRule), idRef,
		func(d *snapshotv1.SnapshotDelta, u []*configv1.PriceRule, r []int64) {
			d.UpsertPriceRules, d.RemovePriceRuleIds = u, r
		}}
	routingRules = kindOf[*configv1.RoutingRule, int64]{kindRoutingRule,
		(*snapshotv1.Snapshot).GetRoutingRules, (*snapshotv1.SnapshotDelta).GetUpsertRoutingRules,
		(*snapshotv1.SnapshotDelta).GetRemoveRoutingRuleIds,
		func(e *configv1.RoutingRule) elemKey { return elemKey{kind: kindRoutingRule, id: e.GetId()} }, idKey(kindRoutingRule), idRef,
		func(d *snapshotv1.SnapshotDelta, u []*configv1.RoutingRule, r []int64) {
			d.UpsertRoutingRules, d.RemoveRoutingRuleIds = u, r
		}}
	providers = kindOf[*configv1.Provider, int64]{kindProvider,
		(*snapshotv1.Snapshot).GetProviders, (*snapshotv1.SnapshotDelta).GetUpsertProviders,
		(*snapshotv1.SnapshotDelta).GetRemoveProviderIds,
		func(e *configv1.Provider) elemKey { return elemKey{kind: kindProvider, id: e.GetId()} }, idKey(kindProvider), idRef,
		func(d *snapshotv1.SnapshotDelta, u []*configv1.Provider, r []int64) {
			d.UpsertProviders, d.RemoveProviderIds = u, r
		}}
	routes = kindOf[*configv1.Route, int64]{kindRoute,
		(*snapshotv1.Snapshot).GetRoutes, (*snapshotv1.SnapshotDelta).GetUpsertRoutes,
		(*snapshotv1.SnapshotDelta).GetRemoveRouteIds,
		func(e *configv1.Route) elemKey { return elemKey{kind: kindRoute, id: e.GetId()} }, idKey(kindRoute), idRef,
		func(d *snapshotv1.SnapshotDelta, u []*configv1.Route, r []int64) {
			d.UpsertRoutes, d.RemoveRouteIds = u, r
		}}
	apiKeys = kindOf[*configv1.ApiKey, int64]{kindAPIKey,
		(*snapshotv1.Snapshot).GetApiKeys, (*snapshotv1.SnapshotDelta).GetUpsertApiKeys,
		(*snapshotv1.SnapshotDelta).GetRemoveApiKeyIds,
		func(e *configv1.ApiKey) elemKey { return elemKey{kind: kindAPIKey, id: e.GetId()} }, idKey(kindAPIKey), idRef,
		func(d *snapshotv1.SnapshotDelta, u []*configv1.ApiKey, r []int64) {
			d.UpsertApiKeys, d.RemoveApiKeyIds = u, r
		}}
	quotas = kindOf[*configv1.Quota, *snapshotv1.QuotaRef]{kindQuota,
		(*snapshotv1.Snapshot).GetQuotas, (*snapshotv1.SnapshotDelta).GetUpsertQuotas,
		(*snapshotv1.SnapshotDelta).GetRemoveQuotas,
		func(e *configv1.Quota) elemKey {
			return elemKey{kind: kindQuota, scope: e.GetScope(), id: e.GetScopeId()}
		},
		func(r *snapshotv1.QuotaRef) elemKey {
			return elemKey{kind: kindQuota, scope: r.GetScope(), id: r.GetScopeId()}
		},
		func(k elemKey) *snapshotv1.QuotaRef { return &snapshotv1.QuotaRef{Scope: k.scope, ScopeId: k.id} },
		func(d *snapshotv1.SnapshotDelta, u []*configv1.Quota, r []*snapshotv1.QuotaRef) {
			d.UpsertQuotas, d.RemoveQuotas = u, r
		}}
	scheduled = kindOf[*configv1.ScheduledPriceRule, int64]{kindScheduled,
		(*snapshotv1.Snapshot).GetScheduledPriceRules, (*snapshotv1.SnapshotDelta).GetUpsertScheduledPriceRules,
		(*snapshotv1.SnapshotDelta).GetRemoveScheduledPriceRuleIds,
		func(e *configv1.ScheduledPriceRule) elemKey { return elemKey{kind: kindScheduled, id: e.GetId()} },
		idKey(kindScheduled), idRef,
		func(d *snapshotv1.SnapshotDelta, u []*configv1.ScheduledPriceRule, r []int64) {
			d.UpsertScheduledPriceRules, d.RemoveScheduledPriceRuleIds = u, r
		}}
)

// newStep records d, published on top of base (the whole snapshot of d's base version).
func newStep(base *snapshotv1.Snapshot, d *snapshotv1.SnapshotDelta) step {
	s := step{d: d, added: map[elemKey]bool{}, size: proto.Size(d)}
	addedOf(s, base, priceRules)
	addedOf(s, base, routingRules)
	addedOf(s, base, providers)
	addedOf(s, base, routes)
	addedAPIKeys(s, base)
	addedOf(s, base, quotas)
	addedOf(s, base, scheduled)
	return s
}

// addedOf marks the upserts of s.d of one small kind that base does not hold (an index of base's
// elements of the kind, built only when the delta upserts some).
func addedOf[T any, R any](s step, base *snapshotv1.Snapshot, k kindOf[T, R]) {
	ups := k.ups(s.d)
	if len(ups) == 0 {
		return
	}
	held := make(map[elemKey]bool, len(k.all(base)))
	for _, e := range k.all(base) {
		held[k.upKey(e)] = true
	}
	for _, e := range ups {
		if key := k.upKey(e); !held[key] {
			s.added[key] = true
		}
	}
}

// addedAPIKeys is addedOf for keys, which a snapshot holds in id order: a search per upsert rather than
// an index of every key.
func addedAPIKeys(s step, base *snapshotv1.Snapshot) {
	keys := base.GetApiKeys()
	for _, e := range s.d.GetUpsertApiKeys() {
		lo, hi := 0, len(keys)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if keys[m].GetId() < e.GetId() {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo == len(keys) || keys[lo].GetId() != e.GetId() {
			s.added[elemKey{kind: kindAPIKey, id: e.GetId()}] = true
		}
	}
}

// compose combines consecutive steps (each one's base the previous one's version) into one delta from
// the first base to the last version: per element the last operation wins, and an element added within
// the range and removed again is left out. Elements come in the order they were first touched, so two
// replicas combining the same steps produce the same delta.
func compose(steps []step) *snapshotv1.SnapshotDelta {
	if len(steps) == 1 {
		return steps[0].d
	}
	first, last := steps[0].d, steps[len(steps)-1].d
	out := &snapshotv1.SnapshotDelta{BaseVersion: first.GetBaseVersion(), Version: last.GetVersion(), BuiltAt: last.GetBuiltAt()}
	composeKind(out, steps, priceRules)
	composeKind(out, steps, routingRules)
	composeKind(out, steps, providers)
	composeKind(out, steps, routes)
	composeKind(out, steps, apiKeys)
	composeKind(out, steps, quotas)
	composeKind(out, steps, scheduled)
	for _, s := range steps {
		if s.d.GetSettlementBounds() != nil {
			out.SettlementBounds = s.d.GetSettlementBounds()
		}
		if s.d.GetModelPolicy() != nil {
			out.ModelPolicy = s.d.GetModelPolicy()
		}
		if s.d.GetGatewaySettings() != nil {
			out.GatewaySettings = s.d.GetGatewaySettings()
		}
	}
	return out
}

func composeKind[T any, R any](out *snapshotv1.SnapshotDelta, steps []step, k kindOf[T, R]) {
	type state struct {
		elem    T
		present bool // upserted last, else removed last
		added   bool // absent from the first base
	}
	var order []elemKey
	states := map[elemKey]*state{}
	for _, s := range steps {
		for _, r := range k.rems(s.d) {
			key := k.remKey(r)
			st := states[key]
			if st == nil {
				states[key] = &state{}
				order = append(order, key)
				continue
			}
			var zero T
			st.elem, st.present = zero, false
		}
		for _, e := range k.ups(s.d) {
			key := k.upKey(e)
			st := states[key]
			if st == nil {
				st = &state{added: s.added[key]}
				states[key] = st
				order = append(order, key)
			}
			st.elem, st.present = e, true
		}
	}
	var ups []T
	var rems []R
	for _, key := range order {
		st := states[key]
		switch {
		case st.present:
			ups = append(ups, st.elem)
		case !st.added:
			rems = append(rems, k.ref(key))
		}
	}
	k.set(out, ups, rems)
}
