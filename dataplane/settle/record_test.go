package settle_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

func testRule(t *testing.T) *pricing.Rule {
	t.Helper()
	r, err := pricing.ParseRule(pricing.RuleInput{ID: 42, MatchType: "exact", ModelMatch: "m-1", Enabled: true,
		InputPrice: "2", OutputPrice: "8", CacheReadPrice: "0.5", CacheCreation5mPrice: "2.5", CacheCreation30mPrice: "3",
		CacheCreation1hPrice: "4", ImageOutputPrice: "40",
		PricingTiersJSON: json.RawMessage(`[{"service_tier":"priority","multiplier":"2"},{"service_tier":"flex","multiplier":"0.5"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBuildRecord(t *testing.T) {
	t.Parallel()
	rule := testRule(t)
	local := usage.Usage{Input: 100, Output: 50}
	base := settle.Outcome{RequestID: "r", Start: time.Unix(1_700_000_000, 0), KeyID: 1, UserID: 3, OrgID: 1,
		ProviderID: 7, Operation: vocab.OpStreamGenerateContent, InboundKind: vocab.KindAlphaChatCompletions,
		Implementation: vocab.ImplPassthrough, Rule: rule, EstimateTokens: 250, EndState: vocab.EndCompleted,
		HTTPStatus: 200, Latency: 1500 * time.Millisecond, FirstByte: 200 * time.Millisecond}
	tests := []struct {
		name       string
		mod        func(o *settle.Outcome)
		wantSource vocab.UsageSource
		wantCost   string
		wantInput  int64
		wantRule   int64
		wantTier   string
	}{
		{"upstream usage", func(o *settle.Outcome) {
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 1000, Output: 500}, true
		}, vocab.SourceUpstream, "0.006", 1000, 42, ""},
		{"reported tier beats requested", func(o *settle.Outcome) {
			o.RequestedTier = "priority"
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 1000, Output: 500, ReportedTier: "default"}, true
		}, vocab.SourceUpstream, "0.006", 1000, 42, "default"},
		{"requested tier when none reported", func(o *settle.Outcome) {
			o.RequestedTier = "fast"
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 1000, Output: 500}, true
		}, vocab.SourceUpstream, "0.012", 1000, 42, ""},
		{"stream broke: local count", func(o *settle.Outcome) {
			o.EndState, o.Local = vocab.EndUpstreamInterrupted, &local
		}, vocab.SourceLocal, "0.0006", 100, 42, ""},
		{"client dropped, no tokenizer: estimate", func(o *settle.Outcome) {
			o.EndState = vocab.EndClientDropped
		}, vocab.SourceEstimated, "0.0005", 250, 42, ""},
		{"upstream error without usage", func(o *settle.Outcome) {
			o.EndState, o.HTTPStatus = vocab.EndUpstreamError, 502
		}, vocab.SourceNone, "0", 0, 42, ""},
		{"rejected", func(o *settle.Outcome) { o.EndState = vocab.EndRejected }, vocab.SourceNone, "0", 0, 42, ""},
		{"no rule: cost 0", func(o *settle.Outcome) {
			o.Rule = nil
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 1000}, true
		}, vocab.SourceUpstream, "0", 1000, 0, ""},
		{"image without usage records zero", func(o *settle.Outcome) {
			o.Operation, o.InboundKind = vocab.OpCreateImage, vocab.KindAlpha
		}, vocab.SourceNone, "0", 0, 42, ""},
		{"image tokens", func(o *settle.Outcome) {
			o.Operation, o.InboundKind = vocab.OpCreateImage, vocab.KindAlpha
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 10, ImageOutput: 1000}, true
		}, vocab.SourceUpstream, "0.04002", 10, 42, ""},
		{"rerank total tokens as input", func(o *settle.Outcome) {
			o.Operation, o.InboundKind = vocab.OpRerank, vocab.KindAlpha
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 500}, true
		}, vocab.SourceUpstream, "0.001", 500, 42, ""},
		{"count_tokens at cost 0", func(o *settle.Outcome) {
			o.Operation, o.InboundKind = vocab.OpCountTokens, vocab.KindBeta
			o.Upstream, o.UpstreamFound = usage.Usage{Input: 500}, true
		}, vocab.SourceUpstream, "0", 500, 0, ""},
		{"list models at cost 0", func(o *settle.Outcome) {
			o.Operation, o.InboundKind = vocab.OpListModels, vocab.KindAlpha
		}, vocab.SourceNone, "0", 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			tt.mod(&o)
			r := settle.BuildRecord(o)
			if r.GetSource() != string(tt.wantSource) || r.GetCost() != tt.wantCost || r.GetTokens().GetInput() != tt.wantInput ||
				r.GetPriceRuleId() != tt.wantRule || r.GetReportedTier() != tt.wantTier {
				t.Errorf("BuildRecord = source %s cost %s input %d rule %d reported %q; want %s %s %d %d %q",
					r.GetSource(), r.GetCost(), r.GetTokens().GetInput(), r.GetPriceRuleId(), r.GetReportedTier(),
					tt.wantSource, tt.wantCost, tt.wantInput, tt.wantRule, tt.wantTier)
			}
			if r.GetLatencyMs() != 1500 || r.GetFirstByteMs() != 200 || r.GetCreatedAt().AsTime().Unix() != 1_700_000_000 || r.TeamId != nil {
				t.Errorf("BuildRecord dimensions = %v", r)
			}
		})
	}
}

// TestRecorderBuildsTheRecord: the Recorder takes the facts of a request (Outcome) and appends the record
// it builds from them, the one it returns, with the hold's pending amount and admission time.
func TestRecorderBuildsTheRecord(t *testing.T) {
	t.Parallel()
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	o := settle.Outcome{RequestID: "facts-1", Start: time.Unix(1_700_000_000, 0), KeyID: 1, UserID: 3, OrgID: 1,
		ProviderID: 7, Operation: vocab.OpStreamGenerateContent, InboundKind: vocab.KindAlphaChatCompletions,
		Implementation: vocab.ImplPassthrough, Rule: testRule(t), EndState: vocab.EndCompleted, HTTPStatus: 200,
		Upstream: usage.Usage{Input: 1000, Output: 500}, UpstreamFound: true, Latency: time.Second}
	admitted := time.Unix(1_700_000_001, 0)
	hold := admission.Hold{Micros: 40, Scopes: []admission.ScopeRef{{Scope: vocab.ScopeOrg, ID: 1}}, KeyID: 1, At: admitted}
	rec, err := settle.NewRecorder(rdb, prefix).Record(ctx, o, hold)
	if err != nil {
		t.Fatalf("Record = %v", err)
	}
	want := settle.BuildRecord(o)
	want.PendingMicros, want.AdmittedAt = 40, timestamppb.New(admitted)
	if !proto.Equal(rec, want) {
		t.Errorf("Record returned %v, want %v", rec, want)
	}
	msgs, err := rdb.XRange(ctx, settle.Streams{Prefix: prefix}.Outbox(""), "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("outbox = %v, %v", msgs, err)
	}
	got, _, err := settle.DecodeEntry(msgs[0].Values)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) || got.GetCost() != "0.006" {
		t.Errorf("appended %v, want %v (cost 0.006)", got, want)
	}
}
