package snapshotbuild

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// makeDelta turns the changes read since prev's version into the delta (prev → ch.Version) and the whole
// snapshot of ch.Version (the proto-level merge: prev's keys with the changed ones replaced, the small
// kinds as read). The small kinds are compared element by element with prev (proto.Equal); the keys
// changed are the ones the database names (store.ReadSnapshotChanges). Removals name only elements prev
// holds, so the delta never asks a data plane to remove what it does not have. prev is not modified;
// next shares its unchanged elements.
func makeDelta(prev *snapshotv1.Snapshot, ch *store.SnapshotChanges, builtAt *timestamppb.Timestamp,
	bounds *snapshotv1.SettlementBounds) (*snapshotv1.SnapshotDelta, *snapshotv1.Snapshot) {
	rest := unreadFrom(ch.Rest, ch.Read, prev)
	next := &snapshotv1.Snapshot{
		Version: ch.Version, BuiltAt: builtAt, PriceRules: rest.PriceRules, RoutingRules: rest.RoutingRules,
		Providers: rest.Providers, Routes: rest.Routes, Quotas: rest.Quotas, SettlementBounds: bounds,
		ScheduledPriceRules: rest.ScheduledPriceRules, ModelPolicy: rest.ModelPolicy, GatewaySettings: rest.GatewaySettings,
	}
	d := &snapshotv1.SnapshotDelta{BaseVersion: prev.GetVersion(), Version: ch.Version, BuiltAt: builtAt}
	d.UpsertPriceRules, d.RemovePriceRuleIds = diffKind(prev.PriceRules, next.PriceRules,
		func(e *configv1.PriceRule) int64 { return e.GetId() })
	d.UpsertRoutingRules, d.RemoveRoutingRuleIds = diffKind(prev.RoutingRules, next.RoutingRules,
		func(e *configv1.RoutingRule) int64 { return e.GetId() })
	d.UpsertProviders, d.RemoveProviderIds = diffKind(prev.Providers, next.Providers,
		func(e *configv1.Provider) int64 { return e.GetId() })
	d.UpsertRoutes, d.RemoveRouteIds = diffKind(prev.Routes, next.Routes,
		func(e *configv1.Route) int64 { return e.GetId() })
	d.UpsertScheduledPriceRules, d.RemoveScheduledPriceRuleIds = diffKind(prev.ScheduledPriceRules,
		next.ScheduledPriceRules, func(e *configv1.ScheduledPriceRule) int64 { return e.GetId() })
	var quotaGone []quotaKey
	d.UpsertQuotas, quotaGone = diffKind(prev.Quotas, next.Quotas,
		func(e *configv1.Quota) quotaKey { return quotaKey{e.GetScope(), e.GetScopeId()} })
	for _, q := range quotaGone {
		d.RemoveQuotas = append(d.RemoveQuotas, &snapshotv1.QuotaRef{Scope: q.scope, ScopeId: q.id})
	}
	if !proto.Equal(prev.SettlementBounds, next.SettlementBounds) {
		d.SettlementBounds = next.SettlementBounds
	}
	if !proto.Equal(prev.ModelPolicy, next.ModelPolicy) {
		// An absent policy means the defaults; the delta can only say "replaced", so it sends an empty
		// one, which the data plane reads as the defaults too.
		d.ModelPolicy = cmp.Or(next.ModelPolicy, &configv1.ModelPolicy{})
	}
	if !proto.Equal(prev.GatewaySettings, next.GatewaySettings) && next.GatewaySettings != nil {
		// The control plane always reads the settings row, so next carries them; an absent message (a
		// snapshot that never held them) is left unchanged rather than replaced by zero values.
		d.GatewaySettings = next.GatewaySettings
	}
	next.ApiKeys, d.UpsertApiKeys, d.RemoveApiKeyIds = mergeKeys(prev.ApiKeys, ch.Keys, ch.GoneKeyIDs)
	return d, next
}

// unreadFrom returns rest with the small kinds the read skipped (unchanged since prev) taken from prev.
func unreadFrom(rest *snapshotv1.Snapshot, read store.SmallKinds, prev *snapshotv1.Snapshot) *snapshotv1.Snapshot {
	out := &snapshotv1.Snapshot{Version: rest.GetVersion(), PriceRules: prev.PriceRules,
		ScheduledPriceRules: prev.ScheduledPriceRules, RoutingRules: prev.RoutingRules, ModelPolicy: prev.ModelPolicy,
		GatewaySettings: prev.GatewaySettings, Providers: prev.Providers, Routes: prev.Routes, Quotas: prev.Quotas}
	if read.PriceRules {
		out.PriceRules = rest.PriceRules
	}
	if read.ScheduledPriceRules {
		out.ScheduledPriceRules = rest.ScheduledPriceRules
	}
	if read.RoutingRules {
		out.RoutingRules = rest.RoutingRules
	}
	if read.ModelPolicy || read.Providers {
		out.ModelPolicy, out.GatewaySettings = rest.ModelPolicy, rest.GatewaySettings
	}
	if read.Providers {
		out.Providers = rest.Providers
	}
	if read.Routes {
		out.Routes = rest.Routes
	}
	if read.Quotas {
		out.Quotas = rest.Quotas
	}
	return out
}

type quotaKey struct {
	scope string
	id    int64
}

// diffKind returns the elements of next that prev lacks or holds differently, in next's order, and the
// keys of prev's elements next lacks, in prev's order. A kind not read again is prev's own slice in next
// (unreadFrom): nothing to compare, and comparing it cost ~1.5 ms of maps per version at the scale
// (18,000 small-kind elements).
func diffKind[T proto.Message, K comparable](prev, next []T, key func(T) K) (upserts []T, removes []K) {
	if len(prev) == len(next) && (len(prev) == 0 || &prev[0] == &next[0]) {
		return nil, nil
	}
	old := make(map[K]T, len(prev))
	for _, e := range prev {
		old[key(e)] = e
	}
	seen := make(map[K]bool, len(next))
	for _, e := range next {
		k := key(e)
		seen[k] = true
		if o, ok := old[k]; !ok || !proto.Equal(o, e) {
			upserts = append(upserts, e)
		}
	}
	for _, e := range prev {
		if k := key(e); !seen[k] {
			removes = append(removes, k)
		}
	}
	return upserts, removes
}

// mergeKeys merges the keys read again (changed, in id order) and the ids gone into held (id order) in
// one pass: the result in id order, the upserts (keys new or different) and the removals (gone ids
// held). held is not modified.
func mergeKeys(held, changed []*configv1.ApiKey, gone []int64) (out, upserts []*configv1.ApiKey, removes []int64) {
	if len(changed) == 0 && len(gone) == 0 {
		return held, nil, nil
	}
	if len(gone) == 0 && (len(held) == 0 || changed[0].GetId() > held[len(held)-1].GetId()) {
		// Only keys newer than every held one (key creation, the common change): append. When held has
		// spare capacity the new keys go there, after held's length, so held's elements — which a
		// published snapshot shares and streams may be encoding — are neither copied nor touched, and
		// the cost follows the change. (A build that is then rejected leaves its keys in that spare
		// capacity; the next build from the same held overwrites them, and nothing reads them.)
		return append(held, changed...), changed, nil
	}
	// The held keys between two changed or gone ids are copied as runs (found by binary search), so a
	// change costs one copy of the key slice's pointers and a search per key changed, not a step per
	// held key: at a million keys the step-by-step merge took ~9 ms of the control plane's CPU per
	// version (benchmarks.md, "Deltas at scale").
	out = make([]*configv1.ApiKey, 0, len(held)+len(changed))
	i, j, g := 0, 0, 0 // next held, changed and gone
	for j < len(changed) || g < len(gone) {
		var id int64
		isChange := g == len(gone) || (j < len(changed) && changed[j].GetId() <= gone[g])
		if isChange {
			id = changed[j].GetId()
		} else {
			id = gone[g]
		}
		n, _ := slices.BinarySearchFunc(held[i:], id, func(k *configv1.ApiKey, id int64) int { return cmp.Compare(k.GetId(), id) })
		pos := i + n
		out = append(out, held[i:pos]...)
		i = pos
		isHeld := i < len(held) && held[i].GetId() == id
		switch {
		case isChange:
			if !isHeld || !proto.Equal(held[i], changed[j]) {
				upserts = append(upserts, changed[j])
			}
			out = append(out, changed[j])
			j++ // a deletion of the same id comes next and finds it no longer held: read present wins
		case isHeld:
			removes = append(removes, id)
			g++
		default: // gone, never held
			g++
			continue
		}
		if isHeld {
			i++
		}
	}
	return append(out, held[i:]...), upserts, removes
}

// deadlines are the instants at which held keys change without a write: a key's expires_at (it leaves
// the snapshot) and a rotation's previous_expires_at (its previous hash leaves). A min-heap; an entry
// whose key has changed since is harmless (the key is read again and found unchanged).
type deadlines []deadline

type deadline struct {
	at time.Time
	id int64
}

func (h deadlines) Len() int           { return len(h) }
func (h deadlines) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlines) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlines) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlines) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// add records the deadlines of keys.
func (h *deadlines) add(keys []*configv1.ApiKey) {
	for _, k := range keys {
		if k.GetExpiresAt() != nil {
			heap.Push(h, deadline{k.GetExpiresAt().AsTime(), k.GetId()})
		}
		if k.GetPreviousExpiresAt() != nil {
			heap.Push(h, deadline{k.GetPreviousExpiresAt().AsTime(), k.GetId()})
		}
	}
}

// due removes and returns the ids (sorted, each once) of the deadlines at or before now.
func (h *deadlines) due(now time.Time) []int64 {
	var ids []int64
	for h.Len() > 0 && !(*h)[0].at.After(now) {
		ids = append(ids, heap.Pop(h).(deadline).id)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// newDeadlines indexes the deadlines of every key of a whole snapshot.
func newDeadlines(keys []*configv1.ApiKey) *deadlines {
	h := &deadlines{}
	for _, k := range keys {
		if k.GetExpiresAt() != nil {
			*h = append(*h, deadline{k.GetExpiresAt().AsTime(), k.GetId()})
		}
		if k.GetPreviousExpiresAt() != nil {
			*h = append(*h, deadline{k.GetPreviousExpiresAt().AsTime(), k.GetId()})
		}
	}
	heap.Init(h)
	return h
}

// held is a builder's state at its published version: the whole snapshot (to serve and to merge the next
// delta into), its compiled form (the base of the next delta's consistency gate) and its keys' deadlines.
type held struct {
	snap       *snapshotv1.Snapshot
	compiled   *snapshot.Compiled
	deadlines  *deadlines
	quotasRead time.Time // when snap's quotas were read (their cost_used and period)
}

// readd records again the deadlines of the keys of ids that h's snapshot still holds (they were taken by
// due for a build that did not publish, or found unchanged).
func (h *held) readd(ids []int64) {
	keys := h.snap.GetApiKeys()
	for _, id := range ids {
		if i, ok := slices.BinarySearchFunc(keys, id, func(k *configv1.ApiKey, id int64) int { return cmp.Compare(k.GetId(), id) }); ok {
			h.deadlines.add(keys[i : i+1])
		}
	}
}
