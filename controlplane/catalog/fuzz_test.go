package catalog

import (
	"testing"

	"github.com/tollgate/tollgate/shared/pricing"
)

// Every rule a parser hands over must pass the engine's validation, whatever the input.
func checkRules(t *testing.T, res *Result) {
	for _, r := range res.Rules {
		if _, err := pricing.ParseRule(r.Rule); err != nil {
			t.Fatalf("%s: mapped rule refused by the engine: %v", r.EntryID, err)
		}
	}
}

func FuzzParseGenAIPrices(f *testing.F) {
	f.Add([]byte(`[{"id":"p","models":[{"id":"m","match":{"or":[{"equals":"m"},{"starts_with":"m-"}]},"prices":{"input_mtok":{"base":1,"tiers":[{"start":200000,"price":2}]},"output_mtok":2.5e-06}}]}]`), true)
	f.Add([]byte(`[{"id":"p","models":[{"id":"m","match":{"contains":"x"},"prices":[{"prices":{"input_mtok":1}},{"constraint":{"start_date":"2025-01-01"},"prices":{"input_mtok":2,"cache_write_mtok":3}}]}]}]`), false)
	f.Add([]byte(`[{"id":"p","models":[{"id":"m","match":{"equals":"m"},"prices":[{"constraint":{"start_time":"00:00:00Z","end_time":"01:00:00Z"},"prices":{}}]}]}]`), false)
	f.Add([]byte(`[]`), false)
	f.Fuzz(func(t *testing.T, doc []byte, sw bool) {
		res, err := ParseGenAIPrices(doc, Options{StartsWithAsContains: sw, ProviderMap: map[string]int64{"p": 3}})
		if err != nil {
			return
		}
		checkRules(t, res)
	})
}

func FuzzParseModelsDev(f *testing.F) {
	f.Add("a/models/m.toml", []byte("[cost]\ninput = 1.25\noutput = 10\n[[cost.tiers]]\ntier = { size = 200_000 }\ninput = 2.5\n[experimental.modes.fast]\ncost = { input = 5e0 }\n"))
	f.Add("providers/a/models/x/y.toml", []byte("base_model = \"x\"\n"))
	f.Add("a/models/m.toml", []byte("[cost]\ninput = inf\n"))
	f.Fuzz(func(t *testing.T, path string, text []byte) {
		res, err := ParseModelsDev(map[string][]byte{path: text}, Options{})
		if err != nil {
			return
		}
		checkRules(t, res)
	})
}
