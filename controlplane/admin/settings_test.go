package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func TestCostDisclosureReachesTheSnapshot(t *testing.T) {
	b := setup(t)
	_, _, user := b.tenants(t, "acme")
	follow := b.newKey(t, user, "follow")
	var hidden, shown struct {
		keyJSON
		CostDisclosure *bool `json:"cost_disclosure"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/api-keys", map[string]any{"user_id": user, "name": "reseller", "cost_disclosure": false}, &hidden)
	b.must(t, http.StatusCreated, "POST", "/admin/api-keys", map[string]any{"user_id": user, "name": "shown", "cost_disclosure": true}, &shown)
	if hidden.CostDisclosure == nil || *hidden.CostDisclosure || shown.CostDisclosure == nil || !*shown.CostDisclosure {
		t.Fatalf("created keys' cost_disclosure = %v, %v, want false, true", hidden.CostDisclosure, shown.CostDisclosure)
	}

	// Defaults: on for the gateway, so for every key without its own switch.
	var gs struct {
		CostDisclosure bool `json:"cost_disclosure"`
	}
	b.must(t, http.StatusOK, "GET", "/admin/settings", nil, &gs)
	if !gs.CostDisclosure {
		t.Fatal("default gateway settings: cost_disclosure off, want on")
	}
	discloses := func(want map[string]bool) {
		t.Helper()
		c := b.compiled(t)
		for name, key := range map[string]string{"follow": follow.Key, "hidden": hidden.Key, "shown": shown.Key} {
			if got := c.DisclosesCost(c.LookupKey(key)); got != want[name] {
				t.Errorf("DisclosesCost(%s) = %v, want %v", name, got, want[name])
			}
		}
	}
	discloses(map[string]bool{"follow": true, "hidden": false, "shown": true})

	// The gateway's switch off: only the key that says so still sees costs. An empty PUT changes nothing
	// and bumps no revision.
	rev := b.revision(t)
	b.must(t, http.StatusOK, "PUT", "/admin/settings", map[string]any{}, &gs)
	if !gs.CostDisclosure || b.revision(t) != rev {
		t.Fatalf("empty PUT: cost_disclosure %v, revision %d → %d", gs.CostDisclosure, rev, b.revision(t))
	}
	b.must(t, http.StatusOK, "PUT", "/admin/settings", map[string]any{"cost_disclosure": false}, &gs)
	if gs.CostDisclosure || b.revision(t) <= rev {
		t.Fatalf("PUT off: cost_disclosure %v, revision %d → %d", gs.CostDisclosure, rev, b.revision(t))
	}
	discloses(map[string]bool{"follow": false, "hidden": false, "shown": true})

	// A key's switch: set, then cleared (null) to follow the gateway again; absent leaves it alone.
	path := fmt.Sprintf("/admin/api-keys/%d", follow.ID)
	var patched struct {
		CostDisclosure *bool `json:"cost_disclosure"`
	}
	b.must(t, http.StatusOK, "PATCH", path, map[string]any{"cost_disclosure": true}, &patched)
	if patched.CostDisclosure == nil || !*patched.CostDisclosure {
		t.Fatalf("PATCH true: cost_disclosure = %v", patched.CostDisclosure)
	}
	b.must(t, http.StatusOK, "PATCH", path, map[string]any{"name": "renamed"}, &patched)
	if patched.CostDisclosure == nil || !*patched.CostDisclosure {
		t.Fatalf("PATCH without the field: cost_disclosure = %v, want true kept", patched.CostDisclosure)
	}
	discloses(map[string]bool{"follow": true, "hidden": false, "shown": true})
	b.must(t, http.StatusOK, "PATCH", path, `{"cost_disclosure": null}`, &patched)
	if patched.CostDisclosure != nil {
		t.Fatalf("PATCH null: cost_disclosure = %v, want null", *patched.CostDisclosure)
	}
	discloses(map[string]bool{"follow": false, "hidden": false, "shown": true})
	b.must(t, http.StatusBadRequest, "PATCH", path, `{"cost_disclosure": "yes"}`, nil)
	b.must(t, http.StatusBadRequest, "PUT", "/admin/settings", `{"cost_disclosure": 1}`, nil)

	// gRPC: the same settings and the same key field, with presence.
	cl, _ := b.grpcClient(t)
	got, err := cl.GetGatewaySettings(withToken(bootstrapToken), &adminv1.GetGatewaySettingsRequest{})
	if err != nil || got.GetSettings().GetCostDisclosure() {
		t.Fatalf("GetGatewaySettings = %v, %v, want off", got, err)
	}
	set, err := cl.SetGatewaySettings(withToken(bootstrapToken), &adminv1.SetGatewaySettingsRequest{CostDisclosure: proto.Bool(true)})
	if err != nil || !set.GetSettings().GetCostDisclosure() {
		t.Fatalf("SetGatewaySettings(on) = %v, %v", set, err)
	}
	k, err := cl.GetApiKey(withToken(bootstrapToken), &adminv1.GetApiKeyRequest{Id: hidden.ID})
	if err != nil || k.GetApiKey().CostDisclosure == nil || k.GetApiKey().GetCostDisclosure() {
		t.Fatalf("GetApiKey(hidden) = %v, %v, want cost_disclosure false", k, err)
	}
	up, err := cl.UpdateApiKey(withToken(bootstrapToken), &adminv1.UpdateApiKeyRequest{Id: hidden.ID, SetCostDisclosure: true})
	if err != nil || up.GetApiKey().CostDisclosure != nil {
		t.Fatalf("UpdateApiKey(clear cost_disclosure) = %v, %v", up, err)
	}
	created, err := cl.CreateApiKey(withToken(bootstrapToken), &adminv1.CreateApiKeyRequest{UserId: user, Name: "grpc",
		Enabled: true, CostDisclosure: proto.Bool(false)})
	if err != nil || created.GetApiKey().CostDisclosure == nil || created.GetApiKey().GetCostDisclosure() {
		t.Fatalf("CreateApiKey(cost_disclosure false) = %v, %v", created, err)
	}
	c := b.compiled(t)
	if !c.DisclosesCost(c.LookupKey(hidden.Key)) || c.DisclosesCost(c.LookupKey(created.GetKey())) {
		t.Fatal("gRPC changes did not reach the snapshot: want the cleared key to follow the gateway (on), the new key off")
	}
	if _, err := cl.SetGatewaySettings(withToken(b.viewerToken(t)), &adminv1.SetGatewaySettingsRequest{CostDisclosure: proto.Bool(false)}); err == nil {
		t.Fatal("a viewer changed the gateway settings")
	}
}
