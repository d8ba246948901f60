package admin_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

// The gRPC twins plan, apply and read provenance like REST, with the same refusals.
func TestCatalogGRPC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, _ := b.grpcClient(t)
	ctx := withToken(bootstrapToken)
	pr, err := c.PlanPriceCatalog(ctx, &adminv1.PlanPriceCatalogRequest{Format: "genai-prices", Document: tinyV2})
	if err != nil {
		t.Fatal(err)
	}
	p := pr.GetPlan()
	if p.GetId() == "" || len(p.GetAdded()) != 3 || p.GetAdded()[1].GetRule().GetOutputPrice() != "4.25" || p.GetCreatedBy() != "bootstrap" {
		t.Fatalf("plan %v", p)
	}
	if b.countRules(t) != 0 {
		t.Fatal("plan wrote rules")
	}
	ar, err := c.ApplyPriceCatalog(ctx, &adminv1.ApplyPriceCatalogRequest{PlanId: p.GetId(), Exclude: []string{"acme/m3"}})
	if err != nil {
		t.Fatal(err)
	}
	if ar.GetAdded() != 2 || ar.GetExcluded() != 1 || b.countRules(t) != 2 {
		t.Fatalf("apply %v, %d rules", ar, b.countRules(t))
	}
	m1 := b.ruleByMatch(t, nil, "exact", "m1")
	// A viewer reads provenance but may not plan.
	var tok struct {
		Token string `json:"token"`
	}
	b.must(t, 201, "POST", "/admin/admin-tokens", map[string]any{"name": "ro", "role": "viewer"}, &tok)
	prov, err := c.GetPriceRuleProvenance(withToken(tok.Token), &adminv1.GetPriceRuleProvenanceRequest{PriceRuleId: m1.ID})
	if err != nil {
		t.Fatal(err)
	}
	if pv := prov.GetProvenance(); pv.GetEntryId() != "acme/m1" || pv.GetPlanId() != p.GetId() || pv.GetCatalog() != "genai-prices" {
		t.Errorf("provenance %v", pv)
	}
	if _, err := c.PlanPriceCatalog(withToken(tok.Token), &adminv1.PlanPriceCatalogRequest{Format: "genai-prices", Document: tinyV1}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("viewer plan: %v, want PermissionDenied", err)
	}
	if _, err := c.ApplyPriceCatalog(ctx, &adminv1.ApplyPriceCatalogRequest{PlanId: p.GetId()}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("second apply: %v, want AlreadyExists (conflict)", err)
	}
	if _, err := c.PlanPriceCatalog(ctx, &adminv1.PlanPriceCatalogRequest{Format: "csv"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad format: %v, want InvalidArgument", err)
	} else if f := fieldViolations(err); len(f) == 0 || f[0] != "format" {
		t.Errorf("bad format violations %v", f)
	}
	if _, err := c.GetPriceRuleProvenance(ctx, &adminv1.GetPriceRuleProvenanceRequest{PriceRuleId: 424242}); status.Code(err) != codes.NotFound {
		t.Errorf("provenance of a missing rule: %v, want NotFound", err)
	}
}
