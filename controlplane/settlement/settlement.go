// Package settlement implements SettlementService on the control plane: it authenticates data planes by
// their shared token (checked in constant time), validates each batch of settlement records, and stores
// it through store.SettleUsages in one transaction — usages inserted idempotently by request_id, then
// quotas.cost_used incremented only for the rows actually inserted — answering the new cost_used of every
// quota scope the batch names so data planes can refresh their admission mirror. See docs/settlement.md.
package settlement

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ServiceName is the full gRPC service name, for per-service authorizers.
const ServiceName = "tollgate.settlement.v1.SettlementService"

// MaxBatch is the largest batch Settle accepts.
const MaxBatch = 5000

// Service implements settlementv1.SettlementServiceServer.
type Service struct {
	settlementv1.UnimplementedSettlementServiceServer
	db     DB
	log    *slog.Logger
	bounds pricing.Bounds

	batches, inserted, duplicates, failures prometheus.Counter
	flaggedByCP, flaggedByDP                prometheus.Counter
	latency                                 prometheus.Histogram
}

// DB is what the service needs of Postgres (a *pgxpool.Pool): transactions for Settle, single queries for
// GetRequestCost.
type DB interface {
	store.TxBeginner
	store.DBTX
}

// New returns the service over db (a pool). reg may be nil (no metrics).
func New(db DB, log *slog.Logger, reg prometheus.Registerer) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{db: db, log: log, bounds: pricing.DefaultBounds}
	f := promauto.With(reg) // a nil reg registers nowhere
	s.batches = f.NewCounter(prometheus.CounterOpts{Name: "tollgate_settlement_batches_total", Help: "Settle batches stored."})
	s.inserted = f.NewCounter(prometheus.CounterOpts{Name: "tollgate_settlement_records_inserted_total", Help: "Settlement records stored as new usages rows."})
	s.duplicates = f.NewCounter(prometheus.CounterOpts{Name: "tollgate_settlement_records_duplicate_total", Help: "Settlement records already stored (redelivery)."})
	s.failures = f.NewCounter(prometheus.CounterOpts{Name: "tollgate_settlement_batch_failures_total", Help: "Settle batches refused or failed."})
	flagged := f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_settlement_records_out_of_bounds_total",
		Help: "Settlement records stored flagged and uncharged because their usage or cost was beyond the per-request bounds, by the plane that flagged them. Alert on any increase."},
		[]string{"flagged_by"})
	s.flaggedByCP, s.flaggedByDP = flagged.WithLabelValues("control_plane"), flagged.WithLabelValues("data_plane")
	s.latency = f.NewHistogram(prometheus.HistogramOpts{Name: "tollgate_settlement_batch_seconds", Help: "Time to store one Settle batch.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}})
	return s
}

// WithBounds sets the per-request settlement bounds (TOLLGATE_SETTLE_MAX_REQUEST_*; default
// pricing.DefaultBounds) and returns s.
func (s *Service) WithBounds(b pricing.Bounds) *Service {
	s.bounds = b.OrDefault()
	return s
}

// Settle stores a batch idempotently and answers per-record results and the touched quotas.
func (s *Service) Settle(ctx context.Context, req *settlementv1.SettleRequest) (*settlementv1.SettleResponse, error) {
	recs := req.GetRecords()
	if len(recs) > MaxBatch {
		s.failures.Inc()
		return nil, status.Errorf(codes.InvalidArgument, "batch of %d records exceeds %d", len(recs), MaxBatch)
	}
	rows := make([]store.UsageRow, len(recs))
	var bad []string
	var flaggedCP, flaggedDP uint64
	for i, r := range recs {
		row, err := ToRow(r, s.bounds)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		switch {
		case row.BillingFlag != "" && r.GetBillingFlag() != "":
			flaggedDP++
		case row.BillingFlag != "":
			flaggedCP++
		}
		rows[i] = row
	}
	if len(bad) > 0 {
		s.failures.Inc()
		return nil, status.Errorf(codes.InvalidArgument, "invalid settlement records: %s", strings.Join(bad, "; "))
	}
	start := time.Now()
	res, err := store.SettleUsages(ctx, s.db, rows)
	if err != nil {
		s.failures.Inc()
		s.log.Error("settle batch failed", "node", req.GetNodeId(), "records", len(rows), "err", err)
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, status.FromContextError(err).Err()
		}
		if errors.Is(err, store.ErrConstraint) {
			// The data itself is refused: retrying cannot help; the data plane dead-letters it.
			return nil, status.Errorf(codes.InvalidArgument, "settlement records refused by the store: %v", err)
		}
		return nil, status.Error(codes.Unavailable, "settlement store unavailable")
	}
	s.latency.Observe(time.Since(start).Seconds())
	s.batches.Inc()
	// Counted once stored (a refused or failed batch is retried and would count twice); a redelivered
	// flagged record counts again, which only errs towards alerting.
	s.flaggedByCP.Add(float64(flaggedCP))
	s.flaggedByDP.Add(float64(flaggedDP))
	if flaggedCP+flaggedDP > 0 {
		s.log.Warn("settlement records beyond the per-request bounds stored uncharged", "node", req.GetNodeId(),
			"flagged_by_control_plane", flaggedCP, "flagged_by_data_plane", flaggedDP)
	}
	out := &settlementv1.SettleResponse{Results: make([]*settlementv1.RecordResult, len(recs))}
	var ins uint64
	for i, r := range recs {
		// A request id repeated within the batch is inserted once: only its first occurrence says so.
		inserted := res.Inserted[r.GetRequestId()]
		if inserted {
			delete(res.Inserted, r.GetRequestId())
			ins++
		}
		out.Results[i] = &settlementv1.RecordResult{RequestId: r.GetRequestId(), Inserted: inserted}
	}
	s.inserted.Add(float64(ins))
	s.duplicates.Add(float64(uint64(len(recs)) - ins))
	for _, q := range res.Quotas {
		pq := &configv1.Quota{Scope: q.Scope, ScopeId: q.ScopeID, CostLimit: q.CostLimit, CostUsed: q.CostUsed,
			AdjustEpoch: q.AdjustEpoch}
		if !q.Period.IsNone() { // one answer per period of a periodic quota (docs/budgets.md, "Periods")
			pq.Period, pq.PeriodId = string(q.Period.Kind), q.Period.ID()
			pq.PeriodStart, pq.PeriodEnd = timestamppb.New(q.Period.Start), timestamppb.New(q.Period.End)
		}
		out.Quotas = append(out.Quotas, pq)
	}
	return out, nil
}

// FlagOutOfBounds is the billing_flag of a usage stored uncharged because its usage or cost was beyond
// the per-request bounds.
const FlagOutOfBounds = "usage_out_of_bounds"

// maxFlagDetail bounds a stored flag_detail.
const maxFlagDetail = 512

// ToRow validates a record and converts it to a usages row. Ids of 0 are stored as NULL. A record
// whose token counts or cost are beyond bounds (or that its data plane flagged) becomes a flagged row
// with cost 0; a record that is malformed (a cost that is not a plain non-negative decimal, negative
// tokens, an unknown flag) is an error.
func ToRow(r *settlementv1.SettlementRecord, bounds pricing.Bounds) (store.UsageRow, error) {
	id := r.GetRequestId()
	if id == "" || len(id) > 200 {
		return store.UsageRow{}, fmt.Errorf("record %q: request_id must be 1 to 200 characters", id)
	}
	if !vocab.Operation(r.GetOperation()).Valid() {
		return store.UsageRow{}, fmt.Errorf("record %q: unknown operation %q", id, r.GetOperation())
	}
	if r.GetInboundKind() == "" {
		return store.UsageRow{}, fmt.Errorf("record %q: inbound_kind is required", id)
	}
	switch vocab.UsageSource(r.GetSource()) {
	case vocab.SourceUpstream, vocab.SourceLocal, vocab.SourceEstimated, vocab.SourceNone:
	default:
		return store.UsageRow{}, fmt.Errorf("record %q: unknown source %q", id, r.GetSource())
	}
	switch vocab.EndState(r.GetEndState()) {
	case vocab.EndCompleted, vocab.EndUpstreamError, vocab.EndUpstreamInterrupted, vocab.EndClientDropped, vocab.EndRejected:
	default:
		return store.UsageRow{}, fmt.Errorf("record %q: unknown end_state %q", id, r.GetEndState())
	}
	switch r.GetBillingFlag() {
	case "", FlagOutOfBounds:
	default:
		return store.UsageRow{}, fmt.Errorf("record %q: unknown billing_flag %.40q", id, r.GetBillingFlag())
	}
	cost, flag, detail := r.GetCost(), r.GetBillingFlag(), r.GetFlagDetail()
	if err := bounds.CheckCost(cost); errors.Is(err, pricing.ErrMalformedDecimal) {
		return store.UsageRow{}, fmt.Errorf("record %q: cost %.40q is not a non-negative decimal", id, cost)
	} else if err != nil && flag == "" {
		flag, detail = FlagOutOfBounds, "control plane: "+err.Error()
	}
	for _, f := range []string{r.GetLogicalModel(), r.GetUpstreamModel(), r.GetInboundKind(), r.GetImplementation(),
		r.GetDestKind(), r.GetRequestedTier(), r.GetReportedTier(), id} {
		if len(f) > 1024 || strings.ContainsRune(f, 0) || !utf8.ValidString(f) {
			return store.UsageRow{}, fmt.Errorf("record %.40q: a text field is longer than 1024 bytes, holds NUL or is not UTF-8", id)
		}
	}
	if v := r.GetPriceRuleVersion(); v < 0 || v > math.MaxInt32 || (v != 0 && r.GetPriceRuleId() == 0) {
		return store.UsageRow{}, fmt.Errorf("record %q: price_rule_version %d is not a version of price_rule_id %d", id, v, r.GetPriceRuleId())
	}
	t := r.GetTokens()
	counts := []int64{t.GetInput(), t.GetOutput(), t.GetCacheRead(), t.GetCacheCreation_5M(), t.GetCacheCreation_30M(), t.GetCacheCreation_1H(), t.GetImageOutput()}
	for _, c := range counts {
		if c < 0 {
			return store.UsageRow{}, fmt.Errorf("record %q: negative token count", id)
		}
	}
	if err := bounds.CheckTokens(counts...); err != nil && flag == "" {
		flag, detail = FlagOutOfBounds, "control plane: "+err.Error()
	}
	if flag != "" {
		cost = "0"
		detail = strings.ToValidUTF8(strings.ReplaceAll(detail, "\x00", ""), "\uFFFD")
		if len(detail) > maxFlagDetail {
			detail = detail[:maxFlagDetail]
		}
	}
	row := store.UsageRow{
		RequestID:        id,
		APIKeyID:         optID(r.GetApiKeyId()),
		UserID:           optID(r.GetUserId()),
		TeamID:           optID(r.GetTeamId()),
		OrgID:            optID(r.GetOrgId()),
		RouteID:          optID(r.GetRouteId()),
		ProviderID:       optID(r.GetProviderId()),
		CredentialID:     optID(r.GetCredentialId()),
		LogicalModel:     r.GetLogicalModel(),
		UpstreamModel:    r.GetUpstreamModel(),
		Operation:        r.GetOperation(),
		InboundKind:      r.GetInboundKind(),
		Implementation:   r.GetImplementation(),
		DestKind:         r.GetDestKind(),
		InputTokens:      counts[0],
		OutputTokens:     counts[1],
		CacheReadTokens:  counts[2],
		CacheCreation5m:  counts[3],
		CacheCreation30m: counts[4],
		CacheCreation1h:  counts[5],
		ImageOutput:      counts[6],
		RequestedTier:    r.GetRequestedTier(),
		ReportedTier:     r.GetReportedTier(),
		PriceRuleID:      optID(r.GetPriceRuleId()),
		PriceRuleVersion: optID(r.GetPriceRuleVersion()),
		SnapshotVersion:  r.GetSnapshotVersion(),
		Cost:             cost,
		BillingFlag:      flag,
		FlagDetail:       strings.ToValidUTF8(detail, "\uFFFD"),
		Source:           r.GetSource(),
		EndState:         r.GetEndState(),
		HTTPStatus:       r.GetHttpStatus(),
		LatencyMS:        r.GetLatencyMs(),
		FirstByteMS:      r.GetFirstByteMs(),
	}
	if r.GetCreatedAt() != nil {
		row.CreatedAt = r.GetCreatedAt().AsTime()
	}
	if r.GetAdmittedAt() != nil { // decides the budget period (docs/budgets.md, "Periods")
		t := r.GetAdmittedAt().AsTime()
		row.AdmittedAt = &t
	}
	return row, nil
}

func optID(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// Authorize checks the data-plane token of a call: metadata "authorization: Bearer <token>", compared in
// constant time. It has the shape of the control plane's per-service authorizer.
func Authorize(token string) func(ctx context.Context, fullMethod string) error {
	want := []byte(token)
	return func(ctx context.Context, _ string) error {
		md, _ := metadata.FromIncomingContext(ctx)
		var got string
		for _, v := range md.Get("authorization") {
			if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
				got = v[7:]
				break
			}
		}
		if len(want) == 0 || got == "" {
			return status.Error(codes.Unauthenticated, "data-plane token required")
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			return status.Error(codes.Unauthenticated, "invalid data-plane token")
		}
		return nil
	}
}

// UnaryInterceptor applies Authorize to SettlementService methods only and lets every other call through,
// so it composes with other services' interceptors on one grpc.Server.
func UnaryInterceptor(token string) grpc.UnaryServerInterceptor {
	auth := Authorize(token)
	prefix := "/" + ServiceName + "/"
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, prefix) {
			if err := auth(ctx, info.FullMethod); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	}
}

// MaxRequestIDLen bounds the request ids GetRequestCost accepts (the gateway's are "req_" + 32 hex).
const MaxRequestIDLen = 128

// GetRequestCost answers the settled row of one request made with one key; NOT_FOUND when there is none,
// the same for another key's request as for an unknown id.
func (s *Service) GetRequestCost(ctx context.Context, req *settlementv1.GetRequestCostRequest) (*settlementv1.GetRequestCostResponse, error) {
	id := req.GetRequestId()
	if req.GetApiKeyId() <= 0 {
		return nil, status.Error(codes.InvalidArgument, "api_key_id must be a positive key id")
	}
	if id == "" || len(id) > MaxRequestIDLen || !utf8.ValidString(id) {
		return nil, status.Errorf(codes.InvalidArgument, "request_id must be 1 to %d bytes of UTF-8", MaxRequestIDLen)
	}
	c, err := store.GetRequestCost(ctx, s.db, req.GetApiKeyId(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, status.Error(codes.NotFound, "no settled request with this id for this key")
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return nil, status.FromContextError(err).Err()
	case err != nil:
		s.log.Error("request cost lookup failed", "request_id", id, "err", err)
		return nil, status.Error(codes.Unavailable, "settlement store unavailable")
	}
	return &settlementv1.GetRequestCostResponse{Cost: &settlementv1.RequestCost{
		RequestId: c.RequestID,
		Tokens: &settlementv1.TokenCounts{Input: c.InputTokens, Output: c.OutputTokens, CacheRead: c.CacheReadTokens,
			CacheCreation_5M: c.CacheCreation5mTokens, CacheCreation_30M: c.CacheCreation30mTokens,
			CacheCreation_1H: c.CacheCreation1hTokens, ImageOutput: c.ImageOutputTokens},
		Cost: canonicalCost(c.Cost), PriceRuleId: c.PriceRuleID, PriceRuleVersion: c.PriceRuleVersion,
		ServedTier: c.ServedTier(), RequestedTier: c.RequestedTier, ReportedTier: c.ReportedTier, Source: c.Source,
		EndState: c.EndState, HttpStatus: c.HTTPStatus, BillingFlag: c.BillingFlag, LogicalModel: c.LogicalModel,
		Operation: c.Operation, InboundKind: c.InboundKind, CreatedAt: timestamppb.New(c.CreatedAt),
		SettledAt: timestamppb.New(c.SettledAt),
	}}, nil
}

// canonicalCost formats a stored numeric the way the data plane formats a cost (pricing.FormatDecimal:
// no exponent, no trailing fractional zeros), so the lookup, the headers and the stream members carry
// the same string for the same amount. A value the money parser refuses is answered as stored.
func canonicalCost(stored string) string {
	d, err := pricing.ParseStoredDecimal(stored)
	if err != nil {
		return stored
	}
	return pricing.FormatDecimal(d)
}
