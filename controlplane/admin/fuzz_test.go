package admin

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// FuzzDecodePriceRule feeds arbitrary bodies through the REST decoding and validation of a price
// rule. It must never panic; a body it accepts must give a stored row that the pricing engine
// parses and whose JSON decodes back to the same row.
func FuzzDecodePriceRule(f *testing.F) {
	f.Add([]byte(`{"provider_id":null,"match_type":"exact","model_match":"m","input_price":"1.50","output_price":"2",` +
		`"cache_read_price":"0","cache_creation_5m_price":"0","cache_creation_30m_price":"0","cache_creation_1h_price":"0",` +
		`"image_output_price":"0","enabled":true,"pricing_tiers_json":[{"min_prompt_tokens":1000,"multiplier":"2"},` +
		`{"service_tier":"fast","output_price":"9.5"}]}`))
	f.Add([]byte(`{"id":7,"provider_id":3,"match_type":"contains","model_match":"x","input_price":"1e5"}`))
	f.Add([]byte(`{"input_price":1.5}`))
	f.Add([]byte(`{"pricing_tiers_json":{"a":1}}`))
	f.Add([]byte(`{"unknown":1}`))
	f.Add([]byte(`[`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var in PriceRuleInput
		if err := decodeStrict(body, &in); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("decodeStrict error %T is not *Error", err)
			}
			return
		}
		row, details := in.validate()
		if details != nil {
			if len(details) == 0 {
				t.Fatal("empty problem list")
			}
			return
		}
		if _, err := pricing.ParseRule(row.RuleInput); err != nil {
			t.Fatalf("accepted rule does not parse: %v", err)
		}
		if !json.Valid(row.PricingTiersJSON) || row.PricingTiersJSON[0] != '[' {
			t.Fatalf("stored tiers %q are not a JSON array", row.PricingTiersJSON)
		}
		out, err := json.Marshal(row)
		if err != nil {
			t.Fatalf("marshal accepted row: %v", err)
		}
		var back PriceRuleInput
		if err := decodeStrict(out, &back); err != nil {
			t.Fatalf("row JSON %s does not decode as input: %v", out, err)
		}
		if back.InputPrice != row.InputPrice || back.ModelMatch != row.ModelMatch || *back.Enabled != row.Enabled {
			t.Fatalf("round trip changed the rule: %+v vs %+v", back, row)
		}
	})
}

// FuzzDecodeAPIKeyPatch feeds arbitrary bodies through the REST decoding and validation of a key
// update. It must never panic; an accepted patch gives a key the snapshot compiler accepts, and a field
// the body leaves out is unchanged.
func FuzzDecodeAPIKeyPatch(f *testing.F) {
	f.Add([]byte(`{"name":"n","enabled":false,"allowed_models":["gpt-4o*","claude"],"rpm_limit":60,"tpm_limit":1000}`))
	f.Add([]byte(`{"expires_at":null}`))
	f.Add([]byte(`{"expires_at":"2030-01-02T03:04:05Z","allow_direct_addressing":true}`))
	f.Add([]byte(`{"allowed_models":["*****"]}`))
	f.Add([]byte(`{"allowed_models":null,"rpm_limit":-1}`))
	f.Add([]byte(`{"expires_at":"yesterday"}`))
	f.Add([]byte(`{"key_hash":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var p APIKeyPatch
		if err := decodeStrict(body, &p); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("decodeStrict error %T is not *Error", err)
			}
			return
		}
		exp := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
		base := store.APIKey{ID: 1, Name: "base", Enabled: true, AllowedModels: []string{"m"}, RPMLimit: 5, ExpiresAt: &exp}
		k, details := p.apply(base)
		if details != nil {
			return
		}
		if err := snapshot.CheckAPIKey(&configv1.ApiKey{Id: 1, KeyHash: make([]byte, sha256.Size), RpmLimit: k.RPMLimit,
			TpmLimit: k.TPMLimit, AllowedModels: k.AllowedModels}); err != nil {
			t.Fatalf("accepted patch gives a key the compiler refuses: %v", err)
		}
		var raw map[string]json.RawMessage
		if json.Unmarshal(body, &raw) == nil {
			has := func(name string) bool { // encoding/json matches keys case-insensitively
				for k := range raw {
					if strings.EqualFold(k, name) {
						return true
					}
				}
				return false
			}
			if !has("expires_at") && k.ExpiresAt != base.ExpiresAt {
				t.Fatal("expires_at changed without being in the body")
			}
			if !has("name") && k.Name != base.Name {
				t.Fatal("name changed without being in the body")
			}
		}
	})
}
