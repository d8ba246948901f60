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
	"github.com/tollgate/tollgate/shared/period"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Compiled is a validated, indexed snapshot. It is never mutated after Compile returns; the data plane
// holds the current one behind an atomic.Pointer and swaps it whole.
type Compiled struct {
	Version int64
	BuiltAt time.Time
	// Prices resolves the price rule of (provider, upstream model) among the rules in force when the
	// snapshot was built (no scheduled version applied), memoised.
	Prices *pricing.Index
	// PriceTimeline resolves at an instant: Prices before the first scheduled version's instant, then the
	// rules with every scheduled version due by that instant applied (docs/pricing.md, "Scheduled price
	// changes").
	PriceTimeline *pricing.Timeline

	providers       map[int64]*Provider
	providersByName map[string]*Provider
	// routes holds every enabled route by its name and by each alias.
	routes map[string]*Route
	// routeList holds the enabled routes ordered by name.
	routeList []*Route
	keys      keyIndex
	quotas    map[QuotaKey]Quota
	// rules holds the compiled price rule of each enabled price-rule element, for ApplyDelta's reuse.
	rules map[*configv1.PriceRule]*pricing.Rule
	// config is the snapshot's configuration without its keys (the same message elements, never
	// mutated): ApplyDelta applies a delta's other kinds to it and compiles the result.
	config *snapshotv1.Snapshot
	// DirectAddressing is the gateway-wide direct-addressing switch (config.v1.ModelPolicy; on when the
	// snapshot carries no policy).
	DirectAddressing bool
	// CostDisclosure is the gateway-wide cost-disclosure switch (config.v1.GatewaySettings; on when the
	// snapshot carries no settings). A key's own switch wins over it: use DisclosesCost.
	CostDisclosure bool
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
	// UnpricedDeny is set when the provider's effective unpriced-model policy is "deny": a model of it
	// without a price rule is refused before the upstream call (routing.Priced).
	UnpricedDeny bool
	cells        map[OpKey]Cell
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
//
// A cloud channel's (aws_bedrock, gcp_vertex, azure_openai) passthrough and transform_to cells read as
// unsupported: this build's upstream dispatch addresses and authenticates the first-party wires only, and
// would send a cloud candidate's request to base_url in a first-party shape with the cloud credential as
// a bearer token. Such a candidate is skipped like any unsupported one (docs/providers.md, "What a data
// plane of this build does"); its local cells (model list and get) are served.
func (p *Provider) Cell(op vocab.Operation, kind vocab.Kind) Cell {
	c, ok := p.cells[OpKey{op, kind}]
	if !ok {
		return Cell{Impl: vocab.ImplUnsupported}
	}
	if p.Channel.Cloud() && (c.Impl == vocab.ImplPassthrough || c.Impl == vocab.ImplTransformTo) {
		return Cell{Impl: vocab.ImplUnsupported, RuleID: c.RuleID}
	}
	return c
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

// APIKey is a compiled client key. A snapshot keeps every key in one slice (keyIndex), so the struct
// holds no per-key allocation: its strings share one buffer and its model list is shared by every key
// with the same list.
type APIKey struct {
	ID     int64
	UserID int64
	OrgID  int64
	// TeamID is 0 when the key's user has no team.
	TeamID int64
	Name   string
	Prefix string
	// ExpiresAt is zero when the key does not expire.
	ExpiresAt time.Time
	TPMLimit  int64
	models    *modelSet
	RPMLimit  int32
	Enabled   bool
	// direct is set when the key may use provider/model direct addressing: the gateway allows it for
	// every key (config.v1.ModelPolicy.direct_addressing) or the key does (allow_direct_addressing).
	direct bool
	// allowDirect is the key's own allow_direct_addressing (direct without the gateway's switch).
	allowDirect bool
	// Previous is set on the entry of a rotated key's previous hash (its ExpiresAt ends the grace period).
	Previous bool
	// costDisclosure is the key's own cost-disclosure switch (config.v1.ApiKey.cost_disclosure):
	// disclosureFollow (absent), disclosureOn or disclosureOff.
	costDisclosure disclosure
}

// disclosure is a key's own cost-disclosure switch.
type disclosure int8

const (
	disclosureFollow disclosure = iota
	disclosureOn
	disclosureOff
)

func disclosureOf(kk *configv1.ApiKey) disclosure {
	switch {
	case kk.CostDisclosure == nil:
		return disclosureFollow
	case kk.GetCostDisclosure():
		return disclosureOn
	default:
		return disclosureOff
	}
}

// CostDisclosure answers the key's own cost-disclosure switch: set is false when the key follows the
// gateway's (Compiled.CostDisclosure).
func (k *APIKey) CostDisclosure() (on, set bool) {
	return k.costDisclosure == disclosureOn, k.costDisclosure != disclosureFollow
}

// DisclosesCost reports whether the caller of key k is shown what its requests cost (docs/cost.md): the
// key's own switch when it has one, else the gateway's. A nil key is never shown costs.
func (c *Compiled) DisclosesCost(k *APIKey) bool {
	if k == nil {
		return false
	}
	if on, set := k.CostDisclosure(); set {
		return on
	}
	return c.CostDisclosure
}

// modelSet is a compiled allowed_models list, shared by every key of a snapshot with the same list.
type modelSet struct {
	names    []string
	allowed  map[string]struct{}
	patterns []string
}

// AllowedModels lists the logical models the key may use, as names or patterns (MatchModel); empty
// means every model. The slice must not be modified.
func (k *APIKey) AllowedModels() []string {
	if k.models == nil {
		return nil
	}
	return k.models.names
}

// Allows reports whether the key may use the logical model name: listed exactly or matched by one of
// its patterns.
func (k *APIKey) Allows(model string) bool {
	if k.models == nil {
		return true
	}
	if _, ok := k.models.allowed[model]; ok {
		return true
	}
	for _, p := range k.models.patterns {
		if MatchModel(p, model) {
			return true
		}
	}
	return false
}

// DirectAddressing reports whether the key may use provider/model direct addressing.
func (k *APIKey) DirectAddressing() bool { return k.direct }

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
	// Period and Zone are the quota's budget period (docs/budgets.md); UsedMicros is the spend of the
	// period PeriodID names (the one containing the snapshot's build time; "" for period.None).
	Period   period.Kind
	Zone     *time.Location
	PeriodID string
	// RPMLimit and TPMLimit limit the whole scope per minute; 0 means unlimited.
	RPMLimit int64
	TPMLimit int64
}

// Current returns the period of q containing now and the spend the snapshot knows of it: UsedMicros when
// the snapshot's period is that one, else 0 (a period that started after the build has no spend in it).
func (q Quota) Current(now time.Time) (period.Period, int64) {
	p := period.Of(q.Period, q.Zone, now)
	if p.ID() != q.PeriodID {
		return p, 0
	}
	return p, q.UsedMicros
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
func (c *Compiled) Key(hash [sha256.Size]byte) *APIKey { return c.keys.byHash(&hash) }

// KeyByID returns the key with id, or nil (request logs name a settled request's key by its prefix).
func (c *Compiled) KeyByID(id int64) *APIKey { return c.keys.byID(id) }

// LookupKey hashes secret and returns its API key, or nil.
func (c *Compiled) LookupKey(secret string) *APIKey {
	h := sha256.Sum256([]byte(secret))
	return c.keys.byHash(&h)
}

// Quota returns the quota of a scope; ok is false when the scope has no quota row.
func (c *Compiled) Quota(scope vocab.Scope, id int64) (q Quota, ok bool) {
	q, ok = c.quotas[QuotaKey{scope, id}]
	return q, ok
}

// ResolvePriceAt returns the price rule of (provider, upstream model) in force at the instant at — the
// request's admission time, so its estimate, its quote and its usage row's price_rule_version agree — or
// nil (cost 0).
func (c *Compiled) ResolvePriceAt(providerID int64, model string, at time.Time) *pricing.Rule {
	return c.PriceTimeline.ResolveAt(providerID, model, at)
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
	c := &Compiled{Version: s.GetVersion(), BuiltAt: s.GetBuiltAt().AsTime()}
	errs := c.compileConfig(configOf(s), nil)
	errs = c.compileKeys(s.GetApiKeys(), errs)
	if len(errs) > 0 {
		return nil, compileError(s.GetVersion(), errs)
	}
	return c, nil
}

func compileError(version int64, errs []error) *CompileError {
	ce := &CompileError{Version: version}
	for _, e := range errs {
		ce.Problems = append(ce.Problems, Problems(e)...)
	}
	return ce
}

// configOf returns s without its API keys, sharing its elements.
func configOf(s *snapshotv1.Snapshot) *snapshotv1.Snapshot {
	return &snapshotv1.Snapshot{
		PriceRules: s.GetPriceRules(), RoutingRules: s.GetRoutingRules(), Providers: s.GetProviders(), Routes: s.GetRoutes(),
		Quotas: s.GetQuotas(), SettlementBounds: s.GetSettlementBounds(), ScheduledPriceRules: s.GetScheduledPriceRules(),
		ModelPolicy: s.GetModelPolicy(), GatewaySettings: s.GetGatewaySettings(),
	}
}

// compileConfig compiles everything but the API keys (s.ApiKeys is ignored): price rules, providers,
// routing, routes, the model policy, quotas and settlement bounds. When held is set (ApplyDelta), a price
// rule or quota that is the very element held compiled (the same message; a delta's upserts are new
// messages) reuses held's compiled form instead of parsing its decimals again: the same result, since
// compiling an element depends only on it and, for a price rule, on the bounds (reused only when equal).
func (c *Compiled) compileConfig(s *snapshotv1.Snapshot, held *Compiled) []error {
	c.config = s
	c.providers = make(map[int64]*Provider, len(s.GetProviders()))
	c.providersByName = make(map[string]*Provider, len(s.GetProviders()))
	c.routes = make(map[string]*Route, len(s.GetRoutes()))
	c.quotas = make(map[QuotaKey]Quota, len(s.GetQuotas()))
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
	var rules map[*configv1.PriceRule]*pricing.Rule
	if held != nil && held.Bounds == c.Bounds {
		rules = held.rules
	}
	if rules != nil && sameSlice(s.GetPriceRules(), held.config.GetPriceRules()) &&
		sameSlice(s.GetScheduledPriceRules(), held.config.GetScheduledPriceRules()) {
		c.Prices, c.PriceTimeline, c.rules = held.Prices, held.PriceTimeline, held.rules
	} else {
		errs = c.compilePrices(s.GetPriceRules(), s.GetScheduledPriceRules(), rules, errs)
	}
	errs = c.compileProviders(s.GetProviders(), errs)
	errs = c.compileRoutingRules(s.GetRoutingRules(), errs)
	errs = c.compileRoutes(s.GetRoutes(), errs)
	c.DirectAddressing = s.GetModelPolicy() == nil || s.GetModelPolicy().GetDirectAddressing()
	c.CostDisclosure = s.GetGatewaySettings() == nil || s.GetGatewaySettings().GetCostDisclosure()
	if mp := s.GetModelPolicy(); mp != nil {
		if err := CheckUnpricedPolicy(mp.GetUnpricedPolicy()); err != nil {
			errs = append(errs, &ElementError{Resource: "model policy", Field: "unpriced_policy", Message: err.Error()})
		}
	}
	if held != nil && sameSlice(s.GetQuotas(), held.config.GetQuotas()) {
		c.quotas = held.quotas
		return errs
	}
	return c.compileQuotas(s.GetQuotas(), held, errs)
}

// sameSlice reports whether a and b are the same slice (ApplyDelta keeps a kind's held slice when the
// delta does not change it).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (c *Compiled) compilePrices(in []*configv1.PriceRule, scheduled []*configv1.ScheduledPriceRule, reuse map[*configv1.PriceRule]*pricing.Rule, errs []error) []error {
	rules := make([]*pricing.Rule, 0, len(in))
	c.rules = make(map[*configv1.PriceRule]*pricing.Rule, len(in))
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
		if r := reuse[pr]; r != nil {
			rules = append(rules, r)
			c.rules[pr] = r
			continue
		}
		r, err := CheckPriceRule(pr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Bounds = c.Bounds
		r.Version = pr.GetVersion()
		rules = append(rules, r)
		c.rules[pr] = r
	}
	var changes []pricing.Change
	type due struct {
		rule int64
		at   time.Time
	}
	seenDue := make(map[due]bool, len(scheduled))
	for _, sp := range scheduled {
		pr := sp.GetRule()
		elem := func(field, msg string) error {
			return &ElementError{Resource: "scheduled price rule", ID: sp.GetId(), Field: field, Message: msg}
		}
		at := sp.GetEffectiveAt().AsTime()
		switch {
		case pr == nil:
			errs = append(errs, elem("rule", "required"))
			continue
		case pr.GetId() != sp.GetPriceRuleId() || pr.GetId() <= 0:
			errs = append(errs, elem("rule.id", fmt.Sprintf("%d does not name the rule %d it schedules", pr.GetId(), sp.GetPriceRuleId())))
			continue
		case sp.GetEffectiveAt() == nil || at.Year() < 1678 || at.Year() > 2261:
			errs = append(errs, elem("effective_at", "required, between the years 1678 and 2261"))
			continue
		case pr.GetVersion() <= 0:
			errs = append(errs, elem("rule.version", "must be positive (the history version it will have)"))
			continue
		case seenDue[due{pr.GetId(), at}]:
			errs = append(errs, elem("effective_at", fmt.Sprintf("a second scheduled version of price rule %d at this instant", pr.GetId())))
			continue
		}
		seenDue[due{pr.GetId(), at}] = true
		r, err := CheckPriceRule(pr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Bounds = c.Bounds
		r.Version = pr.GetVersion()
		changes = append(changes, pricing.Change{At: at, Rule: r})
	}
	tl, err := pricing.NewTimeline(rules, changes)
	if err != nil { // unreachable: the checks above cover NewTimeline's
		return append(errs, &ElementError{Resource: "scheduled price rule", Message: err.Error()})
	}
	c.PriceTimeline, c.Prices = tl, tl.IndexAt(time.Time{})
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

func (c *Compiled) compileQuotas(in []*configv1.Quota, held *Compiled, errs []error) []error {
	var heldElem map[QuotaKey]*configv1.Quota
	if held != nil {
		heldElem = make(map[QuotaKey]*configv1.Quota, len(held.config.GetQuotas()))
		for _, qq := range held.config.GetQuotas() {
			heldElem[QuotaKey{vocab.Scope(qq.GetScope()), qq.GetScopeId()}] = qq
		}
	}
	for _, qq := range in {
		if k := (QuotaKey{vocab.Scope(qq.GetScope()), qq.GetScopeId()}); heldElem[k] == qq && qq != nil {
			if _, dup := c.quotas[k]; !dup {
				c.quotas[k] = held.quotas[k]
				continue
			}
		}
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
		kind, err := period.ParseKind(qq.GetPeriod())
		if err != nil {
			errs = append(errs, &ElementError{Resource: "quota", ID: k.ID, Name: string(k.Scope), Field: "period", Message: err.Error()})
			continue
		}
		zone, err := period.LoadZone(qq.GetTimeZone())
		if err != nil {
			errs = append(errs, &ElementError{Resource: "quota", ID: k.ID, Name: string(k.Scope), Field: "time_zone", Message: err.Error()})
			continue
		}
		q := Quota{Unlimited: qq.CostLimit == nil, LimitMicros: limit, UsedMicros: usedMicros(qq.GetCostUsed()),
			Epoch: max(qq.GetAdjustEpoch(), 0), Period: kind, Zone: zone, PeriodID: qq.GetPeriodId(),
			RPMLimit: int64(max(qq.GetRpmLimit(), 0)), TPMLimit: max(qq.GetTpmLimit(), 0)}
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
