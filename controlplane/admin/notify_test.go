package admin_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
)

// TestMutationsBumpRevisionAndNotify: every admin mutation commits a revision bump and a NOTIFY on
// store.NotifyChannel carrying the new revision (one per transaction); a refused one sends none.
func TestMutationsBumpRevisionAndNotify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+store.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	next := func(wait time.Duration) (string, bool) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		return n.Payload, true
	}
	pid := b.provider(t, "alpha-1", "alpha")
	mutations := []struct {
		name         string
		method, path string
		body         any
	}{
		{"create price rule", "POST", "/admin/price-rules", rule()},
		{"reset routing rules", "POST", "/admin/providers/" + strconv.FormatInt(pid, 10) + "/routing-rules/reset", nil},
		{"delete routing rule", "DELETE", "/admin/providers/" + strconv.FormatInt(pid, 10) + "/routing-rules/count_tokens/alpha", nil},
		{"create route", "POST", "/admin/routes", map[string]any{"name": "r", "aliases": []string{"a"},
			"members": []any{map[string]any{"provider_id": pid, "upstream_model_id": "m"}}}},
		{"import", "POST", "/admin/import", map[string]any{"price_rules": []any{rule(), rule()}}},
	}
	if p, ok := next(5 * time.Second); !ok || p != strconv.FormatInt(b.revision(t), 10) {
		t.Fatalf("provider create notified %q (%v), want the revision", p, ok)
	}
	for _, m := range mutations {
		rev := b.revision(t)
		if r := b.call(t, m.method, m.path, m.body); r.status >= 300 {
			t.Fatalf("%s = %d %s", m.name, r.status, r.raw)
		}
		p, ok := next(5 * time.Second)
		if !ok || p != strconv.FormatInt(rev+1, 10) {
			t.Errorf("%s notified %q (%v), want %d", m.name, p, ok, rev+1)
		}
		if p, ok := next(100 * time.Millisecond); ok {
			t.Errorf("%s sent a second notification %q; want one per transaction", m.name, p)
		}
	}
	if r := b.call(t, "DELETE", "/admin/price-rules/424242", nil); r.status != http.StatusNotFound {
		t.Fatalf("delete unknown = %d", r.status)
	}
	if p, ok := next(300 * time.Millisecond); ok {
		t.Errorf("refused delete notified %q", p)
	}
	// Deleting a cell that is already gone touches no row: it is refused and notifies nothing either.
	if r := b.call(t, "DELETE", "/admin/providers/"+strconv.FormatInt(pid, 10)+"/routing-rules/count_tokens/alpha", nil); r.status != http.StatusNotFound {
		t.Fatalf("delete missing routing cell = %d %s", r.status, r.raw)
	}
	if p, ok := next(300 * time.Millisecond); ok {
		t.Errorf("refused routing-cell delete notified %q", p)
	}
}
