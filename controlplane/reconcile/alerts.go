package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/ericlagergren/decimal"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/alert"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
)

// DriftEventType is the webhook event type of a drift threshold crossed.
const DriftEventType = "reconcile.drift_exceeded"

// driftScope is the alert_events scope of drift events: scope_id is the run, threshold the threshold code.
const driftScope = "reconcile_run"

// Threshold codes, stored as the event's threshold.
var thresholdCodes = map[string]int32{"tokens_abs": 1, "tokens_rel": 2, "cost_abs": 3, "cost_rel": 4}

// Drift is a run's measured drift: the sum over its lines of |provider − ledger| tokens (every category)
// and cost, and the provider's totals the relative thresholds divide by. Lines still pending late data do
// not count.
type Drift struct {
	Tokens         int64
	ProviderTokens int64
	Cost           *decimal.Big
	ProviderCost   *decimal.Big
}

// MeasureDrift sums a run's drift.
func MeasureDrift(run store.ReconcileRun) (Drift, error) {
	d := Drift{Cost: zero(), ProviderCost: zero()}
	for _, l := range run.Lines {
		if l.Cause == CausePendingLate {
			continue
		}
		switch l.Kind {
		case "tokens":
			var p Tokens
			if l.Provider != nil {
				p = fromStore(*l.Provider)
				d.ProviderTokens += p.Total()
			} else if l.Cause == CauseNone {
				continue // a requests-only group that agrees
			}
			for _, c := range p.Sub(fromStore(l.Ledger)).Categories() {
				d.Tokens += abs(c.Value)
			}
		case "cost":
			lc, err := pricing.ParseStoredDecimal(l.LedgerCost)
			if err != nil {
				return d, err
			}
			pc, err := pricing.ParseStoredDecimal(l.ProviderCost)
			if err != nil {
				return d, err
			}
			d.ProviderCost.Add(d.ProviderCost, pc)
			diff := zero()
			diff.Sub(pc, lc)
			d.Cost.Add(d.Cost, diff.Abs(diff))
		}
	}
	return d, nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Crossed is one threshold a run's drift went over: Limit is the threshold, Observed the drift compared
// with it (a fraction of the provider's total for relative thresholds).
type Crossed struct {
	Threshold string `json:"threshold"`
	Limit     string `json:"limit"`
	Observed  string `json:"observed"`
}

// CrossedThresholds lists the provider's thresholds the drift is over. Relative thresholds are fractions
// (0.01 = 1%) of the provider's own total; with a provider total of 0, any drift is over them.
func CrossedThresholds(p store.ReconcileProvider, d Drift) ([]Crossed, error) {
	var out []Crossed
	if p.TokensAbs != nil && d.Tokens > *p.TokensAbs {
		out = append(out, Crossed{"tokens_abs", fmt.Sprint(*p.TokensAbs), fmt.Sprint(d.Tokens)})
	}
	rel := func(name string, limit *string, drift, total *decimal.Big) error {
		if limit == nil {
			return nil
		}
		l, err := pricing.ParseStoredDecimal(*limit)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if drift.Sign() == 0 {
			return nil
		}
		if total.Sign() == 0 {
			out = append(out, Crossed{name, *limit, "inf"})
			return nil
		}
		allowed := zero()
		allowed.Mul(l, total)
		if drift.Cmp(allowed) > 0 {
			frac := decimal.WithPrecision(12)
			frac.Quo(drift, total)
			out = append(out, Crossed{name, *limit, pricing.FormatDecimal(frac)})
		}
		return nil
	}
	if err := rel("tokens_rel", p.TokensRel, decimalInt(d.Tokens), decimalInt(d.ProviderTokens)); err != nil {
		return nil, err
	}
	if p.CostAbs != nil {
		l, err := pricing.ParseStoredDecimal(*p.CostAbs)
		if err != nil {
			return nil, fmt.Errorf("cost_abs: %w", err)
		}
		if d.Cost.Cmp(l) > 0 {
			out = append(out, Crossed{"cost_abs", *p.CostAbs, pricing.FormatDecimal(d.Cost)})
		}
	}
	if err := rel("cost_rel", p.CostRel, d.Cost, d.ProviderCost); err != nil {
		return nil, err
	}
	return out, nil
}

// DriftPayload is the webhook body of a drift event (the Standard Webhooks envelope).
type DriftPayload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      DriftData `json:"data"`
}

// DriftData describes the run and the threshold crossed.
type DriftData struct {
	EventID     int64          `json:"event_id"`
	RunID       int64          `json:"run_id"`
	ProviderID  int64          `json:"provider_id"`
	Day         string         `json:"day"`
	Crossed     Crossed        `json:"crossed"`
	TokensDrift int64          `json:"tokens_drift"`
	CostDrift   string         `json:"cost_drift"`
	Provisional bool           `json:"provisional"`
	Causes      map[string]int `json:"causes"`
}

// raiseAlerts records, in the run's transaction, one event (with its webhook deliveries) per threshold
// the run crossed. The event is unique by (run, threshold), so it is raised exactly once.
func raiseAlerts(ctx context.Context, tx pgx.Tx, p store.ReconcileProvider, run store.ReconcileRun) error {
	d, err := MeasureDrift(run)
	if err != nil {
		return err
	}
	crossed, err := CrossedThresholds(p, d)
	if err != nil {
		return err
	}
	causes := map[string]int{}
	for _, l := range run.Lines {
		if l.Cause != CauseNone {
			causes[l.Cause]++
		}
	}
	for _, c := range crossed {
		used := c.Observed
		if used == "inf" {
			used = "Infinity"
		}
		ev := alert.Event{Type: DriftEventType, Scope: driftScope, ScopeID: run.ID, PeriodStart: run.Day,
			Threshold: thresholdCodes[c.Threshold], Limit: c.Limit, Used: used}
		_, err := alert.Enqueue(ctx, tx, ev, func(id int64, at time.Time) any {
			return DriftPayload{Type: DriftEventType, Timestamp: at.UTC(), Data: DriftData{EventID: id, RunID: run.ID,
				ProviderID: run.ProviderID, Day: run.Day.Format(time.DateOnly), Crossed: c, TokensDrift: d.Tokens,
				CostDrift: pricing.FormatDecimal(d.Cost), Provisional: run.Provisional, Causes: causes}}
		})
		if err != nil {
			return fmt.Errorf("raise %s alert of run %d: %w", c.Threshold, run.ID, err)
		}
	}
	return nil
}

// RaiseAlerts re-evaluates a stored run's thresholds (an event already raised is not raised again).
func (r *Runner) RaiseAlerts(ctx context.Context, runID int64) error {
	run, err := store.GetReconcileRun(ctx, r.pool, runID)
	if err != nil {
		return err
	}
	p, err := r.settings(ctx, run.ProviderID)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error { return raiseAlerts(ctx, tx, p, run) })
}
