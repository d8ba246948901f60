package catalog

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// A Tollgate install with two Bedrock providers, one Vertex, one Azure and the first-party types.
var cloudTypes = map[int64]vocab.ChannelType{
	1: vocab.ChannelAlpha, 2: vocab.ChannelBeta, 3: vocab.ChannelGamma,
	10: vocab.ChannelAWSBedrock, 11: vocab.ChannelAWSBedrock, 20: vocab.ChannelGCPVertex, 30: vocab.ChannelAzureOpenAI,
}

// index builds the engine's index over a mapped catalog, as a data plane would after the apply.
func index(t *testing.T, res *Result) *pricing.Index {
	t.Helper()
	rules := make([]*pricing.Rule, 0, len(res.Rules))
	for i, r := range res.Rules {
		in := r.Rule
		in.ID = int64(i + 1)
		pr, err := pricing.ParseRule(in)
		if err != nil {
			t.Fatalf("%s: %v", r.EntryID, err)
		}
		rules = append(rules, pr)
	}
	return pricing.NewIndex(rules)
}

// billed prices 10,000 input, output, cache-read and cache-write (5m) tokens each of a model on a provider:
// a hundredth of the sum of the four prices per million (below every prompt tier of the catalog).
func billed(t *testing.T, x *pricing.Index, provider int64, model string) string {
	t.Helper()
	r := x.Resolve(provider, model)
	if r == nil {
		t.Errorf("provider %d model %q: no rule", provider, model)
		return ""
	}
	if r.ProviderID != provider {
		t.Errorf("provider %d model %q: resolved to a rule of provider %d (%s %q)", provider, model, r.ProviderID, r.MatchType, r.ModelMatch)
	}
	return pricing.FormatDecimal(pricing.QuoteFor(r, usage.Usage{Input: 10_000, Output: 10_000, CacheRead: 10_000, CacheCreation5m: 10_000}, "").Cost)
}

func TestGenAIPricesCloudProvidersByChannelType(t *testing.T) {
	res, err := ParseGenAIPrices(readGenAI(t), Options{At: at, ProviderTypes: cloudTypes})
	if err != nil {
		t.Fatal(err)
	}
	accounted(t, res, gpIDs(t, readGenAI(t)))
	x := index(t, res)
	for _, c := range []struct {
		provider int64
		model    string
		want     string // input + output + cache read + cache write, per the catalog entry named
	}{
		// aws regional.anthropic.claude-sonnet-4-5-20250929-v1:0: 3.3 + 16.5 + 0.33 + 4.125.
		{10, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "0.24255"},
		{11, "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "0.24255"},
		{10, "anthropic.claude-sonnet-4-5-20250929-v1:0", "0.24255"},
		{10, "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "0.24255"},
		// aws global.anthropic.claude-sonnet-4-5-20250929-v1:0: 3 + 15 + 0.3 + 3.75 (the global profile is cheaper).
		{10, "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "0.2205"},
		// aws regional.anthropic.claude-opus-4-6-v1:0 (5.5, 27.5, 0.55, 6.875) vs global (5, 25, 0.5, 6.25).
		{11, "apac.anthropic.claude-opus-4-6-v1:0", "0.40425"},
		{11, "global.anthropic.claude-opus-4-6-v1:0", "0.3675"},
		// aws amazon.nova-pro-v1:0: 0.8 + 3.2 + 0.2, cache write at the input price 0.8.
		{10, "amazon.nova-pro-v1:0", "0.05"},
		{10, "us.amazon.nova-pro-v1:0", "0.05"},
		// aws openai.gpt-5.4 (equals in the catalog): 2.75 + 16.5 + 0.275 + 2.75.
		{10, "us.openai.gpt-5.4", "0.22275"},
		// google claude-4-opus on Vertex (contains "claude-opus-4@"/"claude-opus-4-1"): 15 + 75 + 1.5 + 18.75.
		{20, "claude-opus-4@20250514", "1.1025"},
		{20, "claude-opus-4-1@20250805", "1.1025"},
		// google claude-3-5-sonnet: 3 + 15 + 0.3 + 3.75.
		{20, "claude-3-5-sonnet-v2@20241022", "0.2205"},
		// google gemini-2.5-pro (starts_with, contains on Vertex): 1.25 + 10 + 0.125 + 1.25.
		// google gemini-2.5-flash: 0.3 + 2.5 + 0.03 + 0.3.
		{20, "gemini-2.5-pro-preview-06-05", "0.12625"},
		{20, "gemini-2.5-flash", "0.0313"},
		// The Gemini API keeps its Gemini prices once Vertex takes the google entries.
		{3, "gemini-2.5-flash", "0.0313"},
		// azure o3-2025-04-16: 2 + 8 + 0.5 + 2 (deployments named after the model); text-embedding-3-large: 4 × 0.13.
		{30, "o3", "0.125"},
		{30, "text-embedding-3-large", "0.0052"},
	} {
		if got := billed(t, x, c.provider, c.model); got != c.want {
			t.Errorf("provider %d model %q: %s, want %s", c.provider, c.model, got, c.want)
		}
	}
	// The cloud catalogs are not global: Bedrock's regional Claude price does not reach beta traffic,
	// Azure's o3 not alpha traffic.
	for _, r := range res.Rules {
		prov := strings.SplitN(r.EntryID, "/", 2)[0]
		if (prov == "aws" || prov == "azure" || prov == "google") && r.Rule.ProviderID == nil {
			t.Errorf("%s imported as a global rule", r.EntryID)
		}
	}
	// One rule per Bedrock provider, named apart.
	ruleIn(t, res, 10, "contains", "us.anthropic.claude-sonnet-4-5-20250929")
	ruleIn(t, res, 11, "contains", "us.anthropic.claude-sonnet-4-5-20250929")
	names := map[string]bool{}
	for _, r := range res.Rules {
		if names[r.EntryID] {
			t.Errorf("entry id %s names two rules", r.EntryID)
		}
		names[r.EntryID] = true
	}
	if !names["aws/amazon.nova-pro-v1:0 (provider 10)"] || !names["aws/amazon.nova-pro-v1:0 (provider 11)"] {
		t.Error("aws/amazon.nova-pro-v1:0: want one entry per Bedrock provider")
	}
	if !names["azure/o1-mini#0"] {
		t.Error("azure/o1-mini#0: a single Azure provider keeps the entry id")
	}
}

// Without a provider of the cloud type, the catalog provider imports as before; an explicit
// ProviderMap entry wins over the channel-type default.
func TestGenAIPricesChannelTypeDefaultNeedsCloudAndYieldsToProviderMap(t *testing.T) {
	doc := readGenAI(t)
	plain, err := ParseGenAIPrices(doc, Options{At: at, ProviderTypes: map[int64]vocab.ChannelType{1: vocab.ChannelAlpha, 3: vocab.ChannelGamma}})
	if err != nil {
		t.Fatal(err)
	}
	rule(t, plain, "contains", "amazon.nova-pro")
	rule(t, plain, "exact", "gemini-2.5-flash")
	explicit, err := ParseGenAIPrices(doc, Options{At: at, ProviderTypes: cloudTypes, ProviderMap: map[string]int64{"aws": 11, "google": 3}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range explicit.Rules {
		if strings.HasPrefix(r.EntryID, "aws/") && *r.Rule.ProviderID != 11 {
			t.Errorf("%s scoped to provider %d, want 11 (provider_map)", r.EntryID, *r.Rule.ProviderID)
		}
		if strings.HasPrefix(r.EntryID, "google/") && *r.Rule.ProviderID != 3 {
			t.Errorf("%s scoped to provider %d, want 3 (provider_map)", r.EntryID, *r.Rule.ProviderID)
		}
	}
	// Mapped explicitly to a Bedrock provider, the ids are still matched as Bedrock bills them.
	ruleIn(t, explicit, 11, "contains", "openai.gpt-5.4")
	// only_mapped counts the channel-type default as a mapping.
	only, err := ParseGenAIPrices(doc, Options{At: at, ProviderTypes: cloudTypes, OnlyMapped: true})
	if err != nil {
		t.Fatal(err)
	}
	ruleIn(t, only, 30, "exact", "o3")
	skipped(t, only, "openai/gpt-4o", "not mapped")
}

// The shipped models.dev tree has no cloud providers (only anthropic, google, openai); its cloud
// provider ids are mapped the same way.
func TestModelsDevCloudProvidersByChannelType(t *testing.T) {
	files := map[string][]byte{
		"providers/amazon-bedrock/models/anthropic.claude-sonnet-4-20250514-v1:0.toml": []byte("[cost]\ninput = 3\noutput = 15\ncache_read = 0.3\ncache_write = 3.75\n"),
		"providers/google-vertex-anthropic/models/claude-sonnet-4@20250514.toml":       []byte("[cost]\ninput = 3\noutput = 15\ncache_read = 0.3\ncache_write = 3.75\n"),
		"providers/google-vertex-anthropic/models/claude-opus-4-6@default.toml":        []byte("[cost]\ninput = 5\noutput = 25\ncache_read = 0.5\ncache_write = 6.25\n"),
		"providers/azure/models/gpt-4o.toml":                                           []byte("[cost]\ninput = 2.5\noutput = 10\ncache_read = 1.25\n"),
	}
	res, err := ParseModelsDev(files, Options{At: at, ProviderTypes: cloudTypes})
	if err != nil {
		t.Fatal(err)
	}
	x := index(t, res)
	for _, c := range []struct {
		provider     int64
		model, wants string
	}{
		{10, "us.anthropic.claude-sonnet-4-20250514-v1:0", "0.2205"},
		{11, "anthropic.claude-sonnet-4-20250514-v1:0", "0.2205"},
		{20, "claude-sonnet-4@20250514", "0.2205"},
		// models.dev's "@default" file is Vertex's unversioned id: 5 + 25 + 0.5 + 6.25.
		{20, "claude-opus-4-6", "0.3675"},
		{30, "gpt-4o", "0.1625"},
	} {
		if got := billed(t, x, c.provider, c.model); got != c.wants {
			t.Errorf("provider %d model %q: %s, want %s", c.provider, c.model, got, c.wants)
		}
	}
}
