package snapshotbuild_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/snapshotbuild"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/controlplane/watch"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/telemetry"
	"github.com/tollgate/tollgate/shared/testkit"
)

type testBundle struct {
	db  *storetest.DB
	box *secret.Box
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secret.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{db: storetest.New(t), box: box}
}

type replica struct {
	b   *snapshotbuild.Builder
	ws  *watch.Server
	reg *prometheus.Registry
}

// start runs a builder publishing into a real watch.Server until the test ends.
func (tb *testBundle) start(t *testing.T, opts snapshotbuild.Options) *replica {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	ws := watch.New(log, reg)
	b := snapshotbuild.New(tb.db.Pool, tb.box, ws, log, reg, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return &replica{b: b, ws: ws, reg: reg}
}

func (tb *testBundle) exec(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := tb.db.Pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
	rev, err := store.Revision(ctx, tb.db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func priceRuleSQL(model, tiers string) string {
	return fmt.Sprintf(`INSERT INTO price_rules (match_type, model_match, input_price, output_price, cache_read_price,
		cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price, pricing_tiers_json)
		VALUES ('exact', '%s', 1, 2, 0, 0, 0, 0, 0, '%s')`, model, tiers)
}

func waitPublished(t *testing.T, r *replica, v int64) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("version %d published", v), func() bool { return r.b.Published() >= v })
	if got := r.ws.Latest().GetVersion(); got != v {
		t.Fatalf("published version %d, want %d", got, v)
	}
}

func scrape(reg *prometheus.Registry) string {
	s, err := telemetry.Text(reg)
	if err != nil {
		panic(err)
	}
	return s
}

// noSafetyNet leaves notifications as the only trigger after the initial build.
var noSafetyNet = snapshotbuild.Options{Debounce: 10 * time.Millisecond, Interval: time.Hour}

func TestBuilderPublishesOnNotification(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r := tb.start(t, noSafetyNet)
	waitPublished(t, r, 1) // a fresh database is at revision 1
	if r.ws.Latest().GetBuiltAt() == nil {
		t.Error("published snapshot has no built_at")
	}
	testkit.WaitFor(t, "listening", r.b.Listening)

	rev := tb.exec(t, priceRuleSQL("m-1", "[]"))
	waitPublished(t, r, rev)
	if rules := r.ws.Latest().GetPriceRules(); len(rules) != 1 || rules[0].GetModelMatch() != "m-1" {
		t.Fatalf("published price rules = %v, want m-1", rules)
	}

	// A burst of commits ends published at its last revision.
	for i := range 30 {
		rev = tb.exec(t, priceRuleSQL(fmt.Sprintf("burst-%d", i), "[]"))
	}
	waitPublished(t, r, rev)
	if n := len(r.ws.Latest().GetPriceRules()); n != 31 {
		t.Fatalf("after the burst: %d price rules, want 31", n)
	}
}

func TestBuilderNeverPublishesWhatFailsToCompile(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r := tb.start(t, snapshotbuild.Options{Debounce: 10 * time.Millisecond, Interval: 50 * time.Millisecond})
	good := tb.exec(t, priceRuleSQL("good", "[]"))
	waitPublished(t, r, good)

	// Bypassing the admin API: a tier multiplier that is not a decimal. The store carries it, Compile
	// rejects it.
	bad := tb.exec(t, priceRuleSQL("bad", `[{"min_prompt_tokens": 10, "multiplier": "abc"}]`))
	testkit.WaitFor(t, "rejection", func() bool {
		return strings.Contains(scrape(r.reg), fmt.Sprintf("tollgate_snapshot_rejected_version %d\n", bad))
	})
	time.Sleep(200 * time.Millisecond) // several periodic checks
	if got := r.ws.Latest().GetVersion(); got != good {
		t.Fatalf("published version %d after a snapshot that fails to compile, want %d kept", got, good)
	}
	if !strings.Contains(scrape(r.reg), `tollgate_snapshot_builds_total{result="rejected"} 1`+"\n") {
		t.Errorf("rejected version rebuilt on periodic checks (want exactly one rejection):\n%s", scrape(r.reg))
	}
	// Loud: the status names the offending row and the alert gauge is up.
	st := r.b.Status()
	if !st.Failing || st.PublishedVersion != good || st.Rejected == nil || st.Rejected.Version != bad || st.Rejected.Stage != "compile" {
		t.Fatalf("status = %+v, want failing at version %d with %d published", st, bad, good)
	}
	var badID int64
	if err := tb.db.Pool.QueryRow(context.Background(), `SELECT id FROM price_rules WHERE model_match = 'bad'`).Scan(&badID); err != nil {
		t.Fatal(err)
	}
	if p := st.Rejected.Problems; len(p) != 1 || p[0].Resource != "price rule" || p[0].ID != badID || !strings.Contains(p[0].Field, "multiplier") {
		t.Errorf("problems = %+v, want price rule %d, field multiplier", p, badID)
	}
	if !strings.Contains(scrape(r.reg), "tollgate_snapshot_compile_failing 1\n") {
		t.Errorf("compile-failing gauge not set:\n%s", scrape(r.reg))
	}

	// Data the snapshot cannot even carry (an unknown tier key) is refused the same way.
	bad2 := tb.exec(t, priceRuleSQL("bad2", `[{"multipler": "2"}]`))
	testkit.WaitFor(t, "second rejection", func() bool {
		return strings.Contains(scrape(r.reg), fmt.Sprintf("tollgate_snapshot_rejected_version %d\n", bad2))
	})
	if got := r.ws.Latest().GetVersion(); got != good {
		t.Fatalf("published version %d, want %d kept", got, good)
	}

	// Fixed: published again.
	fixed := tb.exec(t, `UPDATE price_rules SET pricing_tiers_json = '[]' WHERE model_match IN ('bad', 'bad2')`)
	waitPublished(t, r, fixed)
	if st := r.b.Status(); st.Failing || st.Rejected != nil {
		t.Errorf("status after the fix = %+v, want not failing", st)
	}
	if !strings.Contains(scrape(r.reg), "tollgate_snapshot_compile_failing 0\n") {
		t.Errorf("compile-failing gauge not cleared:\n%s", scrape(r.reg))
	}
}

func TestBuilderListenerReconnects(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r := tb.start(t, noSafetyNet)
	waitPublished(t, r, 1)
	testkit.WaitFor(t, "listening", r.b.Listening)
	var killed int
	if err := tb.db.Pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, snapshotbuild.ListenerApplicationName).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d listener connections, want 1", killed)
	}
	testkit.WaitFor(t, "listener reconnected", func() bool {
		return r.b.Listening() && strings.Contains(scrape(r.reg), "tollgate_snapshot_listener_reconnects_total 1\n")
	})
	rev := tb.exec(t, priceRuleSQL("after-reconnect", "[]"))
	waitPublished(t, r, rev)
}

// TestBuilderPeriodicCheck commits a change whose notification never comes (triggers disabled, revision
// bumped by hand): the periodic check publishes it.
func TestBuilderPeriodicCheck(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r := tb.start(t, snapshotbuild.Options{Debounce: time.Hour, Interval: 50 * time.Millisecond})
	waitPublished(t, r, 1)
	ctx := context.Background()
	tx, err := tb.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SET LOCAL session_replication_role = replica`, priceRuleSQL("silent", "[]"),
		`UPDATE config_revision SET revision = revision + 1`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitPublished(t, r, 2)
	if rules := r.ws.Latest().GetPriceRules(); len(rules) != 1 {
		t.Fatalf("price rules = %v, want the silent one", rules)
	}
}

func TestReplicasPublishTheSameSnapshot(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	a := tb.start(t, noSafetyNet)
	b := tb.start(t, noSafetyNet)
	rev := tb.exec(t, priceRuleSQL("shared", `[{"service_tier": "priority", "multiplier": "2"}]`))
	rev2 := tb.exec(t, `INSERT INTO providers (name, channel_type, base_url) VALUES ('p', 'alpha', 'http://p.test')`)
	if rev2 != rev+1 {
		t.Fatalf("revision %d after %d", rev2, rev)
	}
	waitPublished(t, a, rev2)
	waitPublished(t, b, rev2)
	sa := proto.Clone(a.ws.Latest()).(*snapshotv1.Snapshot)
	sb := proto.Clone(b.ws.Latest()).(*snapshotv1.Snapshot)
	sa.BuiltAt, sb.BuiltAt = nil, nil
	if !proto.Equal(sa, sb) {
		t.Errorf("replicas published different snapshots for version %d:\n%v\n%v", rev2, sa, sb)
	}
}

func TestRunTwice(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r := tb.start(t, noSafetyNet)
	waitPublished(t, r, 1)
	if err := r.b.Run(context.Background()); err == nil {
		t.Error("second concurrent Run returned nil, want an error")
	}
}
