package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/controlplane/partition"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

func partRow(id string, key, org int64, cost string, at time.Time) store.UsageRow {
	return store.UsageRow{RequestID: id, APIKeyID: &key, OrgID: &org, Operation: "generate_content",
		InboundKind: "alpha_chat_completions", LogicalModel: "m", Cost: cost, Source: "upstream",
		EndState: "completed", CreatedAt: at}
}

// partitionOf names the partition holding a request's rows (one name per row).
func partitionOf(t *testing.T, db store.DBTX, requestID string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT tableoid::regclass::text FROM usages WHERE request_id = $1 ORDER BY 1`, requestID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func partitionNames(t *testing.T, db store.DBTX) []string {
	t.Helper()
	parts, err := store.ListUsagePartitions(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range parts {
		out = append(out, p.Name)
	}
	return out
}

func countUsages(t *testing.T, db store.DBTX, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM usages WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func scalar(t *testing.T, db store.DBTX, sql string, args ...any) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// The migration creates the current and next month's partitions; maintenance at a later clock creates that
// month's and the next, taking over the rows the default partition held for them; it is idempotent and two
// replicas running it at once create each partition once, without error.
func TestUsagePartitionsCreatedAhead(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	now := time.Now().UTC()
	cur, next := store.MonthStart(now), store.MonthStart(now).AddDate(0, 1, 0)
	got := partitionNames(t, db.Pool)
	want := []string{"usages_" + cur.Format("2006_01"), "usages_" + next.Format("2006_01")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("partitions after migrating = %v, want %v", got, want)
	}

	// A faulty data plane's far-future rows: stored (in the default partition), never refused.
	later := time.Date(2031, 5, 31, 23, 59, 59, 999999000, time.UTC)
	rows := []store.UsageRow{partRow("r-may", 1, 1, "1", later), partRow("r-june", 1, 1, "2", later.Add(time.Microsecond)),
		partRow("r-july", 1, 1, "3", later.AddDate(0, 1, 5))}
	res, err := store.SettleUsages(ctx, db.Pool, rows)
	if err != nil || len(res.Inserted) != 3 {
		t.Fatalf("settle far-future rows: %v, inserted %v", err, res.Inserted)
	}
	if p := partitionOf(t, db.Pool, "r-may"); fmt.Sprint(p) != "[usages_default]" {
		t.Fatalf("far-future row in %v, want the default partition", p)
	}

	// Two replicas at once, at a clock in May 2031.
	m := &partition.Maintainer{DB: db.Pool}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.Once(ctx, later.Add(-48*time.Hour)) }()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent maintenance: %v, %v", errs[0], errs[1])
	}
	// A replica that found the lock taken did nothing: run again to be sure both months exist.
	if err := m.Once(ctx, later.Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got = partitionNames(t, db.Pool)
	want = append(want, "usages_2031_05", "usages_2031_06")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("partitions = %v, want %v", got, want)
	}
	for id, part := range map[string]string{"r-may": "usages_2031_05", "r-june": "usages_2031_06", "r-july": "usages_default"} {
		if p := partitionOf(t, db.Pool, id); fmt.Sprint(p) != "["+part+"]" {
			t.Errorf("%s in %v, want %s", id, p, part)
		}
	}
	// Moving rows between partitions is not ingest: the rollups counted each row once.
	if n := scalar(t, db.Pool, `SELECT sum(requests)::text FROM (SELECT bucket, requests FROM spend_hour UNION ALL SELECT bucket, requests FROM spend_delta) r WHERE bucket >= '2031-01-01'`); n != "3" {
		t.Errorf("rollup requests after the move = %s, want 3", n)
	}
	// Redelivery after the move still conflicts with the moved rows.
	res, err = store.SettleUsages(ctx, db.Pool, rows)
	if err != nil || len(res.Inserted) != 0 {
		t.Fatalf("redelivery after the move: %v, inserted %v", err, res.Inserted)
	}
	if created, err := store.EnsureUsagePartitions(ctx, db.Pool, later, partition.Ahead); err != nil || len(created) != 0 {
		t.Fatalf("ensure again = %v, %v; want nothing created", created, err)
	}
}

// Retention drops the month partitions older than N whole months before the clock's month and the default
// partition's rows before that instant, keeping everything since; the spend rollups keep their sums.
func TestUsageRetentionDropsOldPartitions(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	m := &partition.Maintainer{DB: db.Pool, RetentionMonths: 2}
	base := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	var rows []store.UsageRow
	for i := range 6 { // January to June 2030, partitions created as the clock passes each month
		at := base.AddDate(0, i, 0)
		if err := (&partition.Maintainer{DB: db.Pool}).Once(ctx, at); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, partRow(fmt.Sprintf("r-%d", i+1), 1, 1, "1", at))
	}
	rows = append(rows, partRow("r-2029", 1, 1, "1", time.Date(2029, 3, 1, 0, 0, 0, 0, time.UTC)), // default partition
		partRow("r-2032", 1, 1, "1", time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC))) // default, ahead: kept
	if _, err := store.SettleUsages(ctx, db.Pool, rows); err != nil {
		t.Fatal(err)
	}
	rollup := scalar(t, db.Pool, `SELECT sum(requests)::text FROM (SELECT bucket, requests FROM spend_hour UNION ALL SELECT bucket, requests FROM spend_delta) r`)

	now := time.Date(2030, 6, 20, 0, 0, 0, 0, time.UTC)
	if cut := m.Cutoff(now); !cut.Equal(time.Date(2030, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("cutoff = %v, want 2030-04-01", cut)
	}
	if err := m.Once(ctx, now); err != nil {
		t.Fatal(err)
	}
	parts := partitionNames(t, db.Pool)
	for _, p := range parts {
		if p < "usages_2030_04" {
			t.Errorf("partition %s survived a retention of 2 months at 2030-06-20", p)
		}
	}
	for _, want := range []string{"usages_2030_04", "usages_2030_05", "usages_2030_06", "usages_2030_07"} {
		if !contains(parts, want) {
			t.Errorf("partition %s missing after retention: %v", want, parts)
		}
	}
	for id, n := range map[string]int64{"r-1": 0, "r-3": 0, "r-4": 1, "r-6": 1, "r-2029": 0, "r-2032": 1} {
		if got := countUsages(t, db.Pool, `request_id = $1`, id); got != n {
			t.Errorf("%s: %d rows after retention, want %d", id, got, n)
		}
	}
	if got := scalar(t, db.Pool, `SELECT sum(requests)::text FROM (SELECT bucket, requests FROM spend_hour UNION ALL SELECT bucket, requests FROM spend_delta) r`); got != rollup {
		t.Errorf("rollup requests after retention = %s, want %s (kept)", got, rollup)
	}
	// Retention off: nothing more is dropped.
	if err := (&partition.Maintainer{DB: db.Pool}).Once(ctx, now.AddDate(2, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := countUsages(t, db.Pool, `true`); got != 4 {
		t.Errorf("%d rows after a run without retention, want 4", got)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Exactly-once across partitions: records either side of a month boundary, delivered again (reordered), and
// by concurrent batches, are stored once and charged once; so is a record without created_at (it takes the
// created_at its first delivery was stored with), even when its redelivery lands in another month.
func TestSettleExactlyOnceAcrossPartitions(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	snapTestExec(t, db.Pool, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 1000)`)
	now := time.Now().UTC()
	boundary := store.MonthStart(now) // the current month's partition and the previous month (default partition)
	rows := []store.UsageRow{
		partRow("a", 1, 1, "1", boundary.Add(-time.Microsecond)),
		partRow("b", 1, 1, "2", boundary),
		partRow("c", 1, 1, "4", boundary.Add(time.Hour)),
		partRow("z", 1, 1, "8", time.Time{}), // no created_at
	}
	res, err := store.SettleUsages(ctx, db.Pool, rows)
	if err != nil || len(res.Inserted) != 4 {
		t.Fatalf("first delivery: %v, inserted %v", err, res.Inserted)
	}
	if !rows[3].CreatedAt.IsZero() {
		t.Fatal("SettleUsages changed the caller's row")
	}
	if p := partitionOf(t, db.Pool, "a"); fmt.Sprint(p) != "[usages_default]" {
		t.Errorf("row before the boundary in %v, want the default partition (no partition for last month)", p)
	}
	if p := partitionOf(t, db.Pool, "b"); fmt.Sprint(p) != "[usages_"+boundary.Format("2006_01")+"]" {
		t.Errorf("row at the boundary in %v", p)
	}
	// Redelivered in reverse order; then the month's partition of "a" is created and everything delivered again.
	rev := []store.UsageRow{rows[3], rows[2], rows[1], rows[0]}
	if res, err := store.SettleUsages(ctx, db.Pool, rev); err != nil || len(res.Inserted) != 0 {
		t.Fatalf("redelivery: %v, inserted %v", err, res.Inserted)
	}
	if _, err := store.EnsureUsagePartitions(ctx, db.Pool, boundary.Add(-time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if p := partitionOf(t, db.Pool, "a"); fmt.Sprint(p) != "[usages_"+boundary.Add(-time.Hour).Format("2006_01")+"]" {
		t.Errorf("row before the boundary in %v after its partition was created", p)
	}
	// Concurrent batches: eight goroutines deliver the same records (and two new ones) at once.
	more := append([]store.UsageRow{partRow("d", 1, 1, "16", boundary.Add(2*time.Hour)), partRow("e", 1, 1, "32", time.Time{})}, rev...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted := map[string]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := store.SettleUsages(ctx, db.Pool, more)
			if err != nil {
				t.Errorf("concurrent delivery: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for id := range res.Inserted {
				inserted[id]++
			}
		}()
	}
	wg.Wait()
	if fmt.Sprint(inserted) != "map[d:1 e:1]" {
		t.Errorf("concurrent deliveries inserted %v, want d and e once", inserted)
	}
	// Without a quota row the batches do not queue on a quota lock: only the request id's lock keeps two
	// deliveries of a record without created_at from storing it twice.
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := store.SettleUsages(ctx, db.Pool, []store.UsageRow{partRow("f", 2, 2, "1", time.Time{})}); err != nil {
				t.Errorf("concurrent delivery: %v", err)
			}
		}()
	}
	wg.Wait()
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "z"} {
		if n := countUsages(t, db.Pool, `request_id = $1`, id); n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
	if used := scalar(t, db.Pool, `SELECT cost_used::text FROM quotas WHERE scope = 'org' AND scope_id = 1`); used != "63" {
		t.Errorf("cost_used = %s, want 63 (each record charged once)", used)
	}
	if n := scalar(t, db.Pool, `SELECT sum(requests)::text FROM (SELECT bucket, requests FROM spend_hour UNION ALL SELECT bucket, requests FROM spend_delta) r`); n != "7" {
		t.Errorf("rollup requests = %s, want 7", n)
	}
}

// The listing pages newest id first through the id cursor across month partitions, whole and filtered.
func TestListUsagesAcrossMonthBoundary(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	boundary := store.MonthStart(time.Now()).AddDate(0, 1, 0) // between this month and the next (both partitioned)
	var rows []store.UsageRow
	for i := range 20 {
		// Alternating sides of the boundary, so id order and created_at order disagree.
		at := boundary.Add(time.Duration(i) * time.Minute)
		if i%2 == 0 {
			at = boundary.Add(-time.Duration(i+1) * time.Minute)
		}
		rows = append(rows, partRow(fmt.Sprintf("r-%02d", i), int64(1+i%2), 1, "1", at))
	}
	for _, r := range rows { // one batch each: ids follow the loop
		if _, err := store.SettleUsages(ctx, db.Pool, []store.UsageRow{r}); err != nil {
			t.Fatal(err)
		}
	}
	one := int64(1)
	usages := store.NewUsages(db.Pool)
	for _, tc := range []struct {
		name string
		f    store.UsageFilter
		want []string
	}{
		{"all", store.UsageFilter{}, ids(19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)},
		{"key 1", store.UsageFilter{APIKeyID: &one}, ids(18, 16, 14, 12, 10, 8, 6, 4, 2, 0)},
		{"model", store.UsageFilter{LogicalModel: "m"}, ids(19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)},
		{"since the boundary", store.UsageFilter{Since: boundary}, ids(19, 17, 15, 13, 11, 9, 7, 5, 3, 1)},
		{"request id", store.UsageFilter{RequestID: "r-07"}, ids(7)},
	} {
		var got []string
		f := tc.f
		f.Limit = 3
		for page := 0; page < 20; page++ {
			out, err := usages.List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range out {
				got = append(got, u.RequestID)
			}
			if len(out) < f.Limit {
				break
			}
			f.BeforeID = out[len(out)-1].ID
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: paged %v, want %v", tc.name, got, tc.want)
		}
	}
}

func ids(n ...int) []string {
	out := make([]string, len(n))
	for i, v := range n {
		out[i] = fmt.Sprintf("r-%02d", v)
	}
	return out
}

// Migration 0013 on a populated install: every row keeps its id and lands in its month's partition (or the
// default one), the rollups are not counted twice, the id sequence continues, redelivery of an old record is
// still a no-op and new settlements feed the rollups.
func TestMigrateUsagesToPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := databaseBefore(t, 13)
	snapTestExec(t, pool, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 1000)`)
	now := time.Now().UTC()
	var rows []store.UsageRow
	for i := range 40 { // the last 40 days, and two rows of a faulty data plane
		rows = append(rows, partRow(fmt.Sprintf("old-%02d", i), int64(1+i%3), 1, "0.5", now.Add(-time.Duration(i)*24*time.Hour)))
	}
	rows = append(rows, partRow("old-future", 1, 1, "1", now.AddDate(5, 0, 0)), partRow("old-past", 1, 1, "1", now.AddDate(-20, 0, 0)))
	for _, r := range rows { // as the 0011 settlement stored them (ON CONFLICT (request_id) then)
		snapTestExec(t, pool, `INSERT INTO usages (request_id, api_key_id, org_id, operation, inbound_kind, logical_model, cost,
			source, end_state, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7::numeric, $8, $9, $10)`,
			r.RequestID, r.APIKeyID, r.OrgID, r.Operation, r.InboundKind, r.LogicalModel, r.Cost, r.Source, r.EndState, r.CreatedAt)
	}
	snapTestExec(t, pool, `INSERT INTO quota_adjustments (id, scope, scope_id, amount, cost_used_before, cost_used_after, reason, actor_name, actor_role)
		VALUES (1, 'org', 1, -1, 21, 20, 'refund', 'op', 'admin')`)
	snapTestExec(t, pool, `INSERT INTO usages (request_id, org_id, operation, inbound_kind, cost, source, end_state, created_at, kind, adjustment_id)
		VALUES ('adj_1', 1, 'quota_adjustment', '', -1, 'none', 'completed', now(), 'adjustment', 1)`)
	before := scalar(t, pool, `SELECT string_agg(id || ':' || request_id || ':' || cost || ':' || created_at, ',' ORDER BY id) FROM usages`)
	rollup := scalar(t, pool, `SELECT sum(requests) || '/' || sum(cost) FROM spend_hour`)
	maxID := scalar(t, pool, `SELECT max(id)::text FROM usages`)

	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if got := scalar(t, pool, `SELECT string_agg(id || ':' || request_id || ':' || cost || ':' || created_at, ',' ORDER BY id) FROM usages`); got != before {
		t.Fatalf("rows changed by the migration:\n got %s\nwant %s", got, before)
	}
	if got := scalar(t, pool, `SELECT relkind::text FROM pg_class WHERE relname = 'usages'`); got != "p" {
		t.Fatalf("usages relkind %s, want p (partitioned)", got)
	}
	if p := partitionOf(t, pool, "old-future"); fmt.Sprint(p) != "[usages_default]" {
		t.Errorf("far-future row in %v", p)
	}
	if p := partitionOf(t, pool, "old-past"); fmt.Sprint(p) != "[usages_default]" {
		t.Errorf("far-past row in %v", p)
	}
	if p := partitionOf(t, pool, "old-00"); fmt.Sprint(p) != "[usages_"+now.Format("2006_01")+"]" {
		t.Errorf("today's row in %v", p)
	}
	if p := partitionOf(t, pool, "old-39"); fmt.Sprint(p) != "[usages_"+now.Add(-39*24*time.Hour).Format("2006_01")+"]" {
		t.Errorf("a row of 39 days ago in %v", p)
	}
	if got := scalar(t, pool, `SELECT sum(requests) || '/' || sum(cost) FROM spend_hour`); got != rollup {
		t.Errorf("rollups after the migration = %s, want %s", got, rollup)
	}
	// Redelivery of the old rows inserts nothing; a new row gets a later id and reaches the rollups.
	if res, err := store.SettleUsages(ctx, pool, rows); err != nil || len(res.Inserted) != 0 {
		t.Fatalf("redelivery after the migration: %v, inserted %v", err, res.Inserted)
	}
	if _, err := store.SettleUsages(ctx, pool, []store.UsageRow{partRow("new", 1, 1, "0.5", now)}); err != nil {
		t.Fatal(err)
	}
	var newID, old int64
	if err := pool.QueryRow(ctx, `SELECT id, $1::bigint FROM usages WHERE request_id = 'new'`, maxID).Scan(&newID, &old); err != nil {
		t.Fatal(err)
	}
	if newID <= old {
		t.Errorf("new row id %d not after the migrated rows' %d", newID, old)
	}
	if got := scalar(t, pool, `SELECT sum(requests)::text FROM (SELECT bucket, requests FROM spend_hour UNION ALL SELECT bucket, requests FROM spend_delta) r`); got != fmt.Sprint(len(rows)+1) {
		t.Errorf("rollup requests after a new settlement = %s, want %d", got, len(rows)+1)
	}
	// The adjustment row survived with its reason in the listing.
	out, err := store.ListUsages(ctx, pool, store.UsageFilter{Kind: "adjustment", Limit: 10})
	if err != nil || len(out) != 1 || out[0].Reason == nil || *out[0].Reason != "refund" {
		t.Fatalf("adjustment listing after the migration: %v, %+v", err, out)
	}
}

// databaseBefore creates a database with the migrations before version applied (as an install of that
// version has them) and returns its pool; the database is dropped when the test ends.
func databaseBefore(t *testing.T, version int) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, storetest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "tg_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), storetest.AdminURL())
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(storetest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	pool, err := store.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migs, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	snapTestExec(t, pool, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range migs {
		if m.Version >= version {
			break
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		}); err != nil {
			t.Fatalf("apply %s: %v", m.Name, err)
		}
	}
	return pool
}

// A batch whose row is routed to the default partition while maintenance creates that row's month (and so
// changes the default partition's bounds under it) is not refused as bad data — a refused batch would be
// dead-lettered by the data plane —: SettleUsages runs it again and the row lands in the new partition.
func TestSettleRacingPartitionCreationIsRetryable(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	month := time.Date(2033, 3, 1, 0, 0, 0, 0, time.UTC)
	if _, err := store.SettleUsages(ctx, db.Pool, []store.UsageRow{partRow("early", 1, 1, "1", month.Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	// Maintenance, held open mid-transaction: it has moved "early" and holds the default partition.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT usages_ensure_partition($1)`, month); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := store.SettleUsages(ctx, db.Pool, []store.UsageRow{partRow("racing", 1, 1, "1", month.Add(2*time.Hour))})
		done <- err
	}()
	// Let the settlement reach the default partition's lock, then commit the maintenance.
	for {
		var waiting bool
		if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'usages_default' AND NOT l.granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("racing settlement failed (refused as bad data: %v): %v", errors.Is(err, store.ErrConstraint), err)
	}
	for _, id := range []string{"early", "racing"} {
		if p := partitionOf(t, db.Pool, id); fmt.Sprint(p) != "[usages_2033_03]" {
			t.Errorf("%s in %v, want usages_2033_03", id, p)
		}
	}
}
