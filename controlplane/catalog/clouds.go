package catalog

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// channelTypeMap names, per format, the catalog providers that price a cloud channel type and the
// channel types whose Tollgate providers their entries are scoped to by default (docs/pricing.md,
// "Cloud providers"). The first type of each list is the cloud that triggers the default: without
// a provider of that type the catalog provider is imported as before (global, or as ProviderMap
// says). genai-prices' "google" is both the Gemini API and Vertex AI price list, so once a Vertex
// provider exists its entries are scoped to the gamma providers too (the Gemini API keeps its prices).
var channelTypeMap = map[string]map[string][]vocab.ChannelType{
	FormatGenAIPrices: {
		"aws":    {vocab.ChannelAWSBedrock},
		"google": {vocab.ChannelGCPVertex, vocab.ChannelGamma},
		"azure":  {vocab.ChannelAzureOpenAI},
	},
	FormatModelsDev: {
		"amazon-bedrock":          {vocab.ChannelAWSBedrock},
		"google-vertex":           {vocab.ChannelGCPVertex},
		"google-vertex-anthropic": {vocab.ChannelGCPVertex},
		"azure":                   {vocab.ChannelAzureOpenAI},
	},
}

// ChannelTypeMap returns the catalog providers of a format that are mapped by channel type, with
// their channel types (the first one triggers the mapping).
func ChannelTypeMap(format string) map[string][]vocab.ChannelType {
	out := map[string][]vocab.ChannelType{}
	for k, v := range channelTypeMap[format] {
		out[k] = append([]vocab.ChannelType(nil), v...)
	}
	return out
}

// target is one scope a catalog provider's entries are imported into.
type target struct {
	providerID int64             // 0: global
	channel    vocab.ChannelType // the provider's channel type ("" when global or unknown)
}

// targets returns the scopes of a catalog provider's entries: the explicit ProviderMap entry, else
// the providers of its channel types (when a provider of the triggering cloud type exists), else
// global, unless OnlyMapped.
func (c *collector) targets(provider string) []target {
	if id, ok := c.opt.ProviderMap[provider]; ok {
		return []target{{providerID: id, channel: c.opt.ProviderTypes[id]}}
	}
	if types := channelTypeMap[c.res.Format][provider]; len(types) > 0 {
		byType := map[vocab.ChannelType][]int64{}
		for id, ct := range c.opt.ProviderTypes {
			byType[ct] = append(byType[ct], id)
		}
		if len(byType[types[0]]) > 0 {
			var out []target
			for _, ct := range types {
				ids := byType[ct]
				sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
				for _, id := range ids {
					out = append(out, target{providerID: id, channel: ct})
				}
			}
			if c.res.ChannelTypeScopes == nil {
				c.res.ChannelTypeScopes = map[string][]int64{}
			}
			if _, done := c.res.ChannelTypeScopes[provider]; !done {
				for _, t := range out {
					c.res.ChannelTypeScopes[provider] = append(c.res.ChannelTypeScopes[provider], t.providerID)
				}
			}
			return out
		}
	}
	if c.opt.OnlyMapped {
		return nil
	}
	return []target{{}}
}

// entryIn names the rule of an entry (or clause) in one of several targets: "<entry> (provider <id>)".
func entryIn(entry string, t target, n int) string {
	if n <= 1 {
		return entry
	}
	return fmt.Sprintf("%s (provider %d)", entry, t.providerID)
}

// cloudMatch adapts a catalog match to the model ids a provider of channel type ct bills (the route's
// upstream model id). ok is false when the catalog's own match stands.
//
//   - aws_bedrock: a model is billed under its Bedrock id, which may carry a cross-region inference
//     prefix (us., eu., apac., global., …), a version suffix (-v1:0) or be the last segment of an
//     inference-profile ARN, so every catalog id is matched as contains: the longest contains rule wins,
//     so a catalog's "global.anthropic.claude-…" rule still beats its plain "anthropic.claude-…" one.
//   - gcp_vertex: Vertex ids are the model name with an optional "@version" or "-NNN" suffix, so a
//     starts_with clause is a contains one there; models.dev names a Vertex model without a version
//     "<model>@default", which Vertex calls "<model>".
//   - azure_openai and the first-party types: the catalog's match stands (Azure bills the deployment
//     name, which the operator chooses: docs/pricing.md).
func cloudMatch(ct vocab.ChannelType, op, value string) (mt pricing.MatchType, match, note string, ok bool) {
	switch {
	case ct == vocab.ChannelAWSBedrock && op == "contains":
		return pricing.MatchContains, value, "", true
	case ct == vocab.ChannelAWSBedrock && (op == "equals" || op == "exact" || op == "starts_with"):
		return pricing.MatchContains, value, fmt.Sprintf("%s %q imported as contains for an aws_bedrock provider (Bedrock ids carry cross-region prefixes, version suffixes and ARNs)", op, value), true
	case ct == vocab.ChannelGCPVertex && op == "starts_with":
		return pricing.MatchContains, value, fmt.Sprintf("starts_with %q imported as contains for a gcp_vertex provider (Vertex ids are the model name with an optional @version)", value), true
	case ct == vocab.ChannelGCPVertex && (op == "equals" || op == "exact") && strings.HasSuffix(value, "@default") && len(value) > len("@default"):
		m := strings.TrimSuffix(value, "@default")
		return pricing.MatchExact, m, fmt.Sprintf("%q imported as exact %q for a gcp_vertex provider (Vertex names the unversioned model without @default)", value, m), true
	}
	return "", "", "", false
}
