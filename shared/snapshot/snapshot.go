// Package snapshot compiles a Snapshot message into the immutable, indexed form the data plane serves
// from: the price-rule index (memoised resolution per provider and model), each provider's routing table
// from its enabled rows ordered by sort_order, routes and aliases, and API keys by hash. Both planes run
// Compile: the control plane refuses to publish a snapshot that does not compile, and a data plane keeps
// its last good snapshot when a new one fails.
package snapshot

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
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
	keysByID  map[int64]*APIKey
	quotas    map[QuotaKey]Quota
	// Bounds are the settlement bounds of the snapshot (pricing.DefaultBounds when it carries none); every
	// price rule carries them too (pricing.Rule.Bounds), so a record built from a rule uses them.
	Bounds pricing.Bounds
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
	// Epoch is the quota's adjustment epoch (config.v1.Quota.adjust_epoch; a negative one counts as 0):
	// UsedMicros replaces a Redis mirror of an older epoch (docs/settlement.md, "Adjustment epochs").
	Epoch int64
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

// KeyByID returns the key with id, or nil (request logs name a settled request's key by its prefix).
func (c *Compiled) KeyByID(id int64) *APIKey { return c.keysByID[id] }

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

// Compile validates and indexes s. An invalid reference or value fails the whole snapshot with a
// *CompileError listing every problem found, each naming its element. The per-element checks are the
// exported Check* functions, which the admin API runs on every write.
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
		keysByID:        make(map[int64]*APIKey, len(s.GetApiKeys())),
		quotas:          make(map[QuotaKey]Quota, len(s.GetQuotas())),
	}
	var errs []error
	c.Bounds = pricing.DefaultBounds
	if sb := s.GetSettlementBounds(); sb != nil {
		b, err := pricing.ParseBounds(sb.GetMaxRequestTokens(), sb.GetMaxRequestCost())
		if err != nil {
			errs = append(errs, &ElementError{Resource: "settlement bounds", Message: err.Error()})
		} else {
			c.Bounds = b
		}
	}
	errs = c.compilePrices(s.GetPriceRules(), errs)
	errs = c.compileProviders(s.GetProviders(), errs)
	errs = c.compileRoutingRules(s.GetRoutingRules(), errs)
	errs = c.compileRoutes(s.GetRoutes(), errs)
	errs = c.compileKeys(s.GetApiKeys(), errs)
	errs = c.compileQuotas(s.GetQuotas(), errs)
	if len(errs) > 0 {
		ce := &CompileError{Version: s.GetVersion()}
		for _, e := range errs {
			ce.Problems = append(ce.Problems, Problems(e)...)
		}
		return nil, ce
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
			errs = append(errs, &ElementError{Resource: "price rule", ID: pr.GetId(), Field: "id", Message: "duplicate id"})
			continue
		}
		seen[pr.GetId()] = true
		r, err := CheckPriceRule(pr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Bounds = c.Bounds
		r.Version = pr.GetVersion()
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
		p, err := CheckProvider(pp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		elem := func(msg string) error {
			return &ElementError{Resource: "provider", ID: p.ID, Name: p.Name, Field: "name", Message: msg}
		}
		if _, dup := c.providers[p.ID]; dup {
			errs = append(errs, elem("duplicate id"))
			continue
		}
		if _, dup := c.providersByName[p.Name]; dup {
			errs = append(errs, elem("duplicate name"))
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
		return cmp.Compare(a.GetId(), b.GetId())
	})
	for _, r := range rows {
		elem := func(field, format string, args ...any) error {
			return &ElementError{Resource: "routing rule", ID: r.GetId(), Name: r.GetOperation() + "/" + r.GetKind(),
				Field: field, Message: fmt.Sprintf(format, args...)}
		}
		p := c.providers[r.GetProviderId()]
		if p == nil {
			errs = append(errs, elem("provider_id", "unknown provider %d", r.GetProviderId()))
			continue
		}
		cell, err := CheckRoutingRule(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k := OpKey{vocab.Operation(r.GetOperation()), vocab.Kind(r.GetKind())}
		if _, dup := p.cells[k]; dup {
			errs = append(errs, elem("kind", "duplicate (provider %d, operation, kind)", p.ID))
			continue
		}
		p.cells[k] = cell
	}
	return errs
}

func (c *Compiled) compileRoutes(in []*configv1.Route, errs []error) []error {
	for _, rr := range in {
		if !rr.GetEnabled() {
			continue
		}
		if err := CheckRoute(rr); err != nil {
			errs = append(errs, err)
			continue
		}
		elem := func(field, format string, args ...any) error {
			return &ElementError{Resource: "route", ID: rr.GetId(), Name: rr.GetName(), Field: field, Message: fmt.Sprintf(format, args...)}
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
				errs = append(errs, elem(fmt.Sprintf("members[%d].provider_id", i), "unknown provider %d", m.GetProviderId()))
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
			if other, dup := c.routes[n]; dup {
				errs = append(errs, elem("aliases", "name or alias %q already used by route %d", n, other.ID))
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
		if err := CheckAPIKey(kk); err != nil {
			errs = append(errs, err)
			continue
		}
		var h [sha256.Size]byte
		copy(h[:], kk.GetKeyHash())
		if other, dup := c.keys[h]; dup {
			errs = append(errs, &ElementError{Resource: "api key", ID: kk.GetId(), Name: kk.GetPrefix(), Field: "key_hash",
				Message: fmt.Sprintf("already used by api key %d", other.ID)})
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
		c.keysByID[k.ID] = k
	}
	return errs
}

func (c *Compiled) compileQuotas(in []*configv1.Quota, errs []error) []error {
	for _, qq := range in {
		limit, err := CheckQuotaLimit(qq.GetScope(), qq.GetScopeId(), qq.CostLimit)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k := QuotaKey{vocab.Scope(qq.GetScope()), qq.GetScopeId()}
		if _, dup := c.quotas[k]; dup {
			errs = append(errs, &ElementError{Resource: "quota", ID: k.ID, Name: string(k.Scope), Message: "duplicate"})
			continue
		}
		q := Quota{Unlimited: qq.CostLimit == nil, LimitMicros: limit, UsedMicros: usedMicros(qq.GetCostUsed()),
			Epoch: max(qq.GetAdjustEpoch(), 0)}
		c.quotas[k] = q
	}
	return errs
}

// usedMicros converts a scope's cost_used to micro-dollars. cost_used is settlement's running total, not
// configuration: it never fails the snapshot. An amount beyond what admission can compare (above
// pricing.MaxExactMicros, or not a decimal Tollgate parses) saturates at MaxExactMicros — above every
// accepted limit, so the scope is refused until an operator adjusts its spend — and a negative one
// counts as 0.
func usedMicros(s string) int64 {
	if s == "" {
		return 0
	}
	d, err := pricing.ParseDecimal(s)
	if err != nil {
		if strings.HasPrefix(s, "-") {
			return 0
		}
		return pricing.MaxExactMicros
	}
	if d.Sign() < 0 {
		return 0
	}
	m, err := pricing.ToMicros(d)
	if err != nil || m > pricing.MaxExactMicros {
		return pricing.MaxExactMicros
	}
	return m
}
