package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ericlagergren/decimal"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/controlplane/alert"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/deploy/mockupstream"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/usage"
)

// gateway plays the data plane's part for these tests: it sends a request to the mock provider, reads the
// usage from the answer with the data plane's (dialect/alpha, dialect/beta), prices it with the price rule
// (shared/pricing) and settles the row through the store, as settlement does.
type gateway struct {
	t        *testing.T
	pool     *pgxpool.Pool
	box      *secret.Box
	p        *provider
	seq      atomic.Int64
	rules    map[string]ruleRef // model → rule
	provider map[string]int64   // "alpha"/"beta" → provider id
	cred     map[string]int64   // provider kind → credential id
	keys     map[string]string  // provider kind → inference key
}

type ruleRef struct {
	id   int64
	rule *pricing.Rule
}

// ruleInputs are the gateway's price rules; the fake provider prices its bills with the same prices in every
// category (mockPrices), so honest traffic reconciles to zero cost drift whatever categories it has.
var ruleInputs = map[string]pricing.RuleInput{
	"m-1": {MatchType: "exact", ModelMatch: "m-1", InputPrice: "2", OutputPrice: "8", CacheReadPrice: "0.5", CacheCreation5mPrice: "2.5",
		CacheCreation30mPrice: "3", CacheCreation1hPrice: "4", ImageOutputPrice: "30", Enabled: true},
	"b-1": {MatchType: "exact", ModelMatch: "b-1", InputPrice: "3", OutputPrice: "15", CacheReadPrice: "0.3", CacheCreation5mPrice: "3.75",
		CacheCreation30mPrice: "4.5", CacheCreation1hPrice: "6", ImageOutputPrice: "0", Enabled: true},
}

// mockPrice is a rule's prices as the fake provider's price list.
func mockPrice(in pricing.RuleInput) mockupstream.Price {
	return mockupstream.Price{Input: in.InputPrice, Output: in.OutputPrice, CacheRead: in.CacheReadPrice, Cache5m: in.CacheCreation5mPrice,
		Cache30m: in.CacheCreation30mPrice, Cache1h: in.CacheCreation1hPrice, ImageOut: in.ImageOutputPrice}
}

func newGateway(t *testing.T) *gateway {
	t.Helper()
	ctx := context.Background()
	db := storetest.New(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secret.New(key)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{t: t, pool: db.Pool, box: box, p: newProvider(t), rules: map[string]ruleRef{}, provider: map[string]int64{},
		cred: map[string]int64{}, keys: map[string]string{"alpha": "sk-a", "beta": "sk-b"}}
	for kind, rk := range map[string]string{"alpha": KindOpenAI, "beta": KindAnthropic} {
		prov, err := store.InsertProvider(ctx, g.pool, store.Provider{Name: kind + "-main", ChannelType: kind, BaseURL: g.p.srv.URL, Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		g.provider[kind] = prov.ID
		cred, err := store.InsertCredential(ctx, g.pool, prov.ID, g.seal(g.keys[kind]), 1, true)
		if err != nil {
			t.Fatal(err)
		}
		g.cred[kind] = cred.ID
		project := mockupstream.ProjectID
		if kind == "beta" {
			project = mockupstream.WorkspaceID
		}
		if err := store.SetCredentialRef(ctx, g.pool, store.CredentialRef{CredentialID: cred.ID, KeyRef: mockupstream.KeyID(g.keys[kind]), ProjectRef: project}); err != nil {
			t.Fatal(err)
		}
		tokensAbs := int64(5)
		costRel := "0.05"
		if _, err := store.PutReconcileProvider(ctx, g.pool, store.ReconcileProvider{ProviderID: prov.ID, Kind: rk, BaseURL: g.p.srv.URL,
			Enabled: true, BucketBy: "end", LateHours: 24, TokensAbs: &tokensAbs, CostRel: &costRel}, g.seal("sk-admin")); err != nil {
			t.Fatal(err)
		}
	}
	for model, in := range ruleInputs {
		pid := g.provider["alpha"]
		if model == "b-1" {
			pid = g.provider["beta"]
		}
		var id int64
		if err := g.pool.QueryRow(ctx, `INSERT INTO price_rules (provider_id, match_type, model_match, input_price, output_price,
			cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price)
			VALUES ($1, 'exact', $2, $3::text::numeric, $4::text::numeric, $5::text::numeric, $6::text::numeric, $7::text::numeric,
			        $8::text::numeric, $9::text::numeric) RETURNING id`,
			pid, model, in.InputPrice, in.OutputPrice, in.CacheReadPrice, in.CacheCreation5mPrice, in.CacheCreation30mPrice,
			in.CacheCreation1hPrice, in.ImageOutputPrice).Scan(&id); err != nil {
			t.Fatal(err)
		}
		in.ID = id
		r, err := pricing.ParseRule(in)
		if err != nil {
			t.Fatal(err)
		}
		g.rules[model] = ruleRef{id: id, rule: r}
	}
	return g
}

func (g *gateway) seal(s string) []byte {
	c, err := g.box.Seal([]byte(s))
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// call is one request through the "gateway".
type call struct {
	kind    string // alpha (chat) or beta (messages)
	model   string
	at      time.Time // when the request started (the ledger's created_at)
	latency time.Duration
	headers []string
	// cut: the stream is cut by the provider after two words; the provider bills what it wrote (the local
	// count a gateway with the tokenizer would record), the ledger records an estimate instead (source
	// estimated, as a gateway built without the tokenizer does), which differs.
	cut bool
}

func (g *gateway) do(c call) {
	g.t.Helper()
	n := g.seq.Add(1)
	var path, body string
	h := []string{"x-mock-billed-at", c.at.Add(c.latency).UTC().Format(time.RFC3339Nano)}
	if c.kind == "beta" {
		path = "/v1/messages"
		body = fmt.Sprintf(`{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":"question number %d"}]}`, c.model, n)
		h = append(h, "x-api-key", g.keys["beta"], "anthropic-version", "2023-06-01")
	} else {
		path = "/v1/chat/completions"
		body = fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"question number %d"}]}`, c.model, n)
		h = append(h, "Authorization", "Bearer "+g.keys["alpha"])
	}
	h = append(h, c.headers...)
	source := "upstream"
	var u usage.Usage
	if c.cut {
		// The provider cuts the stream; this gateway estimates: prompt from the body's length, output as
		// answered so far.
		req, _ := http.NewRequest(http.MethodPost, g.p.srv.URL+path, strings.NewReader(body))
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		req.Header.Set("x-mock-disconnect-after", "3")
		if resp, err := g.p.srv.Client().Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		u = usage.Usage{Input: int64(len(body)+3) / 4, Output: 2, ReportedTier: "default"}
		source = "estimated"
	} else {
		req, _ := http.NewRequest(http.MethodPost, g.p.srv.URL+path, strings.NewReader(body))
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		resp, err := g.p.srv.Client().Do(req)
		if err != nil {
			g.t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			g.t.Fatalf("%s = %d %s", path, resp.StatusCode, raw)
		}
		if c.kind == "beta" {
			u, _, err = beta.BillBody(raw)
		} else {
			u, _, err = alpha.BillChatBody(raw)
		}
		if err != nil {
			g.t.Fatal(err)
		}
	}
	rr := g.rules[c.model]
	q := rr.rule.Quote(u, u.ReportedTier)
	pid, cid := g.provider[c.kind], g.cred[c.kind]
	version := int64(1)
	row := store.UsageRow{RequestID: fmt.Sprintf("req-%d", n), ProviderID: &pid, CredentialID: &cid, LogicalModel: c.model,
		UpstreamModel: c.model, Operation: "generate_content", InboundKind: "alpha_chat_completions",
		InputTokens: u.Input, OutputTokens: u.Output, CacheReadTokens: u.CacheRead, CacheCreation5m: u.CacheCreation5m, CacheCreation30m: u.CacheCreation30m,
		CacheCreation1h: u.CacheCreation1h, ReportedTier: u.ReportedTier, PriceRuleID: &rr.id, PriceRuleVersion: &version,
		Cost: pricing.FormatDecimal(q.Cost), Source: source, EndState: "completed", HTTPStatus: 200,
		LatencyMS: c.latency.Milliseconds(), CreatedAt: c.at}
	if c.kind == "beta" {
		row.InboundKind = "beta_messages"
	}
	if c.cut {
		row.EndState = "upstream_interrupted"
	}
	if _, err := store.SettleUsages(context.Background(), g.pool, []store.UsageRow{row}); err != nil {
		g.t.Fatal(err)
	}
}

// traffic sends a day's mix: plain and cached chats on two tiers, and messages.
func (g *gateway) traffic(day time.Time) {
	for i := range 4 {
		at := day.Add(time.Duration(1+i) * time.Hour)
		g.do(call{kind: "alpha", model: "m-1", at: at})
		g.do(call{kind: "alpha", model: "m-1", at: at.Add(time.Minute), headers: []string{"x-mock-usage", "cached"}})
		g.do(call{kind: "beta", model: "b-1", at: at.Add(2 * time.Minute), headers: []string{"x-mock-usage", "cached"}})
	}
	g.do(call{kind: "alpha", model: "m-1", at: day.Add(5 * time.Hour), headers: []string{"x-mock-served-tier", "priority"}})
}

func causes(run store.ReconcileRun) map[string]int {
	out := map[string]int{}
	for _, l := range run.Lines {
		out[l.Cause]++
	}
	return out
}

func (g *gateway) reconcile(r *Runner, kind string, day time.Time, ctl mockupstream.ReconcileControls) store.ReconcileRun {
	g.t.Helper()
	g.p.mock.SetReconcile(ctl)
	defer g.p.mock.SetReconcile(mockupstream.ReconcileControls{})
	run, err := r.Reconcile(context.Background(), g.provider[kind], day, TriggerManual, true)
	if err != nil {
		g.t.Fatalf("reconcile %s %s: %v", kind, day.Format(time.DateOnly), err)
	}
	full, err := store.GetReconcileRun(context.Background(), g.pool, run.ID)
	if err != nil {
		g.t.Fatal(err)
	}
	return full
}

// webhookReceiver records drift deliveries.
type webhookReceiver struct {
	mu       sync.Mutex
	payloads []DriftPayload
	ids      map[string]int
}

func (w *webhookReceiver) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var p DriftPayload
	_ = json.Unmarshal(body, &p)
	w.mu.Lock()
	w.payloads = append(w.payloads, p)
	w.ids[r.Header.Get("webhook-id")]++
	w.mu.Unlock()
}

func TestReconcileFindsEachInjectedDriftAndNothingOnHonestTraffic(t *testing.T) {
	g := newGateway(t)
	ctx := context.Background()
	recv := &webhookReceiver{ids: map[string]int{}}
	hook := httptest.NewServer(recv)
	defer hook.Close()
	whsec, _ := alert.NewSecret()
	if _, err := g.pool.Exec(ctx, `INSERT INTO webhook_endpoints (url, secret_ciphertext) VALUES ($1, $2)`, hook.URL, g.seal(whsec)); err != nil {
		t.Fatal(err)
	}
	r := NewRunner(g.pool, g.box, nil, Options{Fetcher: &Fetcher{Sleep: (&waits{}).sleep}})

	dropDay, honest, under, priceDay, localDay, late := days(4), days(3), days(5), days(6), days(7), days(1)
	g.traffic(dropDay) // first: the drop switch drops the first bills
	g.traffic(honest)
	// A request that straddles midnight: it started on one day and ended on the next; both sides bucket it
	// by its end.
	straddle := days(8)
	g.do(call{kind: "alpha", model: "m-1", at: straddle.Add(-500 * time.Millisecond), latency: time.Second})
	g.traffic(under)
	g.traffic(priceDay)
	g.traffic(localDay)
	g.do(call{kind: "alpha", model: "m-1", at: localDay.Add(9 * time.Hour), cut: true})
	g.traffic(late)

	// Honest traffic: zero drift on both providers, every line agreeing.
	for _, kind := range []string{"alpha", "beta"} {
		run := g.reconcile(r, kind, honest, mockupstream.ReconcileControls{})
		if run.Status != "ok" || run.LedgerTokens == 0 || run.LedgerTokens != run.ProviderTokens || run.LedgerCost != run.ProviderCost ||
			causes(run)[CauseNone] != len(run.Lines) || run.Provisional {
			t.Fatalf("%s honest run: %+v causes %v", kind, run, causes(run))
		}
		if run.SourceUpstream == 0 || run.SourceLocal+run.SourceEstimated != 0 {
			t.Fatalf("%s honest source mix: upstream %d local %d estimated %d", kind, run.SourceUpstream, run.SourceLocal, run.SourceEstimated)
		}
	}
	// The straddling request is on the day it ended, on both sides, and not on the day it started.
	if run := g.reconcile(r, "alpha", straddle.Add(-Day), mockupstream.ReconcileControls{}); run.LedgerTokens != 0 || run.ProviderTokens != 0 || run.Status != "ok" {
		t.Fatalf("day the straddling request started: %+v", run)
	}
	if run := g.reconcile(r, "alpha", straddle, mockupstream.ReconcileControls{}); run.LedgerTokens == 0 || run.LedgerTokens != run.ProviderTokens || run.Status != "ok" {
		t.Fatalf("day the straddling request ended: %+v", run)
	}

	// Dropped requests: the provider lost the first bill; the ledger's group is over by that request.
	run := g.reconcile(r, "alpha", dropDay, mockupstream.ReconcileControls{Drop: 1})
	// The provider counts its requests: the line says a request is missing at the provider, not that the
	// provider's token counts are wrong.
	if c := causes(run); run.Status != "drift" || c[CauseMissingAtProvider] != 1 || c[CauseTokens] != 0 || c[CauseCost] != 1 ||
		run.LedgerTokens <= run.ProviderTokens {
		t.Fatalf("dropped request: causes %v, ledger %d provider %d", c, run.LedgerTokens, run.ProviderTokens)
	}
	for _, l := range run.Lines {
		if l.Cause == CauseMissingAtProvider && !strings.Contains(l.Detail, "1 request fewer") {
			t.Errorf("dropped request line detail %q: want the missing request named", l.Detail)
		}
	}

	// A category under-reported: output tokens only, named in the detail.
	run = g.reconcile(r, "beta", under, mockupstream.ReconcileControls{UnderReport: &mockupstream.UnderReport{Category: "output", Percent: 50}})
	for _, l := range run.Lines {
		if l.Kind != "tokens" {
			continue
		}
		if l.Cause != CauseTokens || l.Provider == nil || l.Provider.Output >= l.Ledger.Output || l.Provider.Input != l.Ledger.Input ||
			l.Provider.CacheRead != l.Ledger.CacheRead || l.Provider.Cache5m != l.Ledger.Cache5m || !strings.Contains(l.Detail, "output") ||
			strings.Contains(l.Detail, "input") {
			t.Fatalf("under-reported output: %+v", l)
		}
	}

	// A price change: tokens agree, cost does not; the cost line names the rule and version that priced the rows.
	run = g.reconcile(r, "alpha", priceDay, mockupstream.ReconcileControls{PriceMultiplier: map[string]string{"m-1": "1.1"}})
	c := causes(run)
	if c[CausePrice] != 1 || c[CauseTokens]+c[CauseCost] != 0 || run.LedgerTokens != run.ProviderTokens {
		t.Fatalf("price change: causes %v", c)
	}
	for _, l := range run.Lines {
		if l.Cause == CausePrice {
			want := fmt.Sprintf("price rule %d version 1", g.rules["m-1"].id)
			var uses []ruleUse
			_ = json.Unmarshal(l.PriceRules, &uses)
			if !strings.Contains(l.Detail, want) || len(uses) != 1 || *uses[0].ID != g.rules["m-1"].id || *uses[0].Version != 1 {
				t.Fatalf("price line %+v, want it to name %s", l, want)
			}
			lc, _ := pricing.ParseStoredDecimal(l.LedgerCost)
			pc, _ := pricing.ParseStoredDecimal(l.ProviderCost)
			lc.Mul(lc, decimalFromString("1.1"))
			if lc.Cmp(pc) != 0 {
				t.Fatalf("provider cost %s is not ledger %s × 1.1", l.ProviderCost, l.LedgerCost)
			}
		}
	}

	// An estimate: a stream the provider cut, estimated by the gateway, differs from the provider's bill of
	// it; the drift is attributed to the row's source, not to the provider.
	run = g.reconcile(r, "alpha", localDay, mockupstream.ReconcileControls{})
	c = causes(run)
	if c[CauseLocalCount] != 1 || c[CauseTokens] != 0 || run.SourceEstimated != 1 {
		t.Fatalf("estimated row: causes %v, estimated %d", c, run.SourceEstimated)
	}

	// A late day: reported empty first (pending, the late window is open), then the data arrives and the
	// re-import replaces the day: zero drift.
	run = g.reconcile(r, "alpha", late, mockupstream.ReconcileControls{LateDays: []string{late.Format(time.DateOnly)}})
	if c := causes(run); !run.Provisional || c[CausePendingLate] == 0 || c[CauseMissingAtProvider] != 0 || run.ProviderTokens != 0 {
		t.Fatalf("late day: provisional %v causes %v", run.Provisional, c)
	}
	lateRunID := run.ID
	run = g.reconcile(r, "alpha", late, mockupstream.ReconcileControls{})
	if run.Status != "ok" || run.ImportCount != 2 || run.LedgerTokens != run.ProviderTokens {
		t.Fatalf("late day after its data arrived: %+v", run)
	}
	// The same drift on a day whose late window has passed is missing at the provider.
	run = g.reconcile(r, "alpha", dropDay, mockupstream.ReconcileControls{LateDays: []string{dropDay.Format(time.DateOnly)}})
	if c := causes(run); c[CauseMissingAtProvider] == 0 || c[CausePendingLate] != 0 {
		t.Fatalf("old day reported empty: causes %v", c)
	}

	// Alerts: each drifting run crossed tokens_abs (5) and/or cost_rel (5%); each (run, threshold) is
	// delivered exactly once, even when raised again; the pending late day raised none.
	for _, id := range []int64{run.ID, lateRunID} {
		if err := r.RaiseAlerts(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	sender := alert.New(g.pool, g.box, nil, alert.Options{})
	for {
		n, err := sender.SendDue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	seen := map[string]bool{}
	for _, p := range recv.payloads {
		k := fmt.Sprint(p.Data.RunID, "/", p.Data.Crossed.Threshold)
		if seen[k] {
			t.Fatalf("alert %s delivered twice", k)
		}
		seen[k] = true
		if p.Type != DriftEventType || p.Data.RunID == lateRunID {
			t.Fatalf("unexpected alert %+v", p)
		}
	}
	var want int
	if err := g.pool.QueryRow(ctx, `SELECT count(*) FROM alert_events WHERE type = $1`, DriftEventType).Scan(&want); err != nil {
		t.Fatal(err)
	}
	// dropped (tokens_abs? depends on size; cost_rel), under-reported (tokens_abs, cost_rel), price (cost_rel: 10%),
	// local (tokens_abs, cost_rel), old day empty (tokens_abs, cost_rel): at least one per drifting run.
	if len(recv.payloads) != want || want < 5 {
		t.Fatalf("deliveries %d, events %d (want one delivery per event, at least 5)", len(recv.payloads), want)
	}
	for id, n := range recv.ids {
		if n != 1 {
			t.Fatalf("webhook-id %s delivered %d times", id, n)
		}
	}
}

func decimalFromString(s string) *decimal.Big {
	d, err := pricing.ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}
