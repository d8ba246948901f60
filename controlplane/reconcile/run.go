package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
)

// Secrets opens sealed admin keys (*secret.Box).
type Secrets interface {
	Open(ciphertext []byte) ([]byte, error)
}

// Options tune a Runner; zero values take the defaults in brackets.
type Options struct {
	Fetcher  *Fetcher         // [a Fetcher with its defaults]
	Now      func() time.Time // [time.Now]
	Interval time.Duration    // how often the schedule looks for days to reconcile [1h]
	// Importer builds the importer of a provider from its settings and opened admin key [NewImporter].
	Importer func(p store.ReconcileProvider, adminKey string, f *Fetcher) (Importer, error)
}

// Runner imports provider reports and reconciles days, on demand and daily (Run).
type Runner struct {
	pool    *pgxpool.Pool
	secrets Secrets
	log     *slog.Logger
	o       Options
}

// NewRunner returns a Runner.
func NewRunner(pool *pgxpool.Pool, secrets Secrets, log *slog.Logger, o Options) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Fetcher == nil {
		o.Fetcher = &Fetcher{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Interval <= 0 {
		o.Interval = time.Hour
	}
	if o.Importer == nil {
		o.Importer = NewImporter
	}
	return &Runner{pool: pool, secrets: secrets, log: log, o: o}
}

// NewImporter is the importer of a provider's kind; csv providers have none (their reports are uploaded).
func NewImporter(p store.ReconcileProvider, adminKey string, f *Fetcher) (Importer, error) {
	switch p.Kind {
	case KindOpenAI:
		return &OpenAI{BaseURL: p.BaseURL, AdminKey: adminKey, Fetcher: f}, nil
	case KindAnthropic:
		return &Anthropic{BaseURL: p.BaseURL, AdminKey: adminKey, Fetcher: f}, nil
	}
	return nil, fmt.Errorf("provider %d: kind %q has no importer; upload its reports as files", p.ProviderID, p.Kind)
}

// ErrNotConfigured means the provider has no reconciliation settings.
var ErrNotConfigured = errors.New("provider is not set up for reconciliation")

func (r *Runner) settings(ctx context.Context, providerID int64) (store.ReconcileProvider, error) {
	p, err := store.GetReconcileProvider(ctx, r.pool, providerID)
	if errors.Is(err, store.ErrNotFound) {
		return p, fmt.Errorf("provider %d: %w", providerID, ErrNotConfigured)
	}
	return p, err
}

// ImportDays fetches the provider's report of the UTC days [from, to) and stores each day, replacing
// what an earlier import stored (late data). A day that had not ended at import time is stored as
// incomplete. Nothing is stored when the import fails.
func (r *Runner) ImportDays(ctx context.Context, providerID int64, from, to time.Time) ([]store.ImportedDay, error) {
	p, err := r.settings(ctx, providerID)
	if err != nil {
		return nil, err
	}
	key, err := r.secrets.Open(p.SealedAdminKey)
	if err != nil {
		return nil, fmt.Errorf("provider %d: open admin key: %w", providerID, err)
	}
	imp, err := r.o.Importer(p, string(key), r.o.Fetcher)
	if err != nil {
		return nil, err
	}
	rep, err := imp.Import(ctx, from, to)
	if err != nil {
		return nil, fmt.Errorf("provider %d: import %s–%s: %w", providerID, from.Format(time.DateOnly), to.Format(time.DateOnly), err)
	}
	return r.store(ctx, providerID, "api", rep)
}

// ImportFile stores an uploaded report (ParseCSV) for every day it covers, replacing earlier imports.
func (r *Runner) ImportFile(ctx context.Context, providerID int64, rep Report) ([]store.ImportedDay, error) {
	if _, err := r.settings(ctx, providerID); err != nil {
		return nil, err
	}
	return r.store(ctx, providerID, "file", rep)
}

func (r *Runner) store(ctx context.Context, providerID int64, source string, rep Report) ([]store.ImportedDay, error) {
	now := r.o.Now()
	byDay := map[time.Time]*store.ImportedDay{}
	var order []time.Time
	for d := rep.From; d.Before(rep.To); d = d.Add(Day) {
		byDay[d] = &store.ImportedDay{ProviderID: providerID, Day: d, Source: source, Complete: !now.Before(d.Add(Day))}
		order = append(order, d)
	}
	for _, u := range rep.Usage {
		d := byDay[u.Day]
		if d == nil {
			return nil, fmt.Errorf("usage row of %s outside the report's window", u.Day.Format(time.DateOnly))
		}
		d.Usage = append(d.Usage, store.ReportUsage{KeyRef: u.KeyRef, ProjectRef: u.ProjectRef, Model: u.Model, Tier: u.Tier,
			Tokens: toStore(u.Tokens), TokensReported: u.TokensReported, Requests: u.Requests})
	}
	for _, c := range rep.Costs {
		d := byDay[c.Day]
		if d == nil {
			return nil, fmt.Errorf("cost row of %s outside the report's window", c.Day.Format(time.DateOnly))
		}
		d.Costs = append(d.Costs, store.ReportCost{ProjectRef: c.ProjectRef, Model: c.Model, Cost: pricing.FormatDecimal(c.Cost)})
	}
	out := make([]store.ImportedDay, 0, len(order))
	for _, d := range order {
		saved, err := store.SaveImportedDay(ctx, r.pool, *byDay[d])
		if err != nil {
			return out, err
		}
		out = append(out, saved)
	}
	return out, nil
}

// Triggers of a run.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
)

// Reconcile compares the provider's report of day with the ledger and stores the run, raising an alert for
// each drift threshold crossed. With reimport (API providers) the day is imported first; a failed import is
// stored as a failed run and returned with the error.
func (r *Runner) Reconcile(ctx context.Context, providerID int64, day time.Time, trigger string, reimport bool) (store.ReconcileRun, error) {
	day = utcDay(day)
	started := r.o.Now()
	p, err := r.settings(ctx, providerID)
	if err != nil {
		return store.ReconcileRun{}, err
	}
	if reimport && p.Kind != KindCSV {
		if _, err := r.ImportDays(ctx, providerID, day, day.Add(Day)); err != nil {
			return r.failed(ctx, providerID, day, trigger, started, err)
		}
	}
	rep, err := store.LoadImportedDay(ctx, r.pool, providerID, day)
	if errors.Is(err, store.ErrNotFound) {
		return r.failed(ctx, providerID, day, trigger, started, fmt.Errorf("no report imported for %s", day.Format(time.DateOnly)))
	}
	if err != nil {
		return store.ReconcileRun{}, err
	}
	ledger, err := store.LedgerGroups(ctx, r.pool, providerID, day, day.Add(Day), p.BucketBy)
	if err != nil {
		return store.ReconcileRun{}, err
	}
	refs, err := store.LoadProviderRefs(ctx, r.pool, providerID)
	if err != nil {
		return store.ReconcileRun{}, err
	}
	projects := make([]string, 0, len(refs.OwnProjects))
	for p := range refs.OwnProjects {
		projects = append(projects, p)
	}
	costs, err := store.LedgerCosts(ctx, r.pool, providerID, projects, day, day.Add(Day), p.BucketBy)
	if err != nil {
		return store.ReconcileRun{}, err
	}
	// Provisional: the provider may still add to the day (it had not ended when imported, or its late window
	// has not passed).
	provisional := !rep.Complete || r.o.Now().Before(day.Add(Day).Add(time.Duration(p.LateHours)*time.Hour))
	run, err := compare(p.Kind, ledger, costs, refs, rep, provisional)
	if err != nil {
		return store.ReconcileRun{}, fmt.Errorf("provider %d, %s: %w", providerID, day.Format(time.DateOnly), err)
	}
	run.ProviderID, run.Day, run.Trigger, run.Provisional, run.ImportCount, run.StartedAt =
		providerID, day, trigger, provisional, rep.ImportCount, started
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		saved, err := store.InsertReconcileRun(ctx, tx, run)
		if err != nil {
			return err
		}
		run = saved
		return raiseAlerts(ctx, tx, p, run)
	})
	if err != nil {
		return store.ReconcileRun{}, fmt.Errorf("store run of provider %d, %s: %w", providerID, day.Format(time.DateOnly), err)
	}
	return run, nil
}

// failed stores a failed run and returns it with err.
func (r *Runner) failed(ctx context.Context, providerID int64, day time.Time, trigger string, started time.Time, cause error) (store.ReconcileRun, error) {
	run := store.ReconcileRun{ProviderID: providerID, Day: day, Trigger: trigger, Status: "failed", Error: cause.Error(), StartedAt: started}
	err := pgx.BeginFunc(context.WithoutCancel(ctx), r.pool, func(tx pgx.Tx) error {
		saved, err := store.InsertReconcileRun(ctx, tx, run)
		run = saved
		return err
	})
	if err != nil {
		return run, errors.Join(cause, err)
	}
	return run, cause
}

// Run reconciles on a schedule until ctx ends: every Interval it reconciles each enabled API provider's
// recent days (UTC) — yesterday and the days whose late window may have just passed — once, and once more
// when a day's late window has passed if its run was provisional.
// Replicas coordinate through a Postgres advisory lock: one schedules at a time.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.o.Interval)
	defer t.Stop()
	for {
		if err := r.ScheduleOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("scheduled reconciliation", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// scheduleLockID is the advisory lock key of the schedule ("reconcil").
const scheduleLockID = 0x7265636f6e63696c

// ScheduleOnce runs the scheduled reconciliations that are due now; it returns the first error after
// trying every provider.
func (r *Runner) ScheduleOnce(ctx context.Context) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(scheduleLockID)).Scan(&got); err != nil {
		return fmt.Errorf("schedule: lock: %w", err)
	}
	if !got {
		return nil // another replica schedules
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(scheduleLockID))
	}()
	providers, err := store.ListReconcileProviders(ctx, r.pool)
	if err != nil {
		return err
	}
	now := r.o.Now()
	yesterday := utcDay(now).Add(-Day)
	var first error
	for _, p := range providers {
		if !p.Enabled || p.Kind == KindCSV {
			continue
		}
		// Yesterday, and the days before it whose late window may have just passed.
		back := int(p.LateHours+23)/24 + 1
		for i := back; i >= 0; i-- {
			day := yesterday.Add(-time.Duration(i) * Day)
			due, err := r.due(ctx, p, day, now)
			if err == nil && due {
				_, err = r.Reconcile(ctx, p.ProviderID, day, TriggerSchedule, true)
			}
			if err != nil {
				r.log.Warn("scheduled reconciliation failed", "provider_id", p.ProviderID, "day", day.Format(time.DateOnly), "err", err)
				if first == nil {
					first = err
				}
			}
		}
	}
	return first
}

// due says whether day needs a scheduled run: no run yet, or only provisional ones and the late window
// passed. Runs on demand count like scheduled ones: an operator's run of a day after its late window is
// that day's final run, and the schedule does not run the day again behind it.
func (r *Runner) due(ctx context.Context, p store.ReconcileProvider, day, now time.Time) (bool, error) {
	var runs, final int
	err := r.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE NOT provisional) FROM reconcile_runs
		WHERE provider_id = $1 AND day = $2 AND status <> 'failed'`, p.ProviderID, day).Scan(&runs, &final)
	if err != nil {
		return false, fmt.Errorf("schedule: runs of provider %d: %w", p.ProviderID, err)
	}
	lateOver := !now.Before(day.Add(Day).Add(time.Duration(p.LateHours) * time.Hour))
	return runs == 0 || (final == 0 && lateOver), nil
}
