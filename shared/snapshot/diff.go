package snapshot

import (
	"google.golang.org/protobuf/proto"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// DiffSnapshots returns the delta from a to b: per kind, the elements of b that a lacks or holds
// differently (proto.Equal) as upserts and the keys of a that b lacks as removals; a singleton of b that
// differs from a's. A singleton present in a but absent from b cannot be expressed (a delta only
// replaces singletons) and is left out. The control plane builds its deltas from the database; this is
// for tests and tools that hold two snapshots.
func DiffSnapshots(a, b *snapshotv1.Snapshot) *snapshotv1.SnapshotDelta {
	d := &snapshotv1.SnapshotDelta{BaseVersion: a.GetVersion(), Version: b.GetVersion(), BuiltAt: b.GetBuiltAt()}
	d.UpsertPriceRules, d.RemovePriceRuleIds = diff(a.GetPriceRules(), b.GetPriceRules(), (*configv1.PriceRule).GetId)
	d.UpsertRoutingRules, d.RemoveRoutingRuleIds = diff(a.GetRoutingRules(), b.GetRoutingRules(), (*configv1.RoutingRule).GetId)
	d.UpsertProviders, d.RemoveProviderIds = diff(a.GetProviders(), b.GetProviders(), (*configv1.Provider).GetId)
	d.UpsertRoutes, d.RemoveRouteIds = diff(a.GetRoutes(), b.GetRoutes(), (*configv1.Route).GetId)
	d.UpsertApiKeys, d.RemoveApiKeyIds = diff(a.GetApiKeys(), b.GetApiKeys(), (*configv1.ApiKey).GetId)
	d.UpsertScheduledPriceRules, d.RemoveScheduledPriceRuleIds = diff(a.GetScheduledPriceRules(), b.GetScheduledPriceRules(), (*configv1.ScheduledPriceRule).GetId)
	var removed []quotaKey
	d.UpsertQuotas, removed = diff(a.GetQuotas(), b.GetQuotas(), func(q *configv1.Quota) quotaKey { return quotaKey{q.GetScope(), q.GetScopeId()} })
	for _, k := range removed {
		d.RemoveQuotas = append(d.RemoveQuotas, &snapshotv1.QuotaRef{Scope: k.scope, ScopeId: k.id})
	}
	if b.GetSettlementBounds() != nil && !proto.Equal(a.GetSettlementBounds(), b.GetSettlementBounds()) {
		d.SettlementBounds = b.GetSettlementBounds()
	}
	if b.GetModelPolicy() != nil && !proto.Equal(a.GetModelPolicy(), b.GetModelPolicy()) {
		d.ModelPolicy = b.GetModelPolicy()
	}
	if b.GetGatewaySettings() != nil && !proto.Equal(a.GetGatewaySettings(), b.GetGatewaySettings()) {
		d.GatewaySettings = b.GetGatewaySettings()
	}
	return d
}

// diff returns b's elements absent from a or different there, in b's order, and a's keys absent from b,
// in a's order.
func diff[T proto.Message, K comparable](a, b []T, key func(T) K) (upsert []T, removed []K) {
	held := make(map[K]T, len(a))
	for _, e := range a {
		held[key(e)] = e
	}
	in := make(map[K]bool, len(b))
	for _, e := range b {
		in[key(e)] = true
		if old, ok := held[key(e)]; !ok || !proto.Equal(old, e) {
			upsert = append(upsert, e)
		}
	}
	for _, e := range a {
		if !in[key(e)] {
			removed = append(removed, key(e))
		}
	}
	return upsert, removed
}
