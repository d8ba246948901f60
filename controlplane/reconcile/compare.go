package reconcile

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
)

// Causes of a line's drift (docs/reconciliation.md, "Kinds of drift").
const (
	CauseNone              = "none"
	CauseMissingAtProvider = "missing_at_provider" // the ledger has usage the provider did not report
	CausePendingLate       = "pending_late"        // the same, while the provider may still add late data
	CauseMissingInLedger   = "missing_in_ledger"   // the provider reports usage the ledger does not have
	CauseTokens            = "tokens"              // both sides have the group; categories differ
	CauseLocalCount        = "local_count"         // the same, and the ledger counted some rows itself
	CausePrice             = "price"               // tokens agree, cost does not
	CauseCost              = "cost"                // cost differs because tokens differ
)

// tokenKey is how token lines match: the provider-side key, the model and the served tier.
type tokenKey struct{ key, model, tier string }

// costKey is how cost lines match: the project (workspace) and the model.
type costKey struct{ project, model string }

type ruleUse struct {
	ID      *int64 `json:"price_rule_id"`
	Version *int32 `json:"version"`
	Rows    int64  `json:"rows"`
}

type costAcc struct {
	ledger, provider *decimal.Big
	rules            map[string]*ruleUse
	hasLedger        bool
}

// foldLedger maps a ledger group's categories onto the categories the provider kind reports. Alpha has no
// cache-write field (its input includes every cache write: 5-minute, 30-minute and 1-hour); the other kinds
// report all seven categories as the ledger has them (beta never has 30-minute writes, so a 30m count there
// is drift, not something to fold away).
func foldLedger(kind string, g store.LedgerGroup) Tokens {
	t := Tokens{Input: g.Input, Output: g.Output, CacheRead: g.CacheRead, Cache5m: g.Cache5m, Cache30m: g.Cache30m,
		Cache1h: g.Cache1h, ImageOut: g.ImageOut}
	if kind == KindOpenAI {
		t.Input += t.Cache5m + t.Cache30m + t.Cache1h
		t.Cache5m, t.Cache30m, t.Cache1h = 0, 0, 0
	}
	return t
}

func toStore(t Tokens) store.ReportTokens {
	return store.ReportTokens{Input: t.Input, Output: t.Output, CacheRead: t.CacheRead, Cache5m: t.Cache5m, Cache30m: t.Cache30m,
		Cache1h: t.Cache1h, ImageOut: t.ImageOut}
}

func fromStore(t store.ReportTokens) Tokens {
	return Tokens{Input: t.Input, Output: t.Output, CacheRead: t.CacheRead, Cache5m: t.Cache5m, Cache30m: t.Cache30m,
		Cache1h: t.Cache1h, ImageOut: t.ImageOut}
}

// compare builds a run's lines and totals from the ledger's groups and the provider's report of the day.
// provisional says the provider may still add late data to the day.
//
// The report may cover an account several Tollgate providers share: usage of keys mapped to other
// providers' credentials, and costs of projects mapped only to other providers, are left out (they are
// those providers' to reconcile); usage of keys no credential maps stays (missing_in_ledger: used outside
// the gateway). Cost lines compare the ledger's costs of every credential in the project (costs).
func compare(kind string, ledger []store.LedgerGroup, costs []store.LedgerCost, refs store.ProviderRefs, rep store.ImportedDay,
	provisional bool) (store.ReconcileRun, error) {
	type tokAcc struct {
		line       store.ReconcileLine
		ledgerTok  Tokens
		prov       *Tokens
		provReport bool
		hasLedger  bool
		cut        int64 // ledger rows of streams that broke before their end
		cost       *decimal.Big
	}
	toks := map[tokenKey]*tokAcc{}
	costAccs := map[costKey]*costAcc{}
	getCost := func(k costKey) *costAcc {
		c := costAccs[k]
		if c == nil {
			c = &costAcc{ledger: zero(), provider: zero(), rules: map[string]*ruleUse{}}
			costAccs[k] = c
		}
		return c
	}
	var run store.ReconcileRun
	for _, g := range ledger {
		k := tokenKey{g.KeyRef, g.Model, g.Tier}
		a := toks[k]
		if a == nil {
			a = &tokAcc{line: store.ReconcileLine{Kind: "tokens", KeyRef: g.KeyRef, ProjectRef: g.ProjectRef, Model: g.Model, Tier: g.Tier}, cost: zero()}
			toks[k] = a
		}
		a.hasLedger = true
		a.ledgerTok.Add(foldLedger(kind, g))
		a.line.LedgerRequests += g.Requests
		a.cut += g.Cut
		cost, err := pricing.ParseStoredDecimal(g.Cost)
		if err != nil {
			return run, fmt.Errorf("ledger cost %q: %w", g.Cost, err)
		}
		a.cost.Add(a.cost, cost)
		switch g.Source {
		case "upstream":
			a.line.SourceUpstream += g.Rows
		case "local":
			a.line.SourceLocal += g.Rows
		case "estimated":
			a.line.SourceEstimated += g.Rows
		}
	}
	for _, g := range costs {
		cost, err := pricing.ParseStoredDecimal(g.Cost)
		if err != nil {
			return run, fmt.Errorf("ledger cost %q: %w", g.Cost, err)
		}
		c := getCost(costKey{g.ProjectRef, g.Model})
		c.hasLedger = true
		c.ledger.Add(c.ledger, cost)
		rk := fmt.Sprint(deref64(g.PriceRuleID), "/", deref32(g.PriceRuleVersion))
		if c.rules[rk] == nil {
			c.rules[rk] = &ruleUse{ID: g.PriceRuleID, Version: g.PriceRuleVersion}
		}
		c.rules[rk].Rows += g.Rows
	}
	for _, u := range rep.Usage {
		if refs.ForeignKeys[u.KeyRef] {
			continue
		}
		k := tokenKey{u.KeyRef, u.Model, u.Tier}
		a := toks[k]
		if a == nil {
			a = &tokAcc{line: store.ReconcileLine{Kind: "tokens", KeyRef: u.KeyRef, ProjectRef: u.ProjectRef, Model: u.Model, Tier: u.Tier}, cost: zero()}
			toks[k] = a
		}
		if a.line.ProjectRef == "" {
			a.line.ProjectRef = u.ProjectRef
		}
		a.line.ProviderRequests += u.Requests
		if u.TokensReported {
			if a.prov == nil {
				a.prov = &Tokens{}
			}
			a.prov.Add(fromStore(u.Tokens))
		}
		a.provReport = true
	}
	for _, c := range rep.Costs {
		if refs.ForeignProjects[c.ProjectRef] {
			continue
		}
		cost, err := pricing.ParseStoredDecimal(c.Cost)
		if err != nil {
			return run, fmt.Errorf("provider cost %q: %w", c.Cost, err)
		}
		acc := getCost(costKey{c.ProjectRef, c.Model})
		acc.provider.Add(acc.provider, cost)
	}

	// Token lines, in a stable order.
	keys := make([]tokenKey, 0, len(toks))
	for k := range toks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return a.model+"\x00"+a.key+"\x00"+a.tier < b.model+"\x00"+b.key+"\x00"+b.tier
	})
	drifting := map[costKey]bool{} // a token line of the cost group drifts
	pending := map[costKey]bool{}  // and every drifting one only waits for late data
	for _, k := range keys {
		a := toks[k]
		l := a.line
		l.Ledger = toStore(a.ledgerTok)
		l.LedgerCost = pricing.FormatDecimal(a.cost)
		l.ProviderCost = "0"
		if a.prov != nil {
			p := toStore(*a.prov)
			l.Provider = &p
		}
		l.Cause, l.Detail = tokenCause(a.hasLedger, a.provReport, a.ledgerTok, a.prov, l, provisional)
		if l.Cause == CauseTokens && a.cut > 0 && a.prov != nil && a.prov.Output > a.ledgerTok.Output {
			// The rows' usage is the provider's, but as reported when the stream broke: a provider bills the
			// output it generated, which a stream's early usage (beta's message_start) does not count. Only
			// said where the provider bills more output than the ledger has.
			l.Detail += fmt.Sprintf("; %d of the ledger's rows are streams that broke before their end (cut or left by the client), "+
				"billed with the usage they had reported: the provider may bill output generated past it", a.cut)
		}
		if ck := (costKey{l.ProjectRef, l.Model}); l.Cause != CauseNone {
			pending[ck] = (!drifting[ck] || pending[ck]) && l.Cause == CausePendingLate
			drifting[ck] = true
		}
		run.Lines = append(run.Lines, l)
		run.LedgerTokens += a.ledgerTok.Total()
		if a.prov != nil {
			run.ProviderTokens += a.prov.Total()
		}
		run.SourceUpstream += l.SourceUpstream
		run.SourceLocal += l.SourceLocal
		run.SourceEstimated += l.SourceEstimated
	}

	// Cost lines.
	ckeys := make([]costKey, 0, len(costAccs))
	for k := range costAccs {
		ckeys = append(ckeys, k)
	}
	sort.Slice(ckeys, func(i, j int) bool {
		return ckeys[i].model+"\x00"+ckeys[i].project < ckeys[j].model+"\x00"+ckeys[j].project
	})
	ledgerTotal, providerTotal := zero(), zero()
	for _, k := range ckeys {
		c := costAccs[k]
		ledgerTotal.Add(ledgerTotal, c.ledger)
		providerTotal.Add(providerTotal, c.provider)
		uses := make([]*ruleUse, 0, len(c.rules))
		for _, u := range c.rules {
			uses = append(uses, u)
		}
		sort.Slice(uses, func(i, j int) bool {
			return deref64(uses[i].ID) < deref64(uses[j].ID) || deref64(uses[i].ID) == deref64(uses[j].ID) && deref32(uses[i].Version) < deref32(uses[j].Version)
		})
		rules, err := json.Marshal(uses)
		if err != nil {
			return run, fmt.Errorf("price rules: %w", err)
		}
		l := store.ReconcileLine{Kind: "cost", ProjectRef: k.project, Model: k.model, LedgerCost: pricing.FormatDecimal(c.ledger),
			ProviderCost: pricing.FormatDecimal(c.provider), PriceRules: rules, Cause: CauseNone}
		if c.ledger.Cmp(c.provider) != 0 {
			diff := zero()
			diff.Sub(c.provider, c.ledger)
			switch {
			case pending[k]:
				l.Cause, l.Detail = CausePendingLate, fmt.Sprintf("provider cost differs by %s while the day may still receive late data", pricing.FormatDecimal(diff))
			case drifting[k] || !c.hasLedger:
				l.Cause, l.Detail = CauseCost, fmt.Sprintf("provider cost differs by %s; the tokens differ too", pricing.FormatDecimal(diff))
			default:
				l.Cause, l.Detail = CausePrice, fmt.Sprintf("tokens agree, provider cost differs by %s; the ledger's rows were priced by %s",
					pricing.FormatDecimal(diff), describeRules(uses))
			}
		}
		run.Lines = append(run.Lines, l)
	}
	run.LedgerCost, run.ProviderCost = pricing.FormatDecimal(ledgerTotal), pricing.FormatDecimal(providerTotal)
	run.Status = "ok"
	for _, l := range run.Lines {
		if l.Cause != CauseNone {
			run.Status = "drift"
			break
		}
	}
	return run, nil
}

// tokenCause says why a token line drifts, with a detail naming the categories.
func tokenCause(hasLedger, hasProvider bool, ledger Tokens, prov *Tokens, l store.ReconcileLine, provisional bool) (string, string) {
	switch {
	case hasLedger && !hasProvider:
		if ledger.Total() == 0 && l.LedgerRequests == 0 {
			return CauseNone, ""
		}
		why := fmt.Sprintf("the provider reports nothing for %d ledger requests (%d tokens)", l.LedgerRequests, ledger.Total())
		if l.KeyRef == "" {
			why += "; the credential is not mapped to a provider key"
		}
		if provisional {
			return CausePendingLate, why + " yet; the day may still receive late data"
		}
		return CauseMissingAtProvider, why
	case !hasLedger && hasProvider:
		total := int64(0)
		if prov != nil {
			total = prov.Total()
		}
		if total == 0 && l.ProviderRequests == 0 {
			return CauseNone, ""
		}
		return CauseMissingInLedger, fmt.Sprintf("the ledger has no rows for %d provider requests (%d tokens)", l.ProviderRequests, total)
	}
	if prov == nil { // the provider counts requests only for this group
		if d := l.ProviderRequests - l.LedgerRequests; d > 0 {
			return CauseMissingInLedger, fmt.Sprintf("the provider counts %d requests more", d)
		} else if d < 0 {
			if provisional {
				return CausePendingLate, fmt.Sprintf("the provider counts %d requests fewer yet", -d)
			}
			return CauseMissingAtProvider, fmt.Sprintf("the provider counts %d requests fewer", -d)
		}
		return CauseNone, ""
	}
	diff := prov.Sub(ledger)
	var parts []string
	for _, c := range diff.Categories() {
		if c.Value != 0 {
			parts = append(parts, fmt.Sprintf("%s %+d", c.Name, c.Value))
		}
	}
	if len(parts) == 0 {
		return CauseNone, ""
	}
	detail := "provider − ledger: " + strings.Join(parts, ", ")
	// A report that counts requests (alpha's num_model_requests, a file's requests column; 0 = not counted)
	// and counts fewer than the ledger: requests are missing at the provider, whatever their tokens.
	if d := l.LedgerRequests - l.ProviderRequests; l.ProviderRequests > 0 && d > 0 {
		why := fmt.Sprintf("the provider reports %d request%s fewer than the ledger; %s", d, plural(d), detail)
		if provisional {
			return CausePendingLate, why + "; the day may still receive late data"
		}
		return CauseMissingAtProvider, why
	}
	if l.SourceLocal+l.SourceEstimated > 0 {
		return CauseLocalCount, detail + fmt.Sprintf("; %d of the ledger's rows were counted locally and %d estimated, not reported by the provider",
			l.SourceLocal, l.SourceEstimated)
	}
	return CauseTokens, detail
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func describeRules(uses []*ruleUse) string {
	var parts []string
	for _, u := range uses {
		if u.ID == nil {
			parts = append(parts, fmt.Sprintf("no price rule (%d rows)", u.Rows))
			continue
		}
		v := "unknown version"
		if u.Version != nil {
			v = fmt.Sprintf("version %d", *u.Version)
		}
		parts = append(parts, fmt.Sprintf("price rule %d %s (%d rows)", *u.ID, v, u.Rows))
	}
	return strings.Join(parts, ", ")
}

func deref64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
