// Package alert turns quota spend into budget alerts and delivers them as signed webhooks
// (docs/budgets.md, "Alerts").
//
// Evaluation: every EvalInterval, one statement finds each quota whose spend has crossed one of its
// thresholds (quota_alerts, percent of cost_limit) in the quota's current period and has no event for that
// (quota, period, threshold) yet; each such event is inserted with ON CONFLICT DO NOTHING on the unique
// (scope, scope_id, period_start, threshold), and — in the same transaction, only when this transaction
// inserted it — one outbox row per enabled webhook endpoint. Two replicas evaluating at once, or one
// evaluating again, therefore create each event and its deliveries once. Nothing in settlement changes:
// the evaluator only reads quotas.cost_used.
//
// Delivery: every SendInterval (and right after an evaluation that created events) a sender leases due
// outbox rows with FOR UPDATE SKIP LOCKED and sets leased_until, so no two replicas send the same attempt;
// it POSTs the stored payload with Standard Webhooks headers (webhook-id, the same on every attempt;
// webhook-timestamp; webhook-signature "v1,<base64 HMAC-SHA256 of id.timestamp.body>"), then records
// success, or schedules the next attempt with exponential backoff, or gives up after MaxAttempts. The
// outbox is in Postgres: a restarted control plane resumes where it stopped, and a lease held by a sender
// that died expires after Lease, when another sender takes the row (delivery is at least once: the
// receiver deduplicates by webhook-id).
package alert

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EventType is the type of a threshold event.
const EventType = "quota.threshold_crossed"

// SecretPrefix starts every signing secret (Standard Webhooks: "whsec_" + base64 of the key).
const SecretPrefix = "whsec_"

// Secrets opens sealed endpoint secrets (secret.Box).
type Secrets interface {
	Open(ciphertext []byte) ([]byte, error)
}

// Options tune the runner; zero values take the defaults in brackets.
type Options struct {
	EvalInterval time.Duration // how often quotas are compared with their thresholds [2s]
	SendInterval time.Duration // how often due deliveries are looked for [1s]
	Lease        time.Duration // how long a sender owns a leased delivery; more than Timeout [1m]
	Timeout      time.Duration // one HTTP attempt [10s]
	BackoffBase  time.Duration // delay after the first failure, doubled after each next one [5s]
	BackoffMax   time.Duration // the longest delay between attempts [1h]
	MaxAttempts  int           // attempts before a delivery is given up [15]
	Batch        int           // deliveries leased at once [32]
	Client       *http.Client  // [a client with Timeout]
	Now          func() time.Time
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.EvalInterval, 2*time.Second)
	def(&o.SendInterval, time.Second)
	def(&o.Timeout, 10*time.Second)
	def(&o.Lease, time.Minute)
	if o.Lease <= o.Timeout {
		o.Lease = o.Timeout + time.Second
	}
	def(&o.BackoffBase, 5*time.Second)
	def(&o.BackoffMax, time.Hour)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 15
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	if o.Client == nil {
		// A redirect is an answer, not a success: the receiver's URL is what the operator registered.
		o.Client = &http.Client{Timeout: o.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Runner evaluates thresholds and delivers events. Several runners (control-plane replicas) may share a
// database.
type Runner struct {
	pool    *pgxpool.Pool
	secrets Secrets
	log     *slog.Logger
	o       Options
	wake    chan struct{}
}

// New returns a runner; Run starts it.
func New(pool *pgxpool.Pool, secrets Secrets, log *slog.Logger, o Options) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o.defaults()
	return &Runner{pool: pool, secrets: secrets, log: log, o: o, wake: make(chan struct{}, 1)}
}

// Run evaluates and delivers until ctx ends; it returns nil then.
func (r *Runner) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.o.EvalInterval)
		defer t.Stop()
		for {
			if n, err := r.Evaluate(ctx); err != nil && ctx.Err() == nil {
				r.log.Error("evaluate budget alerts", "err", err)
			} else if n > 0 {
				r.poke()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	t := time.NewTicker(r.o.SendInterval)
	defer t.Stop()
	for {
		for {
			n, err := r.SendDue(ctx)
			if err != nil && ctx.Err() == nil {
				r.log.Error("deliver budget alerts", "err", err)
			}
			if err != nil || n < r.o.Batch {
				break
			}
		}
		select {
		case <-ctx.Done():
			<-done
			return nil
		case <-t.C:
		case <-r.wake:
		}
	}
}

func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// spendByPeriodSQL is the one place that says which period of a quota (alias q) an event belongs to and
// what was spent in it: rows (start, lim, used). A quota without period has one fixed period starting at the
// Unix epoch, with its lifetime limit and cost_used. A periodic quota (docs/budgets.md, "Periods") has one row
// per period in quota_periods, written by settlement, with the limit in force during that period; a period
// with no row has spent nothing and crosses nothing. Periods that ended more than an hour ago are not
// evaluated: the hour covers settlement of requests admitted just before a boundary and an evaluator that was
// down, without firing alerts for long-closed periods when thresholds are first set.
func spendByPeriodSQL() string {
	return `SELECT '1970-01-01T00:00:00Z'::timestamptz AS start, q.cost_limit AS lim, q.cost_used AS used
		         WHERE q.period = 'none'
		        UNION ALL
		        SELECT p.period_start, p.cost_limit, p.cost_used FROM quota_periods p
		         WHERE q.period <> 'none' AND p.scope = q.scope AND p.scope_id = q.scope_id
		           AND p.period_end > now() - interval '1 hour'`
}

// crossed is one (quota, period, threshold) crossed and not yet recorded.
type crossed struct {
	scope       string
	scopeID     int64
	periodStart time.Time
	threshold   int32
	limit, used string
}

// Evaluate records an event for every threshold a quota's spend has crossed in its current period
// without one yet, with its deliveries; it returns how many events this call created.
func (r *Runner) Evaluate(ctx context.Context) (int, error) {
	rows, err := r.pool.Query(ctx, `
		SELECT q.scope, q.scope_id, p.start, t.threshold, p.lim::text, p.used::text
		  FROM quotas q
		  JOIN quota_alerts a ON a.scope = q.scope AND a.scope_id = q.scope_id
		  CROSS JOIN LATERAL (`+spendByPeriodSQL()+`) p
		  CROSS JOIN LATERAL unnest(a.thresholds) AS t(threshold)
		 WHERE p.lim > 0 AND p.used * 100 >= p.lim * t.threshold
		   AND NOT EXISTS (SELECT 1 FROM alert_events e WHERE e.scope = q.scope AND e.scope_id = q.scope_id
		                      AND e.period_start = p.start AND e.threshold = t.threshold)
		 ORDER BY q.scope, q.scope_id, t.threshold`)
	if err != nil {
		return 0, fmt.Errorf("find crossed thresholds: %w", err)
	}
	var todo []crossed
	for rows.Next() {
		var c crossed
		if err := rows.Scan(&c.scope, &c.scopeID, &c.periodStart, &c.threshold, &c.limit, &c.used); err != nil {
			rows.Close()
			return 0, fmt.Errorf("find crossed thresholds: scan: %w", err)
		}
		todo = append(todo, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("find crossed thresholds: %w", err)
	}
	created := 0
	for _, c := range todo {
		ok, err := r.record(ctx, c)
		if err != nil {
			return created, err
		}
		if ok {
			created++
		}
	}
	return created, nil
}

// Payload is the JSON body of a threshold webhook (the Standard Webhooks envelope: type, timestamp, data).
type Payload struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      PayloadData `json:"data"`
}

// PayloadData describes the crossed threshold. Amounts are exact decimal strings of dollars.
type PayloadData struct {
	EventID          int64     `json:"event_id"`
	Scope            string    `json:"scope"`
	ScopeID          int64     `json:"scope_id"`
	PeriodStart      time.Time `json:"period_start"`
	ThresholdPercent int32     `json:"threshold_percent"`
	CostLimit        string    `json:"cost_limit"`
	CostUsed         string    `json:"cost_used"`
}

// record inserts one event and, when this call inserted it, its deliveries, in one transaction.
func (r *Runner) record(ctx context.Context, c crossed) (bool, error) {
	created := false
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		created, err = Enqueue(ctx, tx, Event{Type: EventType, Scope: c.scope, ScopeID: c.scopeID, PeriodStart: c.periodStart,
			Threshold: c.threshold, Limit: c.limit, Used: c.used}, func(id int64, at time.Time) any {
			return Payload{Type: EventType, Timestamp: at.UTC(), Data: PayloadData{EventID: id, Scope: c.scope,
				ScopeID: c.scopeID, PeriodStart: c.periodStart.UTC(), ThresholdPercent: c.threshold, CostLimit: c.limit, CostUsed: c.used}}
		})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record alert %s/%d at %d%%: %w", c.scope, c.scopeID, c.threshold, err)
	}
	return created, nil
}

// Event is one alert event: unique by (Scope, ScopeID, PeriodStart, Threshold). Limit and Used are exact
// decimal strings (the threshold and the value that crossed it).
type Event struct {
	Type        string
	Scope       string
	ScopeID     int64
	PeriodStart time.Time
	Threshold   int32
	Limit, Used string
}

// Enqueue inserts an event in tx unless it exists and, when this call inserted it, one delivery of
// payload(event id, created at) per enabled webhook endpoint; the sender (SendDue) signs and delivers them.
// It reports whether the event was new. Budget alerts and reconciliation drift alerts both use it, so each
// event is delivered exactly once per endpoint, however often it is raised.
func Enqueue(ctx context.Context, tx pgx.Tx, ev Event, payload func(id int64, at time.Time) any) (bool, error) {
	var id int64
	var at time.Time
	err := tx.QueryRow(ctx, `INSERT INTO alert_events (type, scope, scope_id, period_start, threshold, cost_limit, cost_used)
		VALUES ($1, $2, $3, $4, $5, $6::text::numeric, $7::text::numeric)
		ON CONFLICT (scope, scope_id, period_start, threshold) DO NOTHING RETURNING id, created_at`,
		ev.Type, ev.Scope, ev.ScopeID, ev.PeriodStart, ev.Threshold, ev.Limit, ev.Used).Scan(&id, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // already recorded
	}
	if err != nil {
		return false, fmt.Errorf("insert event: %w", err)
	}
	body, err := json.Marshal(payload(id, at))
	if err != nil {
		return false, fmt.Errorf("encode payload: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT id FROM webhook_endpoints WHERE enabled ORDER BY id`)
	if err != nil {
		return false, fmt.Errorf("endpoints: %w", err)
	}
	endpoints, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return false, fmt.Errorf("endpoints: %w", err)
	}
	for _, ep := range endpoints {
		msgID, err := messageID()
		if err != nil {
			return false, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, webhook_id, payload) VALUES ($1, $2, $3, $4)`,
			id, ep, msgID, string(body)); err != nil {
			return false, fmt.Errorf("insert delivery: %w", err)
		}
	}
	return true, nil
}

// messageID is a Standard Webhooks message id: "msg_" + 22 url-safe random characters.
func messageID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("message id: %w", err)
	}
	return "msg_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// NewSecret returns a new signing secret: "whsec_" + base64 of 32 random bytes.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("signing secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// Sign returns the webhook-signature value of a message: "v1," + base64(HMAC-SHA256(key, id.ts.body))
// with key the base64-decoded part of secret after "whsec_".
func Sign(secret, id string, ts int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return "", fmt.Errorf("signing secret is not whsec_ + base64: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// leased is one delivery attempt this runner owns.
type leased struct {
	id        int64
	webhookID string
	payload   string
	attempts  int
	url       string
	sealed    []byte
}

// SendDue leases up to Batch due deliveries and attempts each once; it returns how many it leased.
func (r *Runner) SendDue(ctx context.Context) (int, error) {
	rows, err := r.pool.Query(ctx, `
		WITH due AS (
			SELECT id FROM webhook_deliveries
			 WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
			   AND (leased_until IS NULL OR leased_until <= now())
			 ORDER BY next_attempt_at, id
			 LIMIT $1
			   FOR UPDATE SKIP LOCKED)
		UPDATE webhook_deliveries d
		   SET leased_until = now() + $2::bigint * interval '1 microsecond', attempts = d.attempts + 1
		  FROM due, webhook_endpoints e
		 WHERE d.id = due.id AND e.id = d.endpoint_id
		RETURNING d.id, d.webhook_id, d.payload, d.attempts, e.url, e.secret_ciphertext`, r.o.Batch, r.o.Lease.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("lease deliveries: %w", err)
	}
	var batch []leased
	for rows.Next() {
		var l leased
		if err := rows.Scan(&l.id, &l.webhookID, &l.payload, &l.attempts, &l.url, &l.sealed); err != nil {
			rows.Close()
			return 0, fmt.Errorf("lease deliveries: scan: %w", err)
		}
		batch = append(batch, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("lease deliveries: %w", err)
	}
	for _, l := range batch {
		status, sendErr := r.send(ctx, l)
		if err := r.settle(ctx, l, status, sendErr); err != nil {
			return len(batch), err
		}
	}
	return len(batch), nil
}

// send makes one attempt: the 2xx status, or an error.
func (r *Runner) send(ctx context.Context, l leased) (int, error) {
	plain, err := r.secrets.Open(l.sealed)
	if err != nil {
		return 0, fmt.Errorf("open signing secret: %w", err)
	}
	ts := r.o.Now().Unix()
	sig, err := Sign(string(plain), l.webhookID, ts, []byte(l.payload))
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, strings.NewReader(l.payload))
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tollgate-webhooks")
	req.Header.Set("webhook-id", l.webhookID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := r.o.Client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// settle records an attempt's outcome. The update is conditioned on the attempt number, so a sender
// whose lease expired (and whose row another sender took) does not overwrite the newer attempt.
func (r *Runner) settle(ctx context.Context, l leased, status int, sendErr error) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	switch {
	case sendErr == nil:
		_, err = r.pool.Exec(ctx, `UPDATE webhook_deliveries SET delivered_at = now(), leased_until = NULL, last_status = $3,
			last_error = '' WHERE id = $1 AND attempts = $2`, l.id, l.attempts, status)
	case l.attempts >= r.o.MaxAttempts:
		r.log.Warn("webhook delivery given up", "webhook_id", l.webhookID, "attempts", l.attempts, "err", sendErr)
		_, err = r.pool.Exec(ctx, `UPDATE webhook_deliveries SET failed_at = now(), leased_until = NULL, last_status = $3,
			last_error = $4 WHERE id = $1 AND attempts = $2`, l.id, l.attempts, status, truncate(sendErr.Error()))
	default:
		_, err = r.pool.Exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = now() + $5::bigint * interval '1 microsecond',
			leased_until = NULL, last_status = $3, last_error = $4 WHERE id = $1 AND attempts = $2`,
			l.id, l.attempts, status, truncate(sendErr.Error()), r.backoff(l.attempts).Microseconds())
	}
	if err != nil {
		return fmt.Errorf("record delivery %s: %w", l.webhookID, err)
	}
	return nil
}

// backoff is the delay after the n-th failed attempt: BackoffBase × 2^(n-1), at most BackoffMax.
func (r *Runner) backoff(n int) time.Duration {
	d := r.o.BackoffBase
	for i := 1; i < n && d < r.o.BackoffMax; i++ {
		d *= 2
	}
	return min(d, r.o.BackoffMax)
}

func truncate(s string) string {
	if len(s) > 500 {
		return s[:500]
	}
	return s
}
