// Package batch is the control plane's batch watcher: it claims open provider batches with a lease, polls each
// at its provider with the credential that created it, and when results are available reads them line by line
// and settles every line exactly once as a usages row at the batch service tier (docs/batches.md).
package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/store"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Tier is the service tier every batch line is priced at: a price rule's `batch` tier entry sets the batch
// discount (docs/batches.md, "Pricing").
const Tier = "batch"

// Secrets opens sealed credential secrets (*secret.Box).
type Secrets interface {
	Open(ciphertext []byte) ([]byte, error)
}

// DB is what the watcher needs of Postgres (a *pgxpool.Pool).
type DB interface {
	store.TxBeginner
	store.DBTX
}

// Options tune the watcher; zero values take the defaults.
type Options struct {
	// Owner names this replica in leases (TOLLGATE_NODE_ID); unique per replica.
	Owner string
	// Tick is how often the watcher looks for batches due (default 5 s).
	Tick time.Duration
	// PollEvery is the time between two polls of a batch still running (default 60 s).
	PollEvery time.Duration
	// RetryAfter is the wait after a failed poll or read (default 30 s).
	RetryAfter time.Duration
	// Lease is how long a claim lasts without renewal; renewed at every chunk of lines (default 2 min).
	Lease time.Duration
	// Chunk is the number of lines settled per transaction (default 200).
	Chunk int
	// Claim is the most batches claimed per tick (default 4).
	Claim int
	// HTTP is the client of provider calls (default: 60 s per call without a body deadline).
	HTTP *http.Client
	// Bounds are the per-request settlement bounds (default pricing.DefaultBounds).
	Bounds pricing.Bounds
}

func (o Options) withDefaults() Options {
	if o.Owner == "" {
		o.Owner = "controlplane"
	}
	if o.Tick <= 0 {
		o.Tick = 5 * time.Second
	}
	if o.PollEvery <= 0 {
		o.PollEvery = time.Minute
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 30 * time.Second
	}
	if o.Lease <= 0 {
		o.Lease = 2 * time.Minute
	}
	if o.Chunk <= 0 {
		o.Chunk = 200
	}
	if o.Claim <= 0 {
		o.Claim = 4
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: time.Minute, Proxy: http.ProxyFromEnvironment}}
	}
	o.Bounds = o.Bounds.OrDefault()
	return o
}

// Watcher settles provider batches. Run it on every control-plane replica: leases share the work.
type Watcher struct {
	db      DB
	secrets Secrets
	log     *slog.Logger
	opts    Options

	mu      sync.Mutex
	index   *pricing.Index
	rulesAt int64

	lines  *prometheus.CounterVec
	polls  *prometheus.CounterVec
	failed prometheus.Counter
}

// New returns a watcher; reg may be nil.
func New(db DB, secrets Secrets, log *slog.Logger, reg prometheus.Registerer, opts Options) *Watcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := promauto.With(reg)
	return &Watcher{db: db, secrets: secrets, log: log, opts: opts.withDefaults(),
		lines: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_batch_lines_settled_total",
			Help: "Batch result lines settled as usages rows, by line end state."}, []string{"state"}),
		polls: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_batch_polls_total",
			Help: "Batch status polls at providers, by result (running, ended, failed)."}, []string{"result"}),
		failed: f.NewCounter(prometheus.CounterOpts{Name: "tollgate_batch_result_reads_failed_total",
			Help: "Reads of batch results that failed and will be retried (last_error in GET /admin/batches)."}),
	}
}

// Run works due batches every tick until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.opts.Tick)
	defer t.Stop()
	for {
		if _, err := w.Once(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("batch watcher", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Once claims the batches due and works each; it answers how many it claimed.
func (w *Watcher) Once(ctx context.Context) (int, error) {
	bs, err := store.ClaimBatches(ctx, w.db, w.opts.Owner, w.opts.Lease, w.opts.Claim)
	if err != nil {
		return 0, err
	}
	for _, b := range bs {
		if err := w.work(ctx, b); err != nil {
			if ctx.Err() != nil {
				return len(bs), ctx.Err()
			}
			w.log.Warn("batch not settled yet", "batch_id", b.ID, "provider_batch_id", b.ProviderBatchID, "err", err)
		}
	}
	return len(bs), nil
}

// work polls one claimed batch and, once it ended, settles its results and closes it.
func (w *Watcher) work(ctx context.Context, b store.Batch) error {
	p, err := w.provider(ctx, b)
	if err != nil {
		return w.failedPoll(ctx, b, err)
	}
	st, err := p.status(ctx, b.ProviderBatchID)
	if err != nil {
		return w.failedPoll(ctx, b, err)
	}
	if st.Status != store.BatchEnded {
		w.polls.WithLabelValues("running").Inc()
		return store.RecordBatchPoll(ctx, w.db, b.ID, w.opts.Owner, store.BatchPoll{Status: st.Status,
			ProviderStatus: st.ProviderStatus, NextPollAt: time.Now().Add(w.opts.PollEvery)})
	}
	w.polls.WithLabelValues("ended").Inc()
	if err := w.settleResults(ctx, b, p, st); err != nil {
		w.failed.Inc()
		if errors.Is(err, store.ErrLeaseLost) || ctx.Err() != nil {
			return err // another replica has it, or we are stopping: the lease lapses, the next claim resumes
		}
		if time.Now().After(b.HoldExpiresAt) {
			return w.giveUp(ctx, b, err)
		}
		perr := store.RecordBatchPoll(context.WithoutCancel(ctx), w.db, b.ID, w.opts.Owner, store.BatchPoll{Status: st.Status,
			Outcome: st.Outcome, ProviderStatus: st.ProviderStatus, EndedAt: st.EndedAt,
			NextPollAt: time.Now().Add(w.opts.RetryAfter), LastError: truncate(err.Error())})
		return errors.Join(err, perr)
	}
	if err := store.RecordBatchPoll(ctx, w.db, b.ID, w.opts.Owner, store.BatchPoll{Status: st.Status, Outcome: st.Outcome,
		ProviderStatus: st.ProviderStatus, EndedAt: st.EndedAt, NextPollAt: time.Now().Add(w.opts.PollEvery)}); err != nil {
		return err
	}
	if err := store.CloseBatch(ctx, w.db, b.ID); err != nil {
		return err
	}
	w.log.Info("batch settled", "batch_id", b.ID, "provider_batch_id", b.ProviderBatchID, "outcome", st.Outcome)
	return nil
}

func (w *Watcher) failedPoll(ctx context.Context, b store.Batch, cause error) error {
	w.polls.WithLabelValues("failed").Inc()
	if ctx.Err() != nil {
		return cause
	}
	if time.Now().After(b.HoldExpiresAt) {
		return w.giveUp(ctx, b, cause)
	}
	err := store.RecordBatchPoll(ctx, w.db, b.ID, w.opts.Owner, store.BatchPoll{Status: b.Status, Outcome: b.Outcome,
		ProviderStatus: b.ProviderStatus, EndedAt: b.EndedAt,
		NextPollAt: time.Now().Add(w.opts.RetryAfter), LastError: truncate(cause.Error())})
	return errors.Join(cause, err)
}

// giveUp closes a batch whose provider has not answered (its status, or its results) since past the hold's
// expiry: its hold has lapsed on the data planes anyway. It ends as failed, lines never settled are missing,
// and it stops being polled; what was settled before stays.
func (w *Watcher) giveUp(ctx context.Context, b store.Batch, cause error) error {
	w.log.Error("batch given up: its provider has not answered past the hold's expiry", "batch_id", b.ID,
		"provider_batch_id", b.ProviderBatchID, "err", cause)
	now := time.Now()
	err := store.RecordBatchPoll(ctx, w.db, b.ID, w.opts.Owner, store.BatchPoll{Status: store.BatchEnded,
		Outcome: store.OutcomeFailed, ProviderStatus: b.ProviderStatus, EndedAt: &now, NextPollAt: now.Add(w.opts.PollEvery),
		LastError: truncate("given up past the hold's expiry: " + cause.Error())})
	if err != nil {
		return errors.Join(cause, err)
	}
	return errors.Join(cause, store.CloseBatch(ctx, w.db, b.ID))
}

func truncate(s string) string {
	if len(s) > 1000 {
		s = s[:1000]
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// provider builds the dialect client with the batch's credential.
func (w *Watcher) provider(ctx context.Context, b store.Batch) (provider, error) {
	c, err := store.GetBatchCredential(ctx, w.db, b.CredentialID)
	if err != nil {
		return nil, err
	}
	secret, err := w.secrets.Open(c.Sealed)
	if err != nil {
		return nil, fmt.Errorf("credential %d: %w", b.CredentialID, err)
	}
	return newProvider(w.opts.HTTP, b.Dialect, c.BaseURL, c.ChannelType, string(secret))
}

// settleResults reads every result line and settles them chunk by chunk, renewing the lease before each
// chunk's transaction: a lost lease stops the read (another replica works the batch now). A chunk is also
// settled early when a third of the lease has passed since the last renewal, so a slow provider never lets the
// lease lapse mid-read.
func (w *Watcher) settleResults(ctx context.Context, b store.Batch, p provider, st State) error {
	chunk := make([]Line, 0, w.opts.Chunk)
	renewed := time.Now()
	flush := func() error {
		if err := store.RenewBatchLease(ctx, w.db, b.ID, w.opts.Owner, w.opts.Lease); err != nil {
			return err
		}
		renewed = time.Now()
		if len(chunk) == 0 {
			return nil
		}
		err := w.settleChunk(ctx, b, chunk)
		chunk = chunk[:0]
		return err
	}
	err := p.results(ctx, b.ProviderBatchID, st, func(l Line) error {
		if !validCustomID(l.CustomID) {
			w.log.Warn("batch result line without a usable custom_id left out", "batch_id", b.ID, "custom_id", fmt.Sprintf("%.80q", l.CustomID))
			return nil
		}
		chunk = append(chunk, l)
		if len(chunk) >= w.opts.Chunk || time.Since(renewed) > w.opts.Lease/3 {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// storable makes a provider-written text storable: valid UTF-8, no NUL, at most 1024 bytes.
func storable(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	for len(s) > 1024 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

func validCustomID(s string) bool {
	return s != "" && len(s) <= 512 && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// settleChunk prices a chunk of lines and stores them through the settlement ingest (store.SettleUsages):
// each line's row is inserted only if its batch_lines row moves out of pending in the same transaction.
func (w *Watcher) settleChunk(ctx context.Context, b store.Batch, lines []Line) error {
	ids := make([]string, len(lines))
	for i, l := range lines {
		ids[i] = l.CustomID
	}
	registered, err := store.BatchLinesOf(ctx, w.db, b.ID, ids)
	if err != nil {
		return err
	}
	idx, err := w.prices(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	rows := make([]store.UsageRow, 0, len(lines))
	for _, l := range lines {
		reg, ok := registered[l.CustomID]
		if !ok {
			w.log.Warn("batch result line was not registered; settled at the batch's model", "batch_id", b.ID, "custom_id", l.CustomID)
		}
		rec := w.record(b, l, reg, idx, now)
		row, err := settlement.ToRow(rec, w.opts.Bounds)
		if err != nil {
			// What the provider wrote is not storable (a model name with NUL, a negative count): the line is
			// recorded without usage rather than blocking every other line of the batch.
			w.log.Warn("batch result line not storable as reported; recorded without usage", "batch_id", b.ID,
				"custom_id", l.CustomID, "err", err)
			rec.Tokens, rec.Cost, rec.Source = &settlementv1.TokenCounts{}, "0", string(vocab.SourceNone)
			rec.LogicalModel, rec.UpstreamModel = storable(rec.LogicalModel), storable(rec.UpstreamModel)
			if row, err = settlement.ToRow(rec, w.opts.Bounds); err != nil {
				return fmt.Errorf("batch %d line %q: %w", b.ID, l.CustomID, err)
			}
		}
		row.BatchID, row.CustomID, row.BatchLineState = &b.ID, l.CustomID, l.State
		rows = append(rows, row)
	}
	res, err := store.SettleUsages(ctx, w.db, rows)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if res.Inserted[r.RequestID] {
			w.lines.WithLabelValues(r.BatchLineState).Inc()
		}
	}
	return nil
}

// record is a line's settlement record: the batch's attribution, the line's usage from its body (by the
// dialect's own body billing), priced at the batch tier.
func (w *Watcher) record(b store.Batch, l Line, reg store.BatchLine, idx *pricing.Index, now time.Time) *settlementv1.SettlementRecord {
	kind, op := lineKind(b)
	var u usageAndModel
	if len(l.Body) > 0 {
		var err error
		if u, err = bill(b, l.Body); err != nil {
			w.log.Warn("batch result line body unreadable; recorded without usage", "batch_id", b.ID, "custom_id", l.CustomID, "err", err)
		}
	}
	logical, upstream := reg.LogicalModel, reg.UpstreamModel
	if upstream == "" {
		logical, upstream = b.LogicalModel, b.UpstreamModel
	}
	if upstream == "" {
		upstream = u.model
	}
	if logical == "" {
		logical = upstream
	}
	rec := &settlementv1.SettlementRecord{
		RequestId: store.BatchLineRequestID(b.ID, l.CustomID), ApiKeyId: b.APIKeyID, UserId: deref(b.UserID), TeamId: b.TeamID,
		OrgId: deref(b.OrgID), RouteId: deref(b.RouteID), ProviderId: b.ProviderID, CredentialId: b.CredentialID,
		LogicalModel: logical, UpstreamModel: upstream, Operation: string(op), InboundKind: string(kind),
		Implementation: string(vocab.ImplPassthrough), RequestedTier: Tier, ReportedTier: Tier,
		Cost: "0", Source: string(vocab.SourceNone), EndState: string(vocab.EndUpstreamError), HttpStatus: l.HTTPStatus,
		CreatedAt: timestamppb.New(now), Tokens: &settlementv1.TokenCounts{},
	}
	if b.AdmittedAt != nil {
		rec.AdmittedAt = timestamppb.New(*b.AdmittedAt)
	}
	if l.State == store.LineSucceeded {
		rec.EndState = string(vocab.EndCompleted)
	}
	rule := idx.Resolve(b.ProviderID, upstream)
	if rule != nil {
		rec.PriceRuleId, rec.PriceRuleVersion = rule.ID, rule.Version
	}
	if u.found {
		q := pricing.QuoteFor(rule, u.Usage, Tier)
		rec.Source, rec.Cost = string(vocab.SourceUpstream), pricing.FormatDecimal(q.Cost)
		rec.Tokens = &settlementv1.TokenCounts{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead,
			CacheCreation_5M: u.CacheCreation5m, CacheCreation_30M: u.CacheCreation30m, CacheCreation_1H: u.CacheCreation1h,
			ImageOutput: u.ImageOutput}
	}
	return rec
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// prices answers the pricing index of the enabled rules, rebuilt when the config revision moved.
func (w *Watcher) prices(ctx context.Context) (*pricing.Index, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.index != nil {
		rev, err := store.Revision(ctx, w.db)
		if err != nil {
			return nil, err
		}
		if rev == w.rulesAt {
			return w.index, nil
		}
	}
	rules, rev, err := store.PricedRules(ctx, w.db)
	if err != nil {
		return nil, err
	}
	compiled := make([]*pricing.Rule, 0, len(rules))
	for _, pr := range rules {
		r, err := snapshot.CheckPriceRule(pr)
		if err != nil {
			w.log.Warn("price rule does not compile; left out of batch pricing", "price_rule_id", pr.GetId(), "err", err)
			continue
		}
		r.Version = pr.GetVersion()
		compiled = append(compiled, r)
	}
	w.index, w.rulesAt = pricing.NewIndex(compiled), rev
	return w.index, nil
}
