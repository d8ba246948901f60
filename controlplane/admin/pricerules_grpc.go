package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/pricing"
)

func (g *grpcServer) ListPriceRules(ctx context.Context, req *adminv1.ListPriceRulesRequest) (*adminv1.ListPriceRulesResponse, error) {
	p, err := g.s.ListPriceRules(ctx, int(req.GetLimit()), req.GetCursor())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.ListPriceRulesResponse{NextCursor: p.NextCursor}
	for _, r := range p.Items {
		out.Items = append(out.Items, priceRuleToProto(r))
	}
	return out, nil
}

func (g *grpcServer) GetPriceRule(ctx context.Context, req *adminv1.GetPriceRuleRequest) (*adminv1.GetPriceRuleResponse, error) {
	r, err := g.s.GetPriceRule(ctx, req.GetId())
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.GetPriceRuleResponse{Rule: priceRuleToProto(r)}, nil
}

func (g *grpcServer) CreatePriceRule(ctx context.Context, req *adminv1.CreatePriceRuleRequest) (*adminv1.CreatePriceRuleResponse, error) {
	in := priceRuleInputFromProto(req.GetRule())
	if req.EffectiveAt != nil {
		if in.ID == 0 {
			return nil, g.err(ctx, invalidFields("invalid price rule", field("effective_at",
				"a new rule takes effect when created: create it disabled now and schedule enabling it")))
		}
		sp, err := g.schedule(ctx, in, req.GetEffectiveAt())
		if err != nil {
			return nil, err
		}
		return &adminv1.CreatePriceRuleResponse{Scheduled: sp}, nil
	}
	r, err := g.s.CreatePriceRule(ctx, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.CreatePriceRuleResponse{Rule: priceRuleToProto(r)}, nil
}

func (g *grpcServer) UpdatePriceRule(ctx context.Context, req *adminv1.UpdatePriceRuleRequest) (*adminv1.UpdatePriceRuleResponse, error) {
	in := priceRuleInputFromProto(req.GetRule())
	if req.EffectiveAt != nil {
		sp, err := g.schedule(ctx, in, req.GetEffectiveAt())
		if err != nil {
			return nil, err
		}
		return &adminv1.UpdatePriceRuleResponse{Scheduled: sp}, nil
	}
	r, err := g.s.UpdatePriceRule(ctx, in.ID, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.UpdatePriceRuleResponse{Rule: priceRuleToProto(r)}, nil
}

func (g *grpcServer) DeletePriceRule(ctx context.Context, req *adminv1.DeletePriceRuleRequest) (*adminv1.DeletePriceRuleResponse, error) {
	if err := g.s.DeletePriceRule(ctx, req.GetId()); err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.DeletePriceRuleResponse{}, nil
}

func (g *grpcServer) QuotePrice(ctx context.Context, req *adminv1.QuotePriceRequest) (*adminv1.QuotePriceResponse, error) {
	u := req.GetUsage()
	qr := QuoteRequest{ProviderID: req.ProviderId, Model: req.GetModel(), ServiceTier: req.GetServiceTier(),
		Usage: QuoteUsage{InputTokens: u.GetInput(), OutputTokens: u.GetOutput(), CacheReadTokens: u.GetCacheRead(),
			CacheCreation5mTokens: u.GetCacheCreation_5M(), CacheCreation30mTokens: u.GetCacheCreation_30M(),
			CacheCreation1hTokens: u.GetCacheCreation_1H(), ImageOutputTokens: u.GetImageOutput()}}
	if req.At != nil {
		at := req.GetAt().AsTime()
		qr.At = &at
	}
	q, err := g.s.Quote(ctx, qr)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	return &adminv1.QuotePriceResponse{PriceRuleId: q.PriceRuleID, Cost: q.Cost, CostMicros: q.CostMicros,
		Rates: &adminv1.Rates{InputPrice: q.Rates.InputPrice, OutputPrice: q.Rates.OutputPrice,
			CacheReadPrice: q.Rates.CacheReadPrice, CacheCreation_5MPrice: q.Rates.CacheCreation5mPrice,
			CacheCreation_30MPrice: q.Rates.CacheCreation30mPrice, CacheCreation_1HPrice: q.Rates.CacheCreation1hPrice,
			ImageOutputPrice: q.Rates.ImageOutputPrice},
		PromptTier: int32(q.PromptTier), ServiceTier: int32(q.ServiceTier)}, nil
}

// tierJSON is one pricing_tiers_json entry with the spec's keys.
type tierJSON struct {
	MinPromptTokens       *int64  `json:"min_prompt_tokens,omitempty"`
	ServiceTier           *string `json:"service_tier,omitempty"`
	Multiplier            *string `json:"multiplier,omitempty"`
	InputPrice            *string `json:"input_price,omitempty"`
	OutputPrice           *string `json:"output_price,omitempty"`
	CacheReadPrice        *string `json:"cache_read_price,omitempty"`
	CacheCreation5mPrice  *string `json:"cache_creation_5m_price,omitempty"`
	CacheCreation30mPrice *string `json:"cache_creation_30m_price,omitempty"`
	CacheCreation1hPrice  *string `json:"cache_creation_1h_price,omitempty"`
	ImageOutputPrice      *string `json:"image_output_price,omitempty"`
}

func tiersToJSON(ts []*configv1.TierEntry) json.RawMessage {
	out := make([]tierJSON, len(ts))
	for i, t := range ts {
		e := tierJSON{ServiceTier: t.ServiceTier, Multiplier: t.Multiplier, InputPrice: t.InputPrice,
			OutputPrice: t.OutputPrice, CacheReadPrice: t.CacheReadPrice, CacheCreation5mPrice: t.CacheCreation_5MPrice,
			CacheCreation30mPrice: t.CacheCreation_30MPrice, CacheCreation1hPrice: t.CacheCreation_1HPrice,
			ImageOutputPrice: t.ImageOutputPrice}
		if t.MinPromptTokens != 0 || t.ServiceTier == nil {
			n := t.MinPromptTokens
			e.MinPromptTokens = &n
		}
		out[i] = e
	}
	b, _ := json.Marshal(out) // plain strings and integers: cannot fail
	return b
}

// tiersFromJSON converts stored (validated) tier JSON; numbers written as JSON numbers keep their text.
func tiersFromJSON(raw json.RawMessage) []*configv1.TierEntry {
	var entries []map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&entries); err != nil {
		return nil
	}
	out := make([]*configv1.TierEntry, len(entries))
	for i, e := range entries {
		t := &configv1.TierEntry{}
		if v, ok := e["min_prompt_tokens"]; ok {
			n, _ := strconv.ParseInt(jsonText(v), 10, 64)
			t.MinPromptTokens = n
		}
		for key, dst := range map[string]**string{"service_tier": &t.ServiceTier, "multiplier": &t.Multiplier,
			"input_price": &t.InputPrice, "output_price": &t.OutputPrice, "cache_read_price": &t.CacheReadPrice,
			"cache_creation_5m_price": &t.CacheCreation_5MPrice, "cache_creation_30m_price": &t.CacheCreation_30MPrice,
			"cache_creation_1h_price": &t.CacheCreation_1HPrice, "image_output_price": &t.ImageOutputPrice} {
			if v, ok := e[key]; ok && string(v) != "null" {
				s := jsonText(v)
				*dst = &s
			}
		}
		out[i] = t
	}
	return out
}

// jsonText is a JSON string's value or a JSON number's literal text.
func jsonText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(v))
}

func priceRuleInputFromProto(r *configv1.PriceRule) PriceRuleInput {
	if r == nil {
		r = &configv1.PriceRule{}
	}
	enabled := r.Enabled
	return PriceRuleInput{Enabled: &enabled, RuleInput: pricing.RuleInput{ID: r.Id, ProviderID: r.ProviderId,
		MatchType: r.MatchType, ModelMatch: r.ModelMatch, InputPrice: r.InputPrice, OutputPrice: r.OutputPrice,
		CacheReadPrice: r.CacheReadPrice, CacheCreation5mPrice: r.CacheCreation_5MPrice,
		CacheCreation30mPrice: r.CacheCreation_30MPrice, CacheCreation1hPrice: r.CacheCreation_1HPrice,
		ImageOutputPrice: r.ImageOutputPrice, PricingTiersJSON: tiersToJSON(r.PricingTiersJson)}}
}

func priceRuleToProto(r store.PriceRule) *configv1.PriceRule {
	out := &configv1.PriceRule{Id: r.ID, ProviderId: r.ProviderID, MatchType: r.MatchType, ModelMatch: r.ModelMatch,
		InputPrice: r.InputPrice, OutputPrice: r.OutputPrice, CacheReadPrice: r.CacheReadPrice,
		CacheCreation_5MPrice: r.CacheCreation5mPrice, CacheCreation_30MPrice: r.CacheCreation30mPrice,
		CacheCreation_1HPrice: r.CacheCreation1hPrice, ImageOutputPrice: r.ImageOutputPrice, Enabled: r.Enabled,
		PricingTiersJson: tiersFromJSON(r.PricingTiersJSON)}
	if !r.UpdatedAt.IsZero() {
		out.UpdatedAt = timestamppb.New(r.UpdatedAt)
	}
	return out
}
