package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// listIDs lists one page's ids.
func listIDs(t *testing.T, list func(context.Context, store.UsageFilter) ([]store.StoredUsage, error), f store.UsageFilter) []int64 {
	t.Helper()
	out, err := list(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(out))
	for i, u := range out {
		ids[i] = u.ID
	}
	return ids
}

// The partition-by-partition listing answers exactly what the single query over the partitioned table
// answers — every filter, every page through the cursor, cursors anywhere — on a table whose id order and
// month order disagree: records settled out of created_at order, late records (an old month's created_at
// with the newest ids), rows in the default partition (far past and far future), an empty month partition
// and a month without rows at all.
func TestListUsagesByPartitionMatchesSingleQuery(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	now := time.Now().UTC()
	this := store.MonthStart(now)
	// Partitions for the five months before this one (the migration made this month's and the next, which
	// stays empty); usages_default takes the rest.
	for i := 1; i <= 5; i++ {
		if _, err := db.Pool.Exec(ctx, `SELECT usages_ensure_partition($1)`, this.AddDate(0, -i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(17, 5))
	p := func(v int64) *int64 { return &v }
	row := func(n int, at time.Time) store.UsageRow {
		k := int64(1 + rng.IntN(5))
		return store.UsageRow{RequestID: fmt.Sprintf("lp-%04d", n), APIKeyID: p(k), UserID: p(10 + k%3),
			TeamID: p(20 + k%2), OrgID: p(30), RouteID: p(int64(40 + rng.IntN(3))), ProviderID: p(int64(50 + rng.IntN(2))),
			LogicalModel: fmt.Sprintf("model-%d", rng.IntN(3)), UpstreamModel: fmt.Sprintf("up-%d", rng.IntN(2)),
			Operation: []string{"generate_content", "create_embedding"}[rng.IntN(2)], InboundKind: "alpha_chat_completions",
			Cost: "1", Source: "upstream", EndState: []string{"completed", "completed", "upstream_error", "rejected"}[rng.IntN(4)],
			CreatedAt: at}
	}
	var rows []store.UsageRow
	n := 0
	for month := -5; month <= 0; month++ {
		if month == -3 {
			continue // a month partition without rows
		}
		from := this.AddDate(0, month, 0)
		span := from.AddDate(0, 1, 0).Sub(from)
		if month == 0 {
			span = now.Sub(from)
		}
		for range 25 {
			rows = append(rows, row(n, from.Add(time.Duration(rng.Int64N(int64(span))))))
			n++
		}
	}
	for range 6 { // the default partition: a faulty clock's far past and far future
		rows = append(rows, row(n, this.AddDate(-3, 0, rng.IntN(20))))
		n++
		rows = append(rows, row(n, this.AddDate(0, 4+rng.IntN(10), 0)))
		n++
	}
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	settle := func(rows []store.UsageRow) {
		for len(rows) > 0 {
			k := min(len(rows), 1+rng.IntN(9))
			if _, err := store.SettleUsages(ctx, db.Pool, rows[:k]); err != nil {
				t.Fatal(err)
			}
			rows = rows[k:]
		}
	}
	settle(rows)
	// Late records: the oldest and a middle month get the newest ids.
	var late []store.UsageRow
	for i := range 8 {
		at := this.AddDate(0, -5, 3)
		if i%2 == 1 {
			at = this.AddDate(0, -2, 9)
		}
		late = append(late, row(n, at.Add(time.Duration(i)*time.Hour)))
		n++
	}
	settle(late)
	var lateParts []string
	for _, r := range late[:2] {
		lateParts = append(lateParts, partitionOf(t, db.Pool, r.RequestID)...)
	}
	if fmt.Sprint(lateParts) != fmt.Sprintf("[usages_%s usages_%s]", this.AddDate(0, -5, 0).Format("2006_01"), this.AddDate(0, -2, 0).Format("2006_01")) {
		t.Fatalf("late records in %v", lateParts)
	}
	if c := countUsages(t, db.Pool, `tableoid = 'usages_default'::regclass`); c != 12 {
		t.Fatalf("%d rows in the default partition, want 12", c)
	}
	var maxID int64
	// One Usages for the whole test, as the admin service keeps one: its remembered partitions must follow
	// the changes below. plain is the reference.
	walk := store.NewUsages(db.Pool).List
	plain := func(ctx context.Context, f store.UsageFilter) ([]store.StoredUsage, error) {
		return store.ListUsagesPlainForTest(ctx, db.Pool, f)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT max(id) FROM usages`).Scan(&maxID); err != nil {
		t.Fatal(err)
	}

	filters := map[string]store.UsageFilter{
		"none":                 {},
		"key":                  {APIKeyID: p(3)},
		"user":                 {UserID: p(11)},
		"team":                 {TeamID: p(21)},
		"org":                  {OrgID: p(30)},
		"route":                {RouteID: p(41)},
		"provider":             {ProviderID: p(50)},
		"end state":            {EndState: "upstream_error"},
		"kind request":         {Kind: "request"},
		"kind adjustment":      {Kind: "adjustment"},
		"model":                {LogicalModel: "model-2"},
		"upstream model":       {UpstreamModel: "up-1"},
		"operation":            {Operation: "create_embedding"},
		"request id":           {RequestID: late[3].RequestID},
		"request id, default":  {RequestID: "lp-0150"},
		"request id, none":     {RequestID: "absent"},
		"since":                {Since: this.AddDate(0, -2, 0)},
		"until":                {Until: this.AddDate(0, -2, 0)},
		"since and until":      {Since: this.AddDate(0, -4, 10), Until: this.AddDate(0, -1, 5)},
		"future":               {Since: this.AddDate(0, 2, 0)},
		"key and model":        {APIKeyID: p(2), LogicalModel: "model-1"},
		"team, state, since":   {TeamID: p(20), EndState: "completed", Since: this.AddDate(0, -3, 0)},
		"no match":             {APIKeyID: p(999)},
		"empty month":          {Since: this.AddDate(0, -3, 0), Until: this.AddDate(0, -2, 0)},
		"model, before a late": {LogicalModel: "model-0", BeforeID: maxID - 3},
	}
	for name, base := range filters {
		for _, limit := range []int{1, 4, 50} {
			// Page through with the cursor: every page equal to the single query's.
			f := base
			f.Limit = limit
			var all []int64
			for page := 0; ; page++ {
				got := listIDs(t, walk, f)
				want := listIDs(t, plain, f)
				if !slices.Equal(got, want) {
					t.Fatalf("%s, limit %d, page %d (before %d): got %v, want %v", name, limit, page, f.BeforeID, got, want)
				}
				all = append(all, got...)
				if len(got) < limit {
					break
				}
				f.BeforeID = got[len(got)-1]
			}
			if !slices.IsSortedFunc(all, func(a, b int64) int { return int(b - a) }) {
				t.Fatalf("%s: pages out of order: %v", name, all)
			}
		}
		// Cursors anywhere, including past the newest id and below the oldest.
		for range 12 {
			f := base
			f.Limit = 1 + rng.IntN(12)
			f.BeforeID = 1 + rng.Int64N(maxID+5)
			got := listIDs(t, walk, f)
			want := listIDs(t, plain, f)
			if !slices.Equal(got, want) {
				t.Fatalf("%s, limit %d, before %d: got %v, want %v", name, f.Limit, f.BeforeID, got, want)
			}
		}
	}
	// Inside a caller's transaction (no new transaction: the caller's snapshot), and the rows themselves.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	f := store.UsageFilter{APIKeyID: p(4), Limit: 9}
	got, err := store.ListUsages(ctx, tx, f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := store.ListUsagesPlainForTest(ctx, db.Pool, f)
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) || len(got) != 9 {
		t.Fatalf("in a transaction: got %v, want %v", got, want)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The partitions change between listings (retention drops the oldest month with its late records, a
	// month of the default partition gets its own): the next listing sees the change.
	same := func(stage string) {
		t.Helper()
		for _, f := range []store.UsageFilter{{Limit: 500}, {APIKeyID: p(3), Limit: 4}, {LogicalModel: "model-1", Limit: 7, BeforeID: maxID - 2}} {
			if got, want := listIDs(t, walk, f), listIDs(t, plain, f); !slices.Equal(got, want) {
				t.Fatalf("%s, %+v: got %v, want %v", stage, f, got, want)
			}
		}
	}
	same("before")
	if dropped, _, err := store.DropUsagePartitionsBefore(ctx, db.Pool, this.AddDate(0, -4, 0)); err != nil || len(dropped) != 1 {
		t.Fatalf("retention: %v %v", dropped, err)
	}
	same("after a partition was dropped")
	if _, err := db.Pool.Exec(ctx, `SELECT usages_ensure_partition(min(created_at)) FROM usages_default WHERE created_at > now()`); err != nil {
		t.Fatal(err)
	}
	same("after a partition was created")
	if got, err := walk(ctx, store.UsageFilter{}); err != nil || len(got) != 0 {
		t.Fatalf("limit 0: %v %v", got, err)
	}
}
