package admin_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// compiles reads the snapshot the builder would publish and compiles it with the data planes' compiler.
func (b *testBundle) compiles(t *testing.T) error {
	t.Helper()
	snap, err := store.ReadSnapshot(context.Background(), b.db.Pool, b.box)
	if err != nil {
		return err
	}
	_, err = snapshot.Compile(snap)
	return err
}

// Writes that the snapshot compiler (or the id sequences, or int64 micro-dollars) cannot carry are refused
// with 422 naming the field, and change nothing.
func TestAdminRefusesWritesTheSnapshotCannotCarry(t *testing.T) {
	b := setup(t)
	pid := b.provider(t, "good", "alpha")
	var org struct {
		ID int64 `json:"id"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/orgs", map[string]any{"name": "o"}, &org)
	quota := fmt.Sprintf("/admin/quotas/org/%d", org.ID)
	b.must(t, http.StatusCreated, "POST", "/admin/users", map[string]any{"name": "u", "org_id": org.ID}, nil)
	b.refuses(t, []refusal{
		{"provider name with slash", "POST", "/admin/providers",
			map[string]any{"name": "a/b", "channel_type": "alpha", "base_url": "https://x.example"}, 422, "name"},
		{"provider rename with slash", "PUT", fmt.Sprintf("/admin/providers/%d", pid),
			map[string]any{"name": "x/y", "channel_type": "alpha", "base_url": "https://x.example"}, 422, "name"},
		{"quota limit beyond int64 micro-dollars", "PUT", quota, map[string]any{"cost_limit": "9300000000000"}, 422, "cost_limit"},
		{"quota limit beyond exact micro-dollars", "PUT", quota, map[string]any{"cost_limit": "9007199255"}, 422, "cost_limit"},
		{"price rule id 2^63-1", "POST", "/admin/price-rules", rule("id", int64(math.MaxInt64)), 422, "id"},
		{"price rule id beyond JS-safe", "POST", "/admin/price-rules", rule("id", int64(1)<<53), 422, "id"},
		{"price rule id beyond client ids", "POST", "/admin/price-rules", rule("id", int64(1)<<52), 422, "id"},
		{"import price rule id 2^63-1", "POST", "/admin/import",
			map[string]any{"price_rules": []any{rule("id", int64(math.MaxInt64))}}, 422, "id"},
		{"api key tpm beyond JS-safe", "POST", "/admin/api-keys",
			map[string]any{"user_id": 1, "tpm_limit": int64(1) << 60}, 422, "tpm_limit"},
	})
	// The largest accepted values still compile, and later creates still work.
	b.must(t, http.StatusOK, "PUT", quota, map[string]any{"cost_limit": "9007199254.740991"}, nil)
	b.must(t, http.StatusOK, "POST", "/admin/price-rules", rule("id", int64(1)<<52-1), nil)
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "after"), nil)
	if err := b.compiles(t); err != nil {
		t.Fatalf("accepted writes do not compile: %v", err)
	}
}

// Property: whatever mix of admin writes is accepted, the resulting configuration compiles. Random writes
// (with hostile names, limits, ids and prices among them) go through the REST API to a real Postgres; after
// every accepted write the snapshot is read and compiled.
func TestAnyAcceptedAdminWriteCompiles(t *testing.T) {
	b := setup(t)
	r := rand.New(rand.NewPCG(13, 5))
	names := []string{"p", "a/b", "/", "ok-name", "ünï", "x\x00y", strings.Repeat("n", 300), " ", "a b", "route"}
	decimals := []string{"0", "1", "0.000001", "9007199254.740991", "9007199254.740992", "9223372036854.775807",
		"9300000000000", "999999999999999", "1e5", "-1", "NaN", "0.0000000000000000000000001", "12.5", ""}
	ids := []int64{0, 1, 7, 1<<52 - 1, 1 << 52, 1<<53 - 1, 1 << 53, math.MaxInt64, math.MaxInt64 - 1, -1}
	var providers, orgs []int64
	b.must(t, http.StatusCreated, "POST", "/admin/orgs", map[string]any{"name": "o0"}, nil)
	orgs = append(orgs, 1)
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	pickID := func() int64 { return ids[r.IntN(len(ids))] }
	accepted := 0
	for i := 0; i < 150; i++ {
		var method, path string
		var body any
		switch r.IntN(6) {
		case 0:
			method, path = "POST", "/admin/providers"
			body = map[string]any{"name": pick(names) + fmt.Sprint(r.IntN(3)), "channel_type": "alpha", "base_url": "https://u.example/v1"}
		case 1:
			if len(providers) == 0 {
				continue
			}
			method, path = "PUT", fmt.Sprintf("/admin/providers/%d", providers[r.IntN(len(providers))])
			body = map[string]any{"name": pick(names), "channel_type": "beta", "base_url": "https://u.example"}
		case 2:
			method, path = "PUT", fmt.Sprintf("/admin/quotas/org/%d", orgs[r.IntN(len(orgs))])
			body = map[string]any{"cost_limit": pick(decimals)}
		case 3:
			method, path = "POST", "/admin/price-rules"
			body = rule("id", pickID(), "input_price", pick(decimals), "model_match", pick(names))
		case 4:
			method, path = "POST", "/admin/import"
			body = map[string]any{"price_rules": []any{rule("id", pickID(), "output_price", pick(decimals))}}
		case 5:
			if len(providers) == 0 {
				continue
			}
			method, path = "POST", "/admin/routes"
			body = map[string]any{"name": pick(names) + fmt.Sprint(i), "aliases": []string{pick(names) + fmt.Sprint(i)},
				"members": []any{map[string]any{"provider_id": providers[r.IntN(len(providers))], "upstream_model_id": pick(names)}}}
		}
		resp := b.call(t, method, path, body)
		if resp.status >= 500 {
			t.Fatalf("write %d %s %s %v = %d %s", i, method, path, body, resp.status, resp.raw)
		}
		if resp.status >= 300 {
			continue
		}
		accepted++
		if method == "POST" && path == "/admin/providers" {
			var p struct {
				ID int64 `json:"id"`
			}
			resp.json(t, &p)
			providers = append(providers, p.ID)
		}
		if err := b.compiles(t); err != nil {
			t.Fatalf("write %d %s %s %v was accepted (%d) but the snapshot no longer compiles: %v", i, method, path, body, resp.status, err)
		}
	}
	if accepted < 20 {
		t.Fatalf("only %d writes accepted: the generator is not exercising the API", accepted)
	}
}
