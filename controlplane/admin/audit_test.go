package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

type auditPage struct {
	Items      []store.AuditEvent `json:"items"`
	NextCursor string             `json:"next_cursor"`
}

func (b *testBundle) audit(t *testing.T, query string) []store.AuditEvent {
	t.Helper()
	var p auditPage
	b.must(t, http.StatusOK, "GET", "/admin/audit?"+query, nil, &p)
	return p.Items
}

func jsonField(t *testing.T, raw json.RawMessage, key string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("audit image %s: %v", raw, err)
	}
	return m[key]
}

// Every admin mutation is recorded with its writer (token name and role), the row before and after
// (secrets redacted) and the time, whichever door it came through, in the writing transaction; the
// log is listed and filtered through REST and gRPC.
func TestAuditLogRecordsEveryAdminMutation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var tok struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "alice", "role": "admin"}, &tok)
	as := func(want int, method, path string, body, v any) {
		t.Helper()
		r := b.callAs(t, tok.Token, method, path, body)
		if r.status != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, want)
		}
		if v != nil {
			r.json(t, v)
		}
	}

	// The token's own creation: by the bootstrap token, its hash redacted.
	ev := b.audit(t, "resource=admin_tokens")
	if len(ev) != 1 || ev[0].ActorName != "bootstrap" || ev[0].ActorRole != "admin" || ev[0].Action != "insert" ||
		jsonField(t, ev[0].After, "token_hash") != "redacted" || ev[0].ResourceID != fmt.Sprint(tok.ID) {
		t.Fatalf("admin token creation audit: %+v", ev)
	}

	// A provider and a credential: the secret never reaches the log.
	const secretText = "sk-audit-secret-never-logged"
	var p struct {
		ID int64 `json:"id"`
	}
	as(http.StatusCreated, "POST", "/admin/providers", map[string]any{"name": "up", "channel_type": "alpha", "base_url": "http://127.0.0.1:1"}, &p)
	var cred struct {
		ID int64 `json:"id"`
	}
	as(http.StatusCreated, "POST", fmt.Sprintf("/admin/providers/%d/credentials", p.ID), map[string]any{"secret": secretText}, &cred)
	ev = b.audit(t, "resource=credentials")
	if len(ev) != 1 || ev[0].ActorName != "alice" || ev[0].ActorRole != "admin" || ev[0].Actor != "admin:alice" ||
		jsonField(t, ev[0].After, "secret_ciphertext") != "redacted" || string(ev[0].Before) != "null" || ev[0].At.IsZero() {
		t.Errorf("credential audit: %+v", ev)
	}
	var all string
	if err := b.db.Pool.QueryRow(t.Context(), `SELECT string_agg(coalesce(before::text, '') || coalesce(after::text, ''), '') FROM audit_log`).Scan(&all); err != nil {
		t.Fatal(err)
	}
	var sealed string
	if err := b.db.Pool.QueryRow(t.Context(), `SELECT encode(secret_ciphertext, 'hex') FROM credentials`).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(all, secretText) || strings.Contains(all, sealed) {
		t.Error("the audit log carries a credential secret")
	}

	// A price change: before and after.
	var r store.PriceRule
	as(http.StatusCreated, "POST", "/admin/price-rules", rule("model_match", "m", "input_price", "1"), &r)
	as(http.StatusOK, "PUT", fmt.Sprintf("/admin/price-rules/%d", r.ID), rule("model_match", "m", "input_price", "2.5"), nil)
	ev = b.audit(t, fmt.Sprintf("resource=price_rules&resource_id=%d", r.ID))
	if len(ev) != 2 || ev[0].Action != "update" || ev[1].Action != "insert" {
		t.Fatalf("price rule audit: %+v", ev)
	}
	if before, after := jsonField(t, ev[0].Before, "input_price"), jsonField(t, ev[0].After, "input_price"); before != 1.0 || after != 2.5 {
		t.Errorf("price change before %v after %v, want 1 → 2.5", before, after)
	}

	// An import (what the console's import uses too).
	raw, err := json.Marshal(map[string]any{"price_rules": []any{rule("id", 777, "model_match", "imported", "input_price", "4")}})
	if err != nil {
		t.Fatal(err)
	}
	as(http.StatusOK, "POST", "/admin/import", json.RawMessage(raw), nil)
	if ev := b.audit(t, "resource=price_rules&resource_id=777"); len(ev) != 1 || ev[0].ActorName != "alice" || ev[0].Action != "insert" {
		t.Errorf("import audit: %+v", ev)
	}

	// Single statements outside a transaction (tenancy, quotas) are attributed too.
	var org struct {
		ID int64 `json:"id"`
	}
	as(http.StatusCreated, "POST", "/admin/orgs", map[string]any{"name": "acme"}, &org)
	as(http.StatusOK, "PUT", fmt.Sprintf("/admin/quotas/org/%d", org.ID), map[string]any{"cost_limit": "100"}, nil)
	for _, q := range []string{"resource=orgs", "resource=quotas&resource_id=" + fmt.Sprintf("org/%d", org.ID)} {
		if ev := b.audit(t, q); len(ev) != 1 || ev[0].ActorName != "alice" {
			t.Errorf("%s audit: %+v", q, ev)
		}
	}
	// Settlement raising cost_used is not an admin change: no record.
	if _, err := b.db.Pool.Exec(t.Context(), `UPDATE quotas SET cost_used = cost_used + 1, updated_at = now()`); err != nil {
		t.Fatal(err)
	}
	if ev := b.audit(t, "resource=quotas"); len(ev) != 1 {
		t.Errorf("settlement spend audited: %+v", ev)
	}

	// A refused mutation leaves nothing: the record is in the writing transaction.
	before := len(b.audit(t, "limit=1000"))
	if r := b.callAs(t, tok.Token, "POST", "/admin/providers", map[string]any{"name": "up", "channel_type": "alpha", "base_url": "http://x"}); r.status != http.StatusConflict {
		t.Fatalf("duplicate provider: %d %s", r.status, r.raw)
	}
	if after := len(b.audit(t, "limit=1000")); after != before {
		t.Errorf("a rolled-back change left %d audit rows", after-before)
	}

	// gRPC, through the actor interceptor as app.Server installs it.
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(b.svc.UnaryInterceptor(), b.svc.ActorInterceptor))
	adminv1.RegisterAdminServiceServer(srv, admin.NewGRPC(b.svc))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := adminv1.NewAdminServiceClient(conn)
	o, err := c.CreateOrg(withToken(tok.Token), &adminv1.CreateOrgRequest{Org: &configv1.Org{Name: "grpc-org"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ListAuditEvents(withToken(tok.Token), &adminv1.ListAuditEventsRequest{Resource: "orgs", ResourceId: fmt.Sprint(o.GetOrg().GetId())})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetItems()) != 1 || got.GetItems()[0].GetActorName() != "alice" || got.GetItems()[0].GetActorRole() != "admin" ||
		!strings.Contains(got.GetItems()[0].GetAfterJson(), `"grpc-org"`) {
		t.Errorf("gRPC org audit: %v", got.GetItems())
	}

	// SQL by hand names the database role.
	if _, err := b.db.Pool.Exec(t.Context(), `INSERT INTO orgs (name) VALUES ('by-hand')`); err != nil {
		t.Fatal(err)
	}
	if ev := b.audit(t, "resource=orgs&limit=1"); len(ev) != 1 || !strings.HasPrefix(ev[0].Actor, "db:") || ev[0].ActorRole != "" {
		t.Errorf("SQL by hand audit: %+v", ev)
	}

	// Filters and pages.
	if ev := b.audit(t, "actor=alice&resource=orgs"); len(ev) != 2 {
		t.Errorf("alice's org changes: %d, want 2", len(ev))
	}
	var pg auditPage
	b.must(t, http.StatusOK, "GET", "/admin/audit?limit=2", nil, &pg)
	var next auditPage
	b.must(t, http.StatusOK, "GET", "/admin/audit?limit=2&cursor="+pg.NextCursor, nil, &next)
	if len(pg.Items) != 2 || len(next.Items) != 2 || next.Items[0].ID >= pg.Items[1].ID {
		t.Errorf("pages: %+v then %+v", pg.Items, next.Items)
	}
	// Viewers may not read it; the log cannot be edited.
	var viewer struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "val", "role": "viewer"}, &viewer)
	if r := b.callAs(t, viewer.Token, "GET", "/admin/audit", nil); r.status != http.StatusForbidden {
		t.Errorf("viewer reading the audit log: %d", r.status)
	}
	if _, err := b.db.Pool.Exec(t.Context(), `DELETE FROM audit_log`); err == nil {
		t.Error("the audit log could be deleted")
	}
}

// A pooled connection that served an admin's statement never attributes a later caller's change to
// that admin.
func TestAuditActorDoesNotLeakAcrossPooledConnections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, err := store.Open(t.Context(), b.db.URL+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	admin := store.WithActor(t.Context(), "admin:alice")
	if _, err := pool.Exec(admin, `INSERT INTO orgs (name) VALUES ('by-alice')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO orgs (name) VALUES ('by-nobody')`); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(t.Context(), `SELECT after->>'name', actor FROM audit_log WHERE resource = 'orgs' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var name, actor string
		if err := rows.Scan(&name, &actor); err != nil {
			t.Fatal(err)
		}
		got[name] = actor
	}
	if got["by-alice"] != "admin:alice" || !strings.HasPrefix(got["by-nobody"], "db:") {
		t.Errorf("actors %v", got)
	}
}
