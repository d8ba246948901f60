// Package partition maintains the month partitions of usages (migration 0013; docs/operations.md, "Usages
// partitions and retention"): at start and every Interval it creates the partitions of the current and the
// next month, and with a retention of N months it drops the partitions whose month ended more than N whole
// months before the current one. Every control-plane replica runs one; they serialise on an advisory lock
// (store.EnsureUsagePartitions). Ingest never depends on it: a row of a month without a partition goes to
// the default partition, and the month's partition, once created, takes it over.
package partition

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/process"
)

// DefaultInterval is how often maintenance runs.
const DefaultInterval = time.Hour

// Ahead is how many months after the current one get their partition in advance.
const Ahead = 1

// Maintainer creates and drops usages partitions.
type Maintainer struct {
	DB  store.TxBeginner
	Log *slog.Logger
	// RetentionMonths keeps the usage rows of this many whole months before the current one (0: forever).
	RetentionMonths int
	// Interval between runs (DefaultInterval when 0).
	Interval time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Cutoff is the first instant retention keeps at now: the start of the UTC month RetentionMonths before
// now's (zero when rows are kept forever).
func (m *Maintainer) Cutoff(now time.Time) time.Time {
	if m.RetentionMonths <= 0 {
		return time.Time{}
	}
	return store.MonthStart(now).AddDate(0, -m.RetentionMonths, 0)
}

// Once runs one round at now: creates the partitions ahead, then applies the retention. It returns the
// first error (both steps are attempted).
func (m *Maintainer) Once(ctx context.Context, now time.Time) error {
	log := m.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	created, err := store.EnsureUsagePartitions(ctx, m.DB, now, Ahead)
	if len(created) > 0 {
		log.Info("usages partitions created", "partitions", created)
	}
	if cut := m.Cutoff(now); !cut.IsZero() {
		dropped, deleted, derr := store.DropUsagePartitionsBefore(ctx, m.DB, cut)
		if len(dropped) > 0 || deleted > 0 {
			log.Info("usages retention applied", "before", cut, "partitions_dropped", dropped, "default_rows_deleted", deleted)
		}
		if err == nil {
			err = derr
		}
	}
	return err
}

// Run maintains the partitions until ctx ends: at once, then every Interval. A failed round is logged and
// retried at the next.
func (m *Maintainer) Run(ctx context.Context) error {
	every, now := m.Interval, m.Now
	if every <= 0 {
		every = DefaultInterval
	}
	if now == nil {
		now = time.Now
	}
	process.Every(ctx, every, func() {
		if err := m.Once(ctx, now()); err != nil && ctx.Err() == nil && m.Log != nil {
			m.Log.Error("usages partition maintenance", "err", err)
		}
	})
	return nil
}
