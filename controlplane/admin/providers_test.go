package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/vocab"
)

type cellKey struct{ op, kind string }

func strOrNil(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// assertDefaults checks that every declared default cell of ch is present exactly as declared.
func assertDefaults(t *testing.T, ch vocab.ChannelType, rows map[cellKey]store.RoutingRule) {
	t.Helper()
	for _, c := range admin.DefaultCells(ch) {
		r, ok := rows[cellKey{string(c.Operation), string(c.Kind)}]
		if !ok {
			t.Errorf("%s: default cell %s/%s missing", ch, c.Operation, c.Kind)
			continue
		}
		wantDestOp, wantDestKind := "<nil>", "<nil>"
		if c.DestKind != "" {
			wantDestOp, wantDestKind = string(c.DestOperation), string(c.DestKind)
		}
		if r.Implementation != string(c.Implementation) || strOrNil(r.DestOperation) != wantDestOp ||
			strOrNil(r.DestKind) != wantDestKind || !r.Enabled || r.SortOrder != c.SortOrder {
			t.Errorf("%s: cell %s/%s = %s %s %s enabled=%v sort=%d, want %s %s %s enabled=true sort=%d", ch, c.Operation, c.Kind,
				r.Implementation, strOrNil(r.DestOperation), strOrNil(r.DestKind), r.Enabled, r.SortOrder,
				c.Implementation, wantDestOp, wantDestKind, c.SortOrder)
		}
	}
}

func (b *testBundle) routingRows(t *testing.T, pid int64) map[cellKey]store.RoutingRule {
	t.Helper()
	var p struct {
		Items []store.RoutingRule `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/providers/%d/routing-rules", pid), nil, &p)
	out := map[cellKey]store.RoutingRule{}
	for _, r := range p.Items {
		out[cellKey{r.Operation, r.Kind}] = r
	}
	if len(out) != len(p.Items) {
		t.Fatalf("duplicate (operation, kind) rows: %v", p.Items)
	}
	return out
}

func TestDefaultCellsAreValid(t *testing.T) {
	t.Parallel()
	for _, ch := range vocab.ChannelTypes {
		cells := admin.DefaultCells(ch)
		if len(cells) == 0 {
			t.Fatalf("DefaultCells(%s) is empty", ch)
		}
		seen := map[cellKey]bool{}
		for _, c := range cells {
			k := cellKey{string(c.Operation), string(c.Kind)}
			if seen[k] {
				t.Errorf("%s: duplicate cell %v", ch, k)
			}
			seen[k] = true
			if !vocab.KindFits(c.Operation, c.Kind) {
				t.Errorf("%s: cell %v: kind does not fit operation", ch, k)
			}
			if (c.Implementation == vocab.ImplTransformTo) != (c.DestKind != "") {
				t.Errorf("%s: cell %v: dest_kind %q with implementation %s", ch, k, c.DestKind, c.Implementation)
			}
			if c.DestKind != "" && !vocab.KindFits(c.DestOperation, c.DestKind) {
				t.Errorf("%s: cell %v: dest kind does not fit dest operation", ch, k)
			}
		}
	}
	// The spec's rerank rule: custom and router providers get a passthrough rerank cell.
	for _, ch := range []vocab.ChannelType{vocab.ChannelCustom, vocab.ChannelRouter} {
		found := false
		for _, c := range admin.DefaultCells(ch) {
			found = found || (c.Operation == vocab.OpRerank && c.Kind == vocab.KindAlpha && c.Implementation == vocab.ImplPassthrough)
		}
		if !found {
			t.Errorf("%s has no passthrough alpha rerank cell", ch)
		}
	}
	if admin.DefaultCells("nope") != nil {
		t.Error("DefaultCells(unknown) != nil")
	}
}

// TestProviderSeedsAndResetPerChannel creates a provider of every channel type (seeding the
// defaults in the creating transaction), lets an operator change, disable and delete default
// rows and add rows of their own, then resets: the declared defaults are restored exactly and
// every other row is left as it was.
func TestProviderSeedsAndResetPerChannel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, ch := range vocab.ChannelTypes {
		t.Run(string(ch), func(t *testing.T) {
			rev := b.revision(t)
			pid := b.provider(t, "p-"+string(ch), string(ch))
			if got := b.revision(t); got != rev+1 {
				t.Errorf("revision after create = %d, want %d (one bump for provider and seeded cells)", got, rev+1)
			}
			rows := b.routingRows(t, pid)
			defaults := admin.DefaultCells(ch)
			if len(rows) != len(defaults) {
				t.Errorf("seeded %d rows, want %d", len(rows), len(defaults))
			}
			assertDefaults(t, ch, rows)

			// Operator edits: change one default, disable another, delete a third; add a cell the
			// channel does not declare.
			d0, d1, d2 := defaults[0], defaults[1], defaults[len(defaults)-1]
			changed := rows[cellKey{string(d0.Operation), string(d0.Kind)}]
			disabled := rows[cellKey{string(d1.Operation), string(d1.Kind)}]
			deleted := rows[cellKey{string(d2.Operation), string(d2.Kind)}]
			var extra cellKey
			declared := map[cellKey]bool{}
			for _, c := range defaults {
				declared[cellKey{string(c.Operation), string(c.Kind)}] = true
			}
		search:
			for _, op := range vocab.Operations {
				for _, k := range append(append([]vocab.Kind{}, vocab.GenerationKinds...), vocab.FamilyKinds...) {
					if vocab.KindFits(op, k) && !declared[cellKey{string(op), string(k)}] {
						extra = cellKey{string(op), string(k)}
						break search
					}
				}
			}
			if extra.op == "" {
				t.Fatalf("%s declares every cell; cannot add an operator row", ch)
			}
			b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/providers/%d/routing-rules", pid), map[string]any{"rules": []any{
				map[string]any{"id": changed.ID, "operation": changed.Operation, "kind": changed.Kind,
					"implementation": "unsupported", "sort_order": 999},
				map[string]any{"id": disabled.ID, "operation": disabled.Operation, "kind": disabled.Kind,
					"implementation": disabled.Implementation, "dest_operation": disabled.DestOperation,
					"dest_kind": disabled.DestKind, "sort_order": disabled.SortOrder, "enabled": false},
				map[string]any{"operation": extra.op, "kind": extra.kind, "implementation": "local", "sort_order": 5, "enabled": false},
			}}, nil)
			if _, err := b.db.Pool.Exec(context.Background(), `DELETE FROM routing_rules WHERE id = $1`, deleted.ID); err != nil {
				t.Fatal(err)
			}
			before := b.routingRows(t, pid)
			operatorRow := before[extra]

			var reset struct {
				Items []store.RoutingRule `json:"items"`
			}
			b.must(t, http.StatusOK, "POST", fmt.Sprintf("/admin/providers/%d/routing-rules/reset", pid), nil, &reset)
			after := b.routingRows(t, pid)
			if len(reset.Items) != len(after) {
				t.Errorf("reset answered %d rows, provider has %d", len(reset.Items), len(after))
			}
			assertDefaults(t, ch, after)
			if len(after) != len(defaults)+1 {
				t.Errorf("after reset %d rows, want %d defaults + 1 operator row", len(after), len(defaults))
			}
			if got := after[extra]; got != operatorRow {
				t.Errorf("operator row changed by reset: %+v, was %+v", got, operatorRow)
			}
			if got := after[cellKey{changed.Operation, changed.Kind}]; got.ID != changed.ID {
				t.Errorf("reset replaced row %d instead of overwriting it (now id %d)", changed.ID, got.ID)
			}
		})
	}
}

func TestRoutingRuleWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.provider(t, "beta-1", "beta")
	other := b.provider(t, "gamma-1", "gamma")
	otherRows := b.routingRows(t, other)
	var otherID int64
	for _, r := range otherRows {
		otherID = r.ID
		break
	}
	path := fmt.Sprintf("/admin/providers/%d/routing-rules", pid)
	rules := func(rs ...map[string]any) map[string]any { return map[string]any{"rules": rs} }
	b.refuses(t, []refusal{
		{"generation op with family kind", "PUT", path, rules(map[string]any{"operation": "generate_content", "kind": "alpha", "implementation": "passthrough"}), 422, "kind"},
		{"family op with generation kind", "PUT", path, rules(map[string]any{"operation": "rerank", "kind": "alpha_responses", "implementation": "passthrough"}), 422, "kind"},
		{"unknown operation", "PUT", path, rules(map[string]any{"operation": "dance", "kind": "alpha", "implementation": "passthrough"}), 422, "operation"},
		{"unknown kind", "PUT", path, rules(map[string]any{"operation": "rerank", "kind": "delta", "implementation": "passthrough"}), 422, "kind"},
		{"unknown implementation", "PUT", path, rules(map[string]any{"operation": "rerank", "kind": "alpha", "implementation": "proxy"}), 422, "implementation"},
		{"dest kind not fitting", "PUT", path, rules(map[string]any{"operation": "rerank", "kind": "alpha", "implementation": "transform_to", "dest_kind": "beta_messages"}), 422, "dest_kind"},
		{"negative id", "PUT", path, rules(map[string]any{"id": -1, "operation": "rerank", "kind": "alpha", "implementation": "local"}), 422, "id"},
		{"other provider in body", "PUT", path, rules(map[string]any{"provider_id": other, "operation": "rerank", "kind": "alpha", "implementation": "local"}), 422, "provider_id"},
		{"duplicate of a seeded cell", "PUT", path, rules(map[string]any{"operation": "generate_content", "kind": "beta_messages", "implementation": "local"}), 409, "kind"},
		{"duplicate within request", "PUT", path, rules(
			map[string]any{"operation": "rerank", "kind": "alpha", "implementation": "local"},
			map[string]any{"operation": "rerank", "kind": "alpha", "implementation": "passthrough"}), 409, "kind"},
		{"id of another provider's row", "PUT", path, rules(map[string]any{"id": otherID, "operation": "rerank", "kind": "alpha", "implementation": "local"}), 404, "id"},
		{"unknown provider", "PUT", "/admin/providers/99999/routing-rules", rules(map[string]any{"operation": "rerank", "kind": "alpha", "implementation": "local"}), 404, ""},
		{"wrong type", "PUT", path, `{"rules":[{"operation":"rerank","kind":"alpha","implementation":"local","sort_order":"1"}]}`, 400, "rules.sort_order"},
		{"unknown field", "PUT", path, `{"rules":[{"operation":"rerank","kind":"alpha","implementation":"local","weight":1}]}`, 400, "weight"},
		{"malformed JSON", "PUT", path, `{"rules":[`, 400, ""},
		{"no rules", "PUT", path, `{"rules":[]}`, 422, "rules"},
	})

	// transform_to without dest_kind is stored as given (compiled later as unsupported).
	var out struct {
		Items []store.RoutingRule `json:"items"`
	}
	b.must(t, http.StatusOK, "PUT", path, rules(map[string]any{"operation": "rerank", "kind": "alpha", "implementation": "transform_to"}), &out)
	rows := b.routingRows(t, pid)
	if r := rows[cellKey{"rerank", "alpha"}]; r.Implementation != "transform_to" || r.DestKind != nil || r.DestOperation != nil || !r.Enabled {
		t.Errorf("stored row = %+v, want transform_to without dest", r)
	}
	// Reset does not touch it: beta does not declare rerank.
	b.must(t, http.StatusOK, "POST", fmt.Sprintf("/admin/providers/%d/routing-rules/reset", pid), nil, nil)
	if r := b.routingRows(t, pid)[cellKey{"rerank", "alpha"}]; r.Implementation != "transform_to" {
		t.Errorf("reset changed an undeclared row: %+v", r)
	}
	if r := b.call(t, "POST", fmt.Sprintf("/admin/providers/%d/routing-rules/reset", pid), `{"x":1}`); r.status != 400 {
		t.Errorf("reset with a body = %d, want 400", r.status)
	}
	if r := b.call(t, "POST", "/admin/providers/424242/routing-rules/reset", nil); r.status != 404 {
		t.Errorf("reset unknown provider = %d, want 404", r.status)
	}
}

func TestProviderCRUDAndDeleteRefusedWhileReferenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.provider(t, "custom-1", "custom")
	b.refuses(t, []refusal{
		{"unknown channel", "POST", "/admin/providers", map[string]any{"name": "x", "channel_type": "delta", "base_url": "https://x"}, 422, "channel_type"},
		{"relative base_url", "POST", "/admin/providers", map[string]any{"name": "x", "channel_type": "alpha", "base_url": "/v1"}, 422, "base_url"},
		{"missing name", "POST", "/admin/providers", map[string]any{"channel_type": "alpha", "base_url": "https://x"}, 422, "name"},
		{"settings not an object", "POST", "/admin/providers", map[string]any{"name": "x", "channel_type": "alpha", "base_url": "https://x", "settings": []int{1}}, 422, "settings"},
		{"id on create", "POST", "/admin/providers", map[string]any{"id": 7, "name": "x", "channel_type": "alpha", "base_url": "https://x"}, 422, "id"},
		{"duplicate name", "POST", "/admin/providers", map[string]any{"name": "custom-1", "channel_type": "alpha", "base_url": "https://x"}, 409, ""},
		{"enabled wrong type", "POST", "/admin/providers", `{"name":"x","channel_type":"alpha","base_url":"https://x","enabled":1}`, 400, "enabled"},
		{"update unknown", "PUT", "/admin/providers/99999", map[string]any{"name": "x", "channel_type": "alpha", "base_url": "https://x"}, 404, ""},
		{"delete unknown", "DELETE", "/admin/providers/99999", nil, 404, ""},
		{"credential for unknown provider", "POST", "/admin/providers/99999/credentials", map[string]any{"secret": "s"}, 404, ""},
		{"credential without secret", "POST", fmt.Sprintf("/admin/providers/%d/credentials", pid), map[string]any{"weight": 1}, 422, "secret"},
		{"credential zero weight", "POST", fmt.Sprintf("/admin/providers/%d/credentials", pid), map[string]any{"secret": "s", "weight": 0}, 422, "weight"},
	})

	var p store.Provider
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/providers/%d", pid), map[string]any{"name": "custom-1b",
		"channel_type": "router", "base_url": "http://10.0.0.1:8000", "enabled": false, "settings": map[string]any{"x": 1}}, &p)
	if p.Name != "custom-1b" || p.ChannelType != "router" || p.Enabled || string(p.Settings) != `{"x":1}` {
		t.Errorf("updated provider = %+v (settings %s)", p, p.Settings)
	}

	// A route member and a scoped price rule reference the provider: delete is refused with both listed.
	var route store.Route
	b.must(t, http.StatusCreated, "POST", "/admin/routes", map[string]any{"name": "smart", "aliases": []string{"smart-latest"},
		"members": []any{map[string]any{"provider_id": pid, "upstream_model_id": "m1"}}}, &route)
	var pr store.PriceRule
	b.must(t, http.StatusCreated, "POST", "/admin/price-rules", rule("provider_id", pid), &pr)
	before := b.state(t)
	r := b.call(t, "DELETE", fmt.Sprintf("/admin/providers/%d", pid), nil)
	if r.status != http.StatusConflict {
		t.Fatalf("delete referenced provider = %d %s, want 409", r.status, r.raw)
	}
	e := r.apiError(t)
	var sawRoute, sawRule bool
	for _, d := range e.Error.Details {
		sawRoute = sawRoute || (d.Resource == "route" && d.ID == route.ID && d.Name == "smart")
		sawRule = sawRule || (d.Resource == "price_rule" && d.ID == pr.ID)
	}
	if e.Error.Code != "in_use" || !sawRoute || !sawRule {
		t.Errorf("409 body = %s, want code in_use naming route %d (smart) and price rule %d", r.raw, route.ID, pr.ID)
	}
	if b.state(t) != before {
		t.Error("refused delete changed state")
	}
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/routes/%d", route.ID), nil, nil)
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/price-rules/%d", pr.ID), nil, nil)
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/providers/%d", pid), nil, nil)
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM routing_rules WHERE provider_id = $1`, pid).Scan(&n); err != nil || n != 0 {
		t.Errorf("routing rules left after provider delete: %d (%v)", n, err)
	}
}

func TestCredentialSecretIsSealedAndWriteOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid := b.provider(t, "alpha-1", "alpha")
	const secretText = "sk-upstream-very-secret-value"
	r := b.must(t, http.StatusCreated, "POST", fmt.Sprintf("/admin/providers/%d/credentials", pid),
		map[string]any{"secret": secretText, "weight": 3}, nil)
	if strings.Contains(string(r.raw), secretText) || strings.Contains(string(r.raw), "secret") {
		t.Errorf("create credential answered the secret: %s", r.raw)
	}
	var c store.CredentialInfo
	r.json(t, &c)
	if c.Weight != 3 || !c.Enabled || c.ProviderID != pid {
		t.Errorf("credential = %+v", c)
	}
	ct, err := store.CredentialCiphertext(context.Background(), b.db.Pool, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ct), secretText) {
		t.Fatal("secret stored in clear")
	}
	plain, err := b.box.Open(ct)
	if err != nil || string(plain) != secretText {
		t.Errorf("Open(stored) = %q, %v; want the secret", plain, err)
	}
	for _, path := range []string{fmt.Sprintf("/admin/providers/%d", pid), "/admin/providers"} {
		r := b.must(t, http.StatusOK, "GET", path, nil, nil)
		if strings.Contains(string(r.raw), secretText) || !strings.Contains(string(r.raw), `"weight":3`) {
			t.Errorf("GET %s = %s: want the credential without its secret", path, r.raw)
		}
	}
	b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/credentials/%d", c.ID), nil, nil)
	if r := b.call(t, "DELETE", fmt.Sprintf("/admin/credentials/%d", c.ID), nil); r.status != 404 {
		t.Errorf("second delete = %d, want 404", r.status)
	}
}

// TestDeleteRoutingRule: DELETE /admin/providers/{provider_id}/routing-rules/{operation}/{kind}
// removes exactly that cell, bumps config_revision once (so the next snapshot, built at the new
// revision, no longer carries the cell) and leaves every other row alone; reset restores it.
// Refusals (unknown names, missing cells, roles) change nothing.
func TestDeleteRoutingRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pid := b.provider(t, "beta-1", "beta")
	other := b.provider(t, "gamma-1", "gamma")
	path := func(p int64, op, kind string) string {
		return fmt.Sprintf("/admin/providers/%d/routing-rules/%s/%s", p, op, kind)
	}
	rows := b.routingRows(t, pid)
	target := cellKey{"generate_content", "beta_messages"}
	victim, ok := rows[target]
	if !ok {
		t.Fatalf("beta provider has no seeded %v cell", target)
	}
	otherBefore := b.routingRows(t, other)

	rev := b.revision(t)
	r := b.must(t, http.StatusNoContent, "DELETE", path(pid, target.op, target.kind), nil, nil)
	if len(r.raw) != 0 {
		t.Errorf("204 with a body: %q", r.raw)
	}
	if got := b.revision(t); got != rev+1 {
		t.Errorf("config_revision after delete = %d, want %d", got, rev+1)
	}
	after := b.routingRows(t, pid)
	if _, ok := after[target]; ok || len(after) != len(rows)-1 {
		t.Errorf("after delete: %d rows (cell present: %v), want %d without %v", len(after), ok, len(rows)-1, target)
	}
	for k, row := range rows {
		if k != target && !reflect.DeepEqual(after[k], row) {
			t.Errorf("row %v changed: %+v, was %+v", k, after[k], row)
		}
	}
	if got := b.routingRows(t, other); len(got) != len(otherBefore) {
		t.Errorf("other provider has %d rows, had %d", len(got), len(otherBefore))
	}
	snap, err := store.ReadSnapshot(ctx, b.db.Pool, b.box)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != rev+1 {
		t.Errorf("snapshot version = %d, want the new revision %d", snap.Version, rev+1)
	}
	for _, rr := range snap.RoutingRules {
		if rr.ProviderId == pid && rr.Operation == target.op && rr.Kind == target.kind {
			t.Errorf("snapshot still carries the deleted cell: %v", rr)
		}
		if rr.Id == victim.ID {
			t.Errorf("snapshot still carries routing rule %d", victim.ID)
		}
	}

	// A viewer may not delete; a viewer token and no token are refused before anything happens.
	var viewer struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "audit", "role": "viewer"}, &viewer)
	anotherCell := cellKey{"count_tokens", "beta"}
	if _, ok := rows[anotherCell]; !ok {
		t.Fatalf("beta provider has no seeded %v cell", anotherCell)
	}
	gammaCell := cellKey{"create_embedding", "gamma"} // gamma declares it, beta does not
	if _, ok := otherBefore[gammaCell]; !ok {
		t.Fatalf("gamma provider has no seeded %v cell", gammaCell)
	}
	tests := []struct {
		name, token, path string
		body              any
		status            int
		code              string
		fields            []string
		message           string
	}{
		{"already deleted", bootstrapToken, path(pid, target.op, target.kind), nil, 404, "not_found", nil,
			fmt.Sprintf("provider %d has no routing rule for (generate_content, beta_messages)", pid)},
		{"cell only another provider has", bootstrapToken, path(pid, gammaCell.op, gammaCell.kind), nil, 404, "not_found", nil, "has no routing rule"},
		{"unknown provider", bootstrapToken, path(987654, anotherCell.op, anotherCell.kind), nil, 404, "not_found", nil, "provider 987654 not found"},
		{"unknown operation", bootstrapToken, path(pid, "dance", "beta"), nil, 400, "invalid_request", []string{"operation"}, `"dance"`},
		{"unknown kind", bootstrapToken, path(pid, "count_tokens", "delta"), nil, 400, "invalid_request", []string{"kind"}, `"delta"`},
		{"both unknown", bootstrapToken, path(pid, "dance", "delta"), nil, 400, "invalid_request", []string{"operation", "kind"}, `"dance"`},
		{"operation case", bootstrapToken, path(pid, "Count_Tokens", "beta"), nil, 400, "invalid_request", []string{"operation"}, `"Count_Tokens"`},
		{"kind does not fit operation", bootstrapToken, path(pid, "generate_content", "beta"), nil, 400, "invalid_request", []string{"kind"}, `"beta"`},
		{"provider id not a number", bootstrapToken, "/admin/providers/abc/routing-rules/count_tokens/beta", nil, 400, "invalid_request", nil, "provider_id must be a positive integer"},
		{"provider id zero", bootstrapToken, path(0, anotherCell.op, anotherCell.kind), nil, 400, "invalid_request", nil, "provider_id must be a positive integer"},
		{"body on delete", bootstrapToken, path(pid, anotherCell.op, anotherCell.kind), `{"x":1}`, 400, "invalid_request", nil, "no request body"},
		{"viewer", viewer.Token, path(pid, anotherCell.op, anotherCell.kind), nil, 403, "permission_denied", nil, ""},
		{"no token", "", path(pid, anotherCell.op, anotherCell.kind), nil, 401, "unauthenticated", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.state(t)
			r := b.callAs(t, tt.token, "DELETE", tt.path, tt.body)
			if r.status != tt.status {
				t.Fatalf("DELETE %s = %d %s, want %d", tt.path, r.status, r.raw, tt.status)
			}
			e := r.apiError(t)
			if e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.message) {
				t.Errorf("DELETE %s = %s, want code %s with a message containing %q", tt.path, r.raw, tt.code, tt.message)
			}
			for _, f := range tt.fields {
				if !e.hasField(f, -1) {
					t.Errorf("DELETE %s = %s: details do not name %q", tt.path, r.raw, f)
				}
			}
			if len(e.Error.Details) != len(tt.fields) {
				t.Errorf("DELETE %s = %s: %d details, want %d", tt.path, r.raw, len(e.Error.Details), len(tt.fields))
			}
			if b.state(t) != before {
				t.Error("state changed by a refused delete")
			}
		})
	}
	if _, ok := b.routingRows(t, other)[gammaCell]; !ok {
		t.Error("the other provider's cell went away")
	}

	// An operator row (not a declared default) is deleted the same way; reset does not bring it back
	// but restores the deleted default cell exactly.
	b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/providers/%d/routing-rules", pid), map[string]any{"rules": []any{
		map[string]any{"operation": "rerank", "kind": "alpha", "implementation": "local"}}}, nil)
	b.must(t, http.StatusNoContent, "DELETE", path(pid, "rerank", "alpha"), nil, nil)
	b.must(t, http.StatusOK, "POST", fmt.Sprintf("/admin/providers/%d/routing-rules/reset", pid), nil, nil)
	restored := b.routingRows(t, pid)
	if _, ok := restored[cellKey{"rerank", "alpha"}]; ok {
		t.Error("reset brought back an operator row")
	}
	if len(restored) != len(rows) {
		t.Errorf("after reset %d rows, want %d", len(restored), len(rows))
	}
	assertDefaults(t, vocab.ChannelBeta, restored)
}
