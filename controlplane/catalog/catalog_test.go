package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/usage"
)

// catalogsDir is ../shared/catalogs beside the repository; missing catalogs fail the test.
func catalogsDir(t testing.TB) string {
	t.Helper()
	return filepath.Dir(filepath.Dir(testkit.Shared(t, "catalogs", "genai-prices", "data.json")))
}

func readGenAI(t testing.TB) []byte {
	b, err := os.ReadFile(filepath.Join(catalogsDir(t), "genai-prices", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readModelsDev(t testing.TB) map[string][]byte {
	files, err := ReadTree(filepath.Join(catalogsDir(t), "models.dev"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var at = time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)

// baseEntry strips the clause ("#n") and provider (" (provider n)") parts of an entry id.
func baseEntry(id string) string {
	id, _, _ = strings.Cut(id, " (provider ")
	id, _, _ = strings.Cut(id, "#")
	return id
}

// accounted checks that every entry id of the catalog is either mapped or skipped with a reason.
func accounted(t *testing.T, res *Result, ids []string) {
	t.Helper()
	covered := map[string]bool{}
	for _, r := range res.Rules {
		covered[baseEntry(r.EntryID)] = true
		if _, err := pricing.ParseRule(r.Rule); err != nil {
			t.Errorf("%s: the engine refuses the mapped rule: %v", r.EntryID, err)
		}
	}
	for _, s := range res.Skipped {
		covered[baseEntry(s.EntryID)] = true
		if s.Reason == "" {
			t.Errorf("%s skipped without a reason", s.EntryID)
		}
	}
	for _, id := range ids {
		if !covered[id] {
			t.Errorf("entry %s neither imported nor reported", id)
		}
	}
	if res.Entries != len(ids) {
		t.Errorf("Entries = %d, want %d", res.Entries, len(ids))
	}
}

// gpIDs lists the entry ids of a genai-prices document.
func gpIDs(t *testing.T, doc []byte) []string {
	t.Helper()
	var providers []struct {
		ID     string `json:"id"`
		Models []struct {
			ID string `json:"id"`
		} `json:"models"`
	}
	if err := json.Unmarshal(doc, &providers); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range providers {
		for _, m := range p.Models {
			ids = append(ids, p.ID+"/"+m.ID)
		}
	}
	return ids
}

func TestGenAIPricesShippedCatalogEveryEntryAccounted(t *testing.T) {
	doc := readGenAI(t)
	ids := gpIDs(t, doc)
	for _, opt := range []Options{{At: at}, {At: at, StartsWithAsContains: true}} {
		res, err := ParseGenAIPrices(doc, opt)
		if err != nil {
			t.Fatal(err)
		}
		accounted(t, res, ids)
		if len(res.Rules) < 1000 {
			t.Errorf("only %d rules mapped from %d entries", len(res.Rules), res.Entries)
		}
		t.Logf("starts_with_as_contains=%v: %d entries → %d rules, %d skipped", opt.StartsWithAsContains, res.Entries, len(res.Rules), len(res.Skipped))
	}
}

func TestModelsDevShippedCatalogEveryEntryAccounted(t *testing.T) {
	files := readModelsDev(t)
	var ids []string
	for p := range files {
		if prov, model, ok := mdSplit(p); ok && strings.HasSuffix(p, ".toml") {
			ids = append(ids, prov+"/"+model)
		}
	}
	if len(ids) < 90 {
		t.Fatalf("only %d model files found", len(ids))
	}
	res, err := ParseModelsDev(files, Options{At: at})
	if err != nil {
		t.Fatal(err)
	}
	accounted(t, res, ids)
	if len(res.Rules) < 90 {
		t.Errorf("only %d rules from %d entries; skipped: %v", len(res.Rules), res.Entries, res.Skipped)
	}
}

// rule finds the mapped rule of a key.
func rule(t *testing.T, res *Result, mt, match string) pricing.RuleInput {
	t.Helper()
	return ruleIn(t, res, 0, mt, match)
}

// ruleIn finds the mapped rule of a key in a provider's scope (0: global).
func ruleIn(t *testing.T, res *Result, provider int64, mt, match string) pricing.RuleInput {
	t.Helper()
	for _, r := range res.Rules {
		if k := KeyOf(r.Rule); k == (Key{provider, mt, match}) {
			return r.Rule
		}
	}
	t.Fatalf("no %s rule for %q in provider %d", mt, match, provider)
	return pricing.RuleInput{}
}

func skipped(t *testing.T, res *Result, entry, reasonPart string) {
	t.Helper()
	for _, s := range res.Skipped {
		if s.EntryID == entry {
			if !strings.Contains(s.Reason, reasonPart) {
				t.Errorf("%s skipped for %q, want a reason with %q", entry, s.Reason, reasonPart)
			}
			return
		}
	}
	t.Errorf("%s not skipped", entry)
}

// cost prices a usage with the engine, at a service tier.
func cost(t *testing.T, in pricing.RuleInput, u usage.Usage, tier string) string {
	t.Helper()
	r, err := pricing.ParseRule(in)
	if err != nil {
		t.Fatal(err)
	}
	return pricing.FormatDecimal(pricing.QuoteFor(r, u, tier).Cost)
}

type want struct{ in, out, cacheRead, cache5m string }

func checkPrices(t *testing.T, name string, r pricing.RuleInput, w want) {
	t.Helper()
	got := want{r.InputPrice, r.OutputPrice, r.CacheReadPrice, r.CacheCreation5mPrice}
	if got != w {
		t.Errorf("%s: prices %+v, want %+v", name, got, w)
	}
}

// Published prices (USD per million tokens) of well-known models, checked against the mapping of
// the shipped files.
var gpMap = map[string]int64{"openai": 1, "anthropic": 2, "google": 3}

func TestGenAIPricesSpotChecks(t *testing.T) {
	res, err := ParseGenAIPrices(readGenAI(t), Options{At: at, StartsWithAsContains: true, ProviderMap: gpMap})
	if err != nil {
		t.Fatal(err)
	}
	checkPrices(t, "gpt-4o", ruleIn(t, res, 1, "exact", "gpt-4o"), want{"2.5", "10", "1.25", "2.5"})
	checkPrices(t, "gpt-4o-2024-08-06", ruleIn(t, res, 1, "exact", "gpt-4o-2024-08-06"), want{"2.5", "10", "1.25", "2.5"})
	checkPrices(t, "gpt-4o-mini", ruleIn(t, res, 1, "exact", "gpt-4o-mini"), want{"0.15", "0.6", "0.075", "0.15"})
	checkPrices(t, "gpt-4.1", ruleIn(t, res, 1, "exact", "gpt-4.1"), want{"2", "8", "0.5", "2"})
	checkPrices(t, "gpt-5", ruleIn(t, res, 1, "exact", "gpt-5"), want{"1.25", "10", "0.125", "1.25"})
	// o3's price cut of 2025-06-10 is in force at `at`.
	checkPrices(t, "o3", ruleIn(t, res, 1, "exact", "o3"), want{"2", "8", "0.5", "2"})
	emb := ruleIn(t, res, 1, "exact", "text-embedding-3-small")
	checkPrices(t, "text-embedding-3-small", emb, want{"0.02", "0.02", "0.02", "0.02"})
	checkPrices(t, "claude-3-5-sonnet", ruleIn(t, res, 2, "contains", "claude-3-5-sonnet"), want{"3", "15", "0.3", "3.75"})
	checkPrices(t, "claude-3-haiku", ruleIn(t, res, 2, "contains", "claude-3-haiku"), want{"0.25", "1.25", "0.03", "0.3"})
	checkPrices(t, "claude-opus-4", ruleIn(t, res, 2, "exact", "claude-opus-4"), want{"15", "75", "1.5", "18.75"})
	checkPrices(t, "gemini-2.5-flash", ruleIn(t, res, 3, "exact", "gemini-2.5-flash"), want{"0.3", "2.5", "0.03", "0.3"})
	pro := ruleIn(t, res, 3, "contains", "gemini-2.5-pro")
	checkPrices(t, "gemini-2.5-pro", pro, want{"1.25", "10", "0.125", "1.25"})
	// Long context: all tokens at the tier price once the prompt exceeds 200,000 tokens.
	if got := cost(t, pro, usage.Usage{Input: 200_000, Output: 1_000_000}, ""); got != "10.25" {
		t.Errorf("gemini-2.5-pro at 200,000 prompt tokens: %s, want 10.25 (base)", got)
	}
	if got := cost(t, pro, usage.Usage{Input: 200_001, Output: 1_000_000}, ""); got != "15.5000025" {
		t.Errorf("gemini-2.5-pro at 200,001 prompt tokens: %s, want 15.5000025 (tier)", got)
	}
	// Time-of-day prices and per-request prices cannot be expressed: refused with the reason.
	skipped(t, res, "deepseek/deepseek-chat", "time of day")
	skipped(t, res, "perplexity/sonar", "requests_kcount")
	// Without the option, starts_with is refused, equals clauses of the same entry still import.
	strict, err := ParseGenAIPrices(readGenAI(t), Options{At: at, ProviderMap: gpMap})
	if err != nil {
		t.Fatal(err)
	}
	skipped(t, strict, "anthropic/claude-3-haiku", "starts_with")
	ruleIn(t, strict, 2, "exact", "claude-opus-4-20250514")
}

// alpha's cache writes are 30-minute writes (shared/usage), and an alpha model's cache_write_mtok is that
// 30-minute price (1.25× input): the stand-in rule carries it to cache_creation_30m_price at the base and
// in every prompt tier, so the writes cost what the catalog says on either side of a threshold.
func TestGenAIPricesAlphaCacheWriteIn30mTiers(t *testing.T) {
	res, err := ParseGenAIPrices(readGenAI(t), Options{At: at, ProviderMap: gpMap})
	if err != nil {
		t.Fatal(err)
	}
	sol := ruleIn(t, res, 1, "exact", "gpt-5.6-sol")
	if sol.CacheCreation30mPrice != "6.25" {
		t.Errorf("gpt-5.6-sol cache_creation_30m_price %s, want 6.25 (the catalog's cache write)", sol.CacheCreation30mPrice)
	}
	// 100,000 written tokens: below the 272,000-token threshold at 6.25, above it (with 200,000 input
	// tokens) at the tier's 12.5, beside input at its tier price 10.
	if got := cost(t, sol, usage.Usage{CacheCreation30m: 100_000}, ""); got != "0.625" {
		t.Errorf("gpt-5.6-sol 100,000 30m writes: %s, want 0.625", got)
	}
	if got := cost(t, sol, usage.Usage{Input: 200_000, CacheCreation30m: 100_000}, ""); got != "3.25" {
		t.Errorf("gpt-5.6-sol 200,000 input + 100,000 30m writes: %s, want 3.25 (tier prices)", got)
	}
}

func TestGenAIPricesConditionalByDate(t *testing.T) {
	doc := readGenAI(t)
	before, err := ParseGenAIPrices(doc, Options{At: time.Date(2025, 6, 9, 0, 0, 0, 0, time.UTC), ProviderMap: gpMap})
	if err != nil {
		t.Fatal(err)
	}
	checkPrices(t, "o3 before the cut", ruleIn(t, before, 1, "exact", "o3"), want{"10", "40", "0.5", "10"})
}

func TestModelsDevSpotChecks(t *testing.T) {
	res, err := ParseModelsDev(readModelsDev(t), Options{At: at, ProviderMap: map[string]int64{"anthropic": 7}})
	if err != nil {
		t.Fatal(err)
	}
	opus := ruleIn(t, res, 7, "exact", "claude-opus-4-6")
	if opus.ProviderID == nil || *opus.ProviderID != 7 {
		t.Errorf("mapped provider: provider_id %v, want 7", opus.ProviderID)
	}
	checkPrices(t, "claude-opus-4-6", opus, want{"5", "25", "0.5", "6.25"})
	// Fast mode is the priority service tier (beta's speed "fast" normalises to it).
	if got := cost(t, opus, usage.Usage{Input: 1_000_000}, "fast"); got != "30" {
		t.Errorf("claude-opus-4-6 fast input: %s, want 30", got)
	}
	gpt := rule(t, res, "exact", "gpt-5.4")
	if gpt.ProviderID != nil {
		t.Errorf("unmapped provider: provider_id %v, want global", *gpt.ProviderID)
	}
	checkPrices(t, "gpt-5.4", gpt, want{"2.5", "15", "0.25", "2.5"})
	if got := cost(t, gpt, usage.Usage{Input: 272_001}, ""); got != "1.360005" {
		t.Errorf("gpt-5.4 long context: %s, want 1.360005", got)
	}
	checkPrices(t, "gemini-2.5-flash-image", rule(t, res, "exact", "gemini-2.5-flash-image"), want{"0.3", "30", "0.075", "0.3"})
	if r := rule(t, res, "exact", "gemini-2.5-flash-image"); r.ImageOutputPrice != "30" {
		t.Errorf("image output price %s, want the output price 30", r.ImageOutputPrice)
	}
	skipped(t, res, "openai/gpt-image-1", "base_model")
}

func TestExactDecimalsNeverFloats(t *testing.T) {
	doc := `[{"id":"p","models":[{"id":"m","match":{"equals":"m"},"prices":{"input_mtok":2.5e-06,"output_mtok":0.075,"cache_read_mtok":1E+1,"cache_write_mtok":0.123456789012345678901234}}]}]`
	res, err := ParseGenAIPrices([]byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rules) != 1 {
		t.Fatalf("rules %v, skipped %v", res.Rules, res.Skipped)
	}
	checkPrices(t, "m", res.Rules[0].Rule, want{"0.0000025", "0.075", "10", "0.123456789012345678901234"})
	toml := map[string][]byte{"x/models/m.toml": []byte("[cost]\ninput = 2.5e-06\noutput = 0.075\ncache_read = 1_000.5\n")}
	md, err := ParseModelsDev(toml, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Rules) != 1 {
		t.Fatalf("rules %v, skipped %v", md.Rules, md.Skipped)
	}
	checkPrices(t, "m", md.Rules[0].Rule, want{"0.0000025", "0.075", "1000.5", "0.0000025"})
}

func TestBadEntriesReported(t *testing.T) {
	doc := `[{"id":"p","models":[
		{"id":"neg","match":{"equals":"a"},"prices":{"input_mtok":-1}},
		{"id":"nan","match":{"equals":"b"},"prices":{"input_mtok":"NaN"}},
		{"id":"rx","match":{"regex":"^x"},"prices":{"input_mtok":1}},
		{"id":"and","match":{"and":[{"contains":"a"},{"contains":"b"}]},"prices":{"input_mtok":1}},
		{"id":"noin","match":{"equals":"c"},"prices":{"output_mtok":1}},
		{"id":"unk","match":{"equals":"d"},"prices":{"input_mtok":1,"per_image":3}},
		{"id":"dup","match":{"equals":"e"},"prices":{"input_mtok":1}},
		{"id":"dup2","match":{"equals":"e"},"prices":{"input_mtok":2}},
		{"id":"huge","match":{"equals":"f"},"prices":{"input_mtok":1e300}},
		{"id":"badtier","match":{"equals":"g"},"prices":{"input_mtok":{"base":1,"tiers":[{"start":-5,"price":2}]}}}
	]}]`
	res, err := ParseGenAIPrices([]byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rules) != 1 || res.Rules[0].EntryID != "p/dup" {
		t.Errorf("rules %+v, want only p/dup", res.Rules)
	}
	for id, reason := range map[string]string{"p/neg": "negative", "p/nan": "input_mtok", "p/rx": "regex", "p/and": "and",
		"p/noin": "no input price", "p/unk": "per_image", "p/dup2": "p/dup", "p/huge": "input_mtok", "p/badtier": "start"} {
		skipped(t, res, id, reason)
	}
	if _, err := ParseGenAIPrices([]byte(`{"not":"an array"}`), Options{}); err == nil {
		t.Error("a document that is not an array must be refused")
	}
}
