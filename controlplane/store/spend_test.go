package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/rollupfold"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

var spendDay0 = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// spendRows makes n usage rows over three UTC days from spendDay0 with varied dimensions, absent ids and
// costs of different scales (so exact sums matter).
func spendRows(n int, seed uint64) []store.UsageRow { return spendRowsFrom(n, seed, spendDay0) }

// spendRowsFrom is spendRows over the three days from day0.
func spendRowsFrom(n int, seed uint64, day0 time.Time) []store.UsageRow {
	r := rand.New(rand.NewPCG(seed, 18))
	id := func(max int64) *int64 {
		v := r.Int64N(max + 1)
		if v == 0 {
			return nil
		}
		return &v
	}
	models := []string{"gpt-4o", "claude-sonnet", "llama", ""}
	ops := []string{"chat", "embeddings", "responses"}
	states := []string{"completed", "completed", "completed", "upstream_error", "client_dropped", "rejected"}
	costs := []string{"0", "0.000123", "1.5", "0.1", "0.000000000000000001", "12.25", "0.3333333333"}
	out := make([]store.UsageRow, n)
	for i := range out {
		m := models[r.IntN(len(models))]
		out[i] = store.UsageRow{
			RequestID: fmt.Sprintf("req-%d-%d", seed, i), OrgID: id(2), TeamID: id(3), UserID: id(4), APIKeyID: id(5),
			ProviderID: id(2), LogicalModel: m, UpstreamModel: strings.ToUpper(m), Operation: ops[r.IntN(len(ops))],
			InboundKind: "openai_chat", InputTokens: r.Int64N(5000), OutputTokens: r.Int64N(800),
			CacheReadTokens: r.Int64N(100), CacheCreation5m: r.Int64N(10), CacheCreation30m: r.Int64N(10),
			CacheCreation1h: r.Int64N(10), ImageOutput: r.Int64N(3), Cost: costs[r.IntN(len(costs))],
			Source: "upstream", EndState: states[r.IntN(len(states))],
			CreatedAt: day0.Add(time.Duration(r.Int64N(int64(72 * time.Hour)))),
		}
	}
	return out
}

func settleAll(t *testing.T, db *storetest.DB, rows []store.UsageRow) {
	t.Helper()
	for i := 0; i < len(rows); i += 50 {
		if _, err := store.SettleUsages(context.Background(), db.Pool, rows[i:min(i+50, len(rows))]); err != nil {
			t.Fatal(err)
		}
	}
}

type spendRef struct {
	requests int64
	cost     string
	tokens   store.SpendTokens
}

// referenceSpend aggregates usages directly (what the rollups must equal) with the same buckets, groups and
// filters as q, keyed like keyOf.
func referenceSpend(t *testing.T, db store.DBTX, q store.SpendQuery) map[string]spendRef {
	t.Helper()
	cols := map[store.SpendDim]string{store.DimOrg: "coalesce(org_id, 0)", store.DimTeam: "coalesce(team_id, 0)",
		store.DimUser: "coalesce(user_id, 0)", store.DimKey: "coalesce(api_key_id, 0)",
		store.DimProvider: "coalesce(provider_id, 0)", store.DimLogicalModel: "logical_model",
		store.DimUpstreamModel: "upstream_model", store.DimOperation: "operation", store.DimEndState: "end_state"}
	loc := "UTC"
	if q.Location != nil {
		loc = q.Location.String()
	}
	bucket := map[store.SpendBucket]string{store.BucketNone: "$1::timestamptz",
		store.BucketHour: "date_trunc('hour', created_at, 'UTC')", store.BucketDay: "date_trunc('day', created_at, '" + loc + "')",
		store.BucketMonth: "date_trunc('month', created_at, '" + loc + "')"}[q.Bucket]
	sel := []string{bucket}
	for _, d := range q.GroupBy {
		sel = append(sel, cols[d]+"::text")
	}
	where := []string{"created_at >= $1", "created_at < $2"}
	args := []any{q.Since, q.Until}
	for _, f := range q.Filters {
		if f.Dim.IsID() {
			args = append(args, f.IDs)
			where = append(where, fmt.Sprintf("%s = ANY($%d::bigint[])", cols[f.Dim], len(args)))
		} else {
			args = append(args, f.Values)
			where = append(where, fmt.Sprintf("%s = ANY($%d::text[])", cols[f.Dim], len(args)))
		}
	}
	rows, err := db.Query(context.Background(), `SELECT concat_ws('|', `+strings.Join(sel, ", ")+`), count(*),
		trim_scale(sum(cost))::text, sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint,
		sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint,
		sum(image_output_tokens)::bigint FROM usages WHERE `+strings.Join(where, " AND ")+` GROUP BY 1`, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]spendRef{}
	for rows.Next() {
		var k string
		var v spendRef
		tk := &v.tokens
		if err := rows.Scan(&k, &v.requests, &v.cost, &tk.Input, &tk.Output, &tk.CacheRead, &tk.CacheCreation5m,
			&tk.CacheCreation30m, &tk.CacheCreation1h, &tk.ImageOutput); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// keyOf renders a row's key as referenceSpend does (Postgres's text of the bucket and the group values).
func keyOf(t *testing.T, db store.DBTX, r store.SpendRow) string {
	t.Helper()
	var b string
	if err := db.QueryRow(context.Background(), `SELECT $1::timestamptz::text`, r.BucketStart).Scan(&b); err != nil {
		t.Fatal(err)
	}
	parts := []string{b}
	for _, g := range r.Group {
		switch {
		case g.Dim.IsID() && g.ID == nil:
			parts = append(parts, "0")
		case g.Dim.IsID():
			parts = append(parts, fmt.Sprint(*g.ID))
		default:
			parts = append(parts, g.Value)
		}
	}
	return strings.Join(parts, "|")
}

func idText(id *int64) string {
	if id == nil {
		return "none"
	}
	return fmt.Sprint(*id)
}

// sumDecimals adds decimal strings exactly (in Postgres).
func sumDecimals(t *testing.T, db store.DBTX, ds []string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), `SELECT trim_scale(coalesce(sum(x::numeric), 0))::text FROM unnest($1::text[]) x`, ds).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func usagesCost(t *testing.T, db store.DBTX, since, until time.Time) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), `SELECT trim_scale(coalesce(sum(cost), 0))::text FROM usages
		WHERE created_at >= $1 AND created_at < $2`, since, until).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSpendRollupsEqualUsages(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rows := spendRows(1500, 1)
	settleAll(t, db, rows)
	// Delivered again (a retried batch, and overlapping batches): the rollups must not count them twice.
	settleAll(t, db, rows[:400])
	settleAll(t, db, append(spendRows(100, 2), rows[700:800]...))

	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	one, zero := int64(1), int64(0)
	cases := []struct {
		name  string
		q     store.SpendQuery
		table string
	}{
		{"day by model", store.SpendQuery{Since: spendDay0, Until: spendDay0.Add(72 * time.Hour), Bucket: store.BucketDay,
			GroupBy: []store.SpendDim{store.DimLogicalModel}}, "spend_team_day"},
		{"hour by key and end state in org 1", store.SpendQuery{Since: spendDay0.Add(5 * time.Hour), Until: spendDay0.Add(30 * time.Hour),
			Bucket: store.BucketHour, GroupBy: []store.SpendDim{store.DimKey, store.DimEndState},
			Filters: []store.SpendFilter{{Dim: store.DimOrg, IDs: []int64{one}}}}, "spend_hour"},
		{"month by org in New York", store.SpendQuery{Since: spendDay0.Add(3 * time.Hour), Until: spendDay0.Add(70 * time.Hour),
			Bucket: store.BucketMonth, Location: ny, GroupBy: []store.SpendDim{store.DimOrg}}, "spend_team_hour"},
		{"day in New York by team and operation", store.SpendQuery{Since: spendDay0, Until: spendDay0.Add(72 * time.Hour),
			Bucket: store.BucketDay, Location: ny, GroupBy: []store.SpendDim{store.DimTeam, store.DimOperation}}, "spend_team_hour"},
		{"day by provider and operation for keys 1 and none", store.SpendQuery{Since: spendDay0, Until: spendDay0.Add(48 * time.Hour),
			Bucket: store.BucketDay, GroupBy: []store.SpendDim{store.DimProvider, store.DimOperation},
			Filters: []store.SpendFilter{{Dim: store.DimKey, IDs: []int64{one, zero}}}}, "spend_day"},
		{"by day, no groups", store.SpendQuery{Since: spendDay0, Until: spendDay0.Add(72 * time.Hour), Bucket: store.BucketDay}, "spend_team_day"},
		{"no bucket by user and upstream model, filtered by model and state", store.SpendQuery{Since: spendDay0,
			Until: spendDay0.Add(72 * time.Hour), GroupBy: []store.SpendDim{store.DimUser, store.DimUpstreamModel},
			Filters: []store.SpendFilter{{Dim: store.DimLogicalModel, Values: []string{"gpt-4o", ""}},
				{Dim: store.DimEndState, Values: []string{"completed"}}}}, "spend_day"},
		{"day by key", store.SpendQuery{Since: spendDay0, Until: spendDay0.Add(72 * time.Hour), Bucket: store.BucketDay,
			GroupBy: []store.SpendDim{store.DimKey}}, "spend_key_day"},
		{"month by user for team 2 and none", store.SpendQuery{Since: spendDay0, Until: spendDay0.Add(72 * time.Hour),
			Bucket: store.BucketMonth, GroupBy: []store.SpendDim{store.DimUser},
			Filters: []store.SpendFilter{{Dim: store.DimTeam, IDs: []int64{2, zero}}}}, "spend_key_day"},
		{"no bucket by org and key", store.SpendQuery{Since: spendDay0, Until: spendDay0.Add(72 * time.Hour),
			GroupBy: []store.SpendDim{store.DimOrg, store.DimKey}}, "spend_key_day"},
		{"day by key and logical model", store.SpendQuery{Since: spendDay0, Until: spendDay0.Add(72 * time.Hour), Bucket: store.BucketDay,
			GroupBy: []store.SpendDim{store.DimKey, store.DimLogicalModel}}, "spend_day"},
		{"empty range", store.SpendQuery{Since: spendDay0.Add(-48 * time.Hour), Until: spendDay0, Bucket: store.BucketDay,
			GroupBy: []store.SpendDim{store.DimOrg}}, "spend_team_day"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if table := checkSpend(t, db, tc.q); table != tc.table {
				t.Errorf("read %s, want %s", table, tc.table)
			}
		})
	}
}

// checkSpend answers q from the rollups and compares every row, and the total, with usages aggregated
// directly. It returns the rollup read.
func checkSpend(t *testing.T, db *storetest.DB, q store.SpendQuery) string {
	t.Helper()
	return checkSpendIn(t, db.Pool, q)
}

// checkSpendIn is checkSpend on db (a pool, or a transaction whose snapshot both reads share).
func checkSpendIn(t *testing.T, db store.DBTX, q store.SpendQuery) string {
	t.Helper()
	q.MaxRows = 100000
	ans, err := store.QuerySpend(context.Background(), db, q)
	if err != nil {
		t.Fatal(err)
	}
	want := referenceSpend(t, db, q)
	if len(ans.Rows) != len(want) {
		t.Errorf("%s: %d rows, want %d", ans.Table, len(ans.Rows), len(want))
	}
	var costs []string
	for _, r := range ans.Rows {
		k := keyOf(t, db, r)
		w, ok := want[k]
		if !ok {
			t.Errorf("%s: row %s not in usages", ans.Table, k)
			continue
		}
		if r.Requests != w.requests || r.Cost != w.cost || r.Tokens != w.tokens {
			t.Errorf("%s: row %s = %d %s %+v, usages say %d %s %+v", ans.Table, k, r.Requests, r.Cost, r.Tokens, w.requests, w.cost, w.tokens)
		}
		costs = append(costs, r.Cost)
	}
	if len(q.Filters) == 0 {
		total := usagesCost(t, db, q.Since, q.Until)
		if got := sumDecimals(t, db, costs); got != total || ans.Total.Cost != total {
			t.Errorf("%s: sum of rows %s, total %s; sum(usages.cost) = %s", ans.Table, got, ans.Total.Cost, total)
		}
	}
	return ans.Table
}

func TestSpendTopN(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	settleAll(t, db, spendRows(800, 3))
	since, until := spendDay0, spendDay0.Add(72*time.Hour)
	all, err := store.QuerySpend(ctx, db.Pool, store.SpendQuery{Since: since, Until: until,
		GroupBy: []store.SpendDim{store.DimKey}, MaxRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	top, err := store.QuerySpend(ctx, db.Pool, store.SpendQuery{Since: since, Until: until, Bucket: store.BucketDay,
		GroupBy: []store.SpendDim{store.DimKey}, Top: 2, MaxRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// all has one row per key, by cost descending: the first two are the top two.
	if len(all.Rows) < 4 {
		t.Fatalf("%d keys, want at least 4", len(all.Rows))
	}
	keep := map[string]bool{}
	for _, r := range all.Rows[:2] {
		keep[idText(r.Group[0].ID)] = true
	}
	perGroup := map[string][]string{}
	var costs []string
	for _, r := range top.Rows {
		costs = append(costs, r.Cost)
		if r.Other {
			if len(r.Group) != 0 {
				t.Errorf("other row has a group %+v", r.Group)
			}
			perGroup["other"] = append(perGroup["other"], r.Cost)
			continue
		}
		k := idText(r.Group[0].ID)
		if !keep[k] {
			t.Errorf("key %s is not among the top 2", k)
		}
		perGroup[k] = append(perGroup[k], r.Cost)
	}
	for _, r := range all.Rows[:2] {
		if got := sumDecimals(t, db.Pool, perGroup[idText(r.Group[0].ID)]); got != r.Cost {
			t.Errorf("top key %v: days add to %s, want %s", r.Group[0].ID, got, r.Cost)
		}
	}
	var rest []string
	for _, r := range all.Rows[2:] {
		rest = append(rest, r.Cost)
	}
	if got, want := sumDecimals(t, db.Pool, perGroup["other"]), sumDecimals(t, db.Pool, rest); got != want {
		t.Errorf("other = %s, want %s", got, want)
	}
	if got, want := sumDecimals(t, db.Pool, costs), usagesCost(t, db.Pool, since, until); got != want || top.Total.Cost != want {
		t.Errorf("rows add to %s (total %s), usages %s", got, top.Total.Cost, want)
	}
	if _, err := store.QuerySpend(ctx, db.Pool, store.SpendQuery{Since: since, Until: until, Bucket: store.BucketHour,
		GroupBy: []store.SpendDim{store.DimKey}, MaxRows: 10}); err == nil || !strings.Contains(err.Error(), "too many rows") {
		t.Errorf("over MaxRows: %v, want too many rows", err)
	}
}

// TestSpendRollupsFollowTheTransaction: a usage insert rolled back leaves the rollups and spend_delta
// untouched, and so does a fold rolled back (its time included).
func TestSpendRollupsFollowTheTransaction(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	var foldedAt time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT folded_at FROM spend_fold`).Scan(&foldedAt); err != nil {
		t.Fatal(err)
	}
	const count = `SELECT (SELECT count(*) FROM spend_hour) + (SELECT count(*) FROM spend_day)
		+ (SELECT count(*) FROM spend_key_day) + (SELECT count(*) FROM spend_team_hour) + (SELECT count(*) FROM spend_team_day),
		(SELECT count(*) FROM spend_delta), (SELECT folded_at FROM spend_fold)`
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO usages (request_id, operation, inbound_kind, cost, source, end_state, created_at)
		VALUES ('r1', 'chat', 'openai_chat', 1.5, 'upstream', 'completed', $1)`, spendDay0); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO usages (request_id, operation, inbound_kind, cost, source, end_state, created_at)
		VALUES ('r2', 'chat', 'openai_chat', 2.5, 'upstream', 'completed', now() + interval '2 hours')`); err != nil {
		t.Fatal(err)
	}
	var rollups, delta int
	var at time.Time
	if err := tx.QueryRow(ctx, count).Scan(&rollups, &delta, &at); err != nil {
		t.Fatal(err)
	}
	if rollups != 0 || delta != 2 {
		t.Errorf("before the fold: %d rollup rows and %d delta rows, want 0 and 2", rollups, delta)
	}
	var moved int
	if err := tx.QueryRow(ctx, `SELECT spend_rollup_fold()`).Scan(&moved); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, count).Scan(&rollups, &delta, &at); err != nil {
		t.Fatal(err)
	}
	if moved != 2 || rollups != 10 || delta != 0 {
		t.Errorf("after the fold: moved %d, %d rollup rows and %d delta rows, want 2, 10 and 0", moved, rollups, delta)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, count).Scan(&rollups, &delta, &at); err != nil {
		t.Fatal(err)
	}
	if rollups != 0 || delta != 0 || !at.Equal(foldedAt) {
		t.Errorf("after rollback: %d rollup rows, %d delta rows, folded at %s (was %s)", rollups, delta, at, foldedAt)
	}
}

// spendChecks are queries reading each rollup over the three days from day0 (and two days after).
func spendChecks(t *testing.T, day0 time.Time) []spendCheck {
	t.Helper()
	since := day0.Truncate(24 * time.Hour)
	until := since.Add(5 * 24 * time.Hour)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	return []spendCheck{
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketDay, GroupBy: []store.SpendDim{store.DimLogicalModel}}, "spend_team_day"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketMonth, GroupBy: []store.SpendDim{store.DimOrg, store.DimTeam}}, "spend_team_day"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketDay, GroupBy: []store.SpendDim{store.DimKey}}, "spend_key_day"},
		{store.SpendQuery{Since: since, Until: until, GroupBy: []store.SpendDim{store.DimUser},
			Filters: []store.SpendFilter{{Dim: store.DimOrg, IDs: []int64{1}}}}, "spend_key_day"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketDay, GroupBy: []store.SpendDim{store.DimKey, store.DimEndState}}, "spend_day"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketHour, GroupBy: []store.SpendDim{store.DimTeam, store.DimOperation}}, "spend_team_hour"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketDay, Location: ny, GroupBy: []store.SpendDim{store.DimProvider}}, "spend_team_hour"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketHour, GroupBy: []store.SpendDim{store.DimUser, store.DimLogicalModel}}, "spend_hour"},
	}
}

type spendCheck struct {
	q     store.SpendQuery
	table string
}

// checkAll runs the checks and the rollup invariant on db (a pool, or a transaction whose snapshot they share).
func checkAll(t *testing.T, db store.DBTX, checks []spendCheck, stage string) {
	t.Helper()
	for _, c := range checks {
		if table := checkSpendIn(t, db, c.q); table != c.table {
			t.Errorf("%s: read %s, want %s", stage, table, c.table)
		}
	}
	checkRollups(t, db, stage)
}

// insertOldUsages inserts rows with columns usages has had since migration 0001 (for databases migrated to an
// older version), one statement per row.
func insertOldUsages(t *testing.T, db store.DBTX, rows []store.UsageRow) {
	t.Helper()
	for _, r := range rows {
		if _, err := db.Exec(context.Background(), `INSERT INTO usages (request_id, api_key_id, user_id, team_id, org_id,
			    provider_id, logical_model, upstream_model, operation, inbound_kind, input_tokens, output_tokens,
			    cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens,
			    image_output_tokens, cost, source, end_state, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18::numeric, $19, $20, $21)`,
			r.RequestID, r.APIKeyID, r.UserID, r.TeamID, r.OrgID, r.ProviderID, r.LogicalModel, r.UpstreamModel,
			r.Operation, r.InboundKind, r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheCreation5m,
			r.CacheCreation30m, r.CacheCreation1h, r.ImageOutput, r.Cost, r.Source, r.EndState, r.CreatedAt); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSpendMigrationBackfills: rows stored before the rollups existed (a database at migration 0010) are in
// every rollup after the migrations (0011's backfill, 0012's fold mark and key-grain table, 0013, 0014).
func TestSpendMigrationBackfills(t *testing.T) {
	t.Parallel()
	pool := databaseBefore(t, 11)
	insertOldUsages(t, pool, spendRows(300, 4))
	if _, err := store.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	checkAll(t, pool, spendChecks(t, spendDay0), "after the migrations")
	if n := scalar(t, pool, `SELECT count(*)::text FROM spend_delta`); n != "0" {
		t.Errorf("%s spend_delta rows after the migrations, want 0", n)
	}
}

// TestSpendDeltaMigrationUpgrades0013: a database at migration 0013 holding rows in every state 0012 knew
// (hours folded, hours after the mark in spend_hour only, late rows of folded hours, redelivered batches) is
// exact after 0014, with every rollup complete and spend_delta empty, and stays exact as settlement and folds
// go on.
func TestSpendDeltaMigrationUpgrades0013(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := databaseBefore(t, 14)
	db := &storetest.DB{Pool: pool}
	hour := time.Now().UTC().Truncate(time.Hour)
	past := spendRows(200, 11)             // before 0012's mark: every rollup
	future := spendRowsFrom(300, 12, hour) // from the current hour: spend_hour only until folded
	settleAll(t, db, append(past[:100:100], future[:200]...))
	if _, err := pool.Exec(ctx, `SELECT spend_rollup_fold($1)`, hour.Add(30*time.Hour)); err != nil {
		t.Fatal(err)
	}
	settleAll(t, db, append(append(past[50:], future[100:]...), future[:20]...)) // late rows and redeliveries
	before := scalar(t, pool, `SELECT count(*) || ' ' || sum(cost) FROM usages`)
	var pending int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM spend_hour WHERE bucket >= (SELECT folded_before FROM spend_fold)`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending == 0 {
		t.Fatal("no spend_hour rows after 0012's mark: the test would not exercise the upgrade")
	}
	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if got := scalar(t, pool, `SELECT count(*) || ' ' || sum(cost) FROM usages`); got != before {
		t.Errorf("usages changed by the migration: %s, was %s", got, before)
	}
	if n := scalar(t, pool, `SELECT count(*)::text FROM spend_delta`); n != "0" {
		t.Errorf("%s spend_delta rows after the migration, want 0", n)
	}
	checkAll(t, pool, spendChecks(t, spendDay0), "past days after the migration")
	checks := spendChecks(t, hour)
	checkAll(t, pool, checks, "after the migration")
	settleAll(t, db, append(spendRowsFrom(100, 13, hour), future...))
	checkAll(t, pool, checks, "settled after the migration")
	if _, err := pool.Exec(ctx, `SELECT spend_rollup_fold()`); err != nil {
		t.Fatal(err)
	}
	checkAll(t, pool, checks, "folded after the migration")
}

// TestSpendFoldKeepsRollupsExact: settled rows wait in spend_delta until a fold; folds (explicit, by the
// trigger when due, concurrent with settlement and with each other), late rows, redelivered, concurrent and
// rolled-back batches leave every answer equal to usages aggregated directly, in every snapshot, including
// snapshots taken while folds and batches are in flight.
func TestSpendFoldKeepsRollupsExact(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	day0 := time.Now().UTC().Truncate(time.Hour).Add(-30 * time.Hour)
	checks := spendChecks(t, day0)
	fold := func() {
		if _, err := db.Pool.Exec(ctx, `SELECT spend_rollup_fold()`); err != nil {
			t.Errorf("fold: %v", err)
		}
	}
	rows := spendRowsFrom(900, 5, day0)
	settleAll(t, db, rows[:300])
	var rollups int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM spend_hour) + (SELECT count(*) FROM spend_day)
		+ (SELECT count(*) FROM spend_key_day) + (SELECT count(*) FROM spend_team_hour) + (SELECT count(*) FROM spend_team_day)`).Scan(&rollups); err != nil {
		t.Fatal(err)
	}
	if rollups != 0 {
		t.Errorf("%d rollup rows before any fold, want 0 (settled rows wait in spend_delta)", rollups)
	}
	checkAll(t, db.Pool, checks, "nothing folded")
	fold()
	checkAll(t, db.Pool, checks, "folded")

	// Four writers settle the rest in batches of 25, each batch with ten rows settled already (redelivered,
	// some folded already), while folds run: explicit ones, and the trigger's (the fold time set back so that
	// the next settlement statement folds), and snapshots are checked in flight.
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := rows[300+w*150 : 300+(w+1)*150]
			for i := 0; i < len(part); i += 25 {
				batch := append(append([]store.UsageRow{}, part[i:i+25]...), rows[w*10:w*10+10]...)
				if _, err := store.SettleUsages(ctx, db.Pool, batch); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	var folders sync.WaitGroup
	folders.Add(2)
	go func() {
		defer folders.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if i%2 == 0 {
				fold()
			} else if _, err := db.Pool.Exec(ctx, `UPDATE spend_fold SET folded_at = '-infinity'`); err != nil {
				t.Errorf("set the fold due: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	go func() {
		defer folders.Done()
		for {
			// One snapshot for the rollups and usages.
			tx, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
			if err != nil {
				t.Errorf("begin: %v", err)
				return
			}
			checkAll(t, tx, checks, "in flight")
			_ = tx.Rollback(ctx)
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	wg.Wait()
	close(done)
	folders.Wait()
	var folds int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM spend_hour`).Scan(&folds); err != nil || folds == 0 {
		t.Errorf("spend_hour rows after the folds: %d, %v", folds, err)
	}
	// A batch, and a fold, rolled back with their transaction.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO usages (request_id, api_key_id, user_id, team_id, org_id, logical_model,
		    operation, inbound_kind, cost, source, end_state, created_at)
		SELECT 'rolled-back-' || i, 1 + i % 5, 1 + i % 4, 1 + i % 3, 1 + i % 2, 'gpt-4o', 'chat', 'openai_chat', 0.25,
		       'upstream', 'completed', $1::timestamptz + i * interval '1 hour'
		  FROM generate_series(0, 71) i`, day0); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT spend_rollup_fold()`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	checkAll(t, db.Pool, checks, "after concurrent, redelivered and rolled-back batches")
	fold()
	checkAll(t, db.Pool, checks, "everything folded")
	if n := scalar(t, db.Pool, `SELECT count(*)::text FROM spend_delta`); n != "0" {
		t.Errorf("%s spend_delta rows after the last fold, want 0", n)
	}
}

// checkRollups asserts the invariant of migration 0014 on every rollup: the rollup plus spend_delta, summed to
// the rollup's grain, equals the request rows of usages summed to it.
func checkRollups(t *testing.T, db store.DBTX, stage string) {
	t.Helper()
	sums := `count(*)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint,
		sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint,
		sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint`
	resums := `sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint,
		sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint,
		sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint`
	full := "org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state"
	team := "org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state"
	for table, c := range map[string]struct{ trunc, cols string }{
		"spend_hour":      {"hour", full},
		"spend_day":       {"day", full},
		"spend_key_day":   {"day", "org_id, team_id, user_id, api_key_id"},
		"spend_team_hour": {"hour", team},
		"spend_team_day":  {"day", team},
	} {
		var usageCols []string
		for _, col := range strings.Split(c.cols, ", ") {
			if strings.HasSuffix(col, "_id") {
				col = "coalesce(" + col + ", 0)"
			}
			usageCols = append(usageCols, col)
		}
		var diff int
		if err := db.QueryRow(context.Background(), fmt.Sprintf(`
			WITH want AS (SELECT date_trunc('%[1]s', created_at, 'UTC') AS bucket, %[2]s, %[3]s FROM usages
			               WHERE kind = 'request' GROUP BY 1, %[2]s),
			     have AS (SELECT date_trunc('%[1]s', bucket, 'UTC') AS bucket, %[4]s, %[5]s
			                FROM (SELECT bucket, %[4]s, requests, cost, input_tokens, output_tokens, cache_read_tokens,
						cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens
						FROM %[6]s UNION ALL SELECT bucket, %[4]s, requests, cost, input_tokens,
			                        output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens,
			                        cache_creation_1h_tokens, image_output_tokens FROM spend_delta) r
			               GROUP BY 1, %[4]s)
			SELECT count(*) FROM ((SELECT * FROM want EXCEPT ALL SELECT * FROM have)
			                UNION ALL (SELECT * FROM have EXCEPT ALL SELECT * FROM want)) d`,
			c.trunc, strings.Join(usageCols, ", "), sums, c.cols, resums, table)).Scan(&diff); err != nil {
			t.Fatal(err)
		}
		if diff != 0 {
			t.Errorf("%s: %s plus spend_delta differs from usages in %d rows", stage, table, diff)
		}
	}
}

// TestFoldSpendInItsOwnTransaction: the control plane's periodic fold (rollupfold.Folder → store.FoldSpend)
// empties spend_delta into the rollups outside any settlement, skips the round while another transaction
// holds the fold lock, and leaves every rollup equal to usages aggregated directly.
func TestFoldSpendInItsOwnTransaction(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	settleAll(t, db, spendRowsFrom(200, 11, time.Now().UTC().Truncate(time.Hour).Add(-5*time.Hour)))
	deltaRows := func() int64 {
		t.Helper()
		var n int64
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM spend_delta`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := deltaRows()
	if before == 0 {
		t.Fatal("no spend_delta rows after settlement: nothing to fold")
	}

	holder, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock(1953459308, 18)`); err != nil {
		t.Fatal(err)
	}
	if moved, ran, err := store.FoldSpend(ctx, db.Pool); err != nil || ran || moved != 0 {
		t.Fatalf("FoldSpend while another transaction folds = (%d, %v, %v), want (0, false, nil)", moved, ran, err)
	}
	if got := deltaRows(); got != before {
		t.Fatalf("spend_delta has %d rows after a skipped fold, want %d", got, before)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	moved, ran, err := store.FoldSpend(ctx, db.Pool)
	if err != nil || !ran || moved != before {
		t.Fatalf("FoldSpend = (%d, %v, %v), want (%d, true, nil)", moved, ran, err, before)
	}
	if got := deltaRows(); got != 0 {
		t.Fatalf("spend_delta has %d rows after the fold, want 0", got)
	}
	checkRollups(t, db.Pool, "after the periodic fold")
}

// TestFolderFoldsPeriodically: a running Folder folds what settlement appends, round after round.
func TestFolderFoldsPeriodically(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	hour := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	f := &rollupfold.Folder{DB: db.Pool, Interval: 20 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	waitEmpty := func(stage string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var n int64
			if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM spend_delta`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: spend_delta still has %d rows after 10 s of a Folder running every 20 ms", stage, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for round := range 3 {
		settleAll(t, db, spendRowsFrom(100, uint64(20+round), hour)[:100])
		waitEmpty(fmt.Sprintf("round %d", round))
		checkRollups(t, db.Pool, fmt.Sprintf("round %d", round))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Folder.Run: %v", err)
	}
}
