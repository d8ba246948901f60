package admin

import (
	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// Admin writes are validated with the snapshot compiler's own per-element checks (shared/snapshot
// Check*), on the element as the snapshot will carry it, so a write the API accepts cannot make the next
// snapshot fail to compile (docs/admin-api.md, "Validation"). Cross-row rules (references, unique names
// and aliases) are the database's constraints.

// serverID stands for an id the database will assign: sequences stay far below snapshot.MaxID, so a
// create is checked as if it had a valid id.
const serverID = 1

// orServerID is id, or serverID when the server assigns it (0).
func orServerID(id int64) int64 {
	if id == 0 {
		return serverID
	}
	return id
}

// elementDetails turns the compiler's element problems into field details.
func elementDetails(err error) []Detail {
	var out []Detail
	for _, p := range snapshot.Problems(err) {
		out = append(out, Detail{Field: p.Field, Message: p.Message})
	}
	if err != nil && out == nil {
		out = []Detail{{Message: err.Error()}}
	}
	return out
}

// idDetails checks a client-chosen id (0: the server assigns it) against snapshot.MaxClientID, which keeps
// the table's id sequence (moved past the largest id written) far from snapshot.MaxID and int64.
func idDetails(name string, id int64) []Detail {
	if id < 0 || id > snapshot.MaxClientID {
		return []Detail{field(name, "must be an integer from 1 to %d, got %d", int64(snapshot.MaxClientID), id)}
	}
	return nil
}

// checkProviderMessage runs the compiler's provider check on the provider as it will be stored.
func checkProviderMessage(id int64, name, channel, baseURL string, settings []byte, enabled bool) []Detail {
	_, err := snapshot.CheckProvider(&configv1.Provider{Id: orServerID(id), Name: name, ChannelType: channel,
		BaseUrl: baseURL, SettingsJson: string(settings), Enabled: enabled})
	return elementDetails(err)
}

// checkPriceRuleMessage runs the compiler's price-rule check on the rule as store.ReadSnapshot will carry
// it (tiers through store.DecodeTierEntries).
func checkPriceRuleMessage(ri pricing.RuleInput) []Detail {
	tiers, err := store.DecodeTierEntries(ri.PricingTiersJSON)
	if err != nil {
		return []Detail{field("pricing_tiers_json", "%v", err)}
	}
	m := &configv1.PriceRule{Id: orServerID(ri.ID), ProviderId: ri.ProviderID, MatchType: ri.MatchType, ModelMatch: ri.ModelMatch,
		InputPrice: ri.InputPrice, OutputPrice: ri.OutputPrice, CacheReadPrice: ri.CacheReadPrice,
		CacheCreation_5MPrice: ri.CacheCreation5mPrice, CacheCreation_30MPrice: ri.CacheCreation30mPrice,
		CacheCreation_1HPrice: ri.CacheCreation1hPrice, ImageOutputPrice: ri.ImageOutputPrice,
		Enabled: true, PricingTiersJson: tiers}
	_, err = snapshot.CheckPriceRule(m)
	return elementDetails(err)
}
