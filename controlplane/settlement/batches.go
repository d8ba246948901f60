package settlement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/store"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
)

// MaxBatchLines is the most lines one batch may register (the largest provider limit: alpha's 50,000).
const MaxBatchLines = 100_000

// RegisterBatch stores a batch a data plane submitted (docs/batches.md). Idempotent by
// (provider_id, provider_batch_id).
func (s *Service) RegisterBatch(ctx context.Context, req *settlementv1.RegisterBatchRequest) (*settlementv1.RegisterBatchResponse, error) {
	b, lines, err := batchFromRequest(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	stored, created, err := store.RegisterBatch(ctx, s.db, b, lines)
	if err != nil {
		if errors.Is(err, store.ErrReference) || errors.Is(err, store.ErrConstraint) {
			return nil, status.Errorf(codes.InvalidArgument, "register batch: %v", err)
		}
		s.log.Error("register batch failed", "provider_batch_id", b.ProviderBatchID, "err", err)
		return nil, status.Error(codes.Unavailable, "register batch failed; retry")
	}
	if created {
		s.log.Info("batch registered", "batch_id", stored.ID, "provider_id", stored.ProviderID,
			"provider_batch_id", stored.ProviderBatchID, "lines", stored.LineCount, "reserved_micros", stored.ReservedMicros)
	}
	return &settlementv1.RegisterBatchResponse{Batch: BatchHold(stored), Created: created}, nil
}

// ListBatchHolds answers the batches whose hold changed after after_seq.
func (s *Service) ListBatchHolds(ctx context.Context, req *settlementv1.ListBatchHoldsRequest) (*settlementv1.ListBatchHoldsResponse, error) {
	if req.GetAfterSeq() < 0 || req.GetLimit() < 0 {
		return nil, status.Error(codes.InvalidArgument, "after_seq and limit must not be negative")
	}
	bs, err := store.ListBatchHolds(ctx, s.db, req.GetAfterSeq(), int(req.GetLimit()))
	if err != nil {
		s.log.Error("list batch holds failed", "err", err)
		return nil, status.Error(codes.Unavailable, "list batch holds failed; retry")
	}
	out := &settlementv1.ListBatchHoldsResponse{Batches: make([]*settlementv1.BatchHold, len(bs))}
	for i, b := range bs {
		out.Batches[i] = BatchHold(b)
	}
	return out, nil
}

// BatchHold is a stored batch as the contract carries it.
func BatchHold(b store.Batch) *settlementv1.BatchHold {
	h := &settlementv1.BatchHold{
		BatchId: b.ID, ProviderId: b.ProviderID, ProviderBatchId: b.ProviderBatchID, ApiKeyId: b.APIKeyID,
		TeamId: b.TeamID, ReservedMicros: b.ReservedMicros, HeldMicros: b.HeldMicros,
		HoldExpiresAt: timestamppb.New(b.HoldExpiresAt), Status: b.Status, Outcome: b.Outcome,
		Settled: b.SettledAt != nil, ProgressSeq: b.ProgressSeq, SettledCost: canonicalCost(b.SettledCost),
		LineCount: b.LineCount, LinesSucceeded: b.LinesSucceeded, LinesErrored: b.LinesErrored,
		LinesExpired: b.LinesExpired, LinesCancelled: b.LinesCancelled,
	}
	if b.UserID != nil {
		h.UserId = *b.UserID
	}
	if b.OrgID != nil {
		h.OrgId = *b.OrgID
	}
	if b.AdmittedAt != nil {
		h.AdmittedAt = timestamppb.New(*b.AdmittedAt)
	}
	return h
}

// batchFromRequest validates a registration whole, naming every bad field.
func batchFromRequest(req *settlementv1.RegisterBatchRequest) (store.Batch, []store.BatchLine, error) {
	var bad []string
	if req.GetProviderId() <= 0 {
		bad = append(bad, "provider_id is required")
	}
	if req.GetCredentialId() <= 0 {
		bad = append(bad, "credential_id is required")
	}
	if id := req.GetProviderBatchId(); id == "" || len(id) > 512 || !cleanText(id) {
		bad = append(bad, "provider_batch_id must be 1 to 512 bytes of UTF-8 without NUL")
	}
	switch req.GetDialect() {
	case "alpha":
		switch req.GetEndpoint() {
		case "/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions":
		default:
			bad = append(bad, fmt.Sprintf("endpoint %.60q is not an alpha batch endpoint", req.GetEndpoint()))
		}
	case "beta", "gamma":
		if req.GetEndpoint() != "" {
			bad = append(bad, "endpoint is only for the alpha dialect")
		}
	default:
		bad = append(bad, fmt.Sprintf("dialect %.20q must be alpha, beta or gamma", req.GetDialect()))
	}
	if req.GetApiKeyId() <= 0 {
		bad = append(bad, "api_key_id is required")
	}
	if req.GetExpiresAt() == nil || !req.GetExpiresAt().IsValid() {
		bad = append(bad, "expires_at is required")
	}
	if req.GetReservedMicros() < 0 || req.GetReservedMicros() > pricing.MaxExactMicros {
		bad = append(bad, "reserved_micros must be from 0 to 2^53")
	}
	for _, f := range []string{req.GetLogicalModel(), req.GetUpstreamModel()} {
		if len(f) > 1024 || !cleanText(f) {
			bad = append(bad, "a model name is longer than 1024 bytes, holds NUL or is not UTF-8")
		}
	}
	if len(req.GetLines()) > MaxBatchLines {
		bad = append(bad, fmt.Sprintf("%d lines; at most %d", len(req.GetLines()), MaxBatchLines))
	}
	lines := make([]store.BatchLine, 0, len(req.GetLines()))
	seen := make(map[string]bool, len(req.GetLines()))
	var sum int64
	for i, l := range req.GetLines() {
		switch {
		case l.GetCustomId() == "" || len(l.GetCustomId()) > 512 || !cleanText(l.GetCustomId()):
			bad = append(bad, fmt.Sprintf("lines[%d].custom_id must be 1 to 512 bytes of UTF-8 without NUL", i))
		case seen[l.GetCustomId()]:
			bad = append(bad, fmt.Sprintf("lines[%d].custom_id %.60q repeats an earlier line", i, l.GetCustomId()))
		case len(l.GetLogicalModel()) > 1024 || len(l.GetUpstreamModel()) > 1024 || !cleanText(l.GetLogicalModel()) || !cleanText(l.GetUpstreamModel()):
			bad = append(bad, fmt.Sprintf("lines[%d]: a model name is longer than 1024 bytes, holds NUL or is not UTF-8", i))
		case l.GetEstimateMicros() < 0 || l.GetEstimateMicros() > pricing.MaxExactMicros:
			bad = append(bad, fmt.Sprintf("lines[%d].estimate_micros must be from 0 to 2^53", i))
		}
		seen[l.GetCustomId()] = true
		sum += min(max(l.GetEstimateMicros(), 0), pricing.MaxExactMicros)
		lines = append(lines, store.BatchLine{CustomID: l.GetCustomId(), LogicalModel: l.GetLogicalModel(),
			UpstreamModel: l.GetUpstreamModel(), EstimateMicros: l.GetEstimateMicros()})
	}
	if len(bad) == 0 && sum != req.GetReservedMicros() {
		bad = append(bad, fmt.Sprintf("reserved_micros %d is not the sum of the lines' estimates (%d)", req.GetReservedMicros(), sum))
	}
	if len(bad) > 0 {
		return store.Batch{}, nil, fmt.Errorf("invalid batch: %s", strings.Join(bad, "; "))
	}
	b := store.Batch{
		ProviderID: req.GetProviderId(), CredentialID: req.GetCredentialId(), ProviderBatchID: req.GetProviderBatchId(),
		Dialect: req.GetDialect(), Endpoint: req.GetEndpoint(), APIKeyID: req.GetApiKeyId(),
		UserID: optID(req.GetUserId()), TeamID: req.TeamId, OrgID: optID(req.GetOrgId()), RouteID: optID(req.GetRouteId()),
		LogicalModel: req.GetLogicalModel(), UpstreamModel: req.GetUpstreamModel(),
		ExpiresAt: req.GetExpiresAt().AsTime(), ReservedMicros: req.GetReservedMicros(),
	}
	if req.GetAdmittedAt() != nil {
		t := req.GetAdmittedAt().AsTime()
		b.AdmittedAt = &t
	}
	return b, lines, nil
}

func cleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
