package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

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
func referenceSpend(t *testing.T, db *storetest.DB, q store.SpendQuery) map[string]spendRef {
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
	rows, err := db.Pool.Query(context.Background(), `SELECT concat_ws('|', `+strings.Join(sel, ", ")+`), count(*),
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
func keyOf(t *testing.T, db *storetest.DB, r store.SpendRow) string {
	t.Helper()
	var b string
	if err := db.Pool.QueryRow(context.Background(), `SELECT $1::timestamptz::text`, r.BucketStart).Scan(&b); err != nil {
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
func sumDecimals(t *testing.T, db *storetest.DB, ds []string) string {
	t.Helper()
	var s string
	if err := db.Pool.QueryRow(context.Background(), `SELECT trim_scale(coalesce(sum(x::numeric), 0))::text FROM unnest($1::text[]) x`, ds).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func usagesCost(t *testing.T, db *storetest.DB, since, until time.Time) string {
	t.Helper()
	var s string
	if err := db.Pool.QueryRow(context.Background(), `SELECT trim_scale(coalesce(sum(cost), 0))::text FROM usages
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
	q.MaxRows = 100000
	ans, err := store.QuerySpend(context.Background(), db.Pool, q)
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
		if got := sumDecimals(t, db, perGroup[idText(r.Group[0].ID)]); got != r.Cost {
			t.Errorf("top key %v: days add to %s, want %s", r.Group[0].ID, got, r.Cost)
		}
	}
	var rest []string
	for _, r := range all.Rows[2:] {
		rest = append(rest, r.Cost)
	}
	if got, want := sumDecimals(t, db, perGroup["other"]), sumDecimals(t, db, rest); got != want {
		t.Errorf("other = %s, want %s", got, want)
	}
	if got, want := sumDecimals(t, db, costs), usagesCost(t, db, since, until); got != want || top.Total.Cost != want {
		t.Errorf("rows add to %s (total %s), usages %s", got, top.Total.Cost, want)
	}
	if _, err := store.QuerySpend(ctx, db.Pool, store.SpendQuery{Since: since, Until: until, Bucket: store.BucketHour,
		GroupBy: []store.SpendDim{store.DimKey}, MaxRows: 10}); err == nil || !strings.Contains(err.Error(), "too many rows") {
		t.Errorf("over MaxRows: %v, want too many rows", err)
	}
}

// TestSpendRollupsFollowTheTransaction: a usage insert rolled back leaves the rollups untouched, and so does
// a fold rolled back (the mark included).
func TestSpendRollupsFollowTheTransaction(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	var mark time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT folded_before FROM spend_fold`).Scan(&mark); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO usages (request_id, operation, inbound_kind, cost, source, end_state, created_at)
		VALUES ('r1', 'chat', 'openai_chat', 1.5, 'upstream', 'completed', $1)`, spendDay0); err != nil {
		t.Fatal(err)
	}
	// A row of an hour not folded yet, and a fold of it in the same transaction.
	if _, err := tx.Exec(ctx, `INSERT INTO usages (request_id, operation, inbound_kind, cost, source, end_state, created_at)
		VALUES ('r2', 'chat', 'openai_chat', 2.5, 'upstream', 'completed', now() + interval '2 hours')`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT spend_rollup_fold(now() + interval '4 hours')`); err != nil {
		t.Fatal(err)
	}
	var inTx int
	if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM spend_hour) + (SELECT count(*) FROM spend_day)
		+ (SELECT count(*) FROM spend_key_day) + (SELECT count(*) FROM spend_team_hour) + (SELECT count(*) FROM spend_team_day)`).Scan(&inTx); err != nil {
		t.Fatal(err)
	}
	if inTx != 10 {
		t.Errorf("inside the transaction the rollups hold %d rows, want 10", inTx)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var after int
	var markAfter time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM spend_hour) + (SELECT count(*) FROM spend_day)
		+ (SELECT count(*) FROM spend_key_day) + (SELECT count(*) FROM spend_team_hour) + (SELECT count(*) FROM spend_team_day),
		(SELECT folded_before FROM spend_fold)`).Scan(&after, &markAfter); err != nil {
		t.Fatal(err)
	}
	if after != 0 || !markAfter.Equal(mark) {
		t.Errorf("after rollback the rollups hold %d rows and the mark is %s (was %s)", after, markAfter, mark)
	}
}

// TestSpendMigrationBackfills runs the backfills of migrations 0011 (the rollups from usages) and 0012 (the
// fold mark and spend_key_day from spend_day) over rows settled without the trigger.
func TestSpendMigrationBackfills(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE usages DISABLE TRIGGER usages_spend_rollup`); err != nil {
		t.Fatal(err)
	}
	settleAll(t, db, spendRows(300, 4))
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE usages ENABLE TRIGGER usages_spend_rollup`); err != nil {
		t.Fatal(err)
	}
	migs, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var backfill11, backfill12 string
	for _, m := range migs {
		switch m.Version {
		case 11:
			_, backfill11, _ = strings.Cut(m.SQL, "-- The rows settled before this migration.")
		case 12:
			_, backfill12, _ = strings.Cut(m.SQL, "-- 0011 kept all four rollups complete")
		}
	}
	if strings.Count(backfill11, "INSERT INTO spend_") != 4 || strings.Count(backfill12, "INSERT INTO spend_") != 2 {
		t.Fatalf("migration 0011 or 0012 backfill not found")
	}
	backfill12 = strings.TrimPrefix(backfill12[strings.Index(backfill12, "\n"):], "\n")
	if _, err := db.Pool.Exec(ctx, `DELETE FROM spend_fold`); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{backfill11, backfill12} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var mark time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT folded_before FROM spend_fold`).Scan(&mark); err != nil {
		t.Fatal(err)
	}
	if now := time.Now().UTC().Truncate(time.Hour); mark.Before(now) {
		t.Errorf("mark %s before the current hour %s", mark, now)
	}
	since, until := spendDay0, spendDay0.Add(72*time.Hour)
	for _, c := range []struct {
		q     store.SpendQuery
		table string
	}{
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketHour, GroupBy: []store.SpendDim{store.DimKey, store.DimLogicalModel}}, "spend_hour"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketDay, GroupBy: []store.SpendDim{store.DimUser, store.DimKey}}, "spend_key_day"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketDay, GroupBy: []store.SpendDim{store.DimKey, store.DimEndState}}, "spend_day"},
		{store.SpendQuery{Since: since, Until: until, Bucket: store.BucketDay, GroupBy: []store.SpendDim{store.DimLogicalModel}}, "spend_team_day"},
	} {
		if table := checkSpend(t, db, c.q); table != c.table {
			t.Errorf("read %s, want %s", table, c.table)
		}
	}
	checkFolded(t, db, "after the backfills")
}

// TestSpendFoldKeepsRollupsExact: rows of hours not folded yet are in spend_hour only; folds (explicit, and
// concurrent with settlement), late rows (hours already folded), redelivered, concurrent and rolled-back
// batches leave every rollup's answer equal to usages aggregated directly, and each coarse rollup equal to
// the spend_hour rows before the mark summed to its grain.
func TestSpendFoldKeepsRollupsExact(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	// Three days from two hours after the current one: after the mark the migration set (its hour), so
	// settling them writes spend_hour only until a fold.
	day0 := time.Now().UTC().Truncate(time.Hour).Add(2 * time.Hour)
	since := day0.Truncate(24 * time.Hour)
	until := since.Add(5 * 24 * time.Hour)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	queries := []struct {
		q     store.SpendQuery
		table string
	}{
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
	check := func(stage string) {
		t.Helper()
		for _, c := range queries {
			if table := checkSpend(t, db, c.q); table != c.table {
				t.Errorf("%s: read %s, want %s", stage, table, c.table)
			}
		}
		checkFolded(t, db, stage)
	}
	fold := func(upto time.Time) {
		if _, err := db.Pool.Exec(ctx, `SELECT spend_rollup_fold($1)`, upto); err != nil {
			t.Errorf("fold to %s: %v", upto, err)
		}
	}
	rows := spendRowsFrom(900, 5, day0)
	settleAll(t, db, rows[:300])
	var coarse int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM spend_day) + (SELECT count(*) FROM spend_key_day)
		+ (SELECT count(*) FROM spend_team_hour) + (SELECT count(*) FROM spend_team_day)`).Scan(&coarse); err != nil {
		t.Fatal(err)
	}
	if coarse != 0 {
		t.Errorf("%d coarse rollup rows before any fold, want 0 (rows of open hours stay in spend_hour)", coarse)
	}
	check("nothing folded")
	fold(day0.Add(30 * time.Hour))
	check("folded to day0+30h")

	// Four writers settle the rest in batches of 25, each batch with ten rows settled already, some before
	// the mark (late) and some after it, while another fold runs.
	var wg sync.WaitGroup
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		fold(day0.Add(50 * time.Hour))
	}()
	wg.Wait()
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
	if _, err := tx.Exec(ctx, `SELECT spend_rollup_fold($1)`, day0.Add(70*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	check("after concurrent, redelivered and rolled-back batches")
	fold(until)
	check("everything folded")
}

// checkFolded asserts the fold invariant: each coarse rollup equals the spend_hour rows before the mark,
// summed to its grain.
func checkFolded(t *testing.T, db *storetest.DB, stage string) {
	t.Helper()
	sums := `sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint,
		sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint,
		sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint`
	measures := `requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens,
		cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens`
	for table, c := range map[string]struct{ bucket, cols string }{
		"spend_day":       {"date_trunc('day', bucket, 'UTC')", "org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state"},
		"spend_key_day":   {"date_trunc('day', bucket, 'UTC')", "org_id, team_id, user_id, api_key_id"},
		"spend_team_hour": {"bucket", "org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state"},
		"spend_team_day":  {"date_trunc('day', bucket, 'UTC')", "org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state"},
	} {
		var diff int
		if err := db.Pool.QueryRow(context.Background(), fmt.Sprintf(`
			WITH want AS (SELECT %[1]s AS bucket, %[2]s, %[3]s FROM spend_hour
			               WHERE bucket < (SELECT folded_before FROM spend_fold) GROUP BY %[1]s, %[2]s),
			     have AS (SELECT bucket, %[2]s, %[4]s FROM %[5]s)
			SELECT count(*) FROM ((SELECT * FROM want EXCEPT ALL SELECT * FROM have)
			                UNION ALL (SELECT * FROM have EXCEPT ALL SELECT * FROM want)) d`,
			c.bucket, c.cols, sums, measures, table)).Scan(&diff); err != nil {
			t.Fatal(err)
		}
		if diff != 0 {
			t.Errorf("%s: %s differs from spend_hour before the mark in %d rows", stage, table, diff)
		}
	}
}
