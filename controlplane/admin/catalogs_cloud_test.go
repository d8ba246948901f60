package admin_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

// The real genai-prices file with two Bedrock providers, a Vertex, an Azure and a gamma provider:
// the plan scopes aws to both Bedrock providers, google to Vertex and gamma, azure to Azure, the apply
// stores those provider-scoped rules with the catalog's exact prices and provenance, a re-plan finds
// nothing to do, and an explicit provider_map entry replaces the default.
func TestCatalogCloudProvidersMappedByChannelType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br1 := b.provider(t, "bedrock-us", "aws_bedrock")
	br2 := b.provider(t, "bedrock-eu", "aws_bedrock")
	vx := b.provider(t, "vertex", "gcp_vertex")
	az := b.provider(t, "azure", "azure_openai")
	gm := b.provider(t, "gemini", "gamma")
	req := map[string]any{"format": "genai-prices", "document": genaiDoc(t), "at": "2026-08-01T00:00:00Z"}
	p := b.plan(t, req)
	want := map[string][]int64{"aws": {br1, br2}, "google": {vx, gm}, "azure": {az}}
	if !reflect.DeepEqual(p.ChannelTypeScopes, want) {
		t.Errorf("channel_type_scopes %v, want %v", p.ChannelTypeScopes, want)
	}
	for _, a := range p.Added {
		if a.Rule.ProviderID == nil && (strings.HasPrefix(a.EntryID, "aws/") || strings.HasPrefix(a.EntryID, "azure/") || strings.HasPrefix(a.EntryID, "google/")) {
			t.Errorf("%s planned as a global rule", a.EntryID)
		}
	}
	var res admin.CatalogApplyResult
	b.must(t, http.StatusOK, "POST", "/admin/price-catalogs/apply", map[string]any{"plan_id": p.ID}, &res)
	if res.Added != len(p.Added) {
		t.Fatalf("apply added %d, want %d", res.Added, len(p.Added))
	}
	for _, c := range []struct {
		provider             int64
		mt, match            string
		in, out, read, write string
	}{
		// aws regional.anthropic.claude-sonnet-4-5-20250929-v1:0 and its global profile.
		{br1, "contains", "us.anthropic.claude-sonnet-4-5-20250929", "3.3", "16.5", "0.33", "4.125"},
		{br2, "contains", "us.anthropic.claude-sonnet-4-5-20250929", "3.3", "16.5", "0.33", "4.125"},
		{br2, "contains", "global.anthropic.claude-sonnet-4-5-20250929", "3", "15", "0.3", "3.75"},
		// aws amazon.nova-pro-v1:0 (no cache write in the catalog: the input price stands in).
		{br1, "contains", "amazon.nova-pro", "0.8", "3.2", "0.2", "0.8"},
		// google claude-4-opus on Vertex: the @version clause.
		{vx, "contains", "claude-opus-4@", "15", "75", "1.5", "18.75"},
		{gm, "exact", "gemini-2.5-flash", "0.3", "2.5", "0.03", "0.3"},
		{az, "exact", "o3-2025-04-16", "2", "8", "0.5", "2"},
	} {
		pid := c.provider
		r := b.ruleByMatch(t, &pid, c.mt, c.match)
		if got := [4]string{r.InputPrice, r.OutputPrice, r.CacheReadPrice, r.CacheCreation5mPrice}; got != [4]string{c.in, c.out, c.read, c.write} {
			t.Errorf("provider %d %s %q: prices %v, want %v", c.provider, c.mt, c.match, got, [4]string{c.in, c.out, c.read, c.write})
		}
	}
	pid := br2
	nova := b.ruleByMatch(t, &pid, "contains", "amazon.nova-pro")
	var prov store.Provenance
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/price-rules/%d/provenance", nova.ID), nil, &prov)
	if prov.EntryID != fmt.Sprintf("aws/amazon.nova-pro-v1:0 (provider %d)", br2) {
		t.Errorf("provenance entry %q", prov.EntryID)
	}
	again := b.plan(t, req)
	if len(again.Added) != 0 || len(again.Changed) != 0 || len(again.Unchanged) != len(p.Added) {
		t.Errorf("re-plan: added %d changed %d unchanged %d, want 0 0 %d", len(again.Added), len(again.Changed), len(again.Unchanged), len(p.Added))
	}
	// The gRPC plan names the same scopes.
	c, _ := b.grpcClient(t)
	gp, err := c.PlanPriceCatalog(withToken(bootstrapToken), &adminv1.PlanPriceCatalogRequest{Format: "genai-prices", Document: genaiDoc(t)})
	if err != nil {
		t.Fatal(err)
	}
	for name, ids := range want {
		if got := gp.GetPlan().GetChannelTypeScopes()[name].GetProviderIds(); !reflect.DeepEqual(got, ids) {
			t.Errorf("gRPC channel_type_scopes[%s] = %v, want %v", name, got, ids)
		}
	}
	// provider_map names aws explicitly: only that provider, and the default no longer lists aws.
	req["provider_map"] = map[string]int64{"aws": br1}
	explicit := b.plan(t, req)
	if _, ok := explicit.ChannelTypeScopes["aws"]; ok {
		t.Errorf("channel_type_scopes %v: aws is mapped by provider_map", explicit.ChannelTypeScopes)
	}
	for _, a := range explicit.Added {
		if strings.HasPrefix(a.EntryID, "aws/") {
			t.Errorf("%s added although every aws rule of provider %d exists", a.EntryID, br1)
		}
	}
}
