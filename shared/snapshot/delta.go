package snapshot

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// ApplyDelta returns the compiled form of held with d applied: the same as compiling the snapshot held
// was compiled from with d's changes made (elements of each kind then ordered by their key, as
// store.ReadSnapshot reads them). held is not changed and stays valid: the result shares with it every
// key shard d does not touch and, when d changes no other kind, the whole compiled configuration.
//
// Within a kind, d's removals apply before its upserts; removing a key that held does not have is not an
// error (the row may have been added and removed between the two versions). ApplyDelta refuses, changing
// nothing, a delta whose base_version is not held's version, one whose version is not newer, one naming an
// id twice in one upsert list, and one whose result fails Compile's checks (a *CompileError inside the
// error, naming the rows). It depends only on its arguments: the control plane runs it as the
// consistency gate of the deltas it serves.
//
// Cost: the API keys cost what d touches (each touched hash and id shard is copied: about 244 keys at a
// million keys); any other kind or singleton in d recompiles the whole configuration but the keys
// (price rules, providers, routing, routes, quotas); a changed direct-addressing switch rebuilds every key
// shard, as a full snapshot would.
func ApplyDelta(held *Compiled, d *snapshotv1.SnapshotDelta) (*Compiled, error) {
	if held == nil || d == nil {
		return nil, errors.New("apply delta: nil")
	}
	if d.GetBaseVersion() != held.Version {
		return nil, fmt.Errorf("apply delta %d→%d: held version is %d, not the delta's base", d.GetBaseVersion(), d.GetVersion(), held.Version)
	}
	if d.GetVersion() <= d.GetBaseVersion() {
		return nil, fmt.Errorf("apply delta %d→%d: version must be newer than the base", d.GetBaseVersion(), d.GetVersion())
	}
	c := &Compiled{Version: d.GetVersion(), BuiltAt: d.GetBuiltAt().AsTime()}
	var errs []error
	if touchesConfig(d) {
		errs = c.compileConfig(applyConfig(held.config, d), held)
	} else {
		c.shareConfig(held)
	}
	errs = c.applyKeys(held, d.GetUpsertApiKeys(), d.GetRemoveApiKeyIds(), errs)
	if len(errs) > 0 {
		return nil, fmt.Errorf("apply delta %d→%d: %w", d.GetBaseVersion(), d.GetVersion(), compileError(d.GetVersion(), errs))
	}
	return c, nil
}

func touchesConfig(d *snapshotv1.SnapshotDelta) bool {
	return len(d.GetUpsertPriceRules())+len(d.GetRemovePriceRuleIds())+len(d.GetUpsertRoutingRules())+len(d.GetRemoveRoutingRuleIds())+
		len(d.GetUpsertProviders())+len(d.GetRemoveProviderIds())+len(d.GetUpsertRoutes())+len(d.GetRemoveRouteIds())+
		len(d.GetUpsertQuotas())+len(d.GetRemoveQuotas())+len(d.GetUpsertScheduledPriceRules())+len(d.GetRemoveScheduledPriceRuleIds()) > 0 ||
		d.GetSettlementBounds() != nil || d.GetModelPolicy() != nil || d.GetGatewaySettings() != nil
}

// shareConfig makes c serve held's compiled configuration (everything but keys; all immutable).
func (c *Compiled) shareConfig(held *Compiled) {
	c.config, c.Prices, c.PriceTimeline = held.config, held.Prices, held.PriceTimeline
	c.providers, c.providersByName, c.routes, c.routeList = held.providers, held.providersByName, held.routes, held.routeList
	c.quotas, c.DirectAddressing, c.Bounds, c.rules = held.quotas, held.DirectAddressing, held.Bounds, held.rules
	c.CostDisclosure = held.CostDisclosure
}

type quotaKey struct {
	scope string
	id    int64
}

func (a quotaKey) compare(b quotaKey) int {
	return cmp.Or(strings.Compare(a.scope, b.scope), cmp.Compare(a.id, b.id))
}

// applyConfig returns held's configuration with d's changes to the kinds other than keys. Unchanged kinds
// keep held's slices; the elements are shared, never mutated.
func applyConfig(held *snapshotv1.Snapshot, d *snapshotv1.SnapshotDelta) *snapshotv1.Snapshot {
	out := &snapshotv1.Snapshot{
		PriceRules:          merge(held.GetPriceRules(), d.GetUpsertPriceRules(), d.GetRemovePriceRuleIds(), (*configv1.PriceRule).GetId, cmp.Compare[int64]),
		RoutingRules:        merge(held.GetRoutingRules(), d.GetUpsertRoutingRules(), d.GetRemoveRoutingRuleIds(), (*configv1.RoutingRule).GetId, cmp.Compare[int64]),
		Providers:           merge(held.GetProviders(), d.GetUpsertProviders(), d.GetRemoveProviderIds(), (*configv1.Provider).GetId, cmp.Compare[int64]),
		Routes:              merge(held.GetRoutes(), d.GetUpsertRoutes(), d.GetRemoveRouteIds(), (*configv1.Route).GetId, cmp.Compare[int64]),
		ScheduledPriceRules: merge(held.GetScheduledPriceRules(), d.GetUpsertScheduledPriceRules(), d.GetRemoveScheduledPriceRuleIds(), (*configv1.ScheduledPriceRule).GetId, cmp.Compare[int64]),
		SettlementBounds:    cmp.Or(d.GetSettlementBounds(), held.GetSettlementBounds()),
		ModelPolicy:         cmp.Or(d.GetModelPolicy(), held.GetModelPolicy()),
		GatewaySettings:     cmp.Or(d.GetGatewaySettings(), held.GetGatewaySettings()),
	}
	removed := make([]quotaKey, len(d.GetRemoveQuotas()))
	for i, r := range d.GetRemoveQuotas() {
		removed[i] = quotaKey{r.GetScope(), r.GetScopeId()}
	}
	out.Quotas = merge(held.GetQuotas(), d.GetUpsertQuotas(), removed,
		func(q *configv1.Quota) quotaKey { return quotaKey{q.GetScope(), q.GetScopeId()} }, quotaKey.compare)
	return out
}

// merge returns held without the elements whose key is removed or upserted, plus the upserts, ordered by
// key; held itself when nothing changes.
func merge[T any, K comparable](held, upsert []T, removed []K, key func(T) K, compare func(a, b K) int) []T {
	if len(upsert) == 0 && len(removed) == 0 {
		return held
	}
	drop := make(map[K]bool, len(upsert)+len(removed))
	for _, k := range removed {
		drop[k] = true
	}
	for _, e := range upsert {
		drop[key(e)] = true
	}
	out := make([]T, 0, len(held)+len(upsert))
	for _, e := range held {
		if !drop[key(e)] {
			out = append(out, e)
		}
	}
	out = append(out, upsert...)
	slices.SortStableFunc(out, func(a, b T) int { return compare(key(a), key(b)) })
	return out
}

// applyKeys makes c's key index held's with the keys of ids removed and upserted dropped and upserted
// added, copying only the shards that change (every hash shard when the direct-addressing switch
// changed, since each key carries its effect).
func (c *Compiled) applyKeys(held *Compiled, upsert []*configv1.ApiKey, removed []int64, errs []error) []error {
	hx := &held.keys
	if len(upsert) == 0 && len(removed) == 0 && c.DirectAddressing == held.DirectAddressing {
		c.keys = held.keys // the index is immutable: share it whole
		return errs
	}
	x := keyIndex{hashShards: slices.Clone(hx.hashShards), idShards: slices.Clone(hx.idShards), sets: hx.sets}
	kc := &keyCompiler{sets: hx.sets, direct: c.DirectAddressing}
	kc.grow(upsert)
	// What leaves: every entry of a removed or upserted id, found through its refs.
	dropHash := map[int][][sha256.Size]byte{} // hash shard → hashes leaving it
	dropID := map[int]map[int64]bool{}        // id shard → ids leaving it
	leave := func(id int64) {
		s := idShardOf(id)
		if dropID[s] == nil {
			dropID[s] = map[int64]bool{}
		}
		if dropID[s][id] {
			return
		}
		dropID[s][id] = true
		is := &hx.idShards[s]
		for i, j := is.span(id); i < j; i++ {
			top := is.tops[i]
			for _, previous := range []bool{false, true} {
				if sh, k := hx.entry(top, id, previous); sh != nil {
					dropHash[shardOf(top)] = append(dropHash[shardOf(top)], sh.hashes[k])
				}
			}
		}
	}
	for _, id := range removed {
		leave(id)
	}
	// What comes: the upserts' entries.
	addHash := map[int][]keyEntry{}
	addID := map[int][]idRef{}
	seen := make(map[int64]bool, len(upsert))
	var one []keyEntry
	for i, kk := range upsert {
		if err := CheckAPIKey(kk); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[kk.GetId()] {
			errs = append(errs, &ElementError{Resource: "api key", ID: kk.GetId(), Name: kk.GetPrefix(), Field: "id", Message: "upserted twice in one delta"})
			continue
		}
		seen[kk.GetId()] = true
		leave(kk.GetId())
		one = kc.entries(one[:0], int32(i), kk)
		for _, e := range one {
			top := hashTop(&e.hash)
			addHash[shardOf(top)] = append(addHash[shardOf(top)], e)
			addID[idShardOf(e.key.ID)] = append(addID[idShardOf(e.key.ID)], idRef{id: e.key.ID, top: top})
		}
	}
	// An entry already held comes before every upsert (seq -1), so a duplicate names the upsert.
	nameOf := func(e keyEntry) (int64, string) {
		if e.seq < 0 {
			return e.key.ID, e.key.Prefix
		}
		return upsert[e.seq].GetId(), upsert[e.seq].GetPrefix()
	}
	redirect := c.DirectAddressing != held.DirectAddressing
	var es []keyEntry // one shard's entries at a time: newShard copies them into the shard's own slices
	for s := range numShards {
		adds, drops := addHash[s], dropHash[s]
		if len(adds) == 0 && len(drops) == 0 && !redirect {
			continue
		}
		es = es[:0]
		if old := &hx.hashShards[s]; len(old.hashes) > 0 {
			for i := range old.hashes {
				if slices.Contains(drops, old.hashes[i]) {
					continue
				}
				k := old.keys[i]
				k.direct = c.DirectAddressing || k.allowDirect
				es = append(es, keyEntry{hash: old.hashes[i], key: k, seq: -1})
			}
		}
		es = append(es, adds...)
		sortEntries(es)
		x.hashShards[s], errs = newShard(es, nameOf, errs)
	}
	for s := range numShards {
		adds, drops := addID[s], dropID[s]
		if len(adds) == 0 && len(drops) == 0 {
			continue
		}
		var refs []idRef
		if old := &hx.idShards[s]; len(old.ids) > 0 {
			refs = make([]idRef, 0, len(old.ids)+len(adds))
			for i, id := range old.ids {
				if !drops[id] {
					refs = append(refs, idRef{id: id, top: old.tops[i]})
				}
			}
		}
		x.idShards[s] = newIDShard(append(refs, adds...))
	}
	x.sets = kc.sets
	c.keys = x
	return errs
}
