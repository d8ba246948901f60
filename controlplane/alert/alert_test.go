package alert_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/alert"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/testkit"
)

// fast retries: the tests wait for outcomes, never for durations.
var fast = alert.Options{EvalInterval: 20 * time.Millisecond, SendInterval: 20 * time.Millisecond,
	BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}

type world struct {
	db  *storetest.DB
	box *secret.Box
	svc *admin.Service
}

func newWorld(t *testing.T) *world {
	t.Helper()
	db := storetest.New(t)
	box, err := secret.New(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return &world{db: db, box: box, svc: admin.NewService(db.Pool, box, "bootstrap-token-0123456789abcdef", nil)}
}

// org creates an org with a quota of limit dollars, cost_used spent (as settlement would leave it), and
// alert thresholds.
func (w *world) org(t *testing.T, name, limit, spent string, thresholds ...int32) int64 {
	t.Helper()
	ctx := context.Background()
	o, err := store.InsertOrg(ctx, w.db.Pool, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.SetQuota(ctx, "org", o.ID, admin.QuotaInput{CostLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	w.spend(t, o.ID, spent)
	if _, err := w.svc.SetQuotaAlerts(ctx, "org", o.ID, admin.QuotaAlertsInput{Thresholds: thresholds}); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func (w *world) spend(t *testing.T, org int64, used string) {
	t.Helper()
	if _, err := w.db.Pool.Exec(context.Background(), `UPDATE quotas SET cost_used = $2::text::numeric WHERE scope = 'org' AND scope_id = $1`, org, used); err != nil {
		t.Fatal(err)
	}
}

// receiver is a real HTTP webhook receiver that verifies every request with the Standard Webhooks
// library and fails while failing() says so.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	wh      *standardwebhooks.Webhook
	failing func(n int) bool

	mu        sync.Mutex
	requests  int
	badSig    int
	attempts  map[string]int // webhook-id → requests
	delivered map[string]int // webhook-id → 2xx answers
	payloads  map[string]alert.Payload
}

func newReceiver(t *testing.T, w *world, failing func(n int) bool) (*receiver, int64) {
	t.Helper()
	r := &receiver{t: t, failing: failing, attempts: map[string]int{}, delivered: map[string]int{}, payloads: map[string]alert.Payload{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	ep, err := w.svc.CreateWebhookEndpoint(context.Background(), admin.WebhookEndpointInput{URL: r.srv.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	if r.wh, err = standardwebhooks.NewWebhook(ep.Secret); err != nil {
		t.Fatal(err)
	}
	return r, ep.ID
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	id := req.Header.Get("webhook-id")
	r.attempts[id]++
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.badSig++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if r.failing(r.requests) {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var p alert.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		r.badSig++
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.delivered[id]++
	r.payloads[id] = p
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) snapshot() (requests, badSig int, attempts, delivered map[string]int, payloads map[string]alert.Payload) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	ps := map[string]alert.Payload{}
	for k, v := range r.payloads {
		ps[k] = v
	}
	return r.requests, r.badSig, cp(r.attempts), cp(r.delivered), ps
}

// run starts a runner (one control-plane replica) until the test ends or stop is called.
func run(t *testing.T, w *world, o alert.Options) (stop func()) {
	t.Helper()
	pool, err := store.Open(context.Background(), w.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- alert.New(pool, w.box, nil, o).Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("runner: %v", err)
			}
			pool.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

func (w *world) deliveryStates(t *testing.T) map[string]int {
	t.Helper()
	rows, err := w.db.Pool.Query(context.Background(), `SELECT CASE WHEN delivered_at IS NOT NULL THEN 'delivered'
		WHEN failed_at IS NOT NULL THEN 'failed' ELSE 'pending' END, count(*) FROM webhook_deliveries GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

func TestDeliveryRetriesUntilTheReceiverRecovers(t *testing.T) {
	w := newWorld(t)
	// The receiver is down for its first 4 requests, then up.
	rcv, _ := newReceiver(t, w, func(n int) bool { return n <= 4 })
	org := w.org(t, "acme", "10", "8.5", 50, 80, 100)
	run(t, w, fast)

	testkit.WaitFor(t, "two delivered events", func() bool { return w.deliveryStates(t)["delivered"] == 2 })
	requests, badSig, attempts, delivered, payloads := rcv.snapshot()
	if badSig != 0 {
		t.Fatalf("%d requests failed signature verification", badSig)
	}
	if requests < 6 {
		t.Fatalf("requests = %d: want the 4 failures retried", requests)
	}
	got := map[int32]string{}
	for id, n := range delivered {
		if n != 1 {
			t.Errorf("webhook %s delivered %d times", id, n)
		}
		p := payloads[id]
		if p.Type != alert.EventType || p.Data.Scope != "org" || p.Data.ScopeID != org || p.Data.CostLimit != "10" {
			t.Errorf("payload %+v", p)
		}
		got[p.Data.ThresholdPercent] = p.Data.CostUsed
	}
	if fmt.Sprint(got) != "map[50:8.5 80:8.5]" {
		t.Fatalf("delivered thresholds = %v, want 50 and 80 at 8.5", got)
	}
	// Every retry carried the same webhook-id: only the two message ids were ever seen.
	if len(attempts) != 2 {
		t.Fatalf("webhook ids seen = %v, want 2 (retries reuse the id)", attempts)
	}

	// Spend reaches the limit: the 100 % threshold fires once; further spend in the period fires nothing.
	w.spend(t, org, "10")
	testkit.WaitFor(t, "the 100% event", func() bool { return w.deliveryStates(t)["delivered"] == 3 })
	w.spend(t, org, "12")
	r := alert.New(w.db.Pool, w.box, nil, fast)
	for range 3 {
		if n, err := r.Evaluate(context.Background()); err != nil || n != 0 {
			t.Fatalf("Evaluate after every threshold fired = %d, %v; want 0", n, err)
		}
	}

	// The events are listed through the admin API with their delivery state.
	p, err := w.svc.ListAlertEvents(context.Background(), admin.AlertEventQuery{Scope: "org", ScopeID: &org})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 3 || p.Items[0].Threshold != 100 || p.Items[0].CostUsed != "10" {
		t.Fatalf("events = %+v", p.Items)
	}
	for _, e := range p.Items {
		if len(e.Deliveries) != 1 || e.Deliveries[0].State != "delivered" {
			t.Fatalf("event %d deliveries = %+v", e.ID, e.Deliveries)
		}
	}
	var retried bool
	for _, e := range p.Items {
		retried = retried || e.Deliveries[0].Attempts > 1
	}
	if !retried {
		t.Fatal("no delivery records a retry")
	}
}

func TestDeliveryGivesUpAfterMaxAttempts(t *testing.T) {
	w := newWorld(t)
	rcv, _ := newReceiver(t, w, func(int) bool { return true })
	w.org(t, "acme", "1", "1", 100)
	o := fast
	o.MaxAttempts = 3
	run(t, w, o)
	testkit.WaitFor(t, "a failed delivery", func() bool { return w.deliveryStates(t)["failed"] == 1 })
	if requests, badSig, _, _, _ := rcv.snapshot(); requests != 3 || badSig != 0 {
		t.Fatalf("requests = %d (bad signatures %d), want exactly MaxAttempts = 3", requests, badSig)
	}
}

func TestTwoReplicasDeliverEachEventOnce(t *testing.T) {
	w := newWorld(t)
	rcv, _ := newReceiver(t, w, func(int) bool { return false })
	const orgs = 25
	for i := range orgs {
		w.org(t, fmt.Sprintf("org-%d", i), "100", "95", 50, 80, 90, 100) // three thresholds crossed each
	}
	// Both replicas evaluate at once, repeatedly, before either sends.
	r1, r2 := alert.New(w.db.Pool, w.box, nil, fast), alert.New(w.db.Pool, w.box, nil, fast)
	var wg sync.WaitGroup
	created := make([]int, 2)
	for i, r := range []*alert.Runner{r1, r2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				n, err := r.Evaluate(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				created[i] += n
			}
		}()
	}
	wg.Wait()
	if created[0]+created[1] != orgs*3 {
		t.Fatalf("events created by the two replicas = %v, want %d in total", created, orgs*3)
	}
	run(t, w, fast)
	run(t, w, fast)
	testkit.WaitFor(t, "every event delivered", func() bool { return w.deliveryStates(t)["delivered"] == orgs*3 })
	_, badSig, attempts, delivered, payloads := rcv.snapshot()
	if badSig != 0 || len(delivered) != orgs*3 {
		t.Fatalf("delivered %d distinct messages (bad signatures %d), want %d", len(delivered), badSig, orgs*3)
	}
	events := map[int64]int{}
	for id, n := range attempts {
		if n != 1 {
			t.Errorf("webhook %s received %d times", id, n)
		}
		events[payloads[id].Data.EventID]++
	}
	for ev, n := range events {
		if n != 1 {
			t.Errorf("event %d delivered in %d messages", ev, n)
		}
	}
}

func TestOutboxSurvivesRestart(t *testing.T) {
	w := newWorld(t)
	var down sync.Mutex
	up := false
	rcv, _ := newReceiver(t, w, func(int) bool { down.Lock(); defer down.Unlock(); return !up })
	w.org(t, "acme", "10", "6", 50)

	// First control plane: the receiver is down; the event is recorded and attempted, then the process stops.
	stop := run(t, w, fast)
	testkit.WaitFor(t, "a failed attempt", func() bool { r, _, _, _, _ := rcv.snapshot(); return r >= 2 })
	stop()
	if s := w.deliveryStates(t); s["pending"] != 1 {
		t.Fatalf("after stopping, deliveries = %v, want one pending", s)
	}
	// A lease left by a sender that died mid-attempt expires and does not block the next control plane.
	if _, err := w.db.Pool.Exec(context.Background(), `UPDATE webhook_deliveries SET leased_until = now() - interval '1 second',
		next_attempt_at = now()`); err != nil {
		t.Fatal(err)
	}

	// Second control plane: the receiver is back; the pending delivery goes out, once, with its id.
	down.Lock()
	up = true
	down.Unlock()
	_, _, before, _, _ := rcv.snapshot()
	run(t, w, fast)
	testkit.WaitFor(t, "the delivery", func() bool { return w.deliveryStates(t)["delivered"] == 1 })
	_, badSig, after, delivered, _ := rcv.snapshot()
	if badSig != 0 || len(delivered) != 1 || len(after) != 1 || len(before) != 1 {
		t.Fatalf("ids before restart %v, after %v, delivered %v (bad signatures %d): want one message id throughout", before, after, delivered, badSig)
	}
	var events int
	if err := w.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM alert_events`).Scan(&events); err != nil || events != 1 {
		t.Fatalf("events = %d, %v; want 1 across the restart", events, err)
	}
}

// TestSignMatchesTheSpec checks Sign against the Standard Webhooks library's own signer.
func TestSignMatchesTheSpec(t *testing.T) {
	secret, err := alert.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"quota.threshold_crossed"}`)
	ts := time.Unix(1674087231, 0)
	want, err := wh.Sign("msg_abc", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := alert.Sign(secret, "msg_abc", ts.Unix(), body)
	if err != nil || got != want {
		t.Fatalf("Sign = %q, %v; the library signs %q", got, err, want)
	}
	if _, err := alert.Sign("whsec_not base64!", "msg", 1, body); err == nil {
		t.Fatal("a malformed secret signed")
	}
}

// A periodic quota fires per period: the spend and limit of each period's quota_periods row are compared,
// the event names the period's start, a new period fires the same threshold again, and a period closed
// for more than an hour is not evaluated.
func TestPeriodicQuotaFiresPerPeriod(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	o, err := store.InsertOrg(ctx, w.db.Pool, "periodic")
	if err != nil {
		t.Fatal(err)
	}
	limit, daily, zone := "10", "daily", "UTC"
	if _, err := w.svc.SetQuota(ctx, "org", o.ID, admin.QuotaInput{CostLimit: &limit, Period: &daily, TimeZone: &zone}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.SetQuotaAlerts(ctx, "org", o.ID, admin.QuotaAlertsInput{Thresholds: []int32{50}}); err != nil {
		t.Fatal(err)
	}
	// The lifetime total is past the threshold, but a periodic quota is judged by its periods only.
	if _, err := w.db.Pool.Exec(ctx, `UPDATE quotas SET cost_used = 100 WHERE scope = 'org' AND scope_id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	period := func(start time.Time, used string) {
		t.Helper()
		if _, err := w.db.Pool.Exec(ctx, `INSERT INTO quota_periods (scope, scope_id, period_start, period_end, period, time_zone, cost_limit, cost_used, requests)
			VALUES ('org', $1, $2, $3, 'daily', 'UTC', 10, $4::text::numeric, 1)
			ON CONFLICT (scope, scope_id, period_start) DO UPDATE SET cost_used = EXCLUDED.cost_used`,
			o.ID, start, start.Add(24*time.Hour), used); err != nil {
			t.Fatal(err)
		}
	}
	r := alert.New(w.db.Pool, w.box, nil, fast)
	evaluate := func() int {
		t.Helper()
		n, err := r.Evaluate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := evaluate(); n != 0 {
		t.Fatalf("Evaluate with no period spend = %d events, want 0 (the lifetime total does not count)", n)
	}
	period(today.Add(-48*time.Hour), "9") // closed long ago: not evaluated
	period(today, "4.99")
	if n := evaluate(); n != 0 {
		t.Fatalf("Evaluate below the threshold and on a long-closed period = %d, want 0", n)
	}
	period(today, "5")
	if n := evaluate(); n != 1 {
		t.Fatalf("Evaluate at 50%% of today's limit = %d, want 1", n)
	}
	if n := evaluate(); n != 0 {
		t.Fatalf("second Evaluate = %d, want 0 (one event per threshold per period)", n)
	}
	tomorrow := today.Add(24 * time.Hour)
	period(tomorrow, "6")
	if n := evaluate(); n != 1 {
		t.Fatalf("Evaluate in a new period = %d, want 1", n)
	}
	p, err := w.svc.ListAlertEvents(ctx, admin.AlertEventQuery{Scope: "org", ScopeID: &o.ID})
	if err != nil {
		t.Fatal(err)
	}
	var starts []string
	for _, e := range p.Items {
		starts = append(starts, e.PeriodStart.UTC().Format(time.DateOnly)+"@"+e.CostUsed)
	}
	want := []string{tomorrow.Format(time.DateOnly) + "@6", today.Format(time.DateOnly) + "@5"}
	if fmt.Sprint(starts) != fmt.Sprint(want) {
		t.Fatalf("events = %v, want %v (newest first)", starts, want)
	}
}
