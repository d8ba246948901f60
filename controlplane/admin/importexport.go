package admin

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
)

// Bundle is the import/export document: {"price_rules":[…],"routing_rules":[…]}.
type Bundle struct {
	PriceRules   []store.PriceRule   `json:"price_rules"`
	RoutingRules []store.RoutingRule `json:"routing_rules"`
}

// ImportBundle is a bundle as written by a client.
type ImportBundle struct {
	PriceRules   []PriceRuleInput
	RoutingRules []RoutingRuleInput
	// Problems are per-element decoding problems found by the transport (wrong types, unknown
	// fields), reported together with the validation problems.
	Problems []Detail
}

// ImportResult counts what was written. ScheduledPriceRules counts the price_rules elements with
// effective_at, stored as scheduled versions (not in PriceRules).
type ImportResult struct {
	PriceRules          int `json:"price_rules"`
	RoutingRules        int `json:"routing_rules"`
	ScheduledPriceRules int `json:"scheduled_price_rules"`
}

// Export returns every price rule and routing rule, in id order, read in one snapshot.
func (s *Service) Export(ctx context.Context) (Bundle, error) {
	var b Bundle
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if b.PriceRules, err = store.AllPriceRules(ctx, tx, false); err != nil {
			return err
		}
		b.RoutingRules, err = store.AllRoutingRules(ctx, tx)
		return err
	})
	if b.PriceRules == nil {
		b.PriceRules = []store.PriceRule{}
	}
	if b.RoutingRules == nil {
		b.RoutingRules = []store.RoutingRule{}
	}
	return b, storeError(err, "export")
}

// Import writes a bundle all-or-nothing in one transaction. Elements with an id are inserted or
// replaced under that id (so export → import is lossless and repeatable); price rules without one
// get a new id, routing rules without one upsert by (provider_id, operation, kind). The id
// sequences are moved past every imported id. Provider defaults are never seeded. When any element
// is invalid nothing is written and the error lists every bad element by section, index and field.
func (s *Service) Import(ctx context.Context, in ImportBundle) (ImportResult, error) {
	details := append([]Detail(nil), in.Problems...)
	// Elements that did not decode are reported by their decoding problem only.
	undecoded := map[string]map[int]bool{"price_rules": {}, "routing_rules": {}}
	for _, d := range in.Problems {
		if d.Index != nil && undecoded[d.Section] != nil {
			undecoded[d.Section][*d.Index] = true
		}
	}
	bad := func(section string, i int, d Detail) {
		d.Section, d.Index = section, intp(i)
		details = append(details, d)
	}
	prices := make([]store.PriceRule, len(in.PriceRules))
	priceProblems := make([][]Detail, len(in.PriceRules))
	parallel(len(in.PriceRules), func(i int) {
		if !undecoded["price_rules"][i] {
			prices[i], priceProblems[i] = in.PriceRules[i].validate()
		}
	})
	// A rule id may appear once as a rule and once as a scheduled version (effective_at).
	type priceKey struct {
		id        int64
		scheduled bool
	}
	priceIDs := map[priceKey]int{}
	providerRefs := map[int64]bool{}
	now := time.Now()
	for i, r := range in.PriceRules {
		if undecoded["price_rules"][i] {
			continue
		}
		for _, d := range priceProblems[i] {
			bad("price_rules", i, d)
		}
		if r.EffectiveAt != nil {
			for _, d := range checkEffectiveAt(*r.EffectiveAt, now) {
				bad("price_rules", i, d)
			}
			if r.ID <= 0 {
				bad("price_rules", i, field("effective_at", "a scheduled version needs the id of the rule it changes"))
			}
		}
		if r.ID > 0 {
			k := priceKey{r.ID, r.EffectiveAt != nil}
			if j, dup := priceIDs[k]; dup {
				bad("price_rules", i, field("id", "duplicate id %d (also price_rules[%d])", r.ID, j))
			}
			priceIDs[k] = i
		}
		if r.ProviderID != nil && *r.ProviderID > 0 {
			providerRefs[*r.ProviderID] = true
		}
	}
	routing := make([]store.RoutingRule, len(in.RoutingRules))
	routingIDs := map[int64]int{}
	type cellKey struct {
		provider int64
		op, kind string
	}
	cells := map[cellKey]int{}
	for i, r := range in.RoutingRules {
		if undecoded["routing_rules"][i] {
			continue
		}
		row, ds := r.validate()
		for _, d := range ds {
			bad("routing_rules", i, d)
		}
		if r.ID > 0 {
			if j, dup := routingIDs[r.ID]; dup {
				bad("routing_rules", i, field("id", "duplicate id %d (also routing_rules[%d])", r.ID, j))
			}
			routingIDs[r.ID] = i
		}
		k := cellKey{r.ProviderID, r.Operation, r.Kind}
		if j, dup := cells[k]; dup {
			bad("routing_rules", i, field("kind", "duplicate (provider_id, operation, kind) (also routing_rules[%d])", j))
		}
		cells[k] = i
		if r.ProviderID > 0 {
			providerRefs[r.ProviderID] = true
		}
		routing[i] = row
	}
	var res ImportResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		ids := make([]int64, 0, len(providerRefs))
		for id := range providerRefs {
			ids = append(ids, id)
		}
		exists, err := store.ExistingProviderIDs(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i, r := range in.PriceRules {
			if !undecoded["price_rules"][i] && r.ProviderID != nil && *r.ProviderID > 0 && !exists[*r.ProviderID] {
				bad("price_rules", i, field("provider_id", "provider %d does not exist", *r.ProviderID))
			}
		}
		for i, r := range in.RoutingRules {
			if !undecoded["routing_rules"][i] && r.ProviderID > 0 && !exists[r.ProviderID] {
				bad("routing_rules", i, field("provider_id", "provider %d does not exist", r.ProviderID))
			}
		}
		if len(details) == 0 {
			clashes, err := store.RoutingRuleClashes(ctx, tx, routing)
			if err != nil {
				return err
			}
			for _, c := range clashes {
				bad("routing_rules", c.Index, field("id", "(provider_id, operation, kind) is already held by routing rule %d", c.HolderID))
			}
		}
		if len(details) > 0 {
			return &Error{Code: CodeValidation, Message: fmt.Sprintf("import refused: %d problem(s); nothing was changed", len(details)), Details: details}
		}
		var immediate, later []store.PriceRule
		var laterAt []time.Time
		var laterIdx []int
		for i, r := range in.PriceRules {
			if r.EffectiveAt == nil {
				immediate = append(immediate, prices[i])
			} else {
				later, laterAt, laterIdx = append(later, prices[i]), append(laterAt, *r.EffectiveAt), append(laterIdx, i)
			}
		}
		if err := store.ImportPriceRules(ctx, tx, immediate); err != nil {
			return err
		}
		if err := store.ImportRoutingRules(ctx, tx, routing); err != nil {
			return err
		}
		for j, r := range later { // after the rules: a scheduled version may change a rule this import writes
			_, err := store.SchedulePriceRule(ctx, tx, r, laterAt[j])
			switch {
			case errors.Is(err, store.ErrNotFound):
				bad("price_rules", laterIdx[j], field("id", "price rule %d does not exist: a scheduled version changes an existing rule", r.ID))
			case errors.Is(err, store.ErrUnchangedSchedule):
				bad("price_rules", laterIdx[j], field("effective_at", "the scheduled version is identical to the rule's content"))
			case err != nil:
				return err
			}
		}
		if len(details) > 0 {
			return &Error{Code: CodeValidation, Message: fmt.Sprintf("import refused: %d problem(s); nothing was changed", len(details)), Details: details}
		}
		res = ImportResult{PriceRules: len(immediate), RoutingRules: len(routing), ScheduledPriceRules: len(later)}
		return nil
	})
	return res, priceRuleWriteError(err, "import")
}

// parallel runs fn(0..n-1) on up to GOMAXPROCS goroutines, in contiguous chunks (validation of
// large imports is CPU-bound: decimal parsing of every price).
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/512))
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				fn(i)
			}
		}()
	}
	wg.Wait()
}
