package snapshot

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/vocab"
)

// world is the universe a random snapshot draws from: ids, names, models and a pool of key hashes. Half
// the hashes fall into hash shard 0 (so its bucket table is used) and one in four shares its first 8
// bytes with the previous one (so entries are told apart by key id).
type world struct {
	r      *rand.Rand
	hashes [][]byte
	models []string
	names  []string
}

const (
	wProviders = 6
	wRoutes    = 5
	wRules     = 12
	wKeys      = 300
	wQuotaIDs  = 4
)

func newWorld(seed uint64) *world {
	w := &world{r: rand.New(rand.NewPCG(seed, 32)), models: []string{"m-1", "m-2", "gpt-4o", "gpt-4o-mini", "x"}}
	for i := range 2 * wKeys {
		h := make([]byte, sha256.Size)
		for j := range h {
			h[j] = byte(w.r.IntN(256))
		}
		if i%2 == 0 {
			h[0], h[1] = 0, h[1]&0x0f
		}
		if i%4 == 3 {
			copy(h[:8], w.hashes[i-1][:8])
		}
		w.hashes = append(w.hashes, h)
	}
	for i := range wProviders + 2 {
		w.names = append(w.names, fmt.Sprintf("p%d", i))
	}
	return w
}

func (w *world) pick(n int) int { return w.r.IntN(n) }

func (w *world) provider(id int64) *configv1.Provider {
	p := &configv1.Provider{Id: id, Name: w.names[w.pick(len(w.names))], ChannelType: string(vocab.ChannelTypes[w.pick(len(vocab.ChannelTypes))]),
		BaseUrl: fmt.Sprintf("https://p%d.example/", w.pick(3)), Enabled: w.pick(5) > 0}
	if w.pick(3) == 0 {
		p.UnpricedPolicy = []string{"", UnpricedAllow, UnpricedDeny}[w.pick(3)]
	}
	for c := range w.pick(3) {
		p.Credentials = append(p.Credentials, &configv1.Credential{Id: id*10 + int64(c), ProviderId: id, Secret: fmt.Sprintf("s%d", w.pick(9)), Weight: int32(w.pick(4)), Enabled: w.pick(4) > 0})
	}
	return p
}

func (w *world) routingRule(id int64) *configv1.RoutingRule {
	ops := []struct{ op, kind, impl string }{
		{"generate_content", "alpha_chat_completions", "passthrough"},
		{"generate_content", "beta_messages", "transform_to"},
		{"list_models", "alpha", "local"},
		{"rerank", "alpha", "passthrough"},
	}
	o := ops[w.pick(len(ops))]
	r := &configv1.RoutingRule{Id: id, ProviderId: int64(1 + w.pick(wProviders+1)), Operation: o.op, Kind: o.kind, Implementation: o.impl,
		Enabled: w.pick(5) > 0, SortOrder: int32(w.pick(3))}
	if o.impl == "transform_to" && w.pick(2) == 0 {
		r.DestKind = proto.String("alpha_responses")
	}
	return r
}

func (w *world) route(id int64) *configv1.Route {
	r := &configv1.Route{Id: id, Name: fmt.Sprintf("r%d", w.pick(wRoutes+2)), Enabled: w.pick(5) > 0, Strategy: "weighted"}
	for range w.pick(2) {
		r.Aliases = append(r.Aliases, fmt.Sprintf("a%d", w.pick(4)))
	}
	for range 1 + w.pick(3) {
		r.Members = append(r.Members, &configv1.RouteMember{ProviderId: int64(1 + w.pick(wProviders+1)), UpstreamModelId: w.models[w.pick(len(w.models))],
			Priority: int32(w.pick(3)), Weight: int32(w.pick(3)), Enabled: w.pick(5) > 0})
	}
	return r
}

func (w *world) priceRule(id int64) *configv1.PriceRule {
	pr := &configv1.PriceRule{Id: id, MatchType: []string{"exact", "prefix", "contains"}[w.pick(3)], ModelMatch: w.models[w.pick(len(w.models))],
		InputPrice: fmt.Sprint(w.pick(5)), OutputPrice: fmt.Sprint(w.pick(5)), CacheReadPrice: "0", CacheCreation_5MPrice: "0",
		CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0", ImageOutputPrice: "0", Enabled: w.pick(6) > 0, Version: int64(1 + w.pick(3))}
	if w.pick(2) == 0 {
		pr.ProviderId = proto.Int64(int64(1 + w.pick(wProviders)))
	}
	return pr
}

func (w *world) key(id int64) *configv1.ApiKey {
	k := &configv1.ApiKey{Id: id, UserId: int64(1 + w.pick(5)), OrgId: int64(1 + w.pick(2)), Name: fmt.Sprintf("k%d-%d", id, w.pick(9)),
		KeyHash: w.hashes[w.pick(len(w.hashes))], Prefix: fmt.Sprintf("tg-%d", w.pick(99)), Enabled: w.pick(6) > 0,
		RpmLimit: int32(w.pick(3)), TpmLimit: int64(w.pick(3)), AllowDirectAddressing: w.pick(4) == 0}
	if w.pick(3) == 0 {
		k.TeamId = proto.Int64(int64(1 + w.pick(3)))
	}
	if n := w.pick(3); n > 0 {
		k.CostDisclosure = proto.Bool(n == 1)
	}
	if w.pick(3) == 0 {
		k.AllowedModels = [][]string{{"m-1"}, {"gpt-*", "x"}, {"r1"}}[w.pick(3)]
	}
	if w.pick(4) == 0 {
		k.ExpiresAt = timestamppb.New(time.Unix(1760000000+int64(w.pick(3))*3600, 0))
	}
	if w.pick(6) == 0 {
		k.PreviousKeyHash, k.PreviousPrefix = w.hashes[w.pick(len(w.hashes))], fmt.Sprintf("tg-old-%d", w.pick(9))
		k.PreviousExpiresAt = timestamppb.New(time.Unix(1760000000+int64(w.pick(3))*1800, 0))
	}
	return k
}

func (w *world) quota(scope string, id int64) *configv1.Quota {
	q := &configv1.Quota{Scope: scope, ScopeId: id, CostUsed: fmt.Sprint(w.pick(4)), RpmLimit: int32(w.pick(3)), AdjustEpoch: int64(w.pick(2))}
	if w.pick(2) == 0 {
		q.CostLimit = proto.String(fmt.Sprintf("%d.5", w.pick(9)))
	}
	return q
}

// snapshot draws a whole snapshot of version v, elements in id order as the store reads them.
func (w *world) snapshot(v int64) *snapshotv1.Snapshot {
	s := &snapshotv1.Snapshot{Version: v, BuiltAt: timestamppb.New(time.Unix(1760000000+v, 0)),
		SettlementBounds: &snapshotv1.SettlementBounds{MaxRequestTokens: 1000000, MaxRequestCost: "100"},
		ModelPolicy:      &configv1.ModelPolicy{DirectAddressing: true}}
	for id := int64(1); id <= wProviders; id++ {
		s.Providers = append(s.Providers, w.provider(id))
	}
	for id := int64(1); id <= 2*wProviders; id++ {
		s.RoutingRules = append(s.RoutingRules, w.routingRule(id))
	}
	for id := int64(1); id <= wRoutes; id++ {
		s.Routes = append(s.Routes, w.route(id))
	}
	for id := int64(1); id <= wRules; id++ {
		s.PriceRules = append(s.PriceRules, w.priceRule(id))
	}
	for id := int64(1); id <= wKeys; id++ {
		s.ApiKeys = append(s.ApiKeys, w.key(id))
	}
	for _, sc := range []string{"org", "user", "key"} {
		for id := int64(1); id <= wQuotaIDs; id++ {
			s.Quotas = append(s.Quotas, w.quota(sc, id))
		}
	}
	return s
}

// validSnapshot draws snapshots until one compiles.
func (w *world) validSnapshot(v int64) *snapshotv1.Snapshot {
	for {
		s := w.snapshot(v)
		// Random draws collide on names and hashes; make them unique, then keep one that compiles.
		seen := map[string]bool{}
		for i, p := range s.Providers {
			p.Name = fmt.Sprintf("p%d", i)
		}
		for _, r := range s.Routes {
			r.Name, r.Aliases = fmt.Sprintf("r%d", r.Id), nil
			for _, m := range r.Members {
				m.ProviderId = min(m.ProviderId, wProviders)
			}
		}
		cells := map[string]bool{}
		s.RoutingRules = slices.DeleteFunc(s.RoutingRules, func(r *configv1.RoutingRule) bool {
			r.ProviderId = min(r.ProviderId, wProviders)
			k := fmt.Sprint(r.ProviderId, r.Operation, r.Kind)
			dup := cells[k]
			cells[k] = true
			return dup
		})
		s.ApiKeys = slices.DeleteFunc(s.ApiKeys, func(k *configv1.ApiKey) bool {
			dup := seen[string(k.KeyHash)] || seen[string(k.PreviousKeyHash)]
			seen[string(k.KeyHash)] = true
			if k.PreviousKeyHash != nil {
				seen[string(k.PreviousKeyHash)] = true
			}
			return dup || string(k.KeyHash) == string(k.PreviousKeyHash)
		})
		if _, err := Compile(s); err == nil {
			return s
		}
	}
}

// change returns a copy of s (version v) with a few random changes to random kinds: upserts (new ids
// too), removals, singletons. Some make the snapshot invalid (a member or cell naming a removed provider, a
// duplicate name or hash, a bad price).
func (w *world) change(s *snapshotv1.Snapshot, v int64) *snapshotv1.Snapshot {
	n := proto.Clone(s).(*snapshotv1.Snapshot)
	n.Version, n.BuiltAt = v, timestamppb.New(time.Unix(1760000000+v, 0))
	for range 1 + w.pick(4) {
		switch w.pick(9) {
		case 0:
			n.Providers = upsertOrRemove(w, n.Providers, wProviders+1, w.provider, (*configv1.Provider).GetId)
		case 1:
			n.RoutingRules = upsertOrRemove(w, n.RoutingRules, 2*wProviders+2, w.routingRule, (*configv1.RoutingRule).GetId)
		case 2:
			n.Routes = upsertOrRemove(w, n.Routes, wRoutes+1, w.route, (*configv1.Route).GetId)
		case 3:
			n.PriceRules = upsertOrRemove(w, n.PriceRules, wRules+2, w.priceRule, (*configv1.PriceRule).GetId)
			if w.pick(10) == 0 && len(n.PriceRules) > 0 {
				n.PriceRules[0].InputPrice = "-1"
			}
		case 4:
			q := w.quota([]string{"org", "user", "key", "team"}[w.pick(4)], int64(1+w.pick(wQuotaIDs+1)))
			i := slices.IndexFunc(n.Quotas, func(o *configv1.Quota) bool { return o.Scope == q.Scope && o.ScopeId == q.ScopeId })
			switch {
			case i >= 0 && w.pick(2) == 0:
				n.Quotas = slices.Delete(n.Quotas, i, i+1)
			case i >= 0:
				n.Quotas[i] = q
			default:
				n.Quotas = append(n.Quotas, q)
			}
		case 5:
			n.ModelPolicy = &configv1.ModelPolicy{DirectAddressing: w.pick(2) == 0, UnpricedPolicy: []string{"", UnpricedDeny}[w.pick(2)]}
		case 6:
			if w.pick(2) == 0 {
				n.GatewaySettings = &configv1.GatewaySettings{CostDisclosure: w.pick(2) == 0}
				break
			}
			n.SettlementBounds = &snapshotv1.SettlementBounds{MaxRequestTokens: int64(1000 * (1 + w.pick(3))), MaxRequestCost: fmt.Sprint(1 + w.pick(9))}
		default:
			for range 1 + w.pick(20) {
				n.ApiKeys = upsertOrRemove(w, n.ApiKeys, wKeys+20, w.key, (*configv1.ApiKey).GetId)
			}
		}
	}
	return n
}

// upsertOrRemove removes, replaces or adds one element of ids 1..maxID, keeping id order.
func upsertOrRemove[T any](w *world, list []T, maxID int, gen func(int64) T, id func(T) int64) []T {
	e := gen(int64(1 + w.pick(maxID)))
	i, found := slices.BinarySearchFunc(list, id(e), func(x T, v int64) int { return int(id(x) - v) })
	switch {
	case found && w.pick(3) == 0:
		return slices.Delete(list, i, i+1)
	case found:
		list[i] = e
		return list
	}
	return slices.Insert(list, i, e)
}

// dump renders every answer c gives about the world, for comparison.
func dump(w *world, c *Compiled) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version %d built %s direct %v cost disclosure %v bounds %+v\n", c.Version, c.BuiltAt, c.DirectAddressing,
		c.CostDisclosure, c.Bounds)
	provider := func(p *Provider) string {
		if p == nil {
			return "nil"
		}
		cells := slices.SortedFunc(maps.Keys(p.cells), func(a, b OpKey) int { return strings.Compare(string(a.Op)+string(a.Kind), string(b.Op)+string(b.Kind)) })
		var cs []string
		for _, k := range cells {
			cs = append(cs, fmt.Sprintf("%v=%+v", k, p.cells[k]))
		}
		return fmt.Sprintf("%d %s %s %s %v %s %+v deny=%v cells=%v", p.ID, p.Name, p.Channel, p.BaseURL, p.Enabled, p.Settings, p.Credentials, p.UnpricedDeny, cs)
	}
	for id := int64(0); id <= wProviders+2; id++ {
		fmt.Fprintf(&b, "provider %d: %s\n", id, provider(c.Provider(id)))
	}
	for _, n := range w.names {
		fmt.Fprintf(&b, "provider %s: %s\n", n, provider(c.ProviderByName(n)))
	}
	route := func(r *Route) string {
		if r == nil {
			return "nil"
		}
		var gs []string
		for _, g := range r.Groups {
			for _, m := range g {
				gs = append(gs, fmt.Sprintf("%d/%s/%d/%d", m.Provider.ID, m.UpstreamModel, m.Priority, m.Weight))
			}
			gs = append(gs, "|")
		}
		return fmt.Sprintf("%d %s %s %v %v", r.ID, r.Name, r.Strategy, r.Aliases, gs)
	}
	for _, r := range c.Routes() {
		fmt.Fprintf(&b, "routes: %s\n", route(r))
	}
	for i := range wRoutes + 3 {
		fmt.Fprintf(&b, "route r%d: %s; a%d: %s\n", i, route(c.Route(fmt.Sprintf("r%d", i))), i, route(c.Route(fmt.Sprintf("a%d", i))))
	}
	key := func(k *APIKey) string {
		if k == nil {
			return "nil"
		}
		on, set := k.CostDisclosure()
		return fmt.Sprintf("%d %d %d %d %q %q %s %d %d %v %v %v %v cost %v/%v/%v", k.ID, k.UserID, k.OrgID, k.TeamID, k.Name, k.Prefix, k.ExpiresAt,
			k.TPMLimit, k.RPMLimit, k.Enabled, k.DirectAddressing(), k.Previous, k.AllowedModels(), on, set, c.DisclosesCost(k))
	}
	for _, h := range w.hashes {
		fmt.Fprintf(&b, "key %x: %s\n", h[:10], key(c.Key([sha256.Size]byte(h))))
	}
	for id := int64(0); id <= wKeys+21; id++ {
		fmt.Fprintf(&b, "key id %d: %s\n", id, key(c.KeyByID(id)))
	}
	for _, sc := range []vocab.Scope{vocab.ScopeOrg, vocab.ScopeTeam, vocab.ScopeUser, vocab.ScopeKey} {
		for id := int64(0); id <= wQuotaIDs+1; id++ {
			q, ok := c.Quota(sc, id)
			fmt.Fprintf(&b, "quota %s %d: %v %+v\n", sc, id, ok, q)
		}
	}
	for pid := int64(0); pid <= wProviders+1; pid++ {
		for _, m := range w.models {
			r := c.ResolvePriceAt(pid, m, time.Unix(1760000000, 0))
			if r == nil {
				fmt.Fprintf(&b, "price %d %s: nil\n", pid, m)
				continue
			}
			fmt.Fprintf(&b, "price %d %s: %d v%d %v %+v\n", pid, m, r.ID, r.Version, r.Prices, r.Bounds)
		}
	}
	return b.String()
}

// checkSequence applies steps random changes from a random valid snapshot: each delta applied to the held
// compiled form must answer exactly like compiling the changed snapshot, or be refused exactly when that
// compile fails, leaving the held form unchanged.
func checkSequence(t *testing.T, seed uint64, steps int) (applied, refused int) {
	w := newWorld(seed)
	s0 := w.validSnapshot(10)
	held, err := Compile(s0)
	if err != nil {
		t.Fatal(err)
	}
	for step := range steps {
		s1 := w.change(s0, s0.Version+1+int64(w.pick(3)))
		want, werr := Compile(s1)
		before := dump(w, held)
		got, gerr := ApplyDelta(held, DiffSnapshots(s0, s1))
		if after := dump(w, held); after != before {
			t.Fatalf("seed %d step %d: ApplyDelta changed the held form:\n%s", seed, step, lineDiff(before, after))
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("seed %d step %d: Compile: %v; ApplyDelta: %v", seed, step, werr, gerr)
		}
		if werr != nil {
			refused++
			var ce *CompileError
			if !errors.As(gerr, &ce) || !strings.Contains(gerr.Error(), fmt.Sprintf("apply delta %d→%d", s0.Version, s1.Version)) {
				t.Fatalf("seed %d step %d: refusal %v: want a *CompileError naming both versions", seed, step, gerr)
			}
			continue
		}
		if g, x := dump(w, got), dump(w, want); g != x {
			t.Fatalf("seed %d step %d: ApplyDelta answers differently from Compile:\n%s", seed, step, lineDiff(x, g))
		}
		s0, held = s1, got
		applied++
	}
	return applied, refused
}

// lineDiff lists the lines of want and got that differ.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(wl), len(gl)) {
		var x, y string
		if i < len(wl) {
			x = wl[i]
		}
		if i < len(gl) {
			y = gl[i]
		}
		if x != y {
			fmt.Fprintf(&b, "- %s\n+ %s\n", x, y)
		}
	}
	return b.String()
}

func TestApplyDeltaMatchesCompile(t *testing.T) {
	applied, refused := 0, 0
	for seed := range uint64(30) {
		a, r := checkSequence(t, seed, 12)
		applied, refused = applied+a, refused+r
	}
	t.Logf("%d deltas applied, %d refused", applied, refused)
	if applied < 90 || refused < 30 {
		t.Errorf("%d deltas applied, %d refused: the generator no longer exercises both", applied, refused)
	}
}

func FuzzApplyDelta(f *testing.F) {
	f.Add(uint64(1), uint8(5))
	f.Add(uint64(99), uint8(20))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		checkSequence(t, seed, int(steps%24))
	})
}

// A delta applies only to the version it names as its base, and only forward.
func TestApplyDeltaVersions(t *testing.T) {
	held, err := Compile(validSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		base, version int64
		want          string
	}{
		{6, 8, "apply delta 6→8: held version is 7"},
		{7, 7, "apply delta 7→7: version must be newer"},
	} {
		_, err := ApplyDelta(held, &snapshotv1.SnapshotDelta{BaseVersion: tc.base, Version: tc.version})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ApplyDelta(%d→%d) = %v, want %q", tc.base, tc.version, err, tc.want)
		}
	}
	c, err := ApplyDelta(held, &snapshotv1.SnapshotDelta{BaseVersion: 7, Version: 9, BuiltAt: timestamppb.New(time.Unix(1760000100, 0))})
	if err != nil || c.Version != 9 || !c.BuiltAt.Equal(time.Unix(1760000100, 0)) || c.LookupKey("tg-secret") == nil || c.Route("chat") == nil {
		t.Fatalf("empty delta: %+v, %v", c, err)
	}
}

// Cross-element checks apply to a delta as to a snapshot: removing a provider a route member or a routing
// cell names is refused, naming the row; so is a key whose hash another held key has, and a key upserted
// twice.
func TestApplyDeltaRefusesInvalidResult(t *testing.T) {
	held, err := Compile(validSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	hash := sha256.Sum256([]byte("tg-secret"))
	for name, tc := range map[string]struct {
		d    *snapshotv1.SnapshotDelta
		want string
	}{
		"member of a removed provider": {&snapshotv1.SnapshotDelta{RemoveProviderIds: []int64{2}}, `route 1 ("chat"): members[0].provider_id: unknown provider 2`},
		"cell of a removed provider": {&snapshotv1.SnapshotDelta{RemoveProviderIds: []int64{1}, RemoveRouteIds: []int64{1}},
			`routing rule 1 ("generate_content/alpha_chat_completions"): provider_id: unknown provider 1`},
		"duplicate hash": {&snapshotv1.SnapshotDelta{UpsertApiKeys: []*configv1.ApiKey{{Id: 9, KeyHash: hash[:], Prefix: "tg-dup", Enabled: true}}},
			`api key 9 ("tg-dup"): key_hash: already used by api key 5`},
		"key upserted twice": {&snapshotv1.SnapshotDelta{UpsertApiKeys: []*configv1.ApiKey{
			{Id: 9, KeyHash: make([]byte, 32), Prefix: "a"}, {Id: 9, KeyHash: make([]byte, 32), Prefix: "b"}}}, `api key 9 ("b"): id: upserted twice`},
		"bad key": {&snapshotv1.SnapshotDelta{UpsertApiKeys: []*configv1.ApiKey{{Id: 9, KeyHash: []byte("short")}}}, "key_hash: must be 32 bytes"},
		"bad price": {&snapshotv1.SnapshotDelta{UpsertPriceRules: []*configv1.PriceRule{{Id: 2, MatchType: "exact", ModelMatch: "m", InputPrice: "-1", Enabled: true}}},
			"price rule 2"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.d.BaseVersion, tc.d.Version = 7, 8
			_, err := ApplyDelta(held, tc.d)
			var ce *CompileError
			if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "apply delta 7→8") {
				t.Fatalf("ApplyDelta = %v, want a *CompileError containing %q", err, tc.want)
			}
		})
	}
}

// A delta that changes only keys shares the held form's compiled configuration and every key shard it
// does not touch.
func TestApplyDeltaSharesUntouched(t *testing.T) {
	held, err := Compile(validSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("new"))
	c, err := ApplyDelta(held, &snapshotv1.SnapshotDelta{BaseVersion: 7, Version: 8,
		UpsertApiKeys: []*configv1.ApiKey{{Id: 9, KeyHash: h[:], Enabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Prices != held.Prices || c.Route("chat") != held.Route("chat") || c.Provider(1) != held.Provider(1) {
		t.Error("a keys-only delta rebuilt the configuration")
	}
	copied := 0
	for s := range numShards {
		if unsafe.SliceData(c.keys.hashShards[s].hashes) != unsafe.SliceData(held.keys.hashShards[s].hashes) {
			copied++
		}
		if unsafe.SliceData(c.keys.idShards[s].ids) != unsafe.SliceData(held.keys.idShards[s].ids) {
			copied++
		}
	}
	if copied != 2 || c.LookupKey("new").ID != 9 || c.KeyByID(9) == nil || held.LookupKey("new") != nil || c.LookupKey("tg-secret") != held.LookupKey("tg-secret") {
		t.Errorf("%d shards copied for one new key, want 2 (its hash shard and its id shard)", copied)
	}
}
