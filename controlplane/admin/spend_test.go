package admin_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

var spendT0 = time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC)

func i64p(v int64) *int64 { return &v }

// seedSpend settles rows over three days: two orgs, keys 1–3 and none, three models (one named like a
// spreadsheet formula), costs of several scales; the first batch is delivered twice.
func seedSpend(t *testing.T, b *testBundle) []store.UsageRow {
	t.Helper()
	models := []string{"gpt-4o", "claude", "=cmd|' /C calc'!A0"}
	costs := []string{"0.000123", "1.5", "0.0000000001", "2", "0"}
	var rows []store.UsageRow
	for i := range 240 {
		r := store.UsageRow{RequestID: fmt.Sprintf("sp-%03d", i), OrgID: i64p(int64(1 + i%2)), LogicalModel: models[i%3],
			UpstreamModel: models[i%3] + "-up", Operation: []string{"chat", "embeddings"}[i%2], InboundKind: "openai_chat",
			InputTokens: int64(i), OutputTokens: 2, CacheReadTokens: 1, Cost: costs[i%5], Source: "upstream",
			EndState: []string{"completed", "completed", "upstream_error"}[i%3], CreatedAt: spendT0.Add(time.Duration(i) * 18 * time.Minute)}
		if i%4 != 0 {
			r.APIKeyID = i64p(int64(i % 4))
		}
		rows = append(rows, r)
	}
	for _, batch := range [][]store.UsageRow{rows[:100], rows[:100], rows[100:], rows[150:]} {
		if _, err := store.SettleUsages(context.Background(), b.db.Pool, batch); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

type spendJSON struct {
	Bucket  string   `json:"bucket"`
	TZ      string   `json:"tz"`
	GroupBy []string `json:"group_by"`
	Rollup  string   `json:"rollup"`
	Rows    []struct {
		BucketStart time.Time      `json:"bucket_start"`
		Group       map[string]any `json:"group"`
		Other       bool           `json:"other"`
		Requests    int64          `json:"requests"`
		Cost        string         `json:"cost"`
		Tokens      map[string]int64
	} `json:"rows"`
	Total struct {
		Requests int64  `json:"requests"`
		Cost     string `json:"cost"`
	} `json:"total"`
}

func (b *testBundle) sqlText(t *testing.T, sql string, args ...any) string {
	t.Helper()
	var s string
	if err := b.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func (b *testBundle) sumCosts(t *testing.T, costs []string) string {
	return b.sqlText(t, `SELECT trim_scale(coalesce(sum(x::numeric), 0))::text FROM unnest($1::text[]) x`, costs)
}

func TestSpendREST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedSpend(t, b)
	since, until := spendT0.Format(time.RFC3339), spendT0.Add(72*time.Hour).Format(time.RFC3339)
	base := "/admin/spend?since=" + since + "&until=" + until

	// By day and model: the costs add up exactly to the usage rows they cover.
	var byModel spendJSON
	b.must(t, http.StatusOK, "GET", base+"&bucket=day&group_by=logical_model", nil, &byModel)
	if byModel.Rollup != "spend_team_day" || byModel.TZ != "UTC" || byModel.Bucket != "day" {
		t.Errorf("answer header = %+v", byModel)
	}
	var costs []string
	var requests int64
	for _, r := range byModel.Rows {
		costs = append(costs, r.Cost)
		requests += r.Requests
		want := b.sqlText(t, `SELECT trim_scale(sum(cost))::text FROM usages WHERE logical_model = $1
			AND created_at >= $2 AND created_at < $2 + interval '1 day'`, r.Group["logical_model"], r.BucketStart)
		if r.Cost != want {
			t.Errorf("%v %v = %s, usages say %s", r.BucketStart, r.Group, r.Cost, want)
		}
	}
	usagesTotal := b.sqlText(t, `SELECT trim_scale(sum(cost))::text FROM usages`)
	if got := b.sumCosts(t, costs); got != usagesTotal || byModel.Total.Cost != usagesTotal {
		t.Errorf("rows add to %s, total %s; sum(usages.cost) = %s", got, byModel.Total.Cost, usagesTotal)
	}
	if requests != 240 || byModel.Total.Requests != 240 {
		t.Errorf("requests %d (total %d), want 240 (the re-delivered batch counts once)", requests, byModel.Total.Requests)
	}

	// Filters: org 1, keys 1 and none, by key and hour (the full-grain hourly rollup).
	var filtered spendJSON
	b.must(t, http.StatusOK, "GET", base+"&bucket=hour&group_by=key&org=1&key=1&key=none", nil, &filtered)
	if filtered.Rollup != "spend_hour" {
		t.Errorf("rollup %s, want spend_hour", filtered.Rollup)
	}
	want := b.sqlText(t, `SELECT trim_scale(sum(cost))::text FROM usages WHERE org_id = 1 AND (api_key_id = 1 OR api_key_id IS NULL)`)
	if filtered.Total.Cost != want {
		t.Errorf("filtered total %s, want %s", filtered.Total.Cost, want)
	}
	for _, r := range filtered.Rows {
		if k := r.Group["key"]; k != nil && k != float64(1) {
			t.Errorf("row of key %v passed the filter", k)
		}
	}

	// Top 1 by model with the rest summed as other.
	var top spendJSON
	b.must(t, http.StatusOK, "GET", base+"&group_by=logical_model&top=1", nil, &top)
	if len(top.Rows) != 2 || top.Rows[0].Other || !top.Rows[1].Other || len(top.Rows[1].Group) != 0 {
		t.Fatalf("top 1 rows = %+v", top.Rows)
	}
	if got := b.sumCosts(t, []string{top.Rows[0].Cost, top.Rows[1].Cost}); got != usagesTotal {
		t.Errorf("top + other = %s, want %s", got, usagesTotal)
	}

	// CSV: the same rows, exact costs, a formula-like model neutralised.
	r := b.call(t, "GET", base+"&bucket=day&group_by=logical_model&format=csv", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("csv = %d %v", r.status, r.header)
	}
	recs, err := csv.NewReader(strings.NewReader(string(r.raw))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(recs[0], ",") != "bucket_start,logical_model,other,requests,cost,input_tokens,output_tokens,cache_read_tokens,cache_creation_5m_tokens,cache_creation_30m_tokens,cache_creation_1h_tokens,image_output_tokens" {
		t.Errorf("csv header %v", recs[0])
	}
	if len(recs)-1 != len(byModel.Rows) {
		t.Fatalf("csv has %d rows, json %d", len(recs)-1, len(byModel.Rows))
	}
	for i, rec := range recs[1:] {
		j := byModel.Rows[i]
		if rec[0] != j.BucketStart.Format(time.RFC3339) || rec[4] != j.Cost {
			t.Errorf("csv row %d = %v, json %+v", i, rec, j)
		}
		if strings.HasPrefix(rec[1], "=") {
			t.Errorf("csv cell %q starts a formula", rec[1])
		}
		if m := j.Group["logical_model"].(string); strings.HasPrefix(m, "=") && rec[1] != "'"+m {
			t.Errorf("csv cell %q, want %q", rec[1], "'"+m)
		}
	}

	// Day buckets in a zone: New York days over the hourly rollup.
	var ny spendJSON
	b.must(t, http.StatusOK, "GET", base+"&bucket=day&tz=America/New_York", nil, &ny)
	if ny.Rollup != "spend_team_hour" || len(ny.Rows) != 4 || ny.Rows[0].BucketStart.Format(time.RFC3339) != "2026-10-29T00:00:00-04:00" {
		t.Errorf("New York days = %s %+v", ny.Rollup, ny.Rows)
	}

	// Refusals.
	for _, tc := range []struct {
		query, field string
		status       int
	}{
		{"?since=2026-10-30T00:30:00Z&until=" + until, "since", 422},
		{"?until=" + until, "since", 422},
		{"?since=" + until + "&until=" + since, "until", 422},
		{"?since=" + since + "&until=" + until + "&bucket=week", "bucket", 422},
		{"?since=" + since + "&until=" + until + "&group_by=model", "group_by", 422},
		{"?since=" + since + "&until=" + until + "&group_by=org,org", "group_by", 422},
		{"?since=" + since + "&until=" + until + "&org=x", "org", 422},
		{"?since=" + since + "&until=" + until + "&top=3", "top", 422},
		{"?since=" + since + "&until=" + until + "&tz=Mars/Olympus", "tz", 422},
		{"?since=" + since + "&until=" + until + "&bucket=day&tz=Asia/Kolkata", "tz", 422},
		{"?since=" + since + "&until=" + until + "&colour=red", "", 400},
		{"?since=" + since + "&until=" + until + "&format=xml", "", 400},
	} {
		r := b.call(t, "GET", "/admin/spend"+tc.query, nil)
		if r.status != tc.status {
			t.Errorf("%s = %d %s, want %d", tc.query, r.status, r.raw, tc.status)
			continue
		}
		if tc.field != "" && !r.apiError(t).hasField(tc.field, -1) {
			t.Errorf("%s: %s does not name %s", tc.query, r.raw, tc.field)
		}
	}
	// Rows are sparse: a nine-year hourly range answers the hours that have rows (the limit is on rows).
	r = b.call(t, "GET", "/admin/spend?since=2020-01-01T00:00:00Z&until=2029-01-01T00:00:00Z&bucket=hour&group_by=key,logical_model", nil)
	if r.status != http.StatusOK {
		t.Errorf("sparse long hourly range = %d %s", r.status, r.raw)
	}
	// Viewers may read spend; no token may not.
	var viewer struct {
		Token string `json:"token"`
	}
	b.must(t, http.StatusCreated, "POST", "/admin/admin-tokens", map[string]any{"name": "v", "role": "viewer"}, &viewer)
	if r := b.callAs(t, viewer.Token, "GET", base, nil); r.status != http.StatusOK {
		t.Errorf("viewer = %d %s", r.status, r.raw)
	}
	if r := b.callAs(t, "", "GET", base, nil); r.status != http.StatusUnauthorized {
		t.Errorf("no token = %d", r.status)
	}
}

func TestGRPCGetSpendMatchesREST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedSpend(t, b)
	client, _ := b.grpcClient(t)
	since, until := spendT0, spendT0.Add(72*time.Hour)
	got, err := client.GetSpend(withToken(bootstrapToken), &adminv1.GetSpendRequest{Since: timestamppb.New(since),
		Until: timestamppb.New(until), Bucket: "day", GroupBy: []string{"key", "operation"},
		Filters: []*adminv1.SpendFilter{{Dimension: "org", Ids: []int64{2}}, {Dimension: "key", Ids: []int64{0, 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	var rest spendJSON
	b.must(t, http.StatusOK, "GET", "/admin/spend?"+url.Values{"since": {since.Format(time.RFC3339)},
		"until": {until.Format(time.RFC3339)}, "bucket": {"day"}, "group_by": {"key,operation"}, "org": {"2"},
		"key": {"none", "3"}}.Encode(), nil, &rest)
	if len(got.Rows) != len(rest.Rows) || got.Total.Cost != rest.Total.Cost || got.Rollup != "spend_day" {
		t.Fatalf("grpc %d rows total %s (%s), rest %d rows total %s", len(got.Rows), got.Total.Cost, got.Rollup, len(rest.Rows), rest.Total.Cost)
	}
	for i, g := range got.Rows {
		r := rest.Rows[i]
		if g.Cost != r.Cost || g.Requests != r.Requests || !g.BucketStart.AsTime().Equal(r.BucketStart) ||
			g.Group[0].Dimension != "key" || g.Group[1].GetValue() != r.Group["operation"] {
			t.Errorf("row %d: grpc %v, rest %+v", i, g, r)
		}
		if id := g.Group[0].Id; (id == nil) != (r.Group["key"] == nil) || (id != nil && float64(*id) != r.Group["key"]) {
			t.Errorf("row %d key: grpc %v, rest %v", i, id, r.Group["key"])
		}
	}
	want := b.sqlText(t, `SELECT trim_scale(sum(cost))::text FROM usages WHERE org_id = 2 AND (api_key_id = 3 OR api_key_id IS NULL)`)
	if got.Total.Cost != want {
		t.Errorf("total %s, usages %s", got.Total.Cost, want)
	}
	if _, err := client.GetSpend(withToken(bootstrapToken), &adminv1.GetSpendRequest{Since: timestamppb.New(since)}); err == nil ||
		!strings.Contains(strings.Join(fieldViolations(err), ","), "until") {
		t.Errorf("no until: %v (%v)", err, fieldViolations(err))
	}
}

func TestUsageListingFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedSpend(t, b)
	type page struct {
		Items []store.StoredUsage `json:"items"`
	}
	for _, tc := range []struct {
		query string
		want  func(u store.StoredUsage) bool
		n     int
	}{
		{"request_id=sp-007", func(u store.StoredUsage) bool { return u.RequestID == "sp-007" }, 1},
		{"logical_model=claude&operation=embeddings", func(u store.StoredUsage) bool {
			return u.LogicalModel == "claude" && u.Operation == "embeddings"
		}, 40},
		{"upstream_model=gpt-4o-up&end_state=completed&org_id=1", func(u store.StoredUsage) bool {
			return u.UpstreamModel == "gpt-4o-up" && u.EndState == "completed" && *u.OrgID == 1
		}, 40},
	} {
		var p page
		b.must(t, http.StatusOK, "GET", "/admin/usages?limit=500&"+tc.query, nil, &p)
		if len(p.Items) != tc.n {
			t.Errorf("%s: %d rows, want %d", tc.query, len(p.Items), tc.n)
		}
		for _, u := range p.Items {
			if !tc.want(u) {
				t.Errorf("%s: row %+v does not match", tc.query, u)
			}
		}
	}
	client, _ := b.grpcClient(t)
	resp, err := client.ListUsages(withToken(bootstrapToken), &adminv1.ListUsagesRequest{RequestId: "sp-011", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Items) != 1 || resp.Items[0].Record.GetRequestId() != "sp-011" {
		t.Errorf("grpc request_id filter = %v", resp.Items)
	}
	resp, err = client.ListUsages(withToken(bootstrapToken), &adminv1.ListUsagesRequest{LogicalModel: "gpt-4o", Operation: "chat", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Items) != 40 {
		t.Errorf("grpc model+operation filter: %d rows, want 40", len(resp.Items))
	}
}
