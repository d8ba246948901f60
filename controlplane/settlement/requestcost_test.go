package settlement_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// TestGetRequestCostThroughTheControlPlane settles records through the real control plane's gRPC server on
// loopback and looks them up the way a data plane answers GET /v1/requests/{id}/cost.
func TestGetRequestCostThroughTheControlPlane(t *testing.T) {
	t.Parallel()
	_, client, _ := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)

	plain := record("req_plain", 1, 0, 3, "0.001234500")
	plain.PriceRuleId, plain.PriceRuleVersion, plain.RequestedTier, plain.ReportedTier = 7, 3, "priority", "default"
	plain.Tokens = &settlementv1.TokenCounts{Input: 100, Output: 20, CacheRead: 5, CacheCreation_5M: 1, CacheCreation_30M: 2,
		CacheCreation_1H: 3, ImageOutput: 4}
	cut := record("req_cut", 1, 0, 3, "0.5")
	cut.Operation, cut.EndState, cut.Source, cut.RequestedTier = "stream_generate_content", "upstream_interrupted", "estimated", "flex"
	dropped := record("req_dropped", 1, 0, 3, "0.25")
	dropped.Operation, dropped.EndState, dropped.Source = "stream_generate_content", "client_dropped", "local"
	other := record("req_other", 1, 0, 3, "9")
	other.ApiKeyId = 2
	// A request of an earlier month, in another partition than this month's.
	old := record("req_old", 1, 0, 3, "1")
	old.CreatedAt = timestamppb.New(time.Now().AddDate(0, -3, 0))
	if _, err := client.Settle(authed, &settlementv1.SettleRequest{NodeId: "dp1",
		Records: []*settlementv1.SettlementRecord{plain, cut, dropped, other, old}}); err != nil {
		t.Fatalf("Settle = %v", err)
	}

	lookup := func(key int64, id string) (*settlementv1.RequestCost, error) {
		resp, err := client.GetRequestCost(authed, &settlementv1.GetRequestCostRequest{ApiKeyId: key, RequestId: id})
		return resp.GetCost(), err
	}
	tests := []struct {
		name                      string
		key                       int64
		id                        string
		cost, tier, source, state string
		rule, version             int64
		tokens                    *settlementv1.TokenCounts
	}{
		// The stored numeric keeps the sent scale; the answer is the data plane's canonical form.
		{name: "own plain request", key: 1, id: "req_plain", cost: "0.0012345", tier: "default", source: "upstream",
			state: "completed", rule: 7, version: 3, tokens: plain.Tokens},
		{name: "own cut stream", key: 1, id: "req_cut", cost: "0.5", tier: "flex", source: "estimated",
			state: "upstream_interrupted", tokens: cut.Tokens},
		{name: "own dropped stream", key: 1, id: "req_dropped", cost: "0.25", source: "local", state: "client_dropped",
			tokens: dropped.Tokens},
		{name: "other key's own request", key: 2, id: "req_other", cost: "9", source: "upstream", state: "completed",
			tokens: other.Tokens},
		{name: "an earlier month's request", key: 1, id: "req_old", cost: "1", source: "upstream", state: "completed",
			tokens: old.Tokens},
	}
	for _, tt := range tests {
		got, err := lookup(tt.key, tt.id)
		if err != nil {
			t.Errorf("%s: GetRequestCost(%d, %s) = %v", tt.name, tt.key, tt.id, err)
			continue
		}
		if got.GetRequestId() != tt.id || got.GetCost() != tt.cost || got.GetServedTier() != tt.tier || got.GetSource() != tt.source ||
			got.GetEndState() != tt.state || got.GetPriceRuleId() != tt.rule || got.GetPriceRuleVersion() != tt.version {
			t.Errorf("%s: GetRequestCost(%d, %s) = %v, want cost %s tier %q source %s end %s rule %d v%d", tt.name, tt.key, tt.id,
				got, tt.cost, tt.tier, tt.source, tt.state, tt.rule, tt.version)
		}
		if g, w := got.GetTokens(), tt.tokens; g.GetInput() != w.GetInput() || g.GetOutput() != w.GetOutput() ||
			g.GetCacheRead() != w.GetCacheRead() || g.GetCacheCreation_5M() != w.GetCacheCreation_5M() ||
			g.GetCacheCreation_30M() != w.GetCacheCreation_30M() || g.GetCacheCreation_1H() != w.GetCacheCreation_1H() ||
			g.GetImageOutput() != w.GetImageOutput() {
			t.Errorf("%s: tokens = %v, want %v", tt.name, g, w)
		}
		if got.GetCreatedAt() == nil || got.GetSettledAt() == nil || got.GetOperation() == "" {
			t.Errorf("%s: created/settled/operation missing: %v", tt.name, got)
		}
	}

	// Another key's request is answered exactly like an unknown id.
	var messages []string
	for _, q := range []struct {
		key int64
		id  string
	}{{2, "req_plain"}, {1, "req_other"}, {1, "req_missing"}, {3, "req_cut"}} {
		_, err := lookup(q.key, q.id)
		if status.Code(err) != codes.NotFound {
			t.Errorf("GetRequestCost(%d, %s) = %v, want NotFound", q.key, q.id, err)
		}
		messages = append(messages, status.Convert(err).Message())
	}
	for _, m := range messages[1:] {
		if m != messages[0] {
			t.Errorf("NotFound messages differ (%q, %q): another key's request must look like a missing one", messages[0], m)
		}
	}

	for _, bad := range []*settlementv1.GetRequestCostRequest{{ApiKeyId: 0, RequestId: "req_plain"}, {ApiKeyId: 1},
		{ApiKeyId: 1, RequestId: string(make([]byte, 200))}} {
		if _, err := client.GetRequestCost(authed, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetRequestCost(%v) = %v, want InvalidArgument", bad, err)
		}
	}
	// The data plane's credential guards the lookup like Settle.
	if _, err := client.GetRequestCost(ctx, &settlementv1.GetRequestCostRequest{ApiKeyId: 1, RequestId: "req_plain"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("GetRequestCost without token = %v, want Unauthenticated", err)
	}
	wrong := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer not-the-token-0123456789")
	if _, err := client.GetRequestCost(wrong, &settlementv1.GetRequestCostRequest{ApiKeyId: 1, RequestId: "req_plain"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("GetRequestCost with a wrong token = %v, want Unauthenticated", err)
	}
}
