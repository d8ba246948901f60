// Package rollupfold moves the spend deltas into the spend rollups in the background (migration 0014;
// docs/admin-api.md, "Rollups"). A settlement statement only appends its rows to spend_delta, and the first
// statement of each UTC hour folds the delta inside its own transaction; without this job that fold holds an
// hour of deltas, and the settlement that pays for it can outlast its data plane's RPC deadline — rolled back,
// the fold would then fall to the next statement, and the next. Every control-plane replica runs a Folder:
// every Interval it folds whatever the delta holds in a transaction of its own, without a deadline, so the
// delta a settlement statement can meet is never more than one interval's. Replicas serialise on the fold's
// advisory lock (store.FoldSpend); a replica that finds it taken skips the round. Queries add the delta to
// the rollups, so answers are exact whenever folds run.
package rollupfold

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/process"
)

// DefaultInterval is how often a Folder folds.
const DefaultInterval = 5 * time.Minute

// Folder folds spend_delta into the rollups periodically.
type Folder struct {
	DB  store.TxBeginner
	Log *slog.Logger
	// Interval between folds (DefaultInterval when 0).
	Interval time.Duration
}

// Run folds at once, then every Interval, until ctx ends. A failed round is logged and retried at the next.
func (f *Folder) Run(ctx context.Context) error {
	every := f.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	process.Every(ctx, every, func() {
		moved, ran, err := store.FoldSpend(ctx, f.DB)
		switch {
		case err != nil && ctx.Err() == nil && f.Log != nil:
			f.Log.Error("spend rollup fold", "err", err)
		case ran && moved > 0 && f.Log != nil:
			f.Log.Debug("spend rollup fold", "delta_rows", moved)
		}
	})
	return nil
}
