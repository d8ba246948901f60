package batch_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/batch"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// env is a control plane's database with one org/team/user/key, a provider of each dialect on the fake
// provider, and price rules: alpha a-1 and beta b-1 with a batch tier entry (half price), gamma g-1 without
// one (base price).
type env struct {
	t        testing.TB
	ctx      context.Context
	pool     *pgxpool.Pool
	box      *secret.Box
	fake     *fakeProvider
	svc      *settlement.Service
	org      int64
	team     int64
	user     int64
	key      int64
	provider map[string]int64
	cred     map[string]int64
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	db := storetest.New(t)
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	box, err := secret.New(k)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, pool: db.Pool, box: box, fake: newFakeProvider(t), svc: settlement.New(db.Pool, nil, nil),
		provider: map[string]int64{}, cred: map[string]int64{}}
	org, err := store.InsertOrg(ctx, e.pool, "acme")
	e.must(err)
	team, err := store.InsertTeam(ctx, e.pool, store.Team{OrgID: org.ID, Name: "research"})
	e.must(err)
	user, err := store.InsertUser(ctx, e.pool, store.User{OrgID: org.ID, TeamID: &team.ID, Name: "ada", Email: "ada@example.com"})
	e.must(err)
	hash := sha256.Sum256([]byte("tg_bulk-secret"))
	key, err := store.InsertAPIKey(ctx, e.pool, store.APIKey{UserID: user.ID, Name: "bulk", Prefix: "tg_bulk", Enabled: true}, hash[:])
	e.must(err)
	e.org, e.team, e.user, e.key = org.ID, team.ID, user.ID, key.ID
	_, err = e.pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', $1, 100), ('team', $2, NULL)`, org.ID, team.ID)
	e.must(err)
	for dialect, secretKey := range map[string]string{"alpha": alphaKey, "beta": betaKey, "gamma": gammaKey} {
		p, err := store.InsertProvider(ctx, e.pool, store.Provider{Name: dialect + "-main", ChannelType: dialect, BaseURL: e.fake.srv.URL, Enabled: true})
		e.must(err)
		sealed, err := box.Seal([]byte(secretKey))
		e.must(err)
		c, err := store.InsertCredential(ctx, e.pool, p.ID, sealed, 1, true)
		e.must(err)
		e.provider[dialect], e.cred[dialect] = p.ID, c.ID
	}
	for _, r := range []struct {
		dialect, model, in, out, cacheRead, tiers string
	}{
		{"alpha", "a-1", "2", "8", "1", `[{"service_tier":"batch","multiplier":"0.5"}]`},
		{"beta", "b-1", "3", "15", "0.3", `[{"service_tier":"batch","multiplier":"0.5"}]`},
		{"gamma", "g-1", "1", "4", "0.25", `[]`},
	} {
		_, err := e.pool.Exec(ctx, `INSERT INTO price_rules (provider_id, match_type, model_match, input_price, output_price,
			cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price, pricing_tiers_json)
			VALUES ($1, 'exact', $2, $3::numeric, $4::numeric, $5::numeric, 0, 0, 0, 0, $6::jsonb)`,
			e.provider[r.dialect], r.model, r.in, r.out, r.cacheRead, r.tiers)
		e.must(err)
	}
	return e
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// register calls the RPC a data plane calls after the provider accepted a batch; every line is estimated at
// 1000 micro-dollars.
func (e *env) register(dialect, providerBatchID, endpoint, model string, customIDs ...string) *settlementv1.BatchHold {
	e.t.Helper()
	req := &settlementv1.RegisterBatchRequest{NodeId: "dp-1", ProviderId: e.provider[dialect], CredentialId: e.cred[dialect],
		ProviderBatchId: providerBatchID, Dialect: dialect, Endpoint: endpoint, ApiKeyId: e.key, UserId: e.user, TeamId: &e.team,
		OrgId: e.org, LogicalModel: "logical-" + model, UpstreamModel: model, ExpiresAt: timestamppb.New(time.Now().Add(24 * time.Hour)),
		AdmittedAt: timestamppb.New(time.Now().Add(-time.Minute))}
	for _, c := range customIDs {
		req.Lines = append(req.Lines, &settlementv1.BatchLine{CustomId: c, LogicalModel: "logical-" + model, UpstreamModel: model, EstimateMicros: 1000})
		req.ReservedMicros += 1000
	}
	res, err := e.svc.RegisterBatch(e.ctx, req)
	e.must(err)
	if !res.GetCreated() {
		e.t.Fatalf("batch %s not created", providerBatchID)
	}
	return res.GetBatch()
}

func (e *env) watcher(owner string, opts batch.Options) *batch.Watcher {
	opts.Owner = owner
	if opts.PollEvery == 0 {
		opts.PollEvery = time.Hour
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = time.Hour
	}
	return batch.New(e.pool, e.box, nil, nil, opts)
}

// due makes every open batch due for a poll now.
func (e *env) due() {
	_, err := e.pool.Exec(e.ctx, `UPDATE batches SET next_poll_at = now() - interval '1 second'`)
	e.must(err)
}

func (e *env) scalar(sql string, args ...any) string {
	e.t.Helper()
	var s string
	e.must(e.pool.QueryRow(e.ctx, sql, args...).Scan(&s))
	return s
}

func (e *env) equalNumeric(what, got, want string) {
	e.t.Helper()
	var eq bool
	e.must(e.pool.QueryRow(e.ctx, `SELECT $1::numeric = $2::numeric`, got, want).Scan(&eq))
	if !eq {
		e.t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func TestWatcherSettlesEachDialectExactlyOnce(t *testing.T) {
	e := newEnv(t)
	f := e.fake
	alpha := e.register("alpha", "batch_abc", "/v1/chat/completions", "a-1", "a1", "a2", "a3", "a4", "a5")
	beta := e.register("beta", "msgbatch_01", "", "b-1", "b1", "b2", "b3", "b4", "b5")
	gfile := e.register("gamma", "batches/file1", "", "g-1", "g1", "g2")
	ginline := e.register("gamma", "batches/inline1", "", "g-1", "i0", "1")
	f.mu.Lock()
	f.alpha["batch_abc"] = &alphaFake{status: "in_progress"}
	f.beta["msgbatch_01"] = &betaFake{status: "in_progress"}
	f.gamma["batches/file1"] = &gammaFake{state: "BATCH_STATE_RUNNING"}
	f.gamma["batches/inline1"] = &gammaFake{state: "BATCH_STATE_PENDING"}
	f.mu.Unlock()

	w := e.watcher("cp-1", batch.Options{})
	if n, err := w.Once(e.ctx); err != nil || n != 4 {
		t.Fatalf("first poll: claimed %d, err %v", n, err)
	}
	if got := e.scalar(`SELECT count(*)::text FROM usages`); got != "0" {
		t.Fatalf("usages while running: %s", got)
	}
	if got := e.scalar(`SELECT string_agg(status, ',' ORDER BY id) FROM batches`); got != "in_progress,in_progress,in_progress,validating" {
		t.Errorf("statuses while running: %s", got)
	}
	if n, _ := w.Once(e.ctx); n != 0 {
		t.Errorf("a batch polled again before its next poll: %d", n)
	}

	// The providers end the batches, with every kind of line.
	f.mu.Lock()
	f.files["file-out"] = []string{alphaOK("a1", 1000, 500), alphaOK("a2", 2000, 1000), alphaOK("zz", 100, 100)}
	f.files["file-err"] = []string{alphaFailed("a3"), alphaExpired("a4")}
	f.alpha["batch_abc"] = &alphaFake{status: "completed", output: "file-out", errorsID: "file-err"}
	f.beta["msgbatch_01"] = &betaFake{status: "ended", canceled: true, expired: 1, lines: []string{
		betaOK("b1", 1000, 200, 10000), betaOK("b2", 500, 100, 0), betaEnded("b3", "errored"), betaEnded("b4", "canceled"), betaEnded("b5", "expired")}}
	f.files["files/out1"] = []string{gammaFileOK("g1", 1000, 250), gammaFileErr("g2")}
	f.gamma["batches/file1"] = &gammaFake{state: "BATCH_STATE_SUCCEEDED", file: "files/out1"}
	f.gamma["batches/inline1"] = &gammaFake{state: "BATCH_STATE_SUCCEEDED", inline: []string{
		`{"response":` + gammaResponse(2000, 500) + `,"metadata":{"key":"i0"}}`,
		`{"error":{"code":429,"message":"Resource exhausted.","status":"RESOURCE_EXHAUSTED"}}`}}
	f.mu.Unlock()
	e.due()
	if _, err := w.Once(e.ctx); err != nil {
		t.Fatal(err)
	}

	// Each line once, priced at the batch tier: alpha and beta at half price, gamma (no batch entry) at base.
	want := map[string]struct{ cost, end, state string }{
		"a1": {"0.003", "completed", "succeeded"}, "a2": {"0.006", "completed", "succeeded"}, "zz": {"0.0005", "completed", "succeeded"},
		"a3": {"0", "upstream_error", "errored"}, "a4": {"0", "upstream_error", "expired"},
		"b1": {"0.0045", "completed", "succeeded"}, "b2": {"0.0015", "completed", "succeeded"},
		"b3": {"0", "upstream_error", "errored"}, "b4": {"0", "upstream_error", "cancelled"}, "b5": {"0", "upstream_error", "expired"},
		"g1": {"0.002", "completed", "succeeded"}, "g2": {"0", "upstream_error", "errored"},
		"i0": {"0.004", "completed", "succeeded"}, "1": {"0", "upstream_error", "errored"},
	}
	rows, err := e.pool.Query(e.ctx, `SELECT u.custom_id, u.request_id, u.batch_id, u.cost::text, u.end_state, u.api_key_id, u.user_id,
		u.team_id, u.org_id, u.requested_tier, u.reported_tier, u.admitted_at IS NOT NULL, l.state
		FROM usages u JOIN batch_lines l ON l.batch_id = u.batch_id AND l.custom_id = u.custom_id`)
	e.must(err)
	seen := map[string]int{}
	for rows.Next() {
		var custom, reqID, cost, end, reqTier, repTier, state string
		var batchID, key, user, team, org int64
		var admitted bool
		e.must(rows.Scan(&custom, &reqID, &batchID, &cost, &end, &key, &user, &team, &org, &reqTier, &repTier, &admitted, &state))
		seen[custom]++
		w, ok := want[custom]
		if !ok {
			t.Errorf("unexpected line %q", custom)
			continue
		}
		e.equalNumeric("cost of "+custom, cost, w.cost)
		if end != w.end || state != w.state {
			t.Errorf("%s: end_state %s, line state %s; want %s, %s", custom, end, state, w.end, w.state)
		}
		if key != e.key || user != e.user || team != e.team || org != e.org {
			t.Errorf("%s attributed to key %d user %d team %d org %d", custom, key, user, team, org)
		}
		if reqTier != "batch" || repTier != "batch" || !admitted {
			t.Errorf("%s: tiers %q/%q, admitted_at set %v", custom, reqTier, repTier, admitted)
		}
		if reqID != store.BatchLineRequestID(batchID, custom) {
			t.Errorf("%s: request_id %s", custom, reqID)
		}
	}
	e.must(rows.Err())
	for c := range want {
		if seen[c] != 1 {
			t.Errorf("line %s settled %d times", c, seen[c])
		}
	}
	// a5 was registered but the results never named it: missing, no row. zz was not registered.
	if got := e.scalar(`SELECT state || ',' || registered FROM batch_lines WHERE custom_id = 'a5'`); got != "missing,true" {
		t.Errorf("a5: %s", got)
	}
	if got := e.scalar(`SELECT state || ',' || registered FROM batch_lines WHERE custom_id = 'zz'`); got != "succeeded,false" {
		t.Errorf("zz: %s", got)
	}
	total := "0.0215"
	e.equalNumeric("org cost_used", e.scalar(`SELECT cost_used::text FROM quotas WHERE scope = 'org'`), total)
	e.equalNumeric("team cost_used", e.scalar(`SELECT cost_used::text FROM quotas WHERE scope = 'team'`), total)
	// The spend rollups see batch rows like any other (the settlement insert's trigger).
	e.equalNumeric("spend", e.scalar(`SELECT (coalesce((SELECT sum(cost) FROM spend_delta), 0) + coalesce((SELECT sum(cost) FROM spend_hour), 0))::text`), total)

	for _, c := range []struct {
		hold                            *settlementv1.BatchHold
		outcome, cost                   string
		ok, errored, expired, cancelled int
	}{
		{alpha, "completed", "0.0095", 3, 1, 1, 0},
		{beta, "cancelled", "0.006", 2, 1, 1, 1},
		{gfile, "completed", "0.002", 1, 1, 0, 0},
		{ginline, "completed", "0.004", 1, 1, 0, 0},
	} {
		b, err := store.GetBatch(e.ctx, e.pool, c.hold.GetBatchId())
		e.must(err)
		if b.SettledAt == nil || b.HeldMicros != 0 || b.Status != "ended" || b.Outcome != c.outcome {
			t.Errorf("batch %s: settled %v held %d status %s outcome %s", b.ProviderBatchID, b.SettledAt != nil, b.HeldMicros, b.Status, b.Outcome)
		}
		if b.LinesSucceeded != int64(c.ok) || b.LinesErrored != int64(c.errored) || b.LinesExpired != int64(c.expired) || b.LinesCancelled != int64(c.cancelled) {
			t.Errorf("batch %s: lines %d/%d/%d/%d", b.ProviderBatchID, b.LinesSucceeded, b.LinesErrored, b.LinesExpired, b.LinesCancelled)
		}
		e.equalNumeric("settled cost of "+b.ProviderBatchID, b.SettledCost, c.cost)
	}

	// The hold feed: every batch is settled, held 0.
	holds, err := e.svc.ListBatchHolds(e.ctx, &settlementv1.ListBatchHoldsRequest{AfterSeq: alpha.GetProgressSeq()})
	e.must(err)
	settled := 0
	for _, h := range holds.GetBatches() {
		if h.GetSettled() && h.GetHeldMicros() == 0 {
			settled++
		}
	}
	if settled != 4 {
		t.Errorf("hold feed: %d batches settled with nothing held, want 4 (%v)", settled, holds.GetBatches())
	}

	// Spend analytics: the batch dimension groups each batch's lines (a request would be batch none), before
	// and after the rollups fold the delta rows.
	e.spendByBatch(map[int64]string{alpha.GetBatchId(): "0.0095", beta.GetBatchId(): "0.006", gfile.GetBatchId(): "0.002", ginline.GetBatchId(): "0.004"})
	if moved, ran, err := store.FoldSpend(e.ctx, e.pool); err != nil || !ran || moved == 0 {
		t.Fatalf("fold: moved %d, ran %v, err %v", moved, ran, err)
	}
	if got := e.scalar(`SELECT count(*)::text FROM spend_delta`); got != "0" {
		t.Fatalf("%s delta rows after the fold", got)
	}
	e.spendByBatch(map[int64]string{alpha.GetBatchId(): "0.0095", beta.GetBatchId(): "0.006", gfile.GetBatchId(): "0.002", ginline.GetBatchId(): "0.004"})

	// Reading the results again settles nothing twice.
	_, err = e.pool.Exec(e.ctx, `UPDATE batches SET settled_at = NULL`)
	e.must(err)
	e.due()
	if _, err := w.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.scalar(`SELECT count(*)::text FROM usages`); got != "14" {
		t.Errorf("usages after a re-read: %s, want 14", got)
	}
	e.equalNumeric("org cost_used after a re-read", e.scalar(`SELECT cost_used::text FROM quotas WHERE scope = 'org'`), total)
	if f.badKey != 0 {
		t.Errorf("%d provider calls with a wrong credential", f.badKey)
	}
}

// bigAlphaBatch registers an alpha batch of n lines, each answered with 100 input and 10 output tokens
// (0.00014 at half price).
func bigAlphaBatch(e *env, id string, n int) {
	ids := make([]string, n)
	lines := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-line-%03d", id, i)
		lines[i] = alphaOK(ids[i], 100, 10)
	}
	e.register("alpha", id, "/v1/chat/completions", "a-1", ids...)
	e.fake.mu.Lock()
	e.fake.files[id+"-out"] = lines
	e.fake.alpha[id] = &alphaFake{status: "completed", output: id + "-out"}
	e.fake.mu.Unlock()
}

func (e *env) assertEachLineOnce(n int) {
	e.t.Helper()
	if got := e.scalar(`SELECT count(*)::text FROM usages`); got != fmt.Sprint(n) {
		e.t.Errorf("usages: %s, want %d", got, n)
	}
	if got := e.scalar(`SELECT count(*)::text FROM (SELECT 1 FROM usages GROUP BY batch_id, custom_id HAVING count(*) > 1) d`); got != "0" {
		e.t.Errorf("%s lines settled more than once", got)
	}
	if got := e.scalar(`SELECT count(*)::text FROM batch_lines WHERE state <> 'succeeded'`); got != "0" {
		e.t.Errorf("%s lines not succeeded", got)
	}
	e.equalNumeric("org cost_used", e.scalar(`SELECT cost_used::text FROM quotas WHERE scope = 'org'`), fmt.Sprintf("%d", n*14)+"e-5")
}

func TestRestartMidReadResumesWithoutDoubleSettlement(t *testing.T) {
	e := newEnv(t)
	bigAlphaBatch(e, "batch_big", 50)
	pause := make(chan struct{})
	e.fake.mu.Lock()
	e.fake.pause, e.fake.after = pause, 23
	e.fake.mu.Unlock()

	ctx, cancel := context.WithCancel(e.ctx)
	w1 := e.watcher("cp-1", batch.Options{Chunk: 5, Lease: time.Second, Tick: 10 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); _ = w1.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for e.scalar(`SELECT count(*)::text FROM usages`) != "20" {
		if time.Now().After(deadline) {
			t.Fatalf("the first watcher did not settle 20 lines (4 chunks of 5) before the pause: %s", e.scalar(`SELECT count(*)::text FROM usages`))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The control plane dies mid-read: 20 lines settled, 3 read and unsettled, 27 unread.
	cancel()
	<-done
	b, err := store.GetBatch(e.ctx, e.pool, 1)
	e.must(err)
	if b.SettledAt != nil || b.LinesSucceeded != 20 || b.HeldMicros != 30*1000 {
		t.Fatalf("after the kill: settled %v, %d lines, held %d", b.SettledAt != nil, b.LinesSucceeded, b.HeldMicros)
	}
	e.fake.mu.Lock()
	e.fake.pause = nil
	e.fake.mu.Unlock()

	// A restarted control plane claims the batch once the dead one's lease lapses, reads from the start.
	time.Sleep(1100 * time.Millisecond)
	w2 := e.watcher("cp-1", batch.Options{Chunk: 7, Lease: time.Second})
	if n, err := w2.Once(e.ctx); err != nil || n != 1 {
		t.Fatalf("restart: claimed %d, err %v", n, err)
	}
	e.assertEachLineOnce(50)
	b, err = store.GetBatch(e.ctx, e.pool, 1)
	e.must(err)
	if b.SettledAt == nil || b.LinesSucceeded != 50 || b.HeldMicros != 0 {
		t.Errorf("after the restart: settled %v, %d lines, held %d", b.SettledAt != nil, b.LinesSucceeded, b.HeldMicros)
	}
	if e.fake.reads != 2 {
		t.Errorf("results read %d times, want 2", e.fake.reads)
	}
}

func TestTwoWatchersSettleEachLineOnce(t *testing.T) {
	e := newEnv(t)
	const batches, lines = 6, 40
	for i := range batches {
		bigAlphaBatch(e, fmt.Sprintf("batch_%d", i), lines)
	}
	// A slow provider and a short lease: leases lapse mid-read and the other replica takes the batch over
	// while the first may still be settling its chunk.
	e.fake.mu.Lock()
	e.fake.perLn = 3 * time.Millisecond
	e.fake.mu.Unlock()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, owner := range []string{"cp-1", "cp-2"} {
		w := e.watcher(owner, batch.Options{Chunk: 4, Lease: 50 * time.Millisecond, Tick: 5 * time.Millisecond, Claim: 2, RetryAfter: 10 * time.Millisecond})
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	deadline := time.Now().Add(60 * time.Second)
	for e.scalar(`SELECT count(*)::text FROM batches WHERE settled_at IS NULL`) != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("batches not settled: %s open", e.scalar(`SELECT count(*)::text FROM batches WHERE settled_at IS NULL`))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	e.assertEachLineOnce(batches * lines)
	if got := e.scalar(`SELECT sum(lines_succeeded)::text FROM batches`); got != fmt.Sprint(batches*lines) {
		t.Errorf("lines_succeeded sum %s", got)
	}
	t.Logf("results streams opened: %d for %d batches", e.fake.reads, batches)
}

// TestConcurrentSettlementOfOneLineInsertsOnce settles the same lines from many goroutines at once (two
// replicas whose reads overlap): each line gets one row and is charged once.
func TestConcurrentSettlementOfOneLineInsertsOnce(t *testing.T) {
	e := newEnv(t)
	h := e.register("alpha", "batch_race", "/v1/chat/completions", "a-1", "x1", "x2", "x3")
	id := h.GetBatchId()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rows []store.UsageRow
			for _, c := range []string{"x3", "x1", "x2"}[g%3:] {
				org, key := e.org, e.key
				rows = append(rows, store.UsageRow{RequestID: store.BatchLineRequestID(id, c), OrgID: &org, APIKeyID: &key,
					Operation: "generate_content", InboundKind: "alpha_chat_completions", Cost: "0.25", Source: "upstream",
					EndState: "completed", CreatedAt: time.Now().Add(time.Duration(g) * time.Microsecond), BatchID: &id, CustomID: c,
					BatchLineState: store.LineSucceeded})
			}
			if _, err := store.SettleUsages(e.ctx, e.pool, rows); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := e.scalar(`SELECT count(*)::text FROM usages`); got != "3" {
		t.Errorf("usages %s, want 3", got)
	}
	e.equalNumeric("org cost_used", e.scalar(`SELECT cost_used::text FROM quotas WHERE scope = 'org'`), "0.75")
	b, err := store.GetBatch(e.ctx, e.pool, id)
	e.must(err)
	if b.LinesSucceeded != 3 || b.HeldMicros != 0 {
		t.Errorf("batch: %d lines, held %d", b.LinesSucceeded, b.HeldMicros)
	}
}

// spendByBatch checks spend grouped by the batch dimension, over the day and by hour, against want.
func (e *env) spendByBatch(want map[int64]string) {
	e.t.Helper()
	hour := time.Now().UTC().Truncate(time.Hour)
	for _, q := range []store.SpendQuery{
		{Since: hour.Add(-24 * time.Hour), Until: hour.Add(time.Hour), GroupBy: []store.SpendDim{store.DimBatch}, MaxRows: 100},
		{Since: hour, Until: hour.Add(time.Hour), Bucket: store.BucketHour, GroupBy: []store.SpendDim{store.DimOrg, store.DimBatch},
			Filters: []store.SpendFilter{{Dim: store.DimBatch, IDs: []int64{e.batchIDs(want)[0]}}}, MaxRows: 100},
	} {
		ans, err := store.QuerySpend(e.ctx, e.pool, q)
		e.must(err)
		seen := 0
		for _, r := range ans.Rows {
			g := r.Group[len(r.Group)-1]
			if g.Dim != store.DimBatch || g.ID == nil {
				e.t.Errorf("spend row without a batch: %+v", r)
				continue
			}
			seen++
			e.equalNumeric(fmt.Sprintf("spend of batch %d (%s)", *g.ID, ans.Table), r.Cost, want[*g.ID])
		}
		if n := len(want); len(q.Filters) > 0 {
			n = 1
			if seen != n {
				e.t.Errorf("filtered spend by batch: %d rows, want %d", seen, n)
			}
		} else if seen != n {
			e.t.Errorf("spend by batch: %d rows, want %d", seen, n)
		}
	}
}

func (e *env) batchIDs(m map[int64]string) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestHoldFeedMissesNoChange follows ListBatchHolds by after_seq, as a data plane does, while lines of ten
// batches settle concurrently and the batches close: what the follower applied (the lowest held amount seen,
// settled) ends equal to every batch's stored state. Progress numbers commit in order, so no change numbered
// below one already read can appear later.
func TestHoldFeedMissesNoChange(t *testing.T) {
	e := newEnv(t)
	const batches, lines = 10, 20
	ids := make([]int64, batches)
	for i := range batches {
		custom := make([]string, lines)
		for j := range lines {
			custom[j] = fmt.Sprintf("l%02d", j)
		}
		ids[i] = e.register("alpha", fmt.Sprintf("batch_feed_%d", i), "/v1/chat/completions", "a-1", custom...).GetBatchId()
	}
	type seen struct {
		held    int64
		settled bool
	}
	applied := map[int64]*seen{}
	var after int64
	follow := func() int {
		res, err := e.svc.ListBatchHolds(e.ctx, &settlementv1.ListBatchHoldsRequest{AfterSeq: after, Limit: 7})
		if err != nil {
			t.Error(err)
			return 0
		}
		for _, h := range res.GetBatches() {
			s := applied[h.GetBatchId()]
			if s == nil {
				s = &seen{held: h.GetReservedMicros()}
				applied[h.GetBatchId()] = s
			}
			s.held = min(s.held, h.GetHeldMicros())
			s.settled = s.settled || h.GetSettled()
			after = h.GetProgressSeq()
		}
		return len(res.GetBatches())
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := g; j < lines; j += 6 {
				var rows []store.UsageRow
				for _, id := range ids {
					org, key, batchID := e.org, e.key, id
					custom := fmt.Sprintf("l%02d", j)
					rows = append(rows, store.UsageRow{RequestID: store.BatchLineRequestID(id, custom), OrgID: &org, APIKeyID: &key,
						Operation: "generate_content", InboundKind: "alpha_chat_completions", Cost: "0.001", Source: "upstream",
						EndState: "completed", CreatedAt: time.Now(), BatchID: &batchID, CustomID: custom, BatchLineState: store.LineSucceeded})
				}
				if _, err := store.SettleUsages(e.ctx, e.pool, rows); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	go func() {
		defer close(done)
		wg.Wait()
		for _, id := range ids[:batches/2] {
			if err := store.CloseBatch(e.ctx, e.pool, id); err != nil {
				t.Error(err)
			}
		}
	}()
	for following := true; following; {
		select {
		case <-done:
			following = false
		default:
			follow()
		}
	}
	for follow() > 0 {
	}
	for i, id := range ids {
		b, err := store.GetBatch(e.ctx, e.pool, id)
		e.must(err)
		s := applied[id]
		if s == nil || s.held != b.HeldMicros || s.settled != (b.SettledAt != nil) {
			t.Errorf("batch %d: follower applied %+v, stored held %d settled %v", id, s, b.HeldMicros, b.SettledAt != nil)
		}
		if wantSettled := i < batches/2; (b.SettledAt != nil) != wantSettled || b.HeldMicros != 0 {
			t.Errorf("batch %d: stored held %d settled %v", id, b.HeldMicros, b.SettledAt != nil)
		}
	}
}

// TestFailingPollsRetryThenGiveUpPastTheHold: a provider that does not know the batch (404) leaves it open
// with last_error and retries; once past the hold's expiry the batch is closed as failed, nothing charged.
func TestFailingPollsRetryThenGiveUpPastTheHold(t *testing.T) {
	e := newEnv(t)
	h := e.register("beta", "msgbatch_gone", "", "b-1", "x1", "x2")
	w := e.watcher("cp-1", batch.Options{})
	if _, err := w.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	b, err := store.GetBatch(e.ctx, e.pool, h.GetBatchId())
	e.must(err)
	if b.SettledAt != nil || b.Status != "validating" || !strings.Contains(b.LastError, "status 404") || b.HeldMicros != 2000 {
		t.Fatalf("after a failed poll: %+v", b)
	}
	_, err = e.pool.Exec(e.ctx, `UPDATE batches SET hold_expires_at = now() - interval '1 minute'`)
	e.must(err)
	e.due()
	if _, err := w.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	b, err = store.GetBatch(e.ctx, e.pool, h.GetBatchId())
	e.must(err)
	if b.SettledAt == nil || b.Status != "ended" || b.Outcome != "failed" || b.HeldMicros != 0 || !strings.Contains(b.LastError, "given up") {
		t.Errorf("after giving up: %+v", b)
	}
	if got := e.scalar(`SELECT string_agg(state, ',' ORDER BY custom_id) FROM batch_lines`); got != "missing,missing" {
		t.Errorf("lines: %s", got)
	}
	if got := e.scalar(`SELECT count(*)::text FROM usages`); got != "0" {
		t.Errorf("usages: %s", got)
	}
}

// TestUnstorableLineDoesNotBlockTheBatch: a result line the batch did not register whose body names a model
// with a NUL (what the provider wrote is not storable) is recorded without usage under a cleaned model name,
// and the batch's other lines settle.
func TestUnstorableLineDoesNotBlockTheBatch(t *testing.T) {
	e := newEnv(t)
	res, err := e.svc.RegisterBatch(e.ctx, &settlementv1.RegisterBatchRequest{ProviderId: e.provider["alpha"], CredentialId: e.cred["alpha"],
		ProviderBatchId: "batch_odd", Dialect: "alpha", Endpoint: "/v1/chat/completions", ApiKeyId: e.key, OrgId: e.org,
		ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)), ReservedMicros: 1000,
		Lines: []*settlementv1.BatchLine{{CustomId: "ok", UpstreamModel: "a-1", EstimateMicros: 1000}}})
	e.must(err)
	odd := strings.Replace(alphaOK("odd", 1000, 500), `"model":"a-1-2025-01-01"`, `"model":"a-1\u0000x"`, 1)
	e.fake.mu.Lock()
	e.fake.files["odd-out"] = []string{odd, alphaOK("ok", 1000, 500)}
	e.fake.alpha["batch_odd"] = &alphaFake{status: "completed", output: "odd-out"}
	e.fake.mu.Unlock()
	if _, err := e.watcher("cp-1", batch.Options{}).Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	b, err := store.GetBatch(e.ctx, e.pool, res.GetBatch().GetBatchId())
	e.must(err)
	if b.SettledAt == nil || b.LinesSucceeded != 2 {
		t.Fatalf("batch: settled %v, %d lines (%s)", b.SettledAt != nil, b.LinesSucceeded, b.LastError)
	}
	e.equalNumeric("settled cost", b.SettledCost, "0.003")
	if got := e.scalar(`SELECT upstream_model || ' ' || cost::text || ' ' || source FROM usages WHERE custom_id = 'odd'`); got != "a-1x 0 none" {
		t.Errorf("odd line: %q", got)
	}
}

// TestUnreadableResultsRetryThenGiveUpPastTheHold: an ended batch whose results cannot be read (the output file
// is gone) keeps its hold and last_error and is retried; past the hold's expiry it is closed as failed.
func TestUnreadableResultsRetryThenGiveUpPastTheHold(t *testing.T) {
	e := newEnv(t)
	h := e.register("alpha", "batch_nofile", "/v1/chat/completions", "a-1", "y1")
	e.fake.mu.Lock()
	e.fake.alpha["batch_nofile"] = &alphaFake{status: "completed", output: "file-gone"}
	e.fake.mu.Unlock()
	w := e.watcher("cp-1", batch.Options{})
	if _, err := w.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	b, err := store.GetBatch(e.ctx, e.pool, h.GetBatchId())
	e.must(err)
	if b.SettledAt != nil || b.Status != "ended" || b.HeldMicros != 1000 || !strings.Contains(b.LastError, "status 404") {
		t.Fatalf("after a failed read: %+v", b)
	}
	_, err = e.pool.Exec(e.ctx, `UPDATE batches SET hold_expires_at = now() - interval '1 minute'`)
	e.must(err)
	e.due()
	if _, err := w.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	b, err = store.GetBatch(e.ctx, e.pool, h.GetBatchId())
	e.must(err)
	if b.SettledAt == nil || b.Outcome != "failed" || b.HeldMicros != 0 || !strings.Contains(b.LastError, "given up") {
		t.Errorf("after giving up: %+v", b)
	}
}
