// Command usageload measures settlement ingest and the usage listing against a large, partitioned usages
// table (docs/benchmarks.md, "Usages at volume"). It creates a database, applies the migrations, loads -rows
// usage rows spread evenly over the -days days before now, then
//
//   - stores -batches batches of 100 and of 1000 new records through settlement.Service.Settle (created_at
//     over the five minutes before now, as settlement sees them), timing each;
//
//   - serves the admin REST API on loopback and times GET /admin/usages: the first page, a page filtered by
//     key, team and model, a deep page through the cursor, and the lookup by request id.
//
//     go run ./deploy/loadgen/usageload [-db URL] [-rows 10000000] [-days 365] [-runs 200] [-keep] [-reuse NAME] [-only ingest|listing]
//
// The load is fast on purpose: the month partitions are created first, the usages indexes and the spend
// rollup trigger are dropped/disabled for the bulk INSERT ... SELECT generate_series (one statement per month
// chunk) and rebuilt/re-enabled after it, so the rollup tables stay empty (they are not what is measured).
// The ingest timing runs with the trigger enabled, as deployed. -keep leaves the database (named in the
// output) for another run with -reuse NAME, which skips the load; the ingested rows are deleted after the
// ingest timing, so reruns see the same table.
// It is not part of make test: loading 10 million rows takes many minutes.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/store"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

const token = "usageload-bootstrap-token-0123456789"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "usageload:", err)
		os.Exit(1)
	}
}

func run() error {
	dbURL := flag.String("db", envOr("TOLLGATE_TEST_DATABASE_URL", "postgres://root@127.0.0.1:5432/test?sslmode=disable"), "admin database URL (databases are created next to it)")
	rows := flag.Int("rows", 10_000_000, "usage rows to load")
	days := flag.Int("days", 365, "days the loaded rows span (ending now)")
	chunk := flag.Int("chunk", 1_000_000, "rows per INSERT statement")
	runs := flag.Int("runs", 200, "timed runs per listing query")
	batches := flag.Int("batches", 40, "timed Settle batches per batch size")
	keep := flag.Bool("keep", false, "keep the database")
	reuse := flag.String("reuse", "", "reuse a database loaded by an earlier -keep run (skips the load)")
	only := flag.String("only", "", `"ingest" or "listing": time only that (default both)`)
	flag.Parse()
	ctx := context.Background()

	name := *reuse
	if name == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		name = "tg_usageload_" + hex.EncodeToString(b[:])
		if err := adminExec(ctx, *dbURL, "CREATE DATABASE "+name); err != nil {
			return err
		}
	}
	if !*keep && *reuse == "" {
		defer func() {
			if err := adminExec(context.Background(), *dbURL, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				fmt.Fprintln(os.Stderr, "usageload: drop:", err)
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
	fmt.Printf("database %s\n", name)
	now := time.Now().UTC()
	if *reuse == "" {
		if err := load(ctx, pool, *rows, *chunk, now.Add(-time.Duration(*days)*24*time.Hour), now); err != nil {
			return err
		}
	}
	if err := sizes(ctx, pool); err != nil {
		return err
	}
	if *only != "listing" {
		if err := ingest(ctx, pool, *batches, now); err != nil {
			return err
		}
	}
	if *only == "ingest" {
		return nil
	}
	return listing(ctx, pool, *runs)
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

// load inserts rows usage rows in time order over [start, end) — 600 keys (two per user, 300 users, 12
// teams, 3 orgs), 12 logical models, the same shape as spendload — with the indexes and the rollup trigger
// out of the way, then rebuilds the indexes exactly as the migrations defined them.
func load(ctx context.Context, pool *pgxpool.Pool, rows, chunk int, start, end time.Time) error {
	t0 := time.Now()
	if _, err := pool.Exec(ctx, `SELECT usages_ensure_partition(m)
		FROM generate_series(date_trunc('month', $1::timestamptz, 'UTC'), $2::timestamptz, interval '1 month') m`, start, end); err != nil {
		return fmt.Errorf("create partitions: %w", err)
	}
	// The parent's index and constraint definitions, replayed after the load.
	var rebuild []string
	rs, err := pool.Query(ctx, `SELECT 'ALTER TABLE usages ADD CONSTRAINT ' || quote_ident(conname) || ' ' || pg_get_constraintdef(oid),
			'ALTER TABLE usages DROP CONSTRAINT ' || quote_ident(conname)
		  FROM pg_constraint WHERE conrelid = 'usages'::regclass AND contype IN ('p', 'u')
		UNION ALL
		SELECT replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON '), 'DROP INDEX ' || quote_ident(c.relname)
		  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		 WHERE i.indrelid = 'usages'::regclass
		   AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`)
	if err != nil {
		return fmt.Errorf("read indexes: %w", err)
	}
	var drops []string
	for rs.Next() {
		var create, drop string
		if err := rs.Scan(&create, &drop); err != nil {
			return err
		}
		rebuild, drops = append(rebuild, create), append(drops, drop)
	}
	rs.Close()
	for _, s := range append(drops, `ALTER TABLE usages DISABLE TRIGGER usages_spend_rollup`) {
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	span := end.Sub(start).Seconds()
	for lo := 1; lo <= rows; lo += chunk {
		hi := min(lo+chunk-1, rows)
		if _, err := pool.Exec(ctx, `
			INSERT INTO usages (request_id, api_key_id, user_id, team_id, org_id, provider_id, logical_model,
			    upstream_model, operation, inbound_kind, input_tokens, output_tokens, cache_read_tokens, cost, source,
			    end_state, http_status, latency_ms, created_at, settled_at, admitted_at)
			SELECT 'load-' || i, k, 1 + k % 300, 1 + (k % 300) % 12, 1 + ((k % 300) % 12) % 3, 1 + m % 4,
			       'model-' || m, 'upstream-' || m,
			       CASE i % 10 WHEN 0 THEN 'create_embedding' WHEN 1 THEN 'stream_generate_content' ELSE 'generate_content' END,
			       'alpha_chat_completions', tin, tout, tin / 4,
			       (tin * (m + 1) * 0.00000025 + tout * (m + 1) * 0.000001)::numeric,
			       'upstream',
			       CASE i % 50 WHEN 0 THEN 'upstream_error' WHEN 1 THEN 'client_dropped' WHEN 2 THEN 'rejected' ELSE 'completed' END,
			       200, tout * 20, t, t + interval '2 seconds', t
			  FROM (SELECT i, k0 AS k, (k0 + abs(hashint8(i + 7)) % 3) % 12 AS m,
			               100 + abs(hashint8(i + 13)) % 4000 AS tin, 10 + abs(hashint8(i + 17)) % 700 AS tout,
			               $3::timestamptz + make_interval(secs => (i - 1)::float8 * $4 / $5) AS t
			          FROM generate_series($1::bigint, $2::bigint) AS i, LATERAL (SELECT 1 + abs(hashint8(i)) % 600 AS k0) kk) g`,
			lo, hi, start, span, rows); err != nil {
			return fmt.Errorf("load rows %d–%d: %w", lo, hi, err)
		}
		fmt.Printf("loaded %d rows (%.0f s)\n", hi, time.Since(t0).Seconds())
	}
	for _, s := range append(rebuild, `ALTER TABLE usages ENABLE TRIGGER usages_spend_rollup`) {
		t := time.Now()
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		fmt.Printf("%s (%.0f s)\n", s, time.Since(t).Seconds())
	}
	if _, err := pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit)
		SELECT 'org', g, 1000000000 FROM generate_series(1, 3) g
		UNION ALL SELECT 'team', g, 1000000000 FROM generate_series(1, 12) g
		ON CONFLICT DO NOTHING`); err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	fmt.Printf("load, index build and vacuum: %.0f s\n", time.Since(t0).Seconds())
	return nil
}

func sizes(ctx context.Context, pool *pgxpool.Pool) error {
	var n, parts int64
	var heap, idx, biggest string
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM usages),
			(SELECT count(*) FROM pg_inherits WHERE inhparent = 'usages'::regclass),
			pg_size_pretty(sum(pg_table_size(inhrelid))), pg_size_pretty(sum(pg_indexes_size(inhrelid))),
			pg_size_pretty(max(pg_total_relation_size(inhrelid)))
		  FROM pg_inherits WHERE inhparent = 'usages'::regclass`).Scan(&n, &parts, &heap, &idx, &biggest); err != nil {
		return fmt.Errorf("sizes: %w", err)
	}
	fmt.Printf("\n| usages rows | partitions | heap | indexes | largest partition (with indexes) |\n|---|---|---|---|---|\n| %d | %d | %s | %s | %s |\n",
		n, parts, heap, idx, biggest)
	return nil
}

// ingest times settlement.Service.Settle over new records, batches of 100 then of 1000.
func ingest(ctx context.Context, pool *pgxpool.Pool, batches int, now time.Time) error {
	svc := settlement.New(pool, nil, nil)
	// Records reach settlement seconds after their request (the forwarder's linger, a backlog of minutes at
	// worst): created_at over the last five minutes, the current partition and the open rollup hour.
	from := now.Add(-5 * time.Minute)
	span := now.Sub(from)
	rng := mrand.New(mrand.NewPCG(uint64(now.UnixNano()), 1))
	run := strconv.FormatInt(now.UnixNano(), 36)
	fmt.Printf("\n| Settle batch | batches | p50 ms | p95 ms | max ms | rows/s (p50) |\n|---|---|---|---|---|---|\n")
	for _, size := range []int{100, 1000} {
		var lat []time.Duration
		for b := range batches + 2 {
			req := &settlementv1.SettleRequest{NodeId: "usageload"}
			for i := range size {
				k := 1 + rng.Int64N(600)
				team := 1 + (k%300)%12
				m := (k + rng.Int64N(3)) % 12
				req.Records = append(req.Records, &settlementv1.SettlementRecord{
					RequestId: fmt.Sprintf("ing-%s-%d-%d-%d", run, size, b, i), ApiKeyId: k, UserId: 1 + k%300,
					TeamId: &team, OrgId: 1 + team%3, ProviderId: 1 + m%4, LogicalModel: fmt.Sprintf("model-%d", m),
					UpstreamModel: fmt.Sprintf("upstream-%d", m), Operation: "generate_content",
					InboundKind: "alpha_chat_completions", Implementation: "passthrough",
					Tokens: &settlementv1.TokenCounts{Input: 100 + rng.Int64N(4000), Output: 10 + rng.Int64N(700)},
					Cost:   "0.0012345", Source: "upstream", EndState: "completed", HttpStatus: 200,
					CreatedAt: timestamppb.New(from.Add(time.Duration(rng.Int64N(int64(span))))),
				})
			}
			t := time.Now()
			res, err := svc.Settle(ctx, req)
			if err != nil {
				return fmt.Errorf("settle: %w", err)
			}
			if b >= 2 { // two warm-up batches
				lat = append(lat, time.Since(t))
			}
			for _, r := range res.GetResults() {
				if !r.GetInserted() {
					return fmt.Errorf("settle: record %s not inserted", r.GetRequestId())
				}
			}
		}
		slices.Sort(lat)
		p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
		fmt.Printf("| %d records | %d | %.1f | %.1f | %.1f | %.0f |\n", size, len(lat), ms(p(0.5)), ms(p(0.95)), ms(lat[len(lat)-1]),
			float64(size)/p(0.5).Seconds())
	}
	// The ingested rows go again, so reruns measure the same table size (the rollups and quotas keep them).
	if _, err := pool.Exec(ctx, `DELETE FROM usages WHERE created_at >= $1 AND request_id LIKE $2`, from, "ing-"+run+"-%"); err != nil {
		return fmt.Errorf("delete the ingested rows: %w", err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE `+pgx.Identifier{"usages_" + from.Format("2006_01")}.Sanitize()); err != nil {
		return fmt.Errorf("vacuum the current partition: %w", err)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// listing times GET /admin/usages.
func listing(ctx context.Context, pool *pgxpool.Pool, runs int) error {
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
	var minID, maxID int64
	var someRequest string
	if err := pool.QueryRow(ctx, `SELECT min(id), max(id) FROM usages`).Scan(&minID, &maxID); err != nil {
		return fmt.Errorf("id range: %w", err)
	}
	mid := minID + (maxID-minID)/2
	if err := pool.QueryRow(ctx, `SELECT request_id FROM usages WHERE id >= $1 ORDER BY id LIMIT 1`, mid).Scan(&someRequest); err != nil {
		return fmt.Errorf("a request id: %w", err)
	}
	deep := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(mid, 10)))
	base := "http://" + ln.Addr().String() + "/admin/usages?"
	fmt.Printf("\n| query (GET /admin/usages) | rows | runs | p50 ms | p95 ms | max ms |\n|---|---|---|---|---|---|\n")
	for _, q := range []struct{ name, query string }{
		{"first page (50)", "limit=50"},
		{"first page, key 17", "limit=50&api_key_id=17"},
		{"first page, team 5", "limit=50&team_id=5"},
		{"first page, model-3", "limit=50&logical_model=model-3"},
		{"deep page (cursor at the middle id)", "limit=50&cursor=" + deep},
		{"deep page, key 17", "limit=50&api_key_id=17&cursor=" + deep},
		{"deep page, model-3", "limit=50&logical_model=model-3&cursor=" + deep},
		{"by request id", "request_id=" + url.QueryEscape(someRequest)},
	} {
		if err := timeQuery(q.name, base+q.query, runs); err != nil {
			return err
		}
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
	for i := 0; i < runs+3; i++ {
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
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	n := bytes.Count(body, []byte(`"request_id"`))
	fmt.Printf("| %s | %d | %d | %.1f | %.1f | %.1f |\n", name, n, len(lat), ms(p(0.5)), ms(p(0.95)), ms(lat[len(lat)-1]))
	return nil
}
