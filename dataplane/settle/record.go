package settle

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/types/known/timestamppb"

	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Outcome is how one dispatched request ended: everything BuildRecord needs. The proxy fills it once,
// when the request is over (response relayed, upstream failed, or client gone).
type Outcome struct {
	RequestID string
	// Start is when the request arrived (the record's created_at).
	Start time.Time
	// Dimensions. TeamID 0 means the user has no team; RouteID 0 a scoped-provider request.
	KeyID, UserID, TeamID, OrgID      int64
	RouteID, ProviderID, CredentialID int64
	LogicalModel, UpstreamModel       string
	Operation                         vocab.Operation
	InboundKind                       vocab.Kind
	Implementation                    vocab.Implementation
	DestKind                          vocab.Kind
	SnapshotVersion                   int64
	// Rule is the compiled price rule for (provider, upstream model); nil when none matched (cost 0).
	Rule *pricing.Rule
	// RequestedTier is the tier the request body names (the proxy's tierOf of its one reading).
	RequestedTier string
	// Upstream is the usage the upstream reported, as its dialect package bills it (a body's usage members,
	// or a stream's latest cumulative value); UpstreamFound is false when it reported none. Upstream.ReportedTier is the
	// tier the upstream says it served (body, usage object or x-gamma-service-tier header).
	Upstream      usage.Usage
	UpstreamFound bool
	// Local is the usage counted locally (tokencount) when the upstream reported none; nil if not
	// counted (tokenizer compiled out, or the dialect is not countable).
	Local *usage.Usage
	// EstimateTokens is the admission estimate of input tokens: the last resort for a generation
	// request that consumed upstream work without reporting usage.
	EstimateTokens int64
	EndState       vocab.EndState
	HTTPStatus     int
	// Latency is the whole request; FirstByte the time to the first byte relayed (0: none).
	Latency, FirstByte time.Duration
	// Priced, when not nil, is Price of this outcome, already computed (the cost the caller was told in the
	// answer's headers): BuildRecord takes it instead of pricing again. The caller sets it only when every
	// input of the price is the one it was computed from.
	Priced *Priced
}

// Priced is what BuildRecord prices an outcome at: the usage it settles, where that usage came from, the
// exact cost (pricing.FormatDecimal's form), the rule and version, the tier the cost was computed at (the
// reported one, else the requested one) and the bounds flag. The data plane tells the caller these values
// (docs/cost.md) from the same function the record is built with, so they are the record's.
type Priced struct {
	Usage       usage.Usage
	Source      vocab.UsageSource
	Cost        string
	RuleID      int64
	RuleVersion int64
	Tier        string
	Flag        string
	FlagDetail  string
}

// Price prices an outcome exactly as BuildRecord does, without building the record or counting a flagged
// one in the metrics.
func Price(o Outcome) Priced { return price(o) }

func price(o Outcome) Priced {
	u, source := usage.Usage{}, vocab.SourceNone
	switch {
	case o.UpstreamFound:
		u, source = o.Upstream, vocab.SourceUpstream
	case o.Operation.IsGeneration() && consumed(o.EndState) && o.Local != nil:
		u, source = *o.Local, vocab.SourceLocal
	case o.Operation.IsGeneration() && consumed(o.EndState) && o.EstimateTokens > 0:
		u, source = usage.Usage{Input: o.EstimateTokens}, vocab.SourceEstimated
	}
	tier := o.RequestedTier
	if o.Upstream.ReportedTier != "" {
		tier = o.Upstream.ReportedTier
	}
	// Bounds: a report beyond what one request can plausibly use or cost is not charged but flagged
	// (docs/settlement.md, "Bounds"); the control plane checks again.
	var bounds pricing.Bounds
	if o.Rule != nil {
		bounds = o.Rule.Bounds
	}
	bounds = bounds.OrDefault()
	p := Priced{Usage: u, Source: source, Cost: "0", Tier: tier}
	if err := bounds.CheckTokens(u.Input, u.Output, u.CacheRead, u.CacheCreation5m, u.CacheCreation30m, u.CacheCreation1h, u.ImageOutput); err != nil {
		p.Flag, p.FlagDetail = FlagOutOfBounds, err.Error()
	}
	if p.Flag == "" && !notBilled(o.Operation) && o.Rule != nil {
		q := o.Rule.Quote(u, tier)
		p.Cost, p.RuleID = pricing.FormatDecimal(q.Cost), q.RuleID
		if p.RuleID != 0 {
			p.RuleVersion = o.Rule.Version
		}
		if err := bounds.CheckCost(p.Cost); err != nil {
			p.Flag, p.FlagDetail = FlagOutOfBounds, err.Error()
		}
	}
	if p.Flag != "" {
		p.Cost = "0"
		if len(p.FlagDetail) > maxFlagDetail {
			p.FlagDetail = p.FlagDetail[:maxFlagDetail]
		}
		if o.Rule != nil {
			p.RuleID, p.RuleVersion = o.Rule.ID, o.Rule.Version
		}
	}
	return p
}

// FlagOutOfBounds marks a record whose reported usage or cost is beyond the settlement bounds: it is
// stored with cost 0 and this flag (usages.billing_flag) instead of being charged.
const FlagOutOfBounds = "usage_out_of_bounds"

// maxFlagDetail bounds a record's flag_detail.
const maxFlagDetail = 512

// outOfBounds counts records BuildRecord flagged (tollgate_settle_usage_out_of_bounds_total), once
// RegisterRecordMetrics has registered it.
var outOfBounds atomic.Pointer[prometheus.Counter]

// RegisterRecordMetrics registers BuildRecord's metric on reg (the data plane's registry; the last
// registration wins): tollgate_settle_usage_out_of_bounds_total, records flagged as beyond the settlement
// bounds and not charged. Alert on any increase: an upstream reported absurd usage, or the bounds are too
// tight for real traffic.
func RegisterRecordMetrics(reg prometheus.Registerer) {
	c := promauto.With(reg).NewCounter(prometheus.CounterOpts{Name: "tollgate_settle_usage_out_of_bounds_total",
		Help: "Settlement records flagged because the reported usage or cost was beyond the per-request bounds (not charged)."})
	outOfBounds.Store(&c)
}

// notBilled lists operations that are recorded but never charged: listing and reading models, counting
// tokens, compacting content and creating a conversation.
func notBilled(op vocab.Operation) bool {
	switch op {
	case vocab.OpListModels, vocab.OpGetModel, vocab.OpCountTokens, vocab.OpCompactContent, vocab.OpCreateConversation:
		return true
	}
	return false
}

// consumed reports whether the upstream may have done billable work although it reported no usage.
func consumed(s vocab.EndState) bool {
	switch s {
	case vocab.EndCompleted, vocab.EndUpstreamInterrupted, vocab.EndClientDropped:
		return true
	}
	return false
}

// BuildRecord computes the settlement record of an outcome:
//
//   - usage and source: the upstream's report ("upstream"); else, for content generation that ended
//     completed, interrupted or dropped, local counting ("local"), else the admission estimate as
//     input tokens ("estimated"); else zero usage ("none"). Images, embeddings and rerank settle from
//     the upstream's usage only (rerank's total_tokens and an image operation's aggregate completion
//     tokens are already mapped by package usage); a failed or rejected request without usage is "none".
//   - tier: the reported tier when the upstream named one, else the requested tier.
//   - cost: the exact decimal quote of the rule at that tier; 0 (and no rule id) for model list/get,
//     count_tokens, compact and conversation, for a missing rule, and for zero usage.
//   - bounds: usage or cost beyond the rule's settlement bounds (pricing.DefaultBounds without a rule)
//     is not charged: cost 0, billing_flag FlagOutOfBounds, flag_detail saying what was reported.
//
// PendingMicros is set by Recorder.Record from the request's hold.
func BuildRecord(o Outcome) *settlementv1.SettlementRecord {
	var pr Priced
	if o.Priced != nil {
		pr = *o.Priced
	} else {
		pr = price(o)
	}
	if pr.Flag != "" {
		if c := outOfBounds.Load(); c != nil {
			(*c).Inc()
		}
	}
	u, reported := pr.Usage, o.Upstream.ReportedTier
	cost, ruleID, ruleVersion, flag, detail, source := pr.Cost, pr.RuleID, pr.RuleVersion, pr.Flag, pr.FlagDetail, pr.Source
	rec := &settlementv1.SettlementRecord{
		RequestId:      o.RequestID,
		ApiKeyId:       o.KeyID,
		UserId:         o.UserID,
		OrgId:          o.OrgID,
		RouteId:        o.RouteID,
		ProviderId:     o.ProviderID,
		CredentialId:   o.CredentialID,
		LogicalModel:   o.LogicalModel,
		UpstreamModel:  o.UpstreamModel,
		Operation:      string(o.Operation),
		InboundKind:    string(o.InboundKind),
		Implementation: string(o.Implementation),
		DestKind:       string(o.DestKind),
		Tokens: &settlementv1.TokenCounts{
			Input: max(u.Input, 0), Output: max(u.Output, 0), CacheRead: max(u.CacheRead, 0),
			CacheCreation_5M: max(u.CacheCreation5m, 0), CacheCreation_30M: max(u.CacheCreation30m, 0),
			CacheCreation_1H: max(u.CacheCreation1h, 0), ImageOutput: max(u.ImageOutput, 0),
		},
		RequestedTier:    o.RequestedTier,
		ReportedTier:     reported,
		PriceRuleId:      ruleID,
		PriceRuleVersion: ruleVersion,
		SnapshotVersion:  o.SnapshotVersion,
		Cost:             cost,
		BillingFlag:      flag,
		FlagDetail:       detail,
		Source:           string(source),
		EndState:         string(o.EndState),
		HttpStatus:       int32(o.HTTPStatus),
		LatencyMs:        o.Latency.Milliseconds(),
		FirstByteMs:      o.FirstByte.Milliseconds(),
	}
	if o.TeamID != 0 {
		team := o.TeamID
		rec.TeamId = &team
	}
	if !o.Start.IsZero() {
		rec.CreatedAt = timestamppb.New(o.Start)
	}
	return rec
}
