package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/catalog"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// CatalogPlanKeep is how long stored plans are kept (applied or not).
const CatalogPlanKeep = 7 * 24 * time.Hour

// CatalogPlanRequest asks for a plan (POST /admin/price-catalogs/plan).
type CatalogPlanRequest struct {
	Format string `json:"format"`
	// Document is the genai-prices data.json text.
	Document string `json:"document,omitempty"`
	// Files are the models.dev TOML files, path → text.
	Files map[string]string `json:"files,omitempty"`
	// ProviderMap maps catalog provider ids to Tollgate provider ids (provider-scoped rules).
	ProviderMap map[string]int64 `json:"provider_map,omitempty"`
	// OnlyMapped imports only the entries of mapped catalog providers.
	OnlyMapped bool `json:"only_mapped,omitempty"`
	// StartsWithAsContains imports genai-prices starts_with clauses as contains rules.
	StartsWithAsContains bool `json:"starts_with_as_contains,omitempty"`
	// At picks dated conditional prices (default: now).
	At *time.Time `json:"at,omitempty"`
}

// CatalogPlan is what applying a catalog would do.
type CatalogPlan struct {
	ID        string    `json:"id"`
	Format    string    `json:"format"`
	Digest    string    `json:"digest"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	Entries   int       `json:"entries"`
	Summary   struct {
		Added          int `json:"added"`
		Changed        int `json:"changed"`
		OperatorEdited int `json:"operator_edited"`
		Unchanged      int `json:"unchanged"`
		Skipped        int `json:"skipped"`
	} `json:"summary"`
	Added     []PlanRule        `json:"added"`
	Changed   []PlanChange      `json:"changed"`
	Unchanged []PlanUnchanged   `json:"unchanged"`
	Skipped   []catalog.Skipped `json:"skipped"`
	// ChannelTypeScopes lists the catalog providers mapped by channel type (genai-prices "aws" to
	// every aws_bedrock provider, …; docs/pricing.md "Cloud providers") and the provider ids they
	// were scoped to. An explicit provider_map entry replaces the default for its catalog provider.
	ChannelTypeScopes map[string][]int64 `json:"channel_type_scopes,omitempty"`
	AppliedAt         *time.Time         `json:"applied_at,omitempty"`
}

// PlanRule is a rule the plan adds.
type PlanRule struct {
	EntryID string            `json:"entry_id"`
	Rule    pricing.RuleInput `json:"rule"`
	Notes   []string          `json:"notes,omitempty"`
}

// PlanChange is an existing rule the plan changes, field by field. OperatorEdited marks a rule an
// operator created or edited since it was imported: applying overwrites it only when the apply
// request confirms it.
type PlanChange struct {
	EntryID        string            `json:"entry_id"`
	PriceRuleID    int64             `json:"price_rule_id"`
	OperatorEdited bool              `json:"operator_edited"`
	Fields         []FieldChange     `json:"fields"`
	Rule           pricing.RuleInput `json:"rule"`
	Notes          []string          `json:"notes,omitempty"`
	// State is the digest of the rule as planned: apply refuses when it changed since.
	State string `json:"state"`
}

// FieldChange is one field's old and new value.
type FieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// PlanUnchanged is an existing rule the catalog already matches.
type PlanUnchanged struct {
	EntryID     string `json:"entry_id"`
	PriceRuleID int64  `json:"price_rule_id"`
	// ProvenanceOnly is true when the rule's prices already match but its provenance would be
	// (re)recorded by the apply (e.g. an operator rule equal to the catalog's).
	ProvenanceOnly bool `json:"provenance_only,omitempty"`
}

// CatalogApplyRequest applies a stored plan (POST /admin/price-catalogs/apply).
type CatalogApplyRequest struct {
	PlanID string `json:"plan_id"`
	// Exclude lists entry ids of the plan not to apply.
	Exclude []string `json:"exclude,omitempty"`
	// ConfirmOperatorEdited must be true when the applied changes include operator-edited rules.
	ConfirmOperatorEdited bool `json:"confirm_operator_edited,omitempty"`
	// EffectiveAt, when set, makes the plan's changes take effect at that future instant: each changed
	// rule gets a scheduled version, each added rule is created disabled now with a scheduled version
	// enabling it (docs/pricing.md, "Scheduled price changes").
	EffectiveAt *time.Time `json:"effective_at,omitempty"`
}

// CatalogApplyResult counts what the apply wrote.
type CatalogApplyResult struct {
	PlanID    string    `json:"plan_id"`
	Added     int       `json:"added"`
	Changed   int       `json:"changed"`
	Excluded  int       `json:"excluded"`
	AppliedAt time.Time `json:"applied_at"`
	// Scheduled counts the scheduled versions stored (with effective_at).
	Scheduled int `json:"scheduled"`
}

// contentFingerprint is the digest of what a rule charges and matches (not its id, not enabled):
// equal fingerprints price every request the same.
func contentFingerprint(in pricing.RuleInput) (string, pricing.RuleInput, error) {
	in.ID, in.Enabled = 0, true
	r, err := pricing.ParseRule(in)
	if err != nil {
		return "", pricing.RuleInput{}, err
	}
	canon := r.Input()
	if len(canon.PricingTiersJSON) == 0 {
		canon.PricingTiersJSON = json.RawMessage("[]")
	}
	b, err := json.Marshal(canon)
	if err != nil {
		return "", pricing.RuleInput{}, err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), canon, nil
}

// stateFingerprint is the digest of a stored rule as a whole (content and enabled).
func stateFingerprint(r store.PriceRule) string {
	fp, _, err := contentFingerprint(r.RuleInput)
	if err != nil { // a stored rule that does not parse: its raw text stands for it
		b, _ := json.Marshal(r.RuleInput)
		s := sha256.Sum256(b)
		fp = "raw:" + hex.EncodeToString(s[:])
	}
	return fmt.Sprintf("%s/%t", fp, r.Enabled)
}

// diffFields lists the fields that differ between two canonical rules.
func diffFields(old, nu pricing.RuleInput) []FieldChange {
	var out []FieldChange
	add := func(f, a, b string) {
		if a != b {
			out = append(out, FieldChange{Field: f, Old: a, New: b})
		}
	}
	add("input_price", old.InputPrice, nu.InputPrice)
	add("output_price", old.OutputPrice, nu.OutputPrice)
	add("cache_read_price", old.CacheReadPrice, nu.CacheReadPrice)
	add("cache_creation_5m_price", old.CacheCreation5mPrice, nu.CacheCreation5mPrice)
	add("cache_creation_30m_price", old.CacheCreation30mPrice, nu.CacheCreation30mPrice)
	add("cache_creation_1h_price", old.CacheCreation1hPrice, nu.CacheCreation1hPrice)
	add("image_output_price", old.ImageOutputPrice, nu.ImageOutputPrice)
	add("pricing_tiers_json", string(old.PricingTiersJSON), string(nu.PricingTiersJSON))
	return out
}

// checkCatalogRequest refuses a malformed plan request before anything is read or parsed.
func checkCatalogRequest(req CatalogPlanRequest) error {
	var details []Detail
	for name, id := range req.ProviderMap {
		if id <= 0 {
			details = append(details, field("provider_map."+name, "must be a positive Tollgate provider id, got %d", id))
		}
	}
	switch req.Format {
	case catalog.FormatGenAIPrices:
		if len(req.Files) > 0 {
			details = append(details, field("files", "not used by format %q: send the file's text as document", req.Format))
		}
		if req.Document == "" {
			details = append(details, field("document", "required for format %q", req.Format))
		}
	case catalog.FormatModelsDev:
		if req.Document != "" {
			details = append(details, field("document", "not used by format %q: send the TOML files as files", req.Format))
		}
		if len(req.Files) == 0 {
			details = append(details, field("files", "required for format %q", req.Format))
		}
	default:
		details = append(details, field("format", "must be %q or %q, got %q", catalog.FormatGenAIPrices, catalog.FormatModelsDev, req.Format))
	}
	if details != nil {
		return invalidFields("invalid catalog plan request", details...)
	}
	return nil
}

// mapCatalog runs the catalog mapping of a checked request; types gives every provider's channel
// type (the default scopes of cloud catalog providers: catalog.Options.ProviderTypes).
func mapCatalog(req CatalogPlanRequest, types map[int64]string) (*catalog.Result, error) {
	opt := catalog.Options{ProviderMap: req.ProviderMap, OnlyMapped: req.OnlyMapped, StartsWithAsContains: req.StartsWithAsContains,
		ProviderTypes: make(map[int64]vocab.ChannelType, len(types))}
	for id, ct := range types {
		opt.ProviderTypes[id] = vocab.ChannelType(ct)
	}
	if req.At != nil {
		opt.At = *req.At
	}
	var res *catalog.Result
	var err error
	if req.Format == catalog.FormatGenAIPrices {
		res, err = catalog.ParseGenAIPrices([]byte(req.Document), opt)
	} else {
		files := make(map[string][]byte, len(req.Files))
		for p, t := range req.Files {
			files[p] = []byte(t)
		}
		res, err = catalog.ParseModelsDev(files, opt)
	}
	if err != nil {
		return nil, invalidFields("catalog refused", field(map[string]string{catalog.FormatGenAIPrices: "document", catalog.FormatModelsDev: "files"}[req.Format], "%v", err))
	}
	return res, nil
}

// PlanCatalog maps a catalog against the current rules and stores the plan; nothing else changes.
func (s *Service) PlanCatalog(ctx context.Context, by string, req CatalogPlanRequest) (CatalogPlan, error) {
	if err := checkCatalogRequest(req); err != nil {
		return CatalogPlan{}, err
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return CatalogPlan{}, &Error{Code: CodeInternal, Message: "internal error", Cause: err}
	}
	var plan CatalogPlan
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		types, err := store.ProviderChannelTypes(ctx, tx)
		if err != nil {
			return err
		}
		var bad []Detail
		for name, pid := range req.ProviderMap {
			if _, ok := types[pid]; !ok {
				bad = append(bad, field("provider_map."+name, "provider %d does not exist", pid))
			}
		}
		if bad != nil {
			sort.Slice(bad, func(i, j int) bool { return bad[i].Field < bad[j].Field })
			return invalidFields("invalid catalog plan request", bad...)
		}
		res, err := mapCatalog(req, types)
		if err != nil {
			return err
		}
		plan = CatalogPlan{ID: "plan_" + hex.EncodeToString(id[:]), Format: res.Format, Digest: res.Digest, CreatedBy: by,
			Entries: res.Entries, Added: []PlanRule{}, Changed: []PlanChange{}, Unchanged: []PlanUnchanged{}, Skipped: res.Skipped,
			ChannelTypeScopes: res.ChannelTypeScopes}
		rules, err := store.AllPriceRules(ctx, tx, false)
		if err != nil {
			return err
		}
		prov, err := store.AllProvenance(ctx, tx)
		if err != nil {
			return err
		}
		// The rule a key resolves to is the lowest id among rules with that key (the engine's tie-break).
		byKey := map[catalog.Key]store.PriceRule{}
		for _, r := range rules {
			k := catalog.KeyOf(r.RuleInput)
			if _, dup := byKey[k]; !dup {
				byKey[k] = r
			}
		}
		for _, m := range res.Rules {
			fp, canon, err := contentFingerprint(m.Rule)
			if err != nil {
				return &Error{Code: CodeInternal, Message: "internal error", Cause: fmt.Errorf("mapped rule %s: %w", m.EntryID, err)}
			}
			cur, ok := byKey[catalog.KeyOf(m.Rule)]
			if !ok {
				plan.Added = append(plan.Added, PlanRule{EntryID: m.EntryID, Rule: canon, Notes: m.Notes})
				continue
			}
			curFP, curCanon, err := contentFingerprint(cur.RuleInput)
			p, imported := prov[cur.ID]
			edited := !imported || err != nil || p.Fingerprint != curFP
			if err == nil && curFP == fp {
				plan.Unchanged = append(plan.Unchanged, PlanUnchanged{EntryID: m.EntryID, PriceRuleID: cur.ID,
					ProvenanceOnly: !imported || p.EntryID != m.EntryID || p.Catalog != res.Format})
				continue
			}
			canon.Enabled = cur.Enabled
			fields := diffFields(curCanon, canon)
			if err != nil {
				fields = []FieldChange{{Field: "(rule)", Old: "does not parse: " + err.Error(), New: "catalog rule"}}
			}
			plan.Changed = append(plan.Changed, PlanChange{EntryID: m.EntryID, PriceRuleID: cur.ID, OperatorEdited: edited,
				Fields: fields, Rule: canon, Notes: m.Notes, State: stateFingerprint(cur)})
		}
		plan.Summary.Added, plan.Summary.Changed, plan.Summary.Unchanged, plan.Summary.Skipped =
			len(plan.Added), len(plan.Changed), len(plan.Unchanged), len(plan.Skipped)
		for _, c := range plan.Changed {
			if c.OperatorEdited {
				plan.Summary.OperatorEdited++
			}
		}
		body, err := json.Marshal(plan)
		if err != nil {
			return err
		}
		plan.CreatedAt, err = store.InsertCatalogPlan(ctx, tx, store.CatalogPlanRow{ID: plan.ID, Format: plan.Format,
			Digest: plan.Digest, CreatedBy: by, Plan: body}, CatalogPlanKeep)
		return err
	})
	if err != nil {
		return CatalogPlan{}, storeError(err, "catalog plan")
	}
	return plan, nil
}

// GetCatalogPlan reads a stored plan.
func (s *Service) GetCatalogPlan(ctx context.Context, id string) (CatalogPlan, error) {
	var plan CatalogPlan
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := store.LockCatalogPlan(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(row.Plan, &plan); err != nil {
			return err
		}
		plan.CreatedAt, plan.AppliedAt = row.CreatedAt, row.AppliedAt
		return nil
	})
	return plan, storeError(err, "catalog plan "+id)
}

// ApplyCatalog applies a stored plan, minus the excluded entries, in one transaction: only if it
// was not applied before, if every rule it changes is still in the planned state and if no rule
// it adds has appeared since. Operator-edited rules are overwritten only with
// ConfirmOperatorEdited. Provenance is recorded for every added, changed and provenance-only rule.
func (s *Service) ApplyCatalog(ctx context.Context, by string, req CatalogApplyRequest) (CatalogApplyResult, error) {
	if req.PlanID == "" {
		return CatalogApplyResult{}, invalidFields("invalid catalog apply request", field("plan_id", "required"))
	}
	if req.EffectiveAt != nil {
		if ds := checkEffectiveAt(*req.EffectiveAt, time.Now()); ds != nil {
			return CatalogApplyResult{}, invalidFields("invalid catalog apply request", ds...)
		}
	}
	var res CatalogApplyResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := store.SetActor(ctx, tx, "admin:"+by+" (catalog plan "+req.PlanID+")"); err != nil {
			return err
		}
		row, err := store.LockCatalogPlan(ctx, tx, req.PlanID)
		if err != nil {
			return err
		}
		if row.AppliedAt != nil {
			return &Error{Code: CodeConflict, Message: fmt.Sprintf("plan %s was already applied at %s; make a new plan", row.ID, row.AppliedAt.UTC().Format(time.RFC3339))}
		}
		var plan CatalogPlan
		if err := json.Unmarshal(row.Plan, &plan); err != nil {
			return fmt.Errorf("decode plan %s: %w", row.ID, err)
		}
		known := map[string]bool{}
		for _, a := range plan.Added {
			known[a.EntryID] = true
		}
		for _, c := range plan.Changed {
			known[c.EntryID] = true
		}
		for _, u := range plan.Unchanged {
			known[u.EntryID] = true
		}
		excluded := map[string]bool{}
		var bad []Detail
		for i, e := range req.Exclude {
			if !known[e] {
				bad = append(bad, Detail{Field: "exclude", Index: intp(i), Message: fmt.Sprintf("entry %q is not in plan %s", e, row.ID)})
			}
			excluded[e] = true
		}
		var edited []Detail
		for _, c := range plan.Changed {
			if c.OperatorEdited && !excluded[c.EntryID] && !req.ConfirmOperatorEdited {
				edited = append(edited, Detail{Resource: "price_rule", ID: c.PriceRuleID, Name: c.EntryID,
					Message: "operator-edited rule: confirm_operator_edited or exclude it"})
			}
		}
		if bad != nil {
			return invalidFields("invalid catalog apply request", bad...)
		}
		if edited != nil {
			return &Error{Code: CodeConflict, Message: fmt.Sprintf("plan %s overwrites %d operator-edited rule(s): set confirm_operator_edited or exclude them", row.ID, len(edited)), Details: edited}
		}
		if err := store.LockPriceRuleTable(ctx, tx); err != nil {
			return err
		}
		// Stale check: changed rules still as planned, added keys still free.
		var lockIDs []int64
		for _, c := range plan.Changed {
			if !excluded[c.EntryID] {
				lockIDs = append(lockIDs, c.PriceRuleID)
			}
		}
		current, err := store.LockPriceRules(ctx, tx, lockIDs)
		if err != nil {
			return err
		}
		var stale []Detail
		var updates []store.PriceRule
		var provRules []int64
		var provEntries []string
		var provFPs []string
		for _, c := range plan.Changed {
			if excluded[c.EntryID] {
				continue
			}
			cur, ok := current[c.PriceRuleID]
			if !ok || stateFingerprint(cur) != c.State {
				stale = append(stale, Detail{Resource: "price_rule", ID: c.PriceRuleID, Name: c.EntryID, Message: "changed or deleted since the plan was made"})
				continue
			}
			r := c.Rule
			r.ID, r.Enabled = c.PriceRuleID, cur.Enabled
			updates = append(updates, store.PriceRule{RuleInput: r})
			fp, _, _ := contentFingerprint(r)
			provRules, provEntries, provFPs = append(provRules, r.ID), append(provEntries, c.EntryID), append(provFPs, fp)
		}
		all, err := store.AllPriceRules(ctx, tx, false)
		if err != nil {
			return err
		}
		taken := map[catalog.Key]int64{}
		for _, r := range all {
			if _, dup := taken[catalog.KeyOf(r.RuleInput)]; !dup {
				taken[catalog.KeyOf(r.RuleInput)] = r.ID
			}
		}
		var inserts []store.PriceRule
		var insEntries, insFPs []string
		for _, a := range plan.Added {
			if excluded[a.EntryID] {
				continue
			}
			if id, ok := taken[catalog.KeyOf(a.Rule)]; ok {
				stale = append(stale, Detail{Resource: "price_rule", ID: id, Name: a.EntryID, Message: "a rule with this match was created since the plan was made"})
				continue
			}
			r := a.Rule
			r.ID, r.Enabled = 0, req.EffectiveAt == nil // scheduled: disabled until the instant
			inserts = append(inserts, store.PriceRule{RuleInput: r})
			fp, _, _ := contentFingerprint(r)
			insEntries, insFPs = append(insEntries, a.EntryID), append(insFPs, fp)
		}
		for _, u := range plan.Unchanged {
			if excluded[u.EntryID] || !u.ProvenanceOnly {
				continue
			}
			cur, ok := current[u.PriceRuleID]
			if !ok {
				got, err := store.LockPriceRules(ctx, tx, []int64{u.PriceRuleID})
				if err != nil {
					return err
				}
				cur, ok = got[u.PriceRuleID]
			}
			if !ok {
				stale = append(stale, Detail{Resource: "price_rule", ID: u.PriceRuleID, Name: u.EntryID, Message: "deleted since the plan was made"})
				continue
			}
			fp, _, err := contentFingerprint(cur.RuleInput)
			if err != nil {
				stale = append(stale, Detail{Resource: "price_rule", ID: u.PriceRuleID, Name: u.EntryID, Message: "changed since the plan was made"})
				continue
			}
			provRules, provEntries, provFPs = append(provRules, u.PriceRuleID), append(provEntries, u.EntryID), append(provFPs, fp)
		}
		if stale != nil {
			return &Error{Code: CodeConflict, Message: fmt.Sprintf("plan %s is stale: %d rule(s) changed since it was made; nothing was changed, make a new plan", row.ID, len(stale)), Details: stale}
		}
		scheduled := 0
		if req.EffectiveAt == nil {
			if err := store.UpdatePriceRulePrices(ctx, tx, updates); err != nil {
				return err
			}
		} else {
			for _, u := range updates {
				if _, err := store.SchedulePriceRule(ctx, tx, u, *req.EffectiveAt); err != nil {
					return err
				}
				scheduled++
			}
		}
		ids, err := store.InsertPriceRulesReturningIDs(ctx, tx, inserts)
		if err != nil {
			return err
		}
		if req.EffectiveAt != nil {
			for i, id := range ids {
				r := inserts[i]
				r.ID, r.Enabled = id, true
				if _, err := store.SchedulePriceRule(ctx, tx, r, *req.EffectiveAt); err != nil {
					return err
				}
				scheduled++
			}
		}
		provRules, provEntries, provFPs = append(provRules, ids...), append(provEntries, insEntries...), append(provFPs, insFPs...)
		appliedAt, err := store.MarkCatalogPlanApplied(ctx, tx, row.ID, by)
		if err != nil {
			return err
		}
		ps := make([]store.Provenance, len(provRules))
		for i := range provRules {
			ps[i] = store.Provenance{PriceRuleID: provRules[i], Catalog: plan.Format, FileDigest: plan.Digest,
				EntryID: provEntries[i], ImportedAt: appliedAt, ImportedBy: by, PlanID: row.ID, Fingerprint: provFPs[i]}
		}
		if err := store.UpsertProvenance(ctx, tx, ps); err != nil {
			return err
		}
		res = CatalogApplyResult{PlanID: row.ID, Added: len(inserts), Changed: len(updates), Excluded: len(excluded),
			AppliedAt: appliedAt, Scheduled: scheduled}
		return nil
	})
	return res, priceRuleWriteError(err, "catalog plan "+req.PlanID)
}

// ListProvenance lists the provenance of imported rules, by rule id, a page at a time.
func (s *Service) ListProvenance(ctx context.Context, limit int, cursor string) (Page[store.Provenance], error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return Page[store.Provenance]{}, err
	}
	after, err := decodeCursor(cursor)
	if err != nil {
		return Page[store.Provenance]{}, err
	}
	ps, err := store.ListProvenance(ctx, s.pool, after, limit)
	if err != nil {
		return Page[store.Provenance]{}, storeError(err, "price rule provenance")
	}
	return page(ps, limit, func(p store.Provenance) int64 { return p.PriceRuleID }), nil
}

// GetProvenance reads the provenance of one rule (not found: the rule was not imported).
func (s *Service) GetProvenance(ctx context.Context, id int64) (store.Provenance, error) {
	if err := checkID(id, "id"); err != nil {
		return store.Provenance{}, err
	}
	p, err := store.GetProvenance(ctx, s.pool, id)
	return p, storeError(err, fmt.Sprintf("provenance of price rule %d", id))
}

// principalName names the caller for plans and provenance ("bootstrap" or the admin token's name).
func (s *Service) principalName(ctx context.Context, authorization string) string {
	p, err := s.Authenticate(ctx, authorization)
	if err != nil {
		return "unknown"
	}
	return p.Name
}

// PriceRuleHistory lists every version of a rule with the time range it was in force and its writer.
func (s *Service) PriceRuleHistory(ctx context.Context, id int64) ([]store.PriceRuleVersion, error) {
	if err := checkID(id, "id"); err != nil {
		return nil, err
	}
	vs, err := store.PriceRuleHistory(ctx, s.pool, id)
	return vs, storeError(err, fmt.Sprintf("history of price rule %d", id))
}
