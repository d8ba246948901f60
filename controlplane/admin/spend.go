package admin

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
)

// Spend limits: an answer has at most MaxSpendRows (bucket, group) rows, Top is at most MaxSpendTop, and
// a range spans at most MaxSpendRange.
const (
	MaxSpendRows  = 50000
	MaxSpendTop   = 1000
	MaxSpendRange = 10 * 366 * 24 * time.Hour
)

// SpendRequest asks for spend (GET /admin/spend, AdminService.GetSpend). Since and Until are whole UTC
// hours; Bucket is "", "hour", "day" or "month"; TZ is an IANA zone name (default UTC) in which buckets
// start; GroupBy names dimensions (store.SpendDims); each filter keeps rows whose dimension is one of its
// values (ids as decimal strings, "none" for rows without that id); Top > 0 keeps the top groups by cost.
type SpendRequest struct {
	Since, Until time.Time
	Bucket       string
	TZ           string
	GroupBy      []string
	Filters      []SpendFilterInput
	Top          int
}

// SpendFilterInput is one dimension's accepted values.
type SpendFilterInput struct {
	Dim    string
	Values []string
}

// SpendTotals are one row's sums: request count, exact decimal cost, tokens per category.
type SpendTotals struct {
	Requests int64             `json:"requests"`
	Cost     string            `json:"cost"`
	Tokens   store.SpendTokens `json:"tokens"`
}

// SpendRow is one (bucket, group) of a spend answer. Group maps each grouped dimension to its value: an
// id (null when the rows have none) or a text. Other marks the sum of every group outside the top N (its
// group is empty).
type SpendRow struct {
	BucketStart time.Time      `json:"bucket_start"`
	Group       map[string]any `json:"group"`
	Other       bool           `json:"other"`
	SpendTotals
}

// SpendResult answers a SpendRequest. Rows are sparse (a bucket or group without rows is absent), bucket
// ascending, by cost descending within a bucket, Other last; their costs add up exactly to Total's. Rollup
// names the rollup table that answered.
type SpendResult struct {
	Since   time.Time   `json:"since"`
	Until   time.Time   `json:"until"`
	Bucket  string      `json:"bucket"`
	TZ      string      `json:"tz"`
	GroupBy []string    `json:"group_by"`
	Top     int         `json:"top"`
	Rows    []SpendRow  `json:"rows"`
	Total   SpendTotals `json:"total"`
	Rollup  string      `json:"rollup"`
}

// spendQuery validates r into a store query; every problem is a field detail.
func spendQuery(r SpendRequest) (store.SpendQuery, *time.Location, error) {
	var details []Detail
	q := store.SpendQuery{Since: r.Since, Until: r.Until, Top: r.Top, MaxRows: MaxSpendRows}
	for _, c := range []struct {
		name string
		t    time.Time
	}{{"since", r.Since}, {"until", r.Until}} {
		name, t := c.name, c.t
		switch {
		case t.IsZero():
			details = append(details, field(name, "is required (RFC 3339, a whole UTC hour)"))
		case !t.Equal(t.Truncate(time.Hour)):
			details = append(details, field(name, "must be a whole UTC hour (the rollups are hourly), got %s", t.Format(time.RFC3339Nano)))
		}
	}
	if !r.Since.IsZero() && !r.Until.IsZero() {
		if !r.Since.Before(r.Until) {
			details = append(details, field("until", "must be after since"))
		} else if r.Until.Sub(r.Since) > MaxSpendRange {
			details = append(details, field("until", "the range may span at most %d days", MaxSpendRange/(24*time.Hour)))
		}
	}
	switch b := store.SpendBucket(r.Bucket); b {
	case store.BucketNone, store.BucketHour, store.BucketDay, store.BucketMonth:
		q.Bucket = b
	default:
		details = append(details, field("bucket", "must be hour, day or month, got %q", r.Bucket))
	}
	loc := time.UTC
	if r.TZ != "" && r.TZ != "UTC" {
		l, err := time.LoadLocation(r.TZ)
		if err != nil || r.TZ == "Local" {
			details = append(details, field("tz", "must be an IANA time zone name such as Europe/Paris, got %q", r.TZ))
		} else {
			loc = l
		}
	}
	q.Location = loc
	if loc != time.UTC && len(details) == 0 && q.Bucket != store.BucketHour && q.Bucket != store.BucketNone {
		if at, ok := wholeHourZone(loc, r.Since, r.Until); !ok {
			details = append(details, field("tz", "%s is not a whole number of hours from UTC at %s; day and month buckets there cannot be cut from hourly rollups", r.TZ, at.Format(time.RFC3339)))
		}
	}
	seen := map[store.SpendDim]bool{}
	for _, g := range r.GroupBy {
		d := store.SpendDim(g)
		switch {
		case !d.Known():
			details = append(details, field("group_by", "unknown dimension %q (one of %s)", g, dimList()))
		case seen[d]:
			details = append(details, field("group_by", "%q is repeated", g))
		default:
			seen[d] = true
			q.GroupBy = append(q.GroupBy, d)
		}
	}
	filtered := map[store.SpendDim]bool{}
	for _, f := range r.Filters {
		d := store.SpendDim(f.Dim)
		if !d.Known() {
			details = append(details, field(f.Dim, "unknown dimension"))
			continue
		}
		if filtered[d] {
			details = append(details, field(f.Dim, "is given twice"))
			continue
		}
		filtered[d] = true
		sf := store.SpendFilter{Dim: d}
		for _, v := range f.Values {
			switch {
			case d.IsID() && v == "none":
				sf.IDs = append(sf.IDs, 0)
			case d.IsID():
				id, err := strconv.ParseInt(v, 10, 64)
				if err != nil || id <= 0 {
					details = append(details, field(f.Dim, "must be a positive integer id or none, got %q", v))
				}
				sf.IDs = append(sf.IDs, id)
			default:
				sf.Values = append(sf.Values, v)
			}
		}
		if len(f.Values) == 0 {
			details = append(details, field(f.Dim, "needs at least one value"))
		}
		q.Filters = append(q.Filters, sf)
	}
	switch {
	case r.Top < 0 || r.Top > MaxSpendTop:
		details = append(details, field("top", "must be between 1 and %d, got %d", MaxSpendTop, r.Top))
	case r.Top > 0 && len(q.GroupBy) == 0:
		details = append(details, field("top", "needs group_by"))
	}
	if len(details) > 0 {
		return store.SpendQuery{}, nil, invalidFields("invalid spend query", details...)
	}
	return q, loc, nil
}

// wholeHourZone reports whether loc is a whole number of hours from UTC at since, until and every day
// between (zone offsets change at most a few times a year); when not, it answers the first time it is not.
func wholeHourZone(loc *time.Location, since, until time.Time) (time.Time, bool) {
	for t := since; ; t = t.Add(24 * time.Hour) {
		if t.After(until) {
			t = until
		}
		if _, off := t.In(loc).Zone(); off%3600 != 0 {
			return t, false
		}
		if t.Equal(until) {
			return time.Time{}, true
		}
	}
}

func dimList() string {
	names := make([]string, len(store.SpendDims))
	for i, d := range store.SpendDims {
		names[i] = string(d)
	}
	return strings.Join(names, ", ")
}

// Spend answers a spend query from the rollups.
func (s *Service) Spend(ctx context.Context, r SpendRequest) (SpendResult, error) {
	q, loc, err := spendQuery(r)
	if err != nil {
		return SpendResult{}, err
	}
	ans, err := store.QuerySpend(ctx, s.pool, q)
	if errors.Is(err, store.ErrTooManyRows) {
		return SpendResult{}, errorf(CodeInvalid, "the answer would have more than %d rows: use a coarser bucket, a shorter range, filters or top", MaxSpendRows)
	}
	if err != nil {
		return SpendResult{}, storeError(err, "spend")
	}
	out := SpendResult{Since: r.Since.In(loc), Until: r.Until.In(loc), Bucket: string(q.Bucket), TZ: loc.String(),
		GroupBy: nonNil(r.GroupBy), Top: r.Top, Rows: make([]SpendRow, 0, len(ans.Rows)), Rollup: ans.Table,
		Total: SpendTotals{Requests: ans.Total.Requests, Cost: ans.Total.Cost, Tokens: ans.Total.Tokens}}
	for _, row := range ans.Rows {
		sr := SpendRow{BucketStart: row.BucketStart, Group: map[string]any{}, Other: row.Other,
			SpendTotals: SpendTotals{Requests: row.Requests, Cost: row.Cost, Tokens: row.Tokens}}
		for _, g := range row.Group {
			if g.Dim.IsID() {
				sr.Group[string(g.Dim)] = g.ID
			} else {
				sr.Group[string(g.Dim)] = g.Value
			}
		}
		out.Rows = append(out.Rows, sr)
	}
	return out, nil
}

// spendParams are GET /admin/spend's parameters besides the dimension filters.
var spendParams = map[string]bool{"since": true, "until": true, "bucket": true, "tz": true, "group_by": true,
	"top": true, "format": true}

// parseSpendRequest reads GET /admin/spend's query: group_by repeated or comma-separated; a filter is a
// dimension's name, repeated for several values (values may contain commas); format json or csv.
func parseSpendRequest(r *http.Request) (SpendRequest, string, error) {
	q := r.URL.Query()
	var out SpendRequest
	for k, vs := range q {
		switch {
		case spendParams[k]:
			if k != "group_by" && len(vs) > 1 {
				return SpendRequest{}, "", errorf(CodeInvalid, "query parameter %q is repeated", k)
			}
		case store.SpendDim(k).Known():
			out.Filters = append(out.Filters, SpendFilterInput{Dim: k, Values: vs})
		default:
			return SpendRequest{}, "", errorf(CodeInvalid, "unknown query parameter %q", k)
		}
	}
	// Filters in canonical dimension order, so answers and errors do not depend on map order.
	slices.SortFunc(out.Filters, func(a, b SpendFilterInput) int {
		return slices.Index(store.SpendDims, store.SpendDim(a.Dim)) - slices.Index(store.SpendDims, store.SpendDim(b.Dim))
	})
	for name, dst := range map[string]*time.Time{"since": &out.Since, "until": &out.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return SpendRequest{}, "", errorf(CodeInvalid, "%s must be an RFC 3339 timestamp, got %q", name, v)
			}
			*dst = t
		}
	}
	out.Bucket, out.TZ = q.Get("bucket"), q.Get("tz")
	for _, v := range q["group_by"] {
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				out.GroupBy = append(out.GroupBy, g)
			}
		}
	}
	if v := q.Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return SpendRequest{}, "", errorf(CodeInvalid, "top must be an integer, got %q", v)
		}
		out.Top = n
	}
	format := q.Get("format")
	switch format {
	case "", "json", "csv":
	default:
		return SpendRequest{}, "", errorf(CodeInvalid, "format must be json or csv, got %q", format)
	}
	return out, format, nil
}

// writeSpendCSV writes one line per row: bucket_start, the grouped dimensions (an absent id is empty),
// other, requests, cost (the exact decimal), the seven token categories. A text cell a spreadsheet would
// read as a formula (starting with = + - @, tab or carriage return) is prefixed with an apostrophe.
func writeSpendCSV(buf *bytes.Buffer, res SpendResult) error {
	cw := csv.NewWriter(buf)
	head := append([]string{"bucket_start"}, res.GroupBy...)
	head = append(head, "other", "requests", "cost", "input_tokens", "output_tokens", "cache_read_tokens",
		"cache_creation_5m_tokens", "cache_creation_30m_tokens", "cache_creation_1h_tokens", "image_output_tokens")
	if err := cw.Write(head); err != nil {
		return err
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, row := range res.Rows {
		line := []string{row.BucketStart.Format(time.RFC3339)}
		for _, g := range res.GroupBy {
			switch v := row.Group[g].(type) {
			case *int64:
				if v != nil {
					line = append(line, i64(*v))
				} else {
					line = append(line, "")
				}
			case string:
				line = append(line, csvSafe(v))
			default:
				line = append(line, "")
			}
		}
		t := row.Tokens
		line = append(line, strconv.FormatBool(row.Other), i64(row.Requests), row.Cost, i64(t.Input), i64(t.Output),
			i64(t.CacheRead), i64(t.CacheCreation5m), i64(t.CacheCreation30m), i64(t.CacheCreation1h), i64(t.ImageOutput))
		if err := cw.Write(line); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
