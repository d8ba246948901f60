package mockupstream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/pricing"
)

// The mock's billing: every generate, embedding and image answer it completes with a 2xx status is
// billed — its model, key, served tier and tokens per category, exactly as its usage reported them — and
// the provider admin endpoints (admin.go) report these bills, so a gateway that recorded the same answers
// reconciles to zero drift. Bills are kept until Reset, and not at all when Options.MaxRecords is negative.

// ProjectID and WorkspaceID are the provider-side project (alpha) and workspace (beta) of every key.
const (
	ProjectID   = "proj_mock"
	WorkspaceID = "wrkspc_mock"
)

// KeyID is the provider-side id of an API key as the admin reports name it: "key_" + the first 16 hex
// digits of its SHA-256. An operator maps each gateway credential to it.
func KeyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key_" + hex.EncodeToString(sum[:8])
}

// Billing endpoints: which admin report a bill appears in.
const (
	EndpointCompletions = "completions" // alpha chat completions and responses
	EndpointEmbeddings  = "embeddings"
	EndpointImages      = "images"
	EndpointMessages    = "messages" // beta messages
	// EndpointGenerateContent is gamma generateContent and streamGenerateContent: no admin report API
	// serves it (as for Gemini); the billing export (export.go) does.
	EndpointGenerateContent = "generate_content"
)

// Bill is one billed answer.
type Bill struct {
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// Provider is the cloud that served it (ProviderBedrock, ProviderVertex, ProviderAzure); empty for the
	// first-party APIs. The first-party admin reports leave cloud bills out; the billing export selects a
	// provider's bills with ?provider=.
	Provider  string `json:"provider,omitempty"`
	Endpoint  string `json:"endpoint"`
	APIKey    string `json:"api_key"`
	Model     string `json:"model"`
	Tier      string `json:"tier"`
	Input     int64  `json:"input_tokens"` // uncached input
	Output    int64  `json:"output_tokens"`
	CacheRead int64  `json:"cache_read_tokens"`
	Cache5m   int64  `json:"cache_creation_5m_tokens"`
	Cache30m  int64  `json:"cache_creation_30m_tokens"`
	Cache1h   int64  `json:"cache_creation_1h_tokens"`
	ImageOut  int64  `json:"image_output_tokens"`
	Images    int64  `json:"images"`
	Requests  int64  `json:"requests"`
	// Batch is the batch whose line this answer was (its tier is BatchTier); empty for a plain request.
	Batch string `json:"batch,omitempty"`
}

// Price is a model's per-million-token prices, exact decimal strings ("" = 0). The mock's admin cost
// reports price bills with them.
type Price struct {
	Input     string `json:"input"`
	Output    string `json:"output"`
	CacheRead string `json:"cache_read"`
	Cache5m   string `json:"cache_creation_5m"`
	Cache30m  string `json:"cache_creation_30m"`
	Cache1h   string `json:"cache_creation_1h"`
	ImageOut  string `json:"image_output"`
}

// billedAtHeader dates a bill (RFC 3339) instead of the time it was answered, so tests can fill past days.
const billedAtHeader = "x-mock-billed-at"

// billFor records b, the bill of the exchange's answer (its token and image counts), dated and keyed;
// finish keeps it when the answer completed.
func (x *exchange) billFor(endpoint, tier string, b Bill) {
	at := time.Now()
	if v := x.r.Header.Get(billedAtHeader); v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			at = t
		}
	}
	b.At, b.Endpoint, b.APIKey, b.Model, b.Tier, b.Requests = at.UTC(), endpoint, x.key, x.model, tier, 1
	b.Provider = x.cloud
	b.Input = max(b.Input, 0)
	x.bill = &b
}

// billPlan bills a generate answer's plan: uncached input, cache reads, cache writes and output. The cache
// writes are billed with the lifetime of the dialect's cache, as the gateway prices them: alpha's cache
// (cache_write_tokens) lives 30 minutes, beta's (cache_creation.ephemeral_5m_input_tokens) 5 minutes.
// Gamma reports no cache writes: its prompt less its cached tokens is input.
func (x *exchange) billPlan(endpoint, tier string, p *plan) {
	x.billFor(endpoint, tier, planBill(endpoint, p))
}

// planBill is the bill of a whole answer to p.
func planBill(endpoint string, p *plan) Bill {
	b := Bill{Input: int64(p.prompt - p.cacheRead - p.cacheWrite), Output: int64(p.output), CacheRead: int64(p.cacheRead)}
	switch endpoint {
	case EndpointCompletions:
		b.Cache30m = int64(p.cacheWrite)
	case EndpointMessages, EndpointConverse:
		b.Cache5m = int64(p.cacheWrite)
	case EndpointGenerateContent:
		b.Input = int64(p.prompt - p.cacheRead)
	}
	return b
}

// keepBillLocked stores x's bill as settleBill (cutbill.go) left it: an answer delivered whole with a 2xx
// status, or a stream cut short. Called under s.mu.
func (s *Server) keepBillLocked(x *exchange) {
	// A mock that records nothing (MaxRecords < 0: benchmarks, load tests) keeps no bills either: they
	// would grow without bound.
	if s.opts.MaxRecords < 0 || x.bill == nil {
		return
	}
	s.billSeq++
	b := *x.bill
	b.Seq = s.billSeq
	s.bills = append(s.bills, b)
}

// Bills returns copies of every bill since the last Reset, oldest first.
func (s *Server) Bills() []Bill {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Bill(nil), s.bills...)
}

// ReconcileControls steer the admin reports: drift to inject and faults to answer with. The zero value is
// an honest provider.
type ReconcileControls struct {
	// Drop leaves the first Drop bills (by sequence) out of every report: requests the provider lost.
	Drop int `json:"drop,omitempty"`
	// UnderReport reports one category (UnderReportCategories) at Percent percent less, rounded down, per
	// reported group.
	UnderReport *UnderReport `json:"under_report,omitempty"`
	// PriceMultiplier prices a model's bills at its price × the multiplier (an exact decimal string): the
	// provider changed its price.
	PriceMultiplier map[string]string `json:"price_multiplier,omitempty"`
	// LateDays (YYYY-MM-DD, UTC) are reported empty: their data has not arrived yet.
	LateDays []string `json:"late_days,omitempty"`
	// RateLimit answers the next RateLimit admin calls 429 with Retry-After: RetryAfter seconds (default 1).
	RateLimit  int `json:"rate_limit,omitempty"`
	RetryAfter int `json:"retry_after,omitempty"`
	// ServerError answers the next ServerError admin calls 500.
	ServerError int `json:"server_error,omitempty"`
	// CutPage cuts the next CutPage admin answers halfway through their body (the connection closes).
	CutPage int `json:"cut_page,omitempty"`
}

// UnderReportCategories are the categories UnderReport may name. A report shows a category only where
// its shape has it: alpha's usage reports fold every cache write into input (under-reporting a cache-write
// category there changes nothing; under-report input), beta's have no 30-minute writes; the billing export
// (export.go) has them all.
var UnderReportCategories = []string{"input", "output", "cache_read", "cache_creation_5m", "cache_creation_30m",
	"cache_creation_1h", "image_output"}

// UnderReport is one under-reported category.
type UnderReport struct {
	Category string `json:"category"`
	Percent  int64  `json:"percent"`
}

// SetReconcile replaces the reconciliation controls (also PUT /_mock/reconcile).
func (s *Server) SetReconcile(c ReconcileControls) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recon = c
}

// SetProjects puts API keys in projects (alpha) and workspaces (beta) of their own: key → id. Keys not
// listed are in ProjectID / WorkspaceID.
func (s *Server) SetProjects(p map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.projects = p
}

// projectOf is the project (or workspace, beta) of a key. Called with the bills' snapshot of projects.
func projectOf(projects map[string]string, key string, beta bool) string {
	if p, ok := projects[key]; ok {
		return p
	}
	if beta {
		return WorkspaceID
	}
	return ProjectID
}

// SetPrices replaces the price list the cost reports use (also Options.Prices).
func (s *Server) SetPrices(p map[string]Price) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prices = p
}

// takeFault consumes one pending admin fault: the status to answer (0 = none) and whether to cut the page.
func (s *Server) takeFault() (status int, retryAfter int, cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.recon
	switch {
	case c.RateLimit > 0:
		c.RateLimit--
		return http.StatusTooManyRequests, max(c.RetryAfter, 1), false
	case c.ServerError > 0:
		c.ServerError--
		return http.StatusInternalServerError, 0, false
	case c.CutPage > 0:
		c.CutPage--
		return 0, 0, true
	}
	return 0, 0, false
}

// reportedBills returns provider's bills ("" = first party) of [from, to) with endpoint in endpoints, after Drop and LateDays, and
// the controls and prices in force.
func (s *Server) reportedBills(provider string, from, to time.Time, endpoints ...string) ([]Bill, ReconcileControls, map[string]Price, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	late := map[string]bool{}
	for _, d := range s.recon.LateDays {
		late[d] = true
	}
	var out []Bill
	for _, b := range s.bills {
		if b.Provider != provider || b.Seq <= int64(s.recon.Drop) || b.At.Before(from) || !b.At.Before(to) || late[b.At.Format(time.DateOnly)] {
			continue
		}
		for _, e := range endpoints {
			if b.Endpoint == e {
				out = append(out, b)
				break
			}
		}
	}
	return out, s.recon, s.prices, s.projects
}

// underReport applies c's UnderReport to a category's total.
func underReport(c ReconcileControls, category string, v int64) int64 {
	if c.UnderReport == nil || c.UnderReport.Category != category || c.UnderReport.Percent <= 0 {
		return v
	}
	return v - v*c.UnderReport.Percent/100
}

// categoryCost is tokens × the per-million price × the model's multiplier, exact.
func categoryCost(c ReconcileControls, prices map[string]Price, model string, tokens int64, pick func(Price) string) (*decimal.Big, error) {
	out, _ := pricing.ParseDecimal("0")
	p, ok := prices[model]
	if !ok || tokens == 0 {
		return out, nil
	}
	s := pick(p)
	if s == "" {
		return out, nil
	}
	rate, err := pricing.ParseDecimal(s)
	if err != nil {
		return nil, fmt.Errorf("price of %s: %w", model, err)
	}
	if m, ok := c.PriceMultiplier[model]; ok {
		mul, err := pricing.ParseDecimal(m)
		if err != nil {
			return nil, fmt.Errorf("price multiplier of %s: %w", model, err)
		}
		rate.Mul(rate, mul)
	}
	out.Mul(rate, decimal.New(tokens, 0))
	out.Mul(out, decimal.New(1, 6))
	return out, nil
}

// costCategories are the priced categories in report order: name, token count, price.
func costCategories(b Bill) []struct {
	name   string
	tokens int64
	price  func(Price) string
} {
	return []struct {
		name   string
		tokens int64
		price  func(Price) string
	}{
		{"input", b.Input, func(p Price) string { return p.Input }},
		{"cache_read", b.CacheRead, func(p Price) string { return p.CacheRead }},
		{"cache_creation_5m", b.Cache5m, func(p Price) string { return p.Cache5m }},
		{"cache_creation_30m", b.Cache30m, func(p Price) string { return p.Cache30m }},
		{"cache_creation_1h", b.Cache1h, func(p Price) string { return p.Cache1h }},
		{"output", b.Output, func(p Price) string { return p.Output }},
		{"image_output", b.ImageOut, func(p Price) string { return p.ImageOut }},
	}
}
