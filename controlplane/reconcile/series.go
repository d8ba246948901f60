package reconcile

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
)

// DriftPoint is the drift of one provider, model and day, from the day's latest run.
type DriftPoint struct {
	ProviderID     int64    `json:"provider_id"`
	Day            string   `json:"day"`
	Model          string   `json:"model"`
	RunID          int64    `json:"run_id"`
	Provisional    bool     `json:"provisional"`
	LedgerTokens   int64    `json:"ledger_tokens"`
	ProviderTokens int64    `json:"provider_tokens"`
	TokensDrift    int64    `json:"tokens_drift"`
	LedgerCost     string   `json:"ledger_cost"`
	ProviderCost   string   `json:"provider_cost"`
	CostDrift      string   `json:"cost_drift"`
	Causes         []string `json:"causes"`
}

// DriftSeries lists the drift per provider, model and day of the days [from, to), each day from its latest
// run, ordered by provider, day and model.
func DriftSeries(ctx context.Context, db store.DBTX, from, to time.Time, providerID *int64) ([]DriftPoint, error) {
	runs, err := store.LatestReconcileRuns(ctx, db, from, to, providerID)
	if err != nil {
		return nil, err
	}
	out := []DriftPoint{}
	for _, run := range runs {
		byModel := map[string][]store.ReconcileLine{}
		for _, l := range run.Lines {
			byModel[l.Model] = append(byModel[l.Model], l)
		}
		models := make([]string, 0, len(byModel))
		for m := range byModel {
			models = append(models, m)
		}
		sort.Strings(models)
		for _, m := range models {
			lines := byModel[m]
			d, err := MeasureDrift(store.ReconcileRun{Lines: lines})
			if err != nil {
				return nil, fmt.Errorf("run %d: %w", run.ID, err)
			}
			p := DriftPoint{ProviderID: run.ProviderID, Day: run.Day.Format(time.DateOnly), Model: m, RunID: run.ID,
				Provisional: run.Provisional, TokensDrift: d.Tokens, CostDrift: pricing.FormatDecimal(d.Cost), Causes: []string{}}
			lc, pc := zero(), zero()
			seen := map[string]bool{}
			for _, l := range lines {
				if l.Kind == "tokens" {
					p.LedgerTokens += fromStore(l.Ledger).Total()
					if l.Provider != nil {
						p.ProviderTokens += fromStore(*l.Provider).Total()
					}
				} else {
					x, err := pricing.ParseStoredDecimal(l.LedgerCost)
					if err != nil {
						return nil, err
					}
					y, err := pricing.ParseStoredDecimal(l.ProviderCost)
					if err != nil {
						return nil, err
					}
					lc.Add(lc, x)
					pc.Add(pc, y)
				}
				if l.Cause != CauseNone && !seen[l.Cause] {
					seen[l.Cause] = true
					p.Causes = append(p.Causes, l.Cause)
				}
			}
			p.LedgerCost, p.ProviderCost = pricing.FormatDecimal(lc), pricing.FormatDecimal(pc)
			out = append(out, p)
		}
	}
	return out, nil
}
