package admin

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ericlagergren/decimal"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/usage"
)

// RepriceRequest asks for a period's spend under another set of rules
// (POST /admin/price-rules/reprice): the rules given (e.g. a corrected table), or the rules that were
// in force at a time (from the price history).
type RepriceRequest struct {
	From  *time.Time       `json:"from"`
	To    *time.Time       `json:"to"`
	At    *time.Time       `json:"at,omitempty"`
	Rules []PriceRuleInput `json:"rules,omitempty"`
}

// RepriceLine is one (provider, upstream model) of the report.
type RepriceLine struct {
	ProviderID int64  `json:"provider_id"`
	Model      string `json:"model"`
	Usages     int64  `json:"usages"`
	Charged    string `json:"charged"`
	Repriced   string `json:"repriced"`
	Difference string `json:"difference"`
}

// RepriceReport sets what was charged beside what the other rules would have charged. It changes nothing.
type RepriceReport struct {
	From       time.Time     `json:"from"`
	To         time.Time     `json:"to"`
	Basis      string        `json:"basis"`
	Usages     int64         `json:"usages"`
	Charged    string        `json:"charged"`
	Repriced   string        `json:"repriced"`
	Difference string        `json:"difference"`
	ByModel    []RepriceLine `json:"by_model"`
}

type repriceAcc struct {
	n                 int64
	charged, repriced *decimal.Big
}

func zero() *decimal.Big {
	z, _ := pricing.ParseDecimal("0") // carries the exact context: sums never round
	return z
}

// Reprice computes the report: each usage row of [from, to) is priced again with the data plane's
// engine (pricing.Index.Resolve on its provider and upstream model, Rule.Quote at its settlement tier)
// and summed exactly beside its recorded cost.
func (s *Service) Reprice(ctx context.Context, req RepriceRequest) (RepriceReport, error) {
	var details []Detail
	if req.From == nil {
		details = append(details, field("from", "required (RFC 3339)"))
	}
	if req.To == nil {
		details = append(details, field("to", "required (RFC 3339)"))
	}
	if req.From != nil && req.To != nil && !req.From.Before(*req.To) {
		details = append(details, field("to", "must be after from"))
	}
	if (req.At == nil) == (len(req.Rules) == 0) {
		details = append(details, field("rules", "give either rules (a price table) or at (the rules in force then)"))
	}
	var inputs []pricing.RuleInput
	for i, r := range req.Rules {
		row, ds := r.validate()
		if r.EffectiveAt != nil {
			ds = append(ds, field("effective_at", "not used by a re-pricing (the rules given price the whole period)"))
		}
		for _, d := range ds {
			d.Section, d.Index = "rules", intp(i)
			details = append(details, d)
		}
		row.ID = int64(i + 1)
		inputs = append(inputs, row.RuleInput)
	}
	if details != nil {
		return RepriceReport{}, invalidFields("invalid re-pricing request", details...)
	}
	rep := RepriceReport{From: *req.From, To: *req.To, Basis: fmt.Sprintf("%d rules given", len(req.Rules))}
	type lineKey struct {
		provider int64
		model    string
	}
	lines := map[lineKey]*repriceAcc{}
	total := repriceAcc{charged: zero(), repriced: zero()}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if req.At != nil {
			var err error
			if inputs, err = store.PriceRulesAt(ctx, tx, *req.At); err != nil {
				return err
			}
			rep.Basis = "rules in force at " + req.At.UTC().Format(time.RFC3339)
		}
		rules := make([]*pricing.Rule, 0, len(inputs))
		for _, in := range inputs {
			r, err := pricing.ParseRule(in)
			if err != nil {
				s.log.Warn("price rule version does not parse; left out of the re-pricing", "price_rule_id", in.ID, "err", err)
				continue
			}
			rules = append(rules, r)
		}
		idx := pricing.NewIndex(rules)
		return store.ForEachUsageBetween(ctx, tx, *req.From, *req.To, func(u store.RepriceUsage) error {
			charged, err := pricing.ParseStoredDecimal(u.Cost)
			if err != nil {
				return fmt.Errorf("usage cost %q: %w", u.Cost, err)
			}
			q := pricing.QuoteFor(idx.Resolve(u.ProviderID, u.Model), usage.Usage{Input: u.Input, Output: u.Output,
				CacheRead: u.CacheRead, CacheCreation5m: u.Cache5m, CacheCreation30m: u.Cache30m, CacheCreation1h: u.Cache1h,
				ImageOutput: u.Image}, pricing.SettlementTier(u.ReportedTier, u.RequestedTier))
			k := lineKey{u.ProviderID, u.Model}
			l := lines[k]
			if l == nil {
				l = &repriceAcc{charged: zero(), repriced: zero()}
				lines[k] = l
			}
			for _, a := range []*repriceAcc{l, &total} {
				a.n++
				a.charged.Add(a.charged, charged)
				a.repriced.Add(a.repriced, q.Cost)
			}
			return nil
		})
	})
	if err != nil {
		return RepriceReport{}, storeError(err, "re-pricing")
	}
	diff := func(a *repriceAcc) string { return pricing.FormatDecimal(zero().Sub(a.repriced, a.charged)) }
	rep.Usages, rep.Charged, rep.Repriced, rep.Difference = total.n, pricing.FormatDecimal(total.charged), pricing.FormatDecimal(total.repriced), diff(&total)
	rep.ByModel = []RepriceLine{}
	for k, l := range lines {
		rep.ByModel = append(rep.ByModel, RepriceLine{ProviderID: k.provider, Model: k.model, Usages: l.n,
			Charged: pricing.FormatDecimal(l.charged), Repriced: pricing.FormatDecimal(l.repriced), Difference: diff(l)})
	}
	sort.Slice(rep.ByModel, func(i, j int) bool {
		a, b := rep.ByModel[i], rep.ByModel[j]
		if a.ProviderID != b.ProviderID {
			return a.ProviderID < b.ProviderID
		}
		return a.Model < b.Model
	})
	return rep, nil
}

// quoteIndexAt is the index of the current rules (at nil) or of the rules in force at a time.
func (s *Service) quoteIndexAt(ctx context.Context, at *time.Time) (*pricing.Index, error) {
	if at == nil {
		return s.quoteIndexNow(ctx)
	}
	inputs, err := store.PriceRulesAt(ctx, s.pool, *at)
	if err != nil {
		return nil, storeError(err, "price history")
	}
	rules := make([]*pricing.Rule, 0, len(inputs))
	for _, in := range inputs {
		if r, err := pricing.ParseRule(in); err == nil {
			rules = append(rules, r)
		}
	}
	return pricing.NewIndex(rules), nil
}
