// Package reconcile proves the ledger against what the providers report (docs/reconciliation.md): importers
// fetch a provider's own usage and cost per UTC day (alpha organization usage and costs, beta usage and cost
// reports, or a CSV file), and a run compares them with the ledger's usage rows of that provider and day,
// grouped the provider's way, per token category and in cost, and stores the result.
package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
)

// Day is the length of a provider bucket; buckets are UTC days.
const Day = 24 * time.Hour

// Tokens are the token categories a report carries, disjoint as in the ledger (input is uncached input).
type Tokens struct {
	Input     int64 `json:"input_tokens"`
	Output    int64 `json:"output_tokens"`
	CacheRead int64 `json:"cache_read_tokens"`
	Cache5m   int64 `json:"cache_creation_5m_tokens"`
	Cache30m  int64 `json:"cache_creation_30m_tokens"`
	Cache1h   int64 `json:"cache_creation_1h_tokens"`
	ImageOut  int64 `json:"image_output_tokens"`
}

// Add adds o to t.
func (t *Tokens) Add(o Tokens) {
	t.Input += o.Input
	t.Output += o.Output
	t.CacheRead += o.CacheRead
	t.Cache5m += o.Cache5m
	t.Cache30m += o.Cache30m
	t.Cache1h += o.Cache1h
	t.ImageOut += o.ImageOut
}

// Sub returns t - o per category.
func (t Tokens) Sub(o Tokens) Tokens {
	return Tokens{t.Input - o.Input, t.Output - o.Output, t.CacheRead - o.CacheRead, t.Cache5m - o.Cache5m,
		t.Cache30m - o.Cache30m, t.Cache1h - o.Cache1h, t.ImageOut - o.ImageOut}
}

// Total is the sum of the categories.
func (t Tokens) Total() int64 {
	return t.Input + t.Output + t.CacheRead + t.Cache5m + t.Cache30m + t.Cache1h + t.ImageOut
}

// Categories lists the categories by name, in a fixed order.
func (t Tokens) Categories() []Category {
	return []Category{{"input", t.Input}, {"output", t.Output}, {"cache_read", t.CacheRead},
		{"cache_creation_5m", t.Cache5m}, {"cache_creation_30m", t.Cache30m}, {"cache_creation_1h", t.Cache1h},
		{"image_output", t.ImageOut}}
}

// Category is one named token count.
type Category struct {
	Name  string
	Value int64
}

// UsageRow is what a provider reports for one day and one group: its key and project (workspace), the
// model and the service tier. TokensReported is false when the provider reports only requests for the group
// (alpha's images usage counts images, not tokens).
type UsageRow struct {
	Day            time.Time
	KeyRef         string
	ProjectRef     string
	Model          string
	Tier           string
	Tokens         Tokens
	TokensReported bool
	Requests       int64
}

// CostRow is a provider's cost for one day, project (workspace) and model, in dollars.
type CostRow struct {
	Day        time.Time
	ProjectRef string
	Model      string
	Cost       *decimal.Big
}

// Report is what an importer fetched for the days [From, To).
type Report struct {
	From, To time.Time
	Usage    []UsageRow
	Costs    []CostRow
}

// Importer fetches a provider's own account of the whole UTC days [from, to). It returns every page or an
// error, never a partial report.
type Importer interface {
	// Kind names the report shape: "openai", "anthropic" or "csv" (it decides how ledger categories fold).
	Kind() string
	Import(ctx context.Context, from, to time.Time) (Report, error)
}

// utcDay truncates t to its UTC day.
func utcDay(t time.Time) time.Time { return t.UTC().Truncate(Day) }

// checkWindow refuses a window that is not whole UTC days, or is empty or longer than 31 days.
func checkWindow(from, to time.Time) error {
	if !from.Equal(utcDay(from)) || !to.Equal(utcDay(to)) {
		return fmt.Errorf("window %s–%s: must start and end at UTC midnight", from, to)
	}
	if !to.After(from) || to.Sub(from) > 31*Day {
		return fmt.Errorf("window %s–%s: must hold 1 to 31 days", from.Format(time.DateOnly), to.Format(time.DateOnly))
	}
	return nil
}

// zero returns an exact 0 (the pricing context: unlimited precision).
func zero() *decimal.Big {
	z, _ := pricing.ParseDecimal("0")
	return z
}

// perMillion is 10^-6: per-million price × tokens × perMillion = dollars.
var perMillion = decimal.New(1, 6)

// decimalInt is n as an exact decimal.
func decimalInt(n int64) *decimal.Big { return decimal.New(n, 0) }
