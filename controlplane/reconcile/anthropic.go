package reconcile

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
)

// Anthropic imports the beta provider's messages usage report grouped by API key, workspace, model and
// service tier (uncached input, cache reads, 5-minute and 1-hour cache creation, output) and its cost report
// grouped by workspace and description (amounts in cents), with an admin key.
type Anthropic struct {
	BaseURL  string // e.g. https://api.anthropic.com
	AdminKey string
	Version  string // anthropic-version header [2023-06-01]
	Fetcher  *Fetcher
	PageDays int // buckets per page [31]
}

// Kind implements Importer.
func (a *Anthropic) Kind() string { return KindAnthropic }

type anthropicPage struct {
	Data []struct {
		StartingAt time.Time       `json:"starting_at"`
		EndingAt   time.Time       `json:"ending_at"`
		Results    []anthropicItem `json:"results"`
	} `json:"data"`
	HasMore  bool   `json:"has_more"`
	NextPage string `json:"next_page"`
}

type anthropicItem struct {
	UncachedInput int64 `json:"uncached_input_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
	CacheCreation struct {
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	Output      int64   `json:"output_tokens"`
	APIKeyID    *string `json:"api_key_id"`
	WorkspaceID *string `json:"workspace_id"`
	Model       *string `json:"model"`
	ServiceTier *string `json:"service_tier"`
	// Cost report fields.
	Amount   *string `json:"amount"`
	Currency string  `json:"currency"`
	CostType *string `json:"cost_type"`
}

// centsPerDollar converts the cost report's cents.
var centsPerDollar = decimal.New(1, 2) // 0.01

// Import implements Importer.
func (a *Anthropic) Import(ctx context.Context, from, to time.Time) (Report, error) {
	if err := checkWindow(from, to); err != nil {
		return Report{}, err
	}
	rep := Report{From: from, To: to}
	err := a.pages(ctx, "/v1/organizations/usage_report/messages", from, to,
		[]string{"api_key_id", "workspace_id", "model", "service_tier"}, func(day time.Time, it anthropicItem) error {
			t := Tokens{Input: it.UncachedInput, Output: it.Output, CacheRead: it.CacheRead,
				Cache5m: it.CacheCreation.Ephemeral5m, Cache1h: it.CacheCreation.Ephemeral1h}
			for _, c := range t.Categories() {
				if c.Value < 0 {
					return fmt.Errorf("negative %s (%d)", c.Name, c.Value)
				}
			}
			rep.Usage = append(rep.Usage, UsageRow{Day: day, KeyRef: str(it.APIKeyID), ProjectRef: str(it.WorkspaceID),
				Model: str(it.Model), Tier: str(it.ServiceTier), Tokens: t, TokensReported: true})
			return nil
		})
	if err != nil {
		return Report{}, err
	}
	err = a.pages(ctx, "/v1/organizations/cost_report", from, to, []string{"workspace_id", "description"}, func(day time.Time, it anthropicItem) error {
		if it.Amount == nil {
			return nil
		}
		if !strings.EqualFold(it.Currency, "USD") {
			return fmt.Errorf("currency %q, only USD is reconciled", it.Currency)
		}
		cents, err := pricing.ParseDecimal(*it.Amount)
		if err != nil {
			return fmt.Errorf("amount %q: %w", *it.Amount, err)
		}
		cost := zero()
		cost.Mul(cents, centsPerDollar)
		rep.Costs = append(rep.Costs, CostRow{Day: day, ProjectRef: str(it.WorkspaceID), Model: str(it.Model), Cost: cost})
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	return rep, nil
}

func (a *Anthropic) pages(ctx context.Context, path string, from, to time.Time, groupBy []string, fn func(time.Time, anthropicItem) error) error {
	limit := a.PageDays
	if limit <= 0 || limit > 31 {
		limit = 31
	}
	version := a.Version
	if version == "" {
		version = "2023-06-01"
	}
	q := url.Values{"starting_at": {from.Format(time.RFC3339)}, "ending_at": {to.Format(time.RFC3339)},
		"bucket_width": {"1d"}, "group_by[]": groupBy, "limit": {strconv.Itoa(limit)}}
	headers := map[string]string{"x-api-key": a.AdminKey, "anthropic-version": version}
	return walkDays(path, from, to, q, func(q url.Values) (dayBuckets[anthropicItem], error) {
		var page anthropicPage
		if err := a.Fetcher.GetJSON(ctx, a.BaseURL, path, q, headers, &page); err != nil {
			return dayBuckets[anthropicItem]{}, err
		}
		out := dayBuckets[anthropicItem]{hasMore: page.HasMore, nextPage: page.NextPage}
		for _, b := range page.Data {
			out.starts, out.results = append(out.starts, b.StartingAt), append(out.results, b.Results)
		}
		return out, nil
	}, fn)
}
