package admin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/usage"
)

// PriceRuleInput is a price rule as written by a client: pricing.RuleInput (the spec's fields), with
// enabled required — a pointer, to tell absent from false; it hides the embedded Enabled in JSON — and an
// id that, when non-zero, names the rule to upsert. EffectiveAt, when set, makes the write a scheduled
// version of the existing rule id, in force from that future instant (SchedulePriceRule).
type PriceRuleInput struct {
	pricing.RuleInput
	Enabled     *bool      `json:"enabled"`
	EffectiveAt *time.Time `json:"effective_at,omitempty"`
}

// validate checks the rule with the pricing engine's own parser and returns the row to store, or
// every problem found (field and tier index).
func (in PriceRuleInput) validate() (store.PriceRule, []Detail) {
	details := idDetails("id", in.ID)
	if in.Enabled == nil {
		details = append(details, field("enabled", "required (true or false)"))
	}
	tiers := bytes.TrimSpace(in.PricingTiersJSON)
	if len(tiers) == 0 || bytes.Equal(tiers, []byte("null")) {
		tiers = []byte("[]")
	}
	ri := in.RuleInput
	ri.Enabled, ri.PricingTiersJSON = in.Enabled != nil && *in.Enabled, json.RawMessage(tiers)
	if in.ProviderID != nil && *in.ProviderID == 0 {
		details = append(details, field("provider_id", "must be a positive provider id, or null for a global rule"))
	}
	if _, err := pricing.ParseRule(ri); err != nil {
		verr, ok := err.(*pricing.ValidationError)
		if !ok {
			details = append(details, Detail{Message: err.Error()})
		} else {
			for _, p := range verr.Problems {
				d := Detail{Field: p.Field, Message: p.Message}
				if p.TierIndex >= 0 {
					d.TierIndex = intp(p.TierIndex)
				}
				details = append(details, d)
			}
		}
	}
	if len(details) == 0 {
		// The snapshot compiler's own check, on the rule as the snapshot reader will carry it.
		details = checkPriceRuleMessage(ri)
	}
	if len(details) > 0 {
		return store.PriceRule{}, details
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, tiers); err != nil {
		return store.PriceRule{}, []Detail{field("pricing_tiers_json", "%v", err)}
	}
	return store.PriceRule{RuleInput: pricing.RuleInput{ID: in.ID, ProviderID: in.ProviderID, MatchType: in.MatchType, ModelMatch: in.ModelMatch,
		InputPrice: in.InputPrice, OutputPrice: in.OutputPrice, CacheReadPrice: in.CacheReadPrice,
		CacheCreation5mPrice: in.CacheCreation5mPrice, CacheCreation30mPrice: in.CacheCreation30mPrice,
		CacheCreation1hPrice: in.CacheCreation1hPrice, ImageOutputPrice: in.ImageOutputPrice,
		Enabled: *in.Enabled, PricingTiersJSON: compact.Bytes()}}, nil
}

// Page is one page of a list.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// Page size bounds.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// pageLimit normalises a requested page size.
func pageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n < 0 || n > MaxPageSize:
		return 0, errorf(CodeInvalid, "limit must be between 1 and %d, got %d", MaxPageSize, n)
	}
	return n, nil
}

// Cursors are opaque: base64url of the last id seen ("keyset" pagination).
func encodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(id, 10)))
}

func decodeCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if id, err := strconv.ParseInt(string(b), 10, 64); err == nil && id > 0 {
			return id, nil
		}
	}
	return 0, errorf(CodeInvalid, "cursor %q is not a cursor this API returned", c)
}

// page fills NextCursor when a full page came back.
func page[T any](items []T, limit int, id func(T) int64) Page[T] {
	p := Page[T]{Items: items}
	if p.Items == nil {
		p.Items = []T{}
	}
	if len(items) == limit && limit > 0 {
		p.NextCursor = encodeCursor(id(items[len(items)-1]))
	}
	return p
}

// ListPriceRules lists price rules in id order, a page at a time.
func (s *Service) ListPriceRules(ctx context.Context, limit int, cursor string) (Page[store.PriceRule], error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return Page[store.PriceRule]{}, err
	}
	after, err := decodeCursor(cursor)
	if err != nil {
		return Page[store.PriceRule]{}, err
	}
	rules, err := store.ListPriceRules(ctx, s.pool, after, limit)
	if err != nil {
		return Page[store.PriceRule]{}, storeError(err, "price rules")
	}
	return page(rules, limit, func(r store.PriceRule) int64 { return r.ID }), nil
}

// GetPriceRule reads one rule.
func (s *Service) GetPriceRule(ctx context.Context, id int64) (store.PriceRule, error) {
	if err := checkID(id, "id"); err != nil {
		return store.PriceRule{}, err
	}
	r, err := store.GetPriceRule(ctx, s.pool, id)
	return r, storeError(err, fmt.Sprintf("price rule %d", id))
}

// CreatePriceRule creates a rule, or inserts/replaces the rule with in.ID when it is set.
func (s *Service) CreatePriceRule(ctx context.Context, in PriceRuleInput) (store.PriceRule, error) {
	if in.EffectiveAt != nil {
		return store.PriceRule{}, invalidFields("invalid price rule", field("effective_at", "a scheduled version is written with SchedulePriceRule"))
	}
	row, details := in.validate()
	if details != nil {
		return store.PriceRule{}, invalidFields("invalid price rule", details...)
	}
	var r store.PriceRule
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = store.UpsertPriceRule(ctx, tx, row)
		return err
	})
	return r, priceRuleWriteError(err, "price rule")
}

// UpdatePriceRule replaces the existing rule id (in.ID must be 0 or id).
func (s *Service) UpdatePriceRule(ctx context.Context, id int64, in PriceRuleInput) (store.PriceRule, error) {
	if err := checkID(id, "id"); err != nil {
		return store.PriceRule{}, err
	}
	if in.ID != 0 && in.ID != id {
		return store.PriceRule{}, invalidFields("invalid price rule", field("id", "body id %d does not match path id %d", in.ID, id))
	}
	in.ID = id
	if in.EffectiveAt != nil {
		return store.PriceRule{}, invalidFields("invalid price rule", field("effective_at", "a scheduled version is written with SchedulePriceRule"))
	}
	row, details := in.validate()
	if details != nil {
		return store.PriceRule{}, invalidFields("invalid price rule", details...)
	}
	var r store.PriceRule
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = store.UpdatePriceRule(ctx, tx, row)
		return err
	})
	return r, priceRuleWriteError(err, fmt.Sprintf("price rule %d", id))
}

// DeletePriceRule deletes a rule.
func (s *Service) DeletePriceRule(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.DeletePriceRule(ctx, tx, id) }),
		fmt.Sprintf("price rule %d", id))
}

// QuoteRequest asks what a usage would cost (POST /admin/price-rules/quote).
type QuoteRequest struct {
	ProviderID  *int64     `json:"provider_id"`
	Model       string     `json:"model"`
	ServiceTier string     `json:"service_tier"`
	Usage       QuoteUsage `json:"usage"`
	// At prices with the rules in force at that time (price history); absent: the current rules.
	At *time.Time `json:"at,omitempty"`
}

// QuoteUsage carries the seven token categories.
type QuoteUsage struct {
	InputTokens            int64 `json:"input_tokens"`
	OutputTokens           int64 `json:"output_tokens"`
	CacheReadTokens        int64 `json:"cache_read_tokens"`
	CacheCreation5mTokens  int64 `json:"cache_creation_5m_tokens"`
	CacheCreation30mTokens int64 `json:"cache_creation_30m_tokens"`
	CacheCreation1hTokens  int64 `json:"cache_creation_1h_tokens"`
	ImageOutputTokens      int64 `json:"image_output_tokens"`
}

// Rates are effective per-million prices, as decimal strings.
type Rates struct {
	InputPrice            string `json:"input_price"`
	OutputPrice           string `json:"output_price"`
	CacheReadPrice        string `json:"cache_read_price"`
	CacheCreation5mPrice  string `json:"cache_creation_5m_price"`
	CacheCreation30mPrice string `json:"cache_creation_30m_price"`
	CacheCreation1hPrice  string `json:"cache_creation_1h_price"`
	ImageOutputPrice      string `json:"image_output_price"`
}

// QuoteResult says what the usage costs, under which rule (0: none matched, cost 0) and which
// pricing_tiers_json entries applied (-1: none).
type QuoteResult struct {
	PriceRuleID int64  `json:"price_rule_id"`
	Cost        string `json:"cost"`
	CostMicros  int64  `json:"cost_micros"`
	Rates       Rates  `json:"rates"`
	PromptTier  int    `json:"prompt_tier"`
	ServiceTier int    `json:"service_tier"`
}

// Quote prices a usage against the current enabled rules with the data plane's engine
// (pricing.NewIndex, Resolve, Quote). The index is rebuilt only when config_revision moved.
func (s *Service) Quote(ctx context.Context, req QuoteRequest) (QuoteResult, error) {
	var details []Detail
	if req.ProviderID != nil && *req.ProviderID <= 0 {
		details = append(details, field("provider_id", "must be a positive provider id or null, got %d", *req.ProviderID))
	}
	if req.Model == "" {
		details = append(details, field("model", "required"))
	}
	u := req.Usage
	for name, n := range map[string]int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_read_tokens": u.CacheReadTokens, "cache_creation_5m_tokens": u.CacheCreation5mTokens,
		"cache_creation_30m_tokens": u.CacheCreation30mTokens, "cache_creation_1h_tokens": u.CacheCreation1hTokens,
		"image_output_tokens": u.ImageOutputTokens} {
		if n < 0 {
			details = append(details, field("usage."+name, "must not be negative, got %d", n))
		}
	}
	if details != nil {
		return QuoteResult{}, invalidFields("invalid quote request", details...)
	}
	idx, err := s.quoteIndexAt(ctx, req.At)
	if err != nil {
		return QuoteResult{}, err
	}
	var pid int64
	if req.ProviderID != nil {
		pid = *req.ProviderID
	}
	q := pricing.QuoteFor(idx.Resolve(pid, req.Model), usage.Usage{Input: u.InputTokens, Output: u.OutputTokens,
		CacheRead: u.CacheReadTokens, CacheCreation5m: u.CacheCreation5mTokens, CacheCreation30m: u.CacheCreation30mTokens,
		CacheCreation1h: u.CacheCreation1hTokens, ImageOutput: u.ImageOutputTokens}, req.ServiceTier)
	f := pricing.FormatDecimal
	return QuoteResult{PriceRuleID: q.RuleID, Cost: f(q.Cost), CostMicros: q.Micros,
		Rates: Rates{InputPrice: f(q.Rates[pricing.CatInput]), OutputPrice: f(q.Rates[pricing.CatOutput]),
			CacheReadPrice: f(q.Rates[pricing.CatCacheRead]), CacheCreation5mPrice: f(q.Rates[pricing.CatCacheCreation5m]),
			CacheCreation30mPrice: f(q.Rates[pricing.CatCacheCreation30m]), CacheCreation1hPrice: f(q.Rates[pricing.CatCacheCreation1h]),
			ImageOutputPrice: f(q.Rates[pricing.CatImageOutput])},
		PromptTier: q.PromptTier, ServiceTier: q.ServiceTier}, nil
}

// quoteIndexNow returns the pricing index of the current revision, reading the revision and the
// enabled rules in one repeatable-read transaction so the pair is consistent.
func (s *Service) quoteIndexNow(ctx context.Context) (*pricing.Index, error) {
	s.quoteMu.Lock()
	defer s.quoteMu.Unlock()
	var idx *pricing.Index
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rev, err := store.Revision(ctx, tx)
		if err != nil {
			return err
		}
		if s.quoteIndex != nil && rev == s.quoteRev {
			idx = s.quoteIndex
			return nil
		}
		rows, err := store.AllPriceRules(ctx, tx, true)
		if err != nil {
			return err
		}
		rules := make([]*pricing.Rule, 0, len(rows))
		for _, r := range rows {
			pr, err := pricing.ParseRule(r.RuleInput)
			if err != nil {
				// Never reachable through this API (every write validates); the snapshot skips it too.
				s.log.Warn("stored price rule does not parse; ignored for quotes", "price_rule_id", r.ID, "err", err)
				continue
			}
			rules = append(rules, pr)
		}
		idx = pricing.NewIndex(rules)
		s.quoteIndex, s.quoteRev = idx, rev
		return nil
	})
	if err != nil {
		return nil, storeError(err, "price rules")
	}
	return idx, nil
}
