// Command spendload measures the spend API at scale (docs/benchmarks.md, "Spend API"). It creates a
// database, applies the migrations, loads -rows usage rows spread evenly over -days days with SQL
// generate_series (one INSERT per -chunk rows, so the spend rollup trigger maintains the rollups exactly as
// settlement does: per statement, in the inserting transaction), then one more hour's worth of rows in the
// current UTC hour, after folding the rows loaded so far (as the hourly folds of live traffic
// would have: the open hour's rows stay in spend_delta until the next fold, so the queries read a rollup and
// the delta rows, as they do live), then serves the admin REST API on loopback
// and times GET /admin/spend for the queries an operator runs, -runs times each (fewer for a query slower than 4 s a run: at most 40 s and at least 10 runs each),
// reporting p50/p95/p99.
//
//	go run ./deploy/loadgen/spendload [-db URL] [-rows 10000000] [-days 30] [-runs 200] [-keep] [-reuse NAME]
//
// -keep leaves the database (named in the output) for another run with -reuse NAME, which skips the load.
// It is not part of make test: loading 10 million rows takes many minutes.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store"
)

const token = "spendload-bootstrap-token-0123456789"

// maxPerQuery bounds the time spent timing one query: after it (and at least 10 runs) the query stops early.
const maxPerQuery = 40 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "spendload:", err)
		os.Exit(1)
	}
}

func run() error {
	dbURL := flag.String("db", envOr("TOLLGATE_TEST_DATABASE_URL", "postgres://root@127.0.0.1:5432/test?sslmode=disable"), "admin database URL (databases are created next to it)")
	rows := flag.Int("rows", 10_000_000, "usage rows to load")
	days := flag.Int("days", 30, "days the rows span (ending at the start of the current UTC day)")
	chunk := flag.Int("chunk", 250_000, "rows per INSERT statement (one transaction each)")
	runs := flag.Int("runs", 200, "timed runs per query")
	keep := flag.Bool("keep", false, "keep the database")
	reuse := flag.String("reuse", "", "reuse a database loaded by an earlier -keep run (skips the load)")
	flag.Parse()
	ctx := context.Background()

	name := *reuse
	if name == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		name = "tg_spendload_" + hex.EncodeToString(b[:])
		if err := adminExec(ctx, *dbURL, "CREATE DATABASE "+name); err != nil {
			return err
		}
	}
	if !*keep && *reuse == "" {
		defer func() {
			if err := adminExec(context.Background(), *dbURL, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				fmt.Fprintln(os.Stderr, "spendload: drop:", err)
			}
		}()
	}
	u, err := url.Parse(*dbURL)
	if err != nil {
		return fmt.Errorf("parse -db: %w", err)
	}
	u.Path = "/" + name
	pool, err := store.Open(ctx, u.String())
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		return err
	}
	end := time.Now().UTC().Truncate(24 * time.Hour)
	start := end.Add(-time.Duration(*days) * 24 * time.Hour)
	fmt.Printf("database %s\n", name)
	if *reuse == "" {
		if err := load(ctx, pool, *rows, *chunk, start, end); err != nil {
			return err
		}
		end = end.Add(24 * time.Hour) // the queries cover today (its open hour) too
	} else if err := pool.QueryRow(ctx, `SELECT min(created_at), date_trunc('day', max(created_at), 'UTC') + interval '1 day'
		FROM usages`).Scan(&start, &end); err != nil {
		return fmt.Errorf("read the loaded range: %w", err)
	}
	if err := sizes(ctx, pool); err != nil {
		return err
	}

	box, err := secret.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	admin.RegisterHTTP(mux, admin.NewService(pool, box, token, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String() + "/admin/spend?"
	d30 := url.Values{"since": {end.Add(-30 * 24 * time.Hour).Format(time.RFC3339)}, "until": {end.Format(time.RFC3339)}}
	with := func(v url.Values, kv ...string) string {
		out := url.Values{}
		for k, vs := range v {
			out[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return base + out.Encode()
	}
	lastDay := url.Values{"since": {end.Add(-24 * time.Hour).Format(time.RFC3339)}, "until": {end.Format(time.RFC3339)}}
	fmt.Printf("\n| query (GET /admin/spend) | rollup read | rows | runs | p50 ms | p95 ms | p99 ms | max ms |\n|---|---|---|---|---|---|---|---|\n")
	for _, q := range []struct{ name, url string }{
		{"30 days by day by logical_model", with(d30, "bucket", "day", "group_by", "logical_model")},
		{"same, format=csv", with(d30, "bucket", "day", "group_by", "logical_model", "format", "csv")},
		{"30 days by day by logical_model, tz=America/New_York", with(d30, "bucket", "day", "group_by", "logical_model", "tz", "America/New_York")},
		{"30 days by day by team, stacked top 5", with(d30, "bucket", "day", "group_by", "team", "top", "5")},
		{"30 days by month by org and provider", with(d30, "bucket", "month", "group_by", "org,provider")},
		{"30 days top 10 keys (no bucket)", with(d30, "group_by", "key", "top", "10")},
		{"30 days by day for one key", with(d30, "bucket", "day", "key", "17")},
		{"today by hour by logical_model (open hour included)", with(lastDay, "bucket", "hour", "group_by", "logical_model")},
	} {
		if err := timeQuery(q.name, q.url, *runs); err != nil {
			return err
		}
	}
	return compare(ctx, pool, end)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func adminExec(ctx context.Context, dbURL, sql string) error {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect %s: %w", dbURL, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// load inserts rows usage rows in time order over [start, end): 600 keys (two per user, 300 users, 12
// teams, 3 orgs), 12 logical models on 4 providers (each key uses three of them), three operations, four end states, token counts and a
// cost (exact numeric) that vary per row.
func load(ctx context.Context, pool *pgxpool.Pool, rows, chunk int, start, end time.Time) error {
	t0 := time.Now()
	for lo := 1; lo <= rows; lo += chunk {
		hi := min(lo+chunk-1, rows)
		if err := insertRows(ctx, pool, "load-", lo, hi, rows, start, end); err != nil {
			return err
		}
		fmt.Printf("loaded %d rows (%.0f s)\n", hi, time.Since(t0).Seconds())
	}
	// The load's statements folded when a fold was due (once an hour, as settlement does); fold the rest,
	// as the next statement after the load would.
	tf := time.Now()
	var folded int64
	if err := pool.QueryRow(ctx, `SELECT spend_rollup_fold()`).Scan(&folded); err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	fmt.Printf("folded %d spend_delta rows (%.0f s)\n", folded, time.Since(tf).Seconds())
	// The open hour: as many rows as an hour of the range holds, in the current UTC hour.
	hour := time.Now().UTC().Truncate(time.Hour)
	perHour := max(1, int(float64(rows)*time.Hour.Seconds()/end.Sub(start).Seconds()))
	if err := insertRows(ctx, pool, "open-", 1, perHour, perHour, hour, hour.Add(time.Hour)); err != nil {
		return err
	}
	var pending int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM spend_delta`).Scan(&pending); err != nil {
		return fmt.Errorf("count the open hour's rows: %w", err)
	}
	fmt.Printf("loaded %d rows in the open hour %s: %d spend_delta rows not folded yet\n", perHour, hour.Format(time.RFC3339), pending)
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	fmt.Printf("load and vacuum: %.0f s\n", time.Since(t0).Seconds())
	return nil
}

// insertRows inserts rows lo..hi of total spread evenly over [start, end), request ids prefix||i.
func insertRows(ctx context.Context, pool *pgxpool.Pool, prefix string, lo, hi, total int, start, end time.Time) error {
	if _, err := pool.Exec(ctx, `
			INSERT INTO usages (request_id, api_key_id, user_id, team_id, org_id, provider_id, logical_model,
			    upstream_model, operation, inbound_kind, input_tokens, output_tokens, cache_read_tokens, cost, source,
			    end_state, http_status, created_at)
			SELECT $6 || i, k, 1 + k % 300, 1 + (k % 300) % 12, 1 + ((k % 300) % 12) % 3, 1 + m % 4,
			       'model-' || m, 'upstream-' || m,
			       CASE i % 10 WHEN 0 THEN 'embeddings' WHEN 1 THEN 'responses' ELSE 'chat' END, 'openai_chat',
			       tin, tout, tin / 4,
			       (tin * (m + 1) * 0.00000025 + tout * (m + 1) * 0.000001)::numeric,
			       'upstream',
			       CASE i % 50 WHEN 0 THEN 'upstream_error' WHEN 1 THEN 'client_dropped' WHEN 2 THEN 'rejected' ELSE 'completed' END,
			       200, $3::timestamptz + make_interval(secs => (i - 1)::float8 * $4 / $5)
			  FROM (SELECT i, k0 AS k, (k0 + abs(hashint8(i + 7)) % 3) % 12 AS m,
			               100 + abs(hashint8(i + 13)) % 4000 AS tin, 10 + abs(hashint8(i + 17)) % 700 AS tout
			          FROM generate_series($1::bigint, $2::bigint) AS i, LATERAL (SELECT 1 + abs(hashint8(i)) % 600 AS k0) kk) g`,
		lo, hi, start, end.Sub(start).Seconds(), total, prefix); err != nil {
		return fmt.Errorf("load rows %s%d–%d: %w", prefix, lo, hi, err)
	}
	return nil
}

func sizes(ctx context.Context, pool *pgxpool.Pool) error {
	fmt.Printf("\n| table | rows | size (with indexes) |\n|---|---|---|\n")
	for _, t := range []string{"usages", "spend_delta", "spend_hour", "spend_day", "spend_key_day", "spend_team_hour", "spend_team_day"} {
		var n int64
		var size string
		if err := pool.QueryRow(ctx, `SELECT count(*), pg_size_pretty(pg_total_relation_size('`+t+`')) FROM `+t).Scan(&n, &size); err != nil {
			return fmt.Errorf("size of %s: %w", t, err)
		}
		fmt.Printf("| %s | %d | %s |\n", t, n, size)
	}
	return nil
}

func timeQuery(name, u string, runs int) error {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	var lat []time.Duration
	var body []byte
	start := time.Now()
	for i := 0; i < runs+3; i++ {
		if len(lat) >= 10 && time.Since(start) > maxPerQuery {
			break // a slow query: report the runs done (the runs column says how many)
		}
		t := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %s %v", name, resp.StatusCode, body, err)
		}
		if i >= 3 { // three warm-up runs
			lat = append(lat, time.Since(t))
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	rollup, n := "csv", bytes.Count(body, []byte("\n"))-1
	var spend struct {
		Rollup string            `json:"rollup"`
		Rows   []json.RawMessage `json:"rows"`
	}
	if json.Unmarshal(body, &spend) == nil && spend.Rollup != "" {
		rollup, n = spend.Rollup, len(spend.Rows)
	}
	fmt.Printf("| %s | %s | %d | %d | %.1f | %.1f | %.1f | %.1f |\n", name, rollup, n, len(lat), pct(0.5), pct(0.95), pct(0.99), pct(1))
	return nil
}

// compare times the target query's SQL over the hourly rollup and over usages itself (what the rollups
// replace), three runs each.
func compare(ctx context.Context, pool *pgxpool.Pool, end time.Time) error {
	since := end.Add(-30 * 24 * time.Hour)
	fmt.Printf("\n| plain SQL over 30 days | best of 3, ms |\n|---|---|\n")
	for _, c := range []struct{ name, sql string }{
		{"top 10 keys from spend_key_day (what the API reads, without the open hour)", `SELECT api_key_id, sum(cost) FROM spend_key_day WHERE bucket >= $1 AND bucket < $2 GROUP BY 1 ORDER BY 2 DESC LIMIT 10`},
		{"top 10 keys from spend_day (0011's choice)", `SELECT api_key_id, sum(cost) FROM spend_day WHERE bucket >= $1 AND bucket < $2 GROUP BY 1 ORDER BY 2 DESC LIMIT 10`},
		{"top 10 keys from spend_hour", `SELECT api_key_id, sum(cost) FROM spend_hour WHERE bucket >= $1 AND bucket < $2 GROUP BY 1 ORDER BY 2 DESC LIMIT 10`},
		{"by day by logical_model from spend_team_day (what the API reads, without the open hour)", `SELECT bucket, logical_model, sum(cost) FROM spend_team_day WHERE bucket >= $1 AND bucket < $2 GROUP BY 1, 2`},
		{"by day by logical_model from spend_team_hour (day rows not kept)", `SELECT date_trunc('day', bucket, 'UTC'), logical_model, sum(cost) FROM spend_team_hour WHERE bucket >= $1 AND bucket < $2 GROUP BY 1, 2`},
		{"by day by logical_model from spend_hour (no team grain either)", `SELECT date_trunc('day', bucket, 'UTC'), logical_model, sum(cost) FROM spend_hour WHERE bucket >= $1 AND bucket < $2 GROUP BY 1, 2`},
		{"by day by logical_model from usages (no rollups)", `SELECT date_trunc('day', created_at, 'UTC'), logical_model, sum(cost) FROM usages WHERE created_at >= $1 AND created_at < $2 GROUP BY 1, 2`},
	} {
		best := time.Duration(1 << 62)
		for range 3 {
			t := time.Now()
			rows, err := pool.Query(ctx, c.sql, since, end)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			for rows.Next() {
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			best = min(best, time.Since(t))
		}
		fmt.Printf("| %s | %.1f |\n", c.name, float64(best.Microseconds())/1000)
	}
	return nil
}
