package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/shared/pricing"
)

// OpenAI imports the alpha provider's organization usage (completions, embeddings, images) grouped by
// project, API key, model and service tier, and its costs grouped by project and line item, with an admin
// key. Alpha's input_tokens include cached input; the importer reports the uncached part as Input and the
// cached part as CacheRead. Alpha reports no cache writes: they are inside its input (the run folds the
// ledger's cache creation into input for this kind). Images usage counts images and requests, not tokens.
type OpenAI struct {
	BaseURL  string // e.g. https://api.openai.com
	AdminKey string
	Fetcher  *Fetcher
	// PageDays is the buckets asked per page (limit) [31].
	PageDays int
}

// Kind implements Importer.
func (o *OpenAI) Kind() string { return KindOpenAI }

// Importer kinds.
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
	KindCSV       = "csv"
)

type openaiPage struct {
	Data []struct {
		StartTime int64             `json:"start_time"`
		EndTime   int64             `json:"end_time"`
		Results   []openaiUsageItem `json:"results"`
	} `json:"data"`
	HasMore  bool   `json:"has_more"`
	NextPage string `json:"next_page"`
}

type openaiUsageItem struct {
	Object            string      `json:"object"`
	InputTokens       int64       `json:"input_tokens"`
	InputCachedTokens int64       `json:"input_cached_tokens"`
	OutputTokens      int64       `json:"output_tokens"`
	Requests          int64       `json:"num_model_requests"`
	Images            int64       `json:"images"`
	ProjectID         *string     `json:"project_id"`
	APIKeyID          *string     `json:"api_key_id"`
	Model             *string     `json:"model"`
	ServiceTier       *string     `json:"service_tier"`
	LineItem          *string     `json:"line_item"`
	Amount            *costAmount `json:"amount"`
}

type costAmount struct {
	Value    json.Number `json:"value"`
	Currency string      `json:"currency"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Import implements Importer.
func (o *OpenAI) Import(ctx context.Context, from, to time.Time) (Report, error) {
	if err := checkWindow(from, to); err != nil {
		return Report{}, err
	}
	rep := Report{From: from, To: to}
	for _, ep := range []string{"completions", "embeddings", "images"} {
		err := o.pages(ctx, "/v1/organization/usage/"+ep, from, to,
			[]string{"project_id", "api_key_id", "model", "service_tier"}, func(day time.Time, it openaiUsageItem) error {
				row := UsageRow{Day: day, KeyRef: str(it.APIKeyID), ProjectRef: str(it.ProjectID), Model: str(it.Model),
					Tier: str(it.ServiceTier), Requests: it.Requests, TokensReported: ep != "images"}
				if it.InputCachedTokens > it.InputTokens || it.InputCachedTokens < 0 || it.OutputTokens < 0 || it.Requests < 0 {
					return fmt.Errorf("%s: impossible counts (input %d, cached %d, output %d)", ep, it.InputTokens, it.InputCachedTokens, it.OutputTokens)
				}
				row.Tokens.Input = it.InputTokens - it.InputCachedTokens
				row.Tokens.CacheRead = it.InputCachedTokens
				row.Tokens.Output = it.OutputTokens
				rep.Usage = append(rep.Usage, row)
				return nil
			})
		if err != nil {
			return Report{}, err
		}
	}
	err := o.pages(ctx, "/v1/organization/costs", from, to, []string{"project_id", "line_item"}, func(day time.Time, it openaiUsageItem) error {
		if it.Amount == nil {
			return nil
		}
		if c := strings.ToLower(it.Amount.Currency); c != "usd" {
			return fmt.Errorf("costs: currency %q, only usd is reconciled", it.Amount.Currency)
		}
		cost, err := pricing.ParseNumberLiteral(it.Amount.Value.String())
		if err != nil {
			return fmt.Errorf("costs: amount %q: %w", it.Amount.Value, err)
		}
		// A line item is "<model>, <what>"; the model is what is reconciled.
		model, _, _ := strings.Cut(str(it.LineItem), ", ")
		rep.Costs = append(rep.Costs, CostRow{Day: day, ProjectRef: str(it.ProjectID), Model: model, Cost: cost})
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	return rep, nil
}

// pages walks every page of one endpoint for [from, to), calling fn per result.
func (o *OpenAI) pages(ctx context.Context, path string, from, to time.Time, groupBy []string, fn func(time.Time, openaiUsageItem) error) error {
	limit := o.PageDays
	if limit <= 0 || limit > 31 {
		limit = 31
	}
	q := url.Values{"start_time": {strconv.FormatInt(from.Unix(), 10)}, "end_time": {strconv.FormatInt(to.Unix(), 10)},
		"bucket_width": {"1d"}, "group_by": groupBy, "limit": {strconv.Itoa(limit)}}
	headers := map[string]string{"Authorization": "Bearer " + o.AdminKey}
	return walkDays(path, from, to, q, func(q url.Values) (dayBuckets[openaiUsageItem], error) {
		var page openaiPage
		if err := o.Fetcher.GetJSON(ctx, o.BaseURL, path, q, headers, &page); err != nil {
			return dayBuckets[openaiUsageItem]{}, err
		}
		out := dayBuckets[openaiUsageItem]{hasMore: page.HasMore, nextPage: page.NextPage}
		for _, b := range page.Data {
			out.starts, out.results = append(out.starts, time.Unix(b.StartTime, 0)), append(out.results, b.Results)
		}
		return out, nil
	}, fn)
}
