package snapshot

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

func validSnapshot() *snapshotv1.Snapshot {
	hash := sha256.Sum256([]byte("tg-secret"))
	return &snapshotv1.Snapshot{
		Version: 7,
		BuiltAt: timestamppb.New(time.Unix(1760000000, 0)),
		PriceRules: []*configv1.PriceRule{{
			Id: 1, MatchType: "exact", ModelMatch: "m-1", InputPrice: "1", OutputPrice: "2", CacheReadPrice: "0",
			CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0", ImageOutputPrice: "0",
			Enabled: true, PricingTiersJson: []*configv1.TierEntry{{ServiceTier: proto.String("priority"), Multiplier: proto.String("2")}},
		}},
		Providers: []*configv1.Provider{
			{Id: 1, Name: "a", ChannelType: "alpha", BaseUrl: "http://127.0.0.1:1/", Enabled: true,
				Credentials: []*configv1.Credential{{Id: 10, Secret: "s1", Weight: 2, Enabled: true}, {Id: 11, Secret: "off", Enabled: false}}},
			{Id: 2, Name: "b", ChannelType: "beta", BaseUrl: "https://b.example", Enabled: true},
			{Id: 3, Name: "off", ChannelType: "gamma", BaseUrl: "https://g.example", Enabled: false},
		},
		RoutingRules: []*configv1.RoutingRule{
			{Id: 1, ProviderId: 1, Operation: "generate_content", Kind: "alpha_chat_completions", Implementation: "passthrough", Enabled: true, SortOrder: 2},
			{Id: 2, ProviderId: 1, Operation: "generate_content", Kind: "beta_messages", Implementation: "transform_to", DestKind: proto.String("alpha_responses"), Enabled: true},
			{Id: 3, ProviderId: 1, Operation: "generate_content", Kind: "gamma_generate_content", Implementation: "transform_to", Enabled: true},
			{Id: 4, ProviderId: 1, Operation: "list_models", Kind: "alpha", Implementation: "local", Enabled: true},
			{Id: 5, ProviderId: 1, Operation: "rerank", Kind: "alpha", Implementation: "passthrough", Enabled: false},
		},
		Routes: []*configv1.Route{{
			Id: 1, Name: "chat", Enabled: true, Aliases: []string{"chat-latest"},
			Members: []*configv1.RouteMember{
				{ProviderId: 2, UpstreamModelId: "b-1", Priority: 2, Weight: 1, Enabled: true},
				{ProviderId: 1, UpstreamModelId: "m-1", Priority: 1, Weight: 3, Enabled: true},
				{ProviderId: 3, UpstreamModelId: "g-1", Priority: 1, Weight: 1, Enabled: true},
				{ProviderId: 1, UpstreamModelId: "m-2", Priority: 1, Weight: 0, Enabled: true},
			},
		}},
		ApiKeys: []*configv1.ApiKey{{Id: 5, UserId: 6, OrgId: 7, TeamId: proto.Int64(8), KeyHash: hash[:], Enabled: true, AllowedModels: []string{"chat"}, RpmLimit: 10}},
		Quotas: []*configv1.Quota{
			{Scope: "org", ScopeId: 7, CostLimit: proto.String("12.3456785"), CostUsed: "1.5"},
			{Scope: "user", ScopeId: 6, CostUsed: "0"},
		},
	}
}

func TestCompile(t *testing.T) {
	c, err := Compile(validSnapshot())
	if err != nil {
		t.Fatalf("Compile = %v", err)
	}
	if c.Version != 7 {
		t.Errorf("Version = %d, want 7", c.Version)
	}
	if r := c.ResolvePriceAt(1, "m-1", time.Now()); r == nil || r.ID != 1 || len(r.Tiers) != 1 {
		t.Errorf("ResolvePrice(1, m-1) = %+v, want rule 1 with one tier", r)
	}
	p := c.Provider(1)
	if p == nil || p.BaseURL != "http://127.0.0.1:1" || len(p.Credentials) != 1 || p.Credentials[0].Weight != 2 {
		t.Fatalf("Provider(1) = %+v", p)
	}
	if c.ProviderByName("a") != p {
		t.Error("ProviderByName(a) mismatch")
	}
	cells := []struct {
		op   vocab.Operation
		kind vocab.Kind
		want Cell
	}{
		{vocab.OpGenerateContent, vocab.KindAlphaChatCompletions, Cell{Impl: vocab.ImplPassthrough, RuleID: 1}},
		{vocab.OpGenerateContent, vocab.KindBetaMessages, Cell{Impl: vocab.ImplTransformTo, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindAlphaResponses, RuleID: 2}},
		{vocab.OpGenerateContent, vocab.KindGammaGenerateContent, Cell{Impl: vocab.ImplUnsupported, RuleID: 3}},
		{vocab.OpListModels, vocab.KindAlpha, Cell{Impl: vocab.ImplLocal, RuleID: 4}},
		{vocab.OpRerank, vocab.KindAlpha, Cell{Impl: vocab.ImplUnsupported}},
	}
	for _, tt := range cells {
		if got := p.Cell(tt.op, tt.kind); got != tt.want {
			t.Errorf("Cell(%s, %s) = %+v, want %+v", tt.op, tt.kind, got, tt.want)
		}
	}
	r := c.Route("chat-latest")
	if r == nil || r != c.Route("chat") || len(c.Routes()) != 1 {
		t.Fatalf("Route(chat-latest) = %+v", r)
	}
	if len(r.Groups) != 2 || len(r.Groups[0]) != 2 || r.Groups[0][0].UpstreamModel != "m-1" || r.Groups[0][1].Weight != 1 || r.Groups[1][0].UpstreamModel != "b-1" {
		t.Errorf("route groups = %+v, want [[m-1 m-2(w1)] [b-1]] (disabled provider dropped)", r.Groups)
	}
	k := c.LookupKey("tg-secret")
	if k == nil || k.ID != 5 || k.TeamID != 8 || !k.Allows("chat") || k.Allows("other") || !k.Usable(time.Now()) {
		t.Errorf("LookupKey = %+v", k)
	}
	if c.LookupKey("nope") != nil {
		t.Error("LookupKey(nope) != nil")
	}
	if q, ok := c.Quota(vocab.ScopeOrg, 7); !ok || q.LimitMicros != 12345679 || q.UsedMicros != 1500000 || q.Unlimited {
		t.Errorf("Quota(org,7) = %+v, %v", q, ok)
	}
	if q, ok := c.Quota(vocab.ScopeUser, 6); !ok || !q.Unlimited {
		t.Errorf("Quota(user,6) = %+v, %v", q, ok)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *snapshotv1.Snapshot)
		want   string
	}{
		{"version", func(s *snapshotv1.Snapshot) { s.Version = 0 }, "version must be positive"},
		{"bad price", func(s *snapshotv1.Snapshot) { s.PriceRules[0].InputPrice = "1.2.3" }, "price rule 1"},
		{"bad tier", func(s *snapshotv1.Snapshot) { s.PriceRules[0].PricingTiersJson[0].Multiplier = proto.String("x") }, "multiplier"},
		{"channel", func(s *snapshotv1.Snapshot) { s.Providers[0].ChannelType = "delta" }, `provider 1 ("a"): channel_type: must be one of`},
		{"base url", func(s *snapshotv1.Snapshot) { s.Providers[1].BaseUrl = "ftp://x" }, `provider 2 ("b"): base_url`},
		{"dup provider name", func(s *snapshotv1.Snapshot) { s.Providers[1].Name = "a" }, "duplicate name"},
		{"rule provider", func(s *snapshotv1.Snapshot) { s.RoutingRules[0].ProviderId = 99 }, `routing rule 1 ("generate_content/alpha_chat_completions"): provider_id: unknown provider 99`},
		{"rule kind", func(s *snapshotv1.Snapshot) { s.RoutingRules[0].Kind = "alpha" }, "does not fit"},
		{"rule op", func(s *snapshotv1.Snapshot) { s.RoutingRules[0].Operation = "fly" }, "unknown operation"},
		{"rule impl", func(s *snapshotv1.Snapshot) { s.RoutingRules[0].Implementation = "magic" }, "unknown implementation"},
		{"rule dest kind", func(s *snapshotv1.Snapshot) { s.RoutingRules[1].DestKind = proto.String("beta") }, "dest_kind"},
		{"rule dup", func(s *snapshotv1.Snapshot) {
			s.RoutingRules = append(s.RoutingRules, proto.Clone(s.RoutingRules[0]).(*configv1.RoutingRule))
		}, "duplicate (provider 1, operation, kind)"},
		{"member provider", func(s *snapshotv1.Snapshot) { s.Routes[0].Members[0].ProviderId = 42 }, `route 1 ("chat"): members[0].provider_id: unknown provider 42`},
		{"alias clash", func(s *snapshotv1.Snapshot) {
			s.Routes = append(s.Routes, &configv1.Route{Id: 2, Name: "chat-latest", Enabled: true})
		}, `route 2 ("chat-latest"): aliases: name or alias "chat-latest" already used by route 1`},
		{"key hash", func(s *snapshotv1.Snapshot) { s.ApiKeys[0].KeyHash = []byte{1} }, "api key 5"},
		{"quota scope", func(s *snapshotv1.Snapshot) { s.Quotas[0].Scope = "galaxy" }, "unknown scope"},
		{"quota period", func(s *snapshotv1.Snapshot) { s.Quotas[0].Period = "yearly" }, `quota 7 ("org"): period`},
		{"quota zone", func(s *snapshotv1.Snapshot) { s.Quotas[0].TimeZone = "Mars/Olympus" }, `quota 7 ("org"): time_zone`},
		{"quota limit", func(s *snapshotv1.Snapshot) { s.Quotas[0].CostLimit = proto.String("-1") }, `quota 7 ("org"): cost_limit`},
		{"provider name with slash", func(s *snapshotv1.Snapshot) { s.Providers[0].Name = "a/b" }, `provider 1 ("a/b"): name: must be non-empty and contain no '/'`},
		{"quota limit beyond int64 micros", func(s *snapshotv1.Snapshot) { s.Quotas[0].CostLimit = proto.String("9300000000000") }, `quota 7 ("org"): cost_limit`},
		{"quota limit beyond exact micros", func(s *snapshotv1.Snapshot) { s.Quotas[0].CostLimit = proto.String("9007199254.740992") }, "exceeds the largest carried amount"},
		{"price rule id beyond MaxID", func(s *snapshotv1.Snapshot) { s.PriceRules[0].Id = 1 << 53 }, "price rule 9007199254740992"},
		{"route id not positive", func(s *snapshotv1.Snapshot) { s.Routes[0].Id = 0 }, `route 0 ("chat"): id`},
		{"key tpm beyond JS-safe", func(s *snapshotv1.Snapshot) { s.ApiKeys[0].TpmLimit = 1 << 60 }, "tpm_limit"},
		{"quota dup", func(s *snapshotv1.Snapshot) { s.Quotas[1].Scope, s.Quotas[1].ScopeId = "org", 7 }, `quota 7 ("org"): duplicate`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSnapshot()
			tt.mutate(s)
			_, err := Compile(s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compile() error = %v, want containing %q", err, tt.want)
			}
		})
	}
}

// A compile failure names each offending row in a structured form (resource, id, field), for the admin
// endpoint and the console.
func TestCompileErrorNamesTheRow(t *testing.T) {
	s := validSnapshot()
	s.Providers[1].Name = "x/y"
	s.Quotas[0].CostLimit = proto.String("1e9")
	_, err := Compile(s)
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("Compile() = %v, want a *CompileError", err)
	}
	got := map[string]bool{}
	for _, p := range ce.Problems {
		got[fmt.Sprintf("%s/%d/%s", p.Resource, p.ID, p.Field)] = true
	}
	for _, want := range []string{"provider/2/name", "quota/7/cost_limit"} {
		if !got[want] {
			t.Errorf("problems %v do not name %s", got, want)
		}
	}
	if ce.Version != s.GetVersion() {
		t.Errorf("version %d, want %d", ce.Version, s.GetVersion())
	}
}

// cost_used is settlement's total, not configuration: an amount beyond what admission can carry (or
// negative, or unparseable) never fails the snapshot; it saturates so the scope is refused.
func TestCostUsedBeyondCarryingSaturates(t *testing.T) {
	for _, used := range []string{"112500000000000", "9999999999999999999999999999999999999", "1e99", "-5"} {
		s := validSnapshot()
		s.Quotas[0].CostUsed = used
		c, err := Compile(s)
		if err != nil {
			t.Fatalf("cost_used %q: Compile() = %v, want it to compile", used, err)
		}
		q, _ := c.Quota(vocab.ScopeOrg, 7)
		want := int64(pricing.MaxExactMicros)
		if used == "-5" {
			want = 0
		}
		if q.UsedMicros != want {
			t.Errorf("cost_used %q: UsedMicros = %d, want %d", used, q.UsedMicros, want)
		}
	}
}

func BenchmarkLookupKey(b *testing.B) {
	c, err := Compile(validSnapshot())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if c.LookupKey("tg-secret") == nil {
			b.Fatal("nil")
		}
	}
}

// The control plane's settlement bounds travel in the snapshot and reach every price rule, so the data
// plane's BuildRecord applies the operator's setting; unusable bounds fail the snapshot.
func TestSettlementBoundsTravelWithRules(t *testing.T) {
	s := validSnapshot()
	c, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bounds != pricing.DefaultBounds || c.ResolvePriceAt(1, "m-1", time.Now()).Bounds != pricing.DefaultBounds {
		t.Errorf("without settlement_bounds: %+v, want the defaults", c.Bounds)
	}
	s.SettlementBounds = &snapshotv1.SettlementBounds{MaxRequestTokens: 5000, MaxRequestCost: "2.5"}
	if c, err = Compile(s); err != nil {
		t.Fatal(err)
	}
	want := pricing.Bounds{MaxRequestTokens: 5000, MaxRequestCostMicros: 2_500_000}
	if c.Bounds != want || c.ResolvePriceAt(1, "m-1", time.Now()).Bounds != want {
		t.Errorf("bounds %+v, rule bounds %+v, want %+v", c.Bounds, c.ResolvePriceAt(1, "m-1", time.Now()).Bounds, want)
	}
	for _, bad := range []*snapshotv1.SettlementBounds{{MaxRequestTokens: 0, MaxRequestCost: "1"}, {MaxRequestTokens: 1, MaxRequestCost: "-1"},
		{MaxRequestTokens: 1, MaxRequestCost: "1e3"}, {MaxRequestTokens: 1, MaxRequestCost: "9007199255"}} {
		s.SettlementBounds = bad
		if _, err := Compile(s); err == nil || !strings.Contains(err.Error(), "settlement bounds") {
			t.Errorf("bounds %v: Compile() = %v, want a settlement bounds error", bad, err)
		}
	}
}

// TestCompileScheduledPriceRules: the scheduled versions a snapshot carries are compiled ahead of time and
// picked by the instant — before effective_at the current version, from it on the scheduled one (its price
// and its history version); a scheduled version may enable a rule the snapshot does not carry yet, or
// disable one. Prices stays the index of the rules as built.
func TestCompileScheduledPriceRules(t *testing.T) {
	T := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	s := validSnapshot()
	s.PriceRules[0].Version = 4
	later := proto.CloneOf(s.PriceRules[0])
	later.InputPrice, later.Version = "1.25", 5
	fresh := proto.CloneOf(s.PriceRules[0])
	fresh.Id, fresh.ModelMatch, fresh.Version = 9, "m-new", 2
	off := proto.CloneOf(s.PriceRules[0])
	off.Enabled, off.Version = false, 6
	s.ScheduledPriceRules = []*configv1.ScheduledPriceRule{
		{Id: 3, PriceRuleId: 1, EffectiveAt: timestamppb.New(T.Add(time.Hour)), Rule: off},
		{Id: 1, PriceRuleId: 1, EffectiveAt: timestamppb.New(T), Rule: later},
		{Id: 2, PriceRuleId: 9, EffectiveAt: timestamppb.New(T), Rule: fresh},
	}
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile = %v", err)
	}
	for _, tc := range []struct {
		model      string
		at         time.Time
		id, ver    int64
		inputPrice string
	}{
		{"m-1", T.Add(-time.Microsecond), 1, 4, "1"},
		{"m-1", T, 1, 5, "1.25"},
		{"m-new", T.Add(-time.Microsecond), 0, 0, ""},
		{"m-new", T, 9, 2, "1"},
		{"m-1", T.Add(time.Hour - time.Microsecond), 1, 5, "1.25"},
		{"m-1", T.Add(time.Hour), 0, 0, ""},
	} {
		r := c.ResolvePriceAt(1, tc.model, tc.at)
		var id, ver int64
		var in string
		if r != nil {
			id, ver, in = r.ID, r.Version, pricing.FormatDecimal(r.Prices[pricing.CatInput])
		}
		if id != tc.id || ver != tc.ver || in != tc.inputPrice {
			t.Errorf("%s at %v: rule %d version %d input %q, want %d %d %q", tc.model, tc.at, id, ver, in, tc.id, tc.ver, tc.inputPrice)
		}
	}
	if r := c.Prices.Resolve(1, "m-1"); r == nil || r.Version != 4 {
		t.Errorf("Prices (as built) resolves %+v, want version 4", r)
	}
	if got := c.PriceTimeline.Instants(); len(got) != 2 {
		t.Errorf("instants %v, want 2", got)
	}
}

func TestCompileScheduledPriceRulesInvalid(t *testing.T) {
	T := timestamppb.New(time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC))
	base := validSnapshot().PriceRules[0]
	with := func(f func(*configv1.PriceRule)) *configv1.PriceRule {
		r := proto.CloneOf(base)
		r.Version = 2
		f(r)
		return r
	}
	for _, tc := range []struct {
		name string
		sp   []*configv1.ScheduledPriceRule
		want string
	}{
		{"no rule", []*configv1.ScheduledPriceRule{{Id: 1, PriceRuleId: 1, EffectiveAt: T}}, "rule: required"},
		{"id mismatch", []*configv1.ScheduledPriceRule{{Id: 1, PriceRuleId: 2, EffectiveAt: T, Rule: with(func(*configv1.PriceRule) {})}}, "does not name the rule"},
		{"no instant", []*configv1.ScheduledPriceRule{{Id: 1, PriceRuleId: 1, Rule: with(func(*configv1.PriceRule) {})}}, "effective_at"},
		{"no version", []*configv1.ScheduledPriceRule{{Id: 1, PriceRuleId: 1, EffectiveAt: T, Rule: with(func(r *configv1.PriceRule) { r.Version = 0 })}}, "rule.version"},
		{"bad price", []*configv1.ScheduledPriceRule{{Id: 1, PriceRuleId: 1, EffectiveAt: T, Rule: with(func(r *configv1.PriceRule) { r.InputPrice = "1e3" })}}, "input_price"},
		{"two at one instant", []*configv1.ScheduledPriceRule{
			{Id: 1, PriceRuleId: 1, EffectiveAt: T, Rule: with(func(*configv1.PriceRule) {})},
			{Id: 2, PriceRuleId: 1, EffectiveAt: T, Rule: with(func(*configv1.PriceRule) {})}}, "a second scheduled version"},
	} {
		s := validSnapshot()
		s.ScheduledPriceRules = tc.sp
		_, err := Compile(s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Compile = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
