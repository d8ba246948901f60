// Package snapshot compiles a Snapshot message into the immutable, indexed form the data plane serves
// from: the price-rule index (memoised resolution per provider and model), each provider's routing table
// from its enabled rows ordered by sort_order, routes and aliases, and API keys by hash. Both planes run
// Compile: the control plane refuses to publish a snapshot that does not compile, and a data plane keeps
// its last good snapshot when a new one fails.
package snapshot

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Compiled is a validated, indexed snapshot. It is never mutated after Compile returns; the data plane
// holds the current one behind an atomic.Pointer and swaps it whole.
type Compiled struct {
	Version int64
	BuiltAt time.Time
	// Prices resolves the price rule of (provider, upstream model), memoised.
	Prices *pricing.Index

	providers       map[int64]*Provider
	providersByName map[string]*Provider
	// routes holds every enabled route by its name and by each alias.
	routes map[string]*Route
	// routeList holds the enabled routes ordered by name.
	routeList []*Route
	keys      map[[sha256.Size]byte]*APIKey
	quotas    map[QuotaKey]Quota
}

// Provider is a compiled provider with its enabled credentials and its routing table.
type Provider struct {
	ID          int64
	Name        string
	Channel     vocab.ChannelType
	BaseURL     string // without a trailing slash
	Enabled     bool
	Settings    json.RawMessage
	Credentials []Credential
	cells       map[OpKey]Cell
}

// Credential is one enabled upstream credential. Weight is at least 1.
type Credential struct {
	ID     int64
	Secret string
	Weight int32
}

// OpKey is an inbound operation key.
type OpKey struct {
	Op   vocab.Operation
	Kind vocab.Kind
}

// Cell is one compiled routing cell. A transform_to row without dest_kind compiles to ImplUnsupported;
// DestOp defaults to the inbound operation.
type Cell struct {
	Impl     vocab.Implementation
	DestOp   vocab.Operation
	DestKind vocab.Kind
	// RuleID is the routing_rules row id (0 for a missing cell).
	RuleID int64
}

// Cell returns the provider's cell for (op, kind); a missing cell is unsupported.
func (p *Provider) Cell(op vocab.Operation, kind vocab.Kind) Cell {
	if c, ok := p.cells[OpKey{op, kind}]; ok {
		return c
	}
	return Cell{Impl: vocab.ImplUnsupported}
}

// Route is a compiled, enabled route. Groups hold its enabled members of enabled providers, grouped by
// priority (lowest number first); within a group the order is the snapshot's.
type Route struct {
	ID       int64
	Name     string
	Strategy string
	Aliases  []string
	Groups   [][]Member
}

// Member is one candidate of a route. Weight is at least 1.
type Member struct {
	Provider      *Provider
	UpstreamModel string
	Priority      int32
	Weight        int32
}

// APIKey is a compiled client key.
type APIKey struct {
	ID     int64
	UserID int64
	OrgID  int64
	// TeamID is 0 when the key's user has no team.
	TeamID  int64
	Name    string
	Prefix  string
	Enabled bool
	// ExpiresAt is zero when the key does not expire.
	ExpiresAt time.Time
	RPMLimit  int32
	TPMLimit  int64
	// AllowedModels lists the logical models the key may use; empty means every model.
	AllowedModels []string
	allowed       map[string]struct{}
}

// Allows reports whether the key may use the logical model name.
func (k *APIKey) Allows(model string) bool {
	if k.allowed == nil {
		return true
	}
	_, ok := k.allowed[model]
	return ok
}

// Usable reports whether the key is enabled and not expired at now.
func (k *APIKey) Usable(now time.Time) bool {
	return k.Enabled && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
}

// QuotaKey names one quota-bearing scope.
type QuotaKey struct {
	Scope vocab.Scope
	ID    int64
}

// Quota is a scope's limit and used amount in integer micro-dollars.
type Quota struct {
	// Unlimited is set when the quota row has no cost_limit.
	Unlimited   bool
	LimitMicros int64
	UsedMicros  int64
}

// Provider returns the provider with id, or nil.
func (c *Compiled) Provider(id int64) *Provider { return c.providers[id] }

// ProviderByName returns the provider named name, or nil.
func (c *Compiled) ProviderByName(name string) *Provider { return c.providersByName[name] }

// Route returns the enabled route named name or having name as an alias, or nil.
func (c *Compiled) Route(name string) *Route { return c.routes[name] }

// Routes returns the enabled routes ordered by name. The slice must not be modified.
func (c *Compiled) Routes() []*Route { return c.routeList }

// Key returns the API key whose sha256 is hash, or nil.
func (c *Compiled) Key(hash [sha256.Size]byte) *APIKey { return c.keys[hash] }

// LookupKey hashes secret and returns its API key, or nil.
func (c *Compiled) LookupKey(secret string) *APIKey { return c.keys[sha256.Sum256([]byte(secret))] }

// Quota returns the quota of a scope; ok is false when the scope has no quota row.
func (c *Compiled) Quota(scope vocab.Scope, id int64) (q Quota, ok bool) {
	q, ok = c.quotas[QuotaKey{scope, id}]
	return q, ok
}

// ResolvePrice returns the price rule of (provider, upstream model), or nil (cost 0).
func (c *Compiled) ResolvePrice(providerID int64, model string) *pricing.Rule {
	return c.Prices.Resolve(providerID, model)
}

// Compile validates and indexes s. An invalid reference or value fails the whole snapshot with an error
// naming the element at fault; every problem found is reported (joined).
func Compile(s *snapshotv1.Snapshot) (*Compiled, error) {
	if s == nil {
		return nil, errors.New("compile snapshot: nil")
	}
	if s.GetVersion() <= 0 {
		return nil, errors.New("compile snapshot: version must be positive")
	}
	c := &Compiled{
		Version:         s.GetVersion(),
		BuiltAt:         s.GetBuiltAt().AsTime(),
		providers:       make(map[int64]*Provider, len(s.GetProviders())),
		providersByName: make(map[string]*Provider, len(s.GetProviders())),
		routes:          make(map[string]*Route, len(s.GetRoutes())),
		keys:            make(map[[sha256.Size]byte]*APIKey, len(s.GetApiKeys())),
		quotas:          make(map[QuotaKey]Quota, len(s.GetQuotas())),
	}
	var errs []error
	errs = c.compilePrices(s.GetPriceRules(), errs)
	errs = c.compileProviders(s.GetProviders(), errs)
	errs = c.compileRoutingRules(s.GetRoutingRules(), errs)
	errs = c.compileRoutes(s.GetRoutes(), errs)
	errs = c.compileKeys(s.GetApiKeys(), errs)
	errs = c.compileQuotas(s.GetQuotas(), errs)
	if len(errs) > 0 {
		return nil, fmt.Errorf("compile snapshot %d: %w", s.GetVersion(), errors.Join(errs...))
	}
	return c, nil
}

func (c *Compiled) compilePrices(in []*configv1.PriceRule, errs []error) []error {
	rules := make([]*pricing.Rule, 0, len(in))
	seen := make(map[int64]bool, len(in))
	for _, pr := range in {
		if !pr.GetEnabled() {
			continue
		}
		if seen[pr.GetId()] {
			errs = append(errs, fmt.Errorf("price rule %d: duplicate id", pr.GetId()))
			continue
		}
		seen[pr.GetId()] = true
		ri := pricing.RuleInput{
			ID: pr.GetId(), ProviderID: pr.ProviderId, MatchType: pr.GetMatchType(), ModelMatch: pr.GetModelMatch(),
			InputPrice: pr.GetInputPrice(), OutputPrice: pr.GetOutputPrice(), CacheReadPrice: pr.GetCacheReadPrice(),
			CacheCreation5mPrice: pr.GetCacheCreation_5MPrice(), CacheCreation30mPrice: pr.GetCacheCreation_30MPrice(),
			CacheCreation1hPrice: pr.GetCacheCreation_1HPrice(), ImageOutputPrice: pr.GetImageOutputPrice(),
			Enabled: true,
		}
		if len(pr.GetPricingTiersJson()) > 0 {
			raw, err := tiersJSON(pr.GetPricingTiersJson())
			if err != nil {
				errs = append(errs, fmt.Errorf("price rule %d: pricing_tiers_json: %w", pr.GetId(), err))
				continue
			}
			ri.PricingTiersJSON = raw
		}
		r, err := pricing.ParseRule(ri)
		if err != nil {
			errs = append(errs, fmt.Errorf("price rule %d: %w", pr.GetId(), err))
			continue
		}
		rules = append(rules, r)
	}
	c.Prices = pricing.NewIndex(rules)
	return errs
}

// tiersJSON renders tier messages as the spec's pricing_tiers_json array for pricing.ParseRule.
func tiersJSON(tiers []*configv1.TierEntry) (json.RawMessage, error) {
	out := make([]map[string]any, len(tiers))
	for i, t := range tiers {
		m := map[string]any{"min_prompt_tokens": t.GetMinPromptTokens()}
		set := func(k string, v *string) {
			if v != nil {
				m[k] = *v
			}
		}
		set("service_tier", t.ServiceTier)
		set("multiplier", t.Multiplier)
		set("input_price", t.InputPrice)
		set("output_price", t.OutputPrice)
		set("cache_read_price", t.CacheReadPrice)
		set("cache_creation_5m_price", t.CacheCreation_5MPrice)
		set("cache_creation_30m_price", t.CacheCreation_30MPrice)
		set("cache_creation_1h_price", t.CacheCreation_1HPrice)
		set("image_output_price", t.ImageOutputPrice)
		out[i] = m
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode tiers: %w", err)
	}
	return b, nil
}

func (c *Compiled) compileProviders(in []*configv1.Provider, errs []error) []error {
	for _, pp := range in {
		where := fmt.Sprintf("provider %d (%q)", pp.GetId(), pp.GetName())
		if pp.GetId() <= 0 {
			errs = append(errs, fmt.Errorf("%s: id must be positive", where))
			continue
		}
		if _, dup := c.providers[pp.GetId()]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate id", where))
			continue
		}
		if pp.GetName() == "" || strings.Contains(pp.GetName(), "/") {
			errs = append(errs, fmt.Errorf("%s: name must be non-empty and contain no '/'", where))
			continue
		}
		if _, dup := c.providersByName[pp.GetName()]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate name", where))
			continue
		}
		ch := vocab.ChannelType(pp.GetChannelType())
		if !ch.Valid() {
			errs = append(errs, fmt.Errorf("%s: unknown channel_type %q", where, pp.GetChannelType()))
			continue
		}
		u, err := url.Parse(pp.GetBaseUrl())
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: base_url %q: want an absolute http(s) URL", where, pp.GetBaseUrl()))
			continue
		}
		p := &Provider{
			ID: pp.GetId(), Name: pp.GetName(), Channel: ch, BaseURL: strings.TrimRight(pp.GetBaseUrl(), "/"),
			Enabled: pp.GetEnabled(), cells: make(map[OpKey]Cell),
		}
		if sj := strings.TrimSpace(pp.GetSettingsJson()); sj != "" {
			if !json.Valid([]byte(sj)) {
				errs = append(errs, fmt.Errorf("%s: settings_json is not valid JSON", where))
				continue
			}
			p.Settings = json.RawMessage(sj)
		}
		bad := false
		for _, cr := range pp.GetCredentials() {
			if !cr.GetEnabled() {
				continue
			}
			if cr.GetProviderId() != 0 && cr.GetProviderId() != p.ID {
				errs = append(errs, fmt.Errorf("%s: credential %d belongs to provider %d", where, cr.GetId(), cr.GetProviderId()))
				bad = true
				continue
			}
			if cr.GetSecret() == "" {
				errs = append(errs, fmt.Errorf("%s: credential %d: empty secret", where, cr.GetId()))
				bad = true
				continue
			}
			if cr.GetWeight() < 0 {
				errs = append(errs, fmt.Errorf("%s: credential %d: negative weight %d", where, cr.GetId(), cr.GetWeight()))
				bad = true
				continue
			}
			p.Credentials = append(p.Credentials, Credential{ID: cr.GetId(), Secret: cr.GetSecret(), Weight: max(1, cr.GetWeight())})
		}
		if bad {
			continue
		}
		c.providers[p.ID] = p
		c.providersByName[p.Name] = p
	}
	return errs
}

func (c *Compiled) compileRoutingRules(in []*configv1.RoutingRule, errs []error) []error {
	rows := make([]*configv1.RoutingRule, 0, len(in))
	for _, r := range in {
		if r.GetEnabled() {
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows, func(a, b *configv1.RoutingRule) int {
		if a.GetSortOrder() != b.GetSortOrder() {
			return int(a.GetSortOrder()) - int(b.GetSortOrder())
		}
		return int(a.GetId() - b.GetId())
	})
	for _, r := range rows {
		where := fmt.Sprintf("routing rule %d (provider %d, %s/%s)", r.GetId(), r.GetProviderId(), r.GetOperation(), r.GetKind())
		p := c.providers[r.GetProviderId()]
		if p == nil {
			errs = append(errs, fmt.Errorf("%s: unknown provider", where))
			continue
		}
		op, kind := vocab.Operation(r.GetOperation()), vocab.Kind(r.GetKind())
		if !op.Valid() {
			errs = append(errs, fmt.Errorf("%s: unknown operation %q", where, op))
			continue
		}
		if !vocab.KindFits(op, kind) {
			errs = append(errs, fmt.Errorf("%s: kind %q does not fit operation %q", where, kind, op))
			continue
		}
		impl := vocab.Implementation(r.GetImplementation())
		if !impl.Valid() {
			errs = append(errs, fmt.Errorf("%s: unknown implementation %q", where, impl))
			continue
		}
		cell := Cell{Impl: impl, RuleID: r.GetId()}
		if impl == vocab.ImplTransformTo {
			cell.DestOp = op
			if d := r.GetDestOperation(); d != "" {
				cell.DestOp = vocab.Operation(d)
			}
			if !cell.DestOp.Valid() {
				errs = append(errs, fmt.Errorf("%s: unknown dest_operation %q", where, cell.DestOp))
				continue
			}
			cell.DestKind = vocab.Kind(r.GetDestKind())
			switch {
			case cell.DestKind == "":
				cell = Cell{Impl: vocab.ImplUnsupported, RuleID: r.GetId()} // spec: transform_to without dest_kind
			case !vocab.KindFits(cell.DestOp, cell.DestKind):
				errs = append(errs, fmt.Errorf("%s: dest_kind %q does not fit dest_operation %q", where, cell.DestKind, cell.DestOp))
				continue
			}
		}
		k := OpKey{op, kind}
		if _, dup := p.cells[k]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate (provider, operation, kind)", where))
			continue
		}
		p.cells[k] = cell
	}
	return errs
}

func (c *Compiled) compileRoutes(in []*configv1.Route, errs []error) []error {
	for _, rr := range in {
		where := fmt.Sprintf("route %d (%q)", rr.GetId(), rr.GetName())
		if !rr.GetEnabled() {
			continue
		}
		if rr.GetName() == "" {
			errs = append(errs, fmt.Errorf("%s: empty name", where))
			continue
		}
		r := &Route{ID: rr.GetId(), Name: rr.GetName(), Strategy: rr.GetStrategy()}
		var members []Member
		bad := false
		for i, m := range rr.GetMembers() {
			if !m.GetEnabled() {
				continue
			}
			p := c.providers[m.GetProviderId()]
			if p == nil {
				errs = append(errs, fmt.Errorf("%s: member %d: unknown provider %d", where, i, m.GetProviderId()))
				bad = true
				continue
			}
			if m.GetUpstreamModelId() == "" {
				errs = append(errs, fmt.Errorf("%s: member %d: empty upstream_model_id", where, i))
				bad = true
				continue
			}
			if m.GetWeight() < 0 {
				errs = append(errs, fmt.Errorf("%s: member %d: negative weight %d", where, i, m.GetWeight()))
				bad = true
				continue
			}
			if !p.Enabled {
				continue
			}
			members = append(members, Member{Provider: p, UpstreamModel: m.GetUpstreamModelId(), Priority: m.GetPriority(), Weight: max(1, m.GetWeight())})
		}
		if bad {
			continue
		}
		slices.SortStableFunc(members, func(a, b Member) int { return int(a.Priority) - int(b.Priority) })
		for i := 0; i < len(members); {
			j := i + 1
			for j < len(members) && members[j].Priority == members[i].Priority {
				j++
			}
			r.Groups = append(r.Groups, members[i:j:j])
			i = j
		}
		names := append([]string{rr.GetName()}, rr.GetAliases()...)
		for _, n := range names {
			if n == "" {
				errs = append(errs, fmt.Errorf("%s: empty alias", where))
				bad = true
				continue
			}
			if other, dup := c.routes[n]; dup {
				errs = append(errs, fmt.Errorf("%s: name or alias %q already used by route %d", where, n, other.ID))
				bad = true
				continue
			}
			c.routes[n] = r
		}
		if bad {
			continue
		}
		r.Aliases = rr.GetAliases()
		c.routeList = append(c.routeList, r)
	}
	slices.SortFunc(c.routeList, func(a, b *Route) int { return strings.Compare(a.Name, b.Name) })
	return errs
}

func (c *Compiled) compileKeys(in []*configv1.ApiKey, errs []error) []error {
	for _, kk := range in {
		where := fmt.Sprintf("api key %d (%q)", kk.GetId(), kk.GetPrefix())
		if len(kk.GetKeyHash()) != sha256.Size {
			errs = append(errs, fmt.Errorf("%s: key_hash must be %d bytes, got %d", where, sha256.Size, len(kk.GetKeyHash())))
			continue
		}
		if kk.GetRpmLimit() < 0 || kk.GetTpmLimit() < 0 {
			errs = append(errs, fmt.Errorf("%s: negative rate limit", where))
			continue
		}
		var h [sha256.Size]byte
		copy(h[:], kk.GetKeyHash())
		if other, dup := c.keys[h]; dup {
			errs = append(errs, fmt.Errorf("%s: key_hash already used by api key %d", where, other.ID))
			continue
		}
		k := &APIKey{
			ID: kk.GetId(), UserID: kk.GetUserId(), OrgID: kk.GetOrgId(), TeamID: kk.GetTeamId(), Name: kk.GetName(),
			Prefix: kk.GetPrefix(), Enabled: kk.GetEnabled(), RPMLimit: kk.GetRpmLimit(), TPMLimit: kk.GetTpmLimit(),
			AllowedModels: kk.GetAllowedModels(),
		}
		if kk.GetExpiresAt() != nil {
			k.ExpiresAt = kk.GetExpiresAt().AsTime()
		}
		if len(k.AllowedModels) > 0 {
			k.allowed = make(map[string]struct{}, len(k.AllowedModels))
			for _, m := range k.AllowedModels {
				k.allowed[m] = struct{}{}
			}
		}
		c.keys[h] = k
	}
	return errs
}

func (c *Compiled) compileQuotas(in []*configv1.Quota, errs []error) []error {
	for _, qq := range in {
		where := fmt.Sprintf("quota %s/%d", qq.GetScope(), qq.GetScopeId())
		sc := vocab.Scope(qq.GetScope())
		if sc != vocab.ScopeOrg && sc != vocab.ScopeTeam && sc != vocab.ScopeUser {
			errs = append(errs, fmt.Errorf("%s: unknown scope %q", where, qq.GetScope()))
			continue
		}
		k := QuotaKey{sc, qq.GetScopeId()}
		if _, dup := c.quotas[k]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate", where))
			continue
		}
		var q Quota
		if qq.CostLimit == nil {
			q.Unlimited = true
		} else {
			m, err := micros(qq.GetCostLimit())
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: cost_limit: %w", where, err))
				continue
			}
			q.LimitMicros = m
		}
		used := qq.GetCostUsed()
		if used == "" {
			used = "0"
		}
		m, err := micros(used)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: cost_used: %w", where, err))
			continue
		}
		q.UsedMicros = m
		c.quotas[k] = q
	}
	return errs
}

// micros parses a non-negative decimal dollar amount into integer micro-dollars (half up).
func micros(s string) (int64, error) {
	d, err := pricing.ParseDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	if d.Sign() < 0 {
		return 0, fmt.Errorf("%q must not be negative", s)
	}
	m, err := pricing.ToMicros(d)
	if err != nil {
		return 0, fmt.Errorf("convert %q: %w", s, err)
	}
	return m, nil
}
