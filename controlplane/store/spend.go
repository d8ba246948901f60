package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// SpendDim is one dimension spend can be grouped and filtered by.
type SpendDim string

// The spend dimensions, in their canonical order (the order of group keys in answers and CSV columns).
const (
	DimOrg           SpendDim = "org"
	DimTeam          SpendDim = "team"
	DimUser          SpendDim = "user"
	DimKey           SpendDim = "key"
	DimLogicalModel  SpendDim = "logical_model"
	DimUpstreamModel SpendDim = "upstream_model"
	DimProvider      SpendDim = "provider"
	DimOperation     SpendDim = "operation"
	DimEndState      SpendDim = "end_state"
	// DimBatch is the provider batch a row settles a line of (migration 0022): its id, none for requests.
	DimBatch SpendDim = "batch"
)

// SpendDims lists every dimension in canonical order.
var SpendDims = []SpendDim{DimOrg, DimTeam, DimUser, DimKey, DimLogicalModel, DimUpstreamModel, DimProvider,
	DimOperation, DimEndState, DimBatch}

// spendColumn is the rollup column of each dimension; IsID says it holds an id (0 in the rollups when absent).
var spendColumn = map[SpendDim]string{
	DimOrg: "org_id", DimTeam: "team_id", DimUser: "user_id", DimKey: "api_key_id", DimProvider: "provider_id",
	DimLogicalModel: "logical_model", DimUpstreamModel: "upstream_model", DimOperation: "operation",
	DimEndState: "end_state", DimBatch: "batch_id",
}

// IsID reports whether the dimension is an id (org, team, user, key, provider) rather than a text value.
func (d SpendDim) IsID() bool {
	switch d {
	case DimOrg, DimTeam, DimUser, DimKey, DimProvider, DimBatch:
		return true
	}
	return false
}

// Known reports whether d is a spend dimension.
func (d SpendDim) Known() bool { _, ok := spendColumn[d]; return ok }

// needsKeyGrain reports whether the dimension exists only in the full rollups (not in the team grain).
func (d SpendDim) needsKeyGrain() bool { return d == DimUser || d == DimKey }

// inKeyDay reports whether the dimension is a column of spend_key_day (org, team, user, key).
func (d SpendDim) inKeyDay() bool { return d == DimOrg || d == DimTeam || d == DimUser || d == DimKey }

// SpendBucket is the time bucket of a spend answer: hour, day, month, or none (one bucket for the range).
type SpendBucket string

// The buckets.
const (
	BucketNone  SpendBucket = ""
	BucketHour  SpendBucket = "hour"
	BucketDay   SpendBucket = "day"
	BucketMonth SpendBucket = "month"
)

// SpendFilter keeps rows whose dimension is one of the values. IDs hold the values of an id dimension (0
// matches rows without that id); Values those of a text dimension.
type SpendFilter struct {
	Dim    SpendDim
	IDs    []int64
	Values []string
}

// SpendQuery asks for spend over [Since, Until), both whole UTC hours. Buckets start in Location (UTC when
// nil); day and month buckets of a zone whose offset is not a whole number of hours cannot be answered from
// hourly rollups, and the caller must refuse them. Top > 0 keeps the Top groups of highest total cost over
// the range and sums every other group, per bucket, into one row marked Other. MaxRows bounds the answer
// (ErrTooManyRows beyond it).
type SpendQuery struct {
	Since, Until time.Time
	Bucket       SpendBucket
	Location     *time.Location
	GroupBy      []SpendDim
	Filters      []SpendFilter
	Top          int
	MaxRows      int
}

// ErrTooManyRows says a spend answer would exceed SpendQuery.MaxRows.
var ErrTooManyRows = errors.New("answer has too many rows")

// SpendTokens are token sums per category.
type SpendTokens struct {
	Input            int64 `json:"input"`
	Output           int64 `json:"output"`
	CacheRead        int64 `json:"cache_read"`
	CacheCreation5m  int64 `json:"cache_creation_5m"`
	CacheCreation30m int64 `json:"cache_creation_30m"`
	CacheCreation1h  int64 `json:"cache_creation_1h"`
	ImageOutput      int64 `json:"image_output"`
}

// SpendGroupValue is one dimension's value in a group: ID for an id dimension (nil: the rows have none),
// Value for a text dimension.
type SpendGroupValue struct {
	Dim   SpendDim
	ID    *int64
	Value string
}

// SpendRow is one (bucket, group) sum. Cost is an exact decimal string. Other marks the sum of the groups
// outside the top N (its Group is empty).
type SpendRow struct {
	BucketStart time.Time
	Group       []SpendGroupValue
	Other       bool
	Requests    int64
	Cost        string
	Tokens      SpendTokens
}

// SpendAnswer holds the rows (bucket ascending; within a bucket by cost descending, Other last) and the
// total over every row the query covers (the rows add up to it exactly). Table names the rollup read.
type SpendAnswer struct {
	Rows  []SpendRow
	Total SpendRow
	Table string
}

// spendTable picks the smallest rollup that answers q: the team grain unless user or key is grouped or
// filtered, and daily rows when the buckets are UTC days or months (or none) and the range is whole UTC days;
// among the daily full-grain rollups, spend_key_day when every dimension used is org, team, user or key.
func spendTable(q SpendQuery) string {
	full, keyDay := false, true
	for _, d := range q.GroupBy {
		full = full || d.needsKeyGrain()
		keyDay = keyDay && d.inKeyDay()
	}
	for _, f := range q.Filters {
		full = full || f.Dim.needsKeyGrain()
		keyDay = keyDay && f.Dim.inKeyDay()
	}
	daily := q.Bucket != BucketHour && (q.Location == nil || q.Location == time.UTC) &&
		isUTCDay(q.Since) && isUTCDay(q.Until)
	switch {
	case full && daily && keyDay:
		return "spend_key_day"
	case full && daily:
		return "spend_day"
	case full:
		return "spend_hour"
	case daily:
		return "spend_team_day"
	}
	return "spend_team_hour"
}

// spendColumns are the dimension columns of each rollup.
var spendColumns = map[string]string{
	"spend_hour":      "org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id",
	"spend_day":       "org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id",
	"spend_key_day":   "org_id, team_id, user_id, api_key_id",
	"spend_team_hour": "org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id",
	"spend_team_day":  "org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id",
}

// spendSource is the FROM item reading table over [$1, $2): the rollup together with the spend_delta rows of
// the range not folded into it yet (migration 0014), read in the same snapshot, so the sum is exact whenever
// it is read. Delta rows keep their hour bucket: a daily rollup is read only with day or month buckets in UTC
// (or none), whose bucket expression truncates them to the same day. spend_delta has every dimension, so it
// can stand in for any rollup.
func spendSource(table string) string {
	const measures = `requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens,
		cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens`
	return fmt.Sprintf(`(SELECT bucket, %[1]s, %[2]s FROM %[3]s WHERE bucket >= $1 AND bucket < $2
		UNION ALL
		SELECT bucket, %[1]s, %[2]s FROM spend_delta WHERE bucket >= $1 AND bucket < $2) src`, spendColumns[table], measures, table)
}

func isUTCDay(t time.Time) bool { return t.Equal(t.UTC().Truncate(24 * time.Hour)) }

// QuerySpend answers q from the rollups (never from usages).
func QuerySpend(ctx context.Context, db DBTX, q SpendQuery) (SpendAnswer, error) {
	table := spendTable(q)
	if q.MaxRows <= 0 {
		return SpendAnswer{}, fmt.Errorf("query spend: MaxRows must be positive")
	}
	loc := q.Location
	if loc == nil {
		loc = time.UTC
	}
	args := []any{q.Since, q.Until}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var bucketExpr string
	switch q.Bucket {
	case BucketNone:
		bucketExpr = "$1::timestamptz"
	case BucketHour:
		bucketExpr = "bucket" // an hour in any whole-hour zone is a UTC hour
	case BucketDay, BucketMonth:
		bucketExpr = fmt.Sprintf("date_trunc('%s', bucket, %s)", q.Bucket, arg(loc.String()))
	default:
		return SpendAnswer{}, fmt.Errorf("query spend: unknown bucket %q", q.Bucket)
	}
	conds := []string{"bucket >= $1", "bucket < $2"}
	for _, f := range q.Filters {
		col, ok := spendColumn[f.Dim]
		if !ok {
			return SpendAnswer{}, fmt.Errorf("query spend: unknown dimension %q", f.Dim)
		}
		if f.Dim.IsID() {
			conds = append(conds, col+" = ANY("+arg(f.IDs)+"::bigint[])")
		} else {
			conds = append(conds, col+" = ANY("+arg(f.Values)+"::text[])")
		}
	}
	// g1..gN are the grouped columns in the caller's order.
	var gcols, gsel, gjoin, gout []string
	for i, d := range q.GroupBy {
		col, ok := spendColumn[d]
		if !ok {
			return SpendAnswer{}, fmt.Errorf("query spend: unknown dimension %q", d)
		}
		g := "g" + strconv.Itoa(i+1)
		gcols = append(gcols, g)
		gsel = append(gsel, col+" AS "+g)
		gjoin = append(gjoin, "a."+g+" = t."+g)
		if d.IsID() {
			gout = append(gout, "CASE WHEN t.hit IS NULL THEN 0 ELSE a."+g+" END AS "+g)
		} else {
			gout = append(gout, "CASE WHEN t.hit IS NULL THEN '' ELSE a."+g+" END AS "+g)
		}
	}
	measures := `sum(requests) AS requests, sum(cost) AS cost, sum(input_tokens) AS i, sum(output_tokens) AS o,
		sum(cache_read_tokens) AS cr, sum(cache_creation_5m_tokens) AS c5, sum(cache_creation_30m_tokens) AS c30,
		sum(cache_creation_1h_tokens) AS c1h, sum(image_output_tokens) AS img`
	remeasure := `sum(requests) AS requests, sum(cost) AS cost, sum(i) AS i, sum(o) AS o, sum(cr) AS cr,
		sum(c5) AS c5, sum(c30) AS c30, sum(c1h) AS c1h, sum(img) AS img`
	groupCols := append([]string{"b"}, gcols...)
	sel := bucketExpr + " AS b" + prefixEach(", ", gsel)
	where := strings.Join(conds, " AND ")
	var sql strings.Builder
	var inner string
	if q.Top > 0 && len(gcols) > 0 {
		// Aggregate per (bucket, group), rank the groups by total cost, then sum the groups outside the top
		// per bucket as one "other" row.
		fmt.Fprintf(&sql, `WITH agg AS (SELECT %[1]s, %[2]s FROM %[3]s WHERE %[4]s GROUP BY %[5]s),
			top AS (SELECT %[6]s, true AS hit FROM agg GROUP BY %[6]s
				ORDER BY sum(cost) DESC, sum(requests) DESC, %[6]s LIMIT %[7]s),
			rows AS (SELECT a.b, t.hit IS NULL AS other, %[8]s, a.requests, a.cost, a.i, a.o, a.cr, a.c5, a.c30,
				a.c1h, a.img FROM agg a LEFT JOIN top t ON %[9]s)`,
			sel, measures, spendSource(table), where, strings.Join(groupCols, ", "), strings.Join(gcols, ", "), arg(q.Top),
			strings.Join(gout, ", "), strings.Join(gjoin, " AND "))
		set := strings.Join(append(append([]string{}, groupCols...), "other"), ", ")
		inner = fmt.Sprintf(`SELECT GROUPING(b) AS tot, %[1]s, %[2]s FROM rows GROUP BY GROUPING SETS ((%[1]s), ())`, set, remeasure)
	} else {
		// One pass: the (bucket, group) sums and the total.
		inner = fmt.Sprintf(`SELECT GROUPING(%[1]s) AS tot, %[2]s, false AS other, %[3]s FROM %[4]s WHERE %[5]s
			GROUP BY GROUPING SETS ((%[6]s), ())`, bucketExpr, sel, measures, spendSource(table), where, strings.Join(groupCols, ", "))
	}
	fmt.Fprintf(&sql, ` SELECT tot = 1, b, other%[1]s, coalesce(requests, 0)::bigint, trim_scale(coalesce(cost, 0))::text,
		coalesce(i, 0)::bigint, coalesce(o, 0)::bigint, coalesce(cr, 0)::bigint, coalesce(c5, 0)::bigint,
		coalesce(c30, 0)::bigint, coalesce(c1h, 0)::bigint, coalesce(img, 0)::bigint
		FROM (%[2]s) s
		ORDER BY tot, b, other, cost DESC%[1]s LIMIT %[3]s`, prefixEach(", ", gcols), inner, arg(q.MaxRows+2))
	rows, err := db.Query(ctx, sql.String(), args...)
	if err != nil {
		return SpendAnswer{}, fmt.Errorf("query spend: %w", interpretError(err))
	}
	defer rows.Close()
	ans := SpendAnswer{Table: table}
	for rows.Next() {
		var (
			total bool
			b     *time.Time
			other *bool
			r     SpendRow
		)
		gv := make([]any, len(q.GroupBy))
		ids := make([]*int64, len(q.GroupBy))
		texts := make([]*string, len(q.GroupBy))
		for i, d := range q.GroupBy {
			if d.IsID() {
				gv[i] = &ids[i]
			} else {
				gv[i] = &texts[i]
			}
		}
		dst := append([]any{&total, &b, &other}, gv...)
		dst = append(dst, &r.Requests, &r.Cost, &r.Tokens.Input, &r.Tokens.Output, &r.Tokens.CacheRead,
			&r.Tokens.CacheCreation5m, &r.Tokens.CacheCreation30m, &r.Tokens.CacheCreation1h, &r.Tokens.ImageOutput)
		if err := rows.Scan(dst...); err != nil {
			return SpendAnswer{}, fmt.Errorf("query spend: read: %w", interpretError(err))
		}
		if total {
			ans.Total = r
			continue
		}
		r.BucketStart = b.In(loc)
		r.Other = other != nil && *other
		if !r.Other {
			for i, d := range q.GroupBy {
				v := SpendGroupValue{Dim: d}
				if d.IsID() {
					if ids[i] != nil && *ids[i] != 0 {
						v.ID = ids[i]
					}
				} else if texts[i] != nil {
					v.Value = *texts[i]
				}
				r.Group = append(r.Group, v)
			}
		}
		ans.Rows = append(ans.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return SpendAnswer{}, fmt.Errorf("query spend: %w", interpretError(err))
	}
	if len(ans.Rows) > q.MaxRows {
		return SpendAnswer{}, fmt.Errorf("query spend: more than %d rows: %w", q.MaxRows, ErrTooManyRows)
	}
	ans.Total.BucketStart = q.Since.In(loc)
	return ans, nil
}

func prefixEach(prefix string, ss []string) string {
	var b strings.Builder
	for _, s := range ss {
		b.WriteString(prefix + s)
	}
	return b.String()
}

// spendFoldLockClass and spendFoldLockKey are the advisory lock every fold holds for its transaction (migration 0014).
const spendFoldLockClass, spendFoldLockKey = 1953459308, 18

// FoldSpend folds every spend_delta row it can see into the rollups (spend_rollup_fold, migration 0014) in a
// transaction of its own, unless another transaction is folding (the advisory lock is only tried: ran is
// false then). moved is how many delta rows it folded.
func FoldSpend(ctx context.Context, db TxBeginner) (moved int64, ran bool, err error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, false, fmt.Errorf("fold spend: begin: %w", interpretError(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2)`, int32(spendFoldLockClass), int32(spendFoldLockKey)).Scan(&ran); err != nil {
		return 0, false, fmt.Errorf("fold spend: lock: %w", interpretError(err))
	}
	if !ran {
		return 0, false, nil
	}
	if err := tx.QueryRow(ctx, `SELECT spend_rollup_fold()`).Scan(&moved); err != nil {
		return 0, true, fmt.Errorf("fold spend: %w", interpretError(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, true, fmt.Errorf("fold spend: commit: %w", interpretError(err))
	}
	return moved, true, nil
}
