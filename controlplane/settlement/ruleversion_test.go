package settlement_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/dataplane/settle"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestUsageRecordsPriceRuleVersion prices requests with the snapshot the control plane publishes, settles
// them through the real control-plane server, and checks that each usage row names the version of the
// price rule in force when it was priced: version 1, then, after a price change, version 2.
func TestUsageRecordsPriceRuleVersion(t *testing.T) {
	t.Parallel()
	srv, client, db := startControlPlane(t)
	callCtx, callCancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token), 20*time.Second)
	defer callCancel()

	var ruleID int64
	if err := db.Pool.QueryRow(callCtx, `INSERT INTO price_rules (match_type, model_match, input_price, output_price,
		cache_read_price, cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price)
		VALUES ('exact', 'm-1', 1, 2, 0, 0, 0, 0, 0) RETURNING id`).Scan(&ruleID); err != nil {
		t.Fatal(err)
	}
	settleOne := func(requestID string) (cost string, version *int64) {
		t.Helper()
		snap, err := store.ReadSnapshot(callCtx, db.Pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := snapshot.Compile(snap)
		if err != nil {
			t.Fatal(err)
		}
		rule := c.Prices.Resolve(0, "m-1")
		if rule == nil {
			t.Fatal("no rule resolved for m-1")
		}
		rec := settle.BuildRecord(settle.Outcome{RequestID: requestID, Start: time.Now(), KeyID: 1, UserID: 3, OrgID: 1,
			ProviderID: 1, LogicalModel: "m", UpstreamModel: "m-1", Operation: vocab.Operation("generate_content"),
			InboundKind: vocab.Kind("alpha_chat_completions"), Implementation: vocab.Implementation("passthrough"),
			SnapshotVersion: snap.GetVersion(), Rule: rule, EndState: vocab.EndState("completed"), HTTPStatus: 200,
			Upstream: usage.Usage{Input: 1_000_000}, UpstreamFound: true})
		if _, err := client.Settle(callCtx, &settlementv1.SettleRequest{Records: []*settlementv1.SettlementRecord{rec}}); err != nil {
			t.Fatalf("Settle = %v", err)
		}
		var gotRule *int64
		if err := db.Pool.QueryRow(callCtx, `SELECT cost::text, price_rule_id, price_rule_version FROM usages WHERE request_id = $1`,
			requestID).Scan(&cost, &gotRule, &version); err != nil {
			t.Fatal(err)
		}
		if gotRule == nil || *gotRule != ruleID {
			t.Errorf("%s: price_rule_id = %v, want %d", requestID, gotRule, ruleID)
		}
		return cost, version
	}
	want := func(requestID, wantCost string, wantVersion int64) {
		t.Helper()
		cost, v := settleOne(requestID)
		if cost != wantCost || v == nil || *v != wantVersion {
			t.Errorf("%s: cost %s, price_rule_version %v; want cost %s, version %d", requestID, cost, v, wantCost, wantVersion)
		}
	}
	want("v1-a", "1", 1)
	if _, err := db.Pool.Exec(callCtx, `UPDATE price_rules SET input_price = 3 WHERE id = $1`, ruleID); err != nil {
		t.Fatal(err)
	}
	want("v2-a", "3", 2)
	// A write that changes nothing priced makes no new version.
	if _, err := db.Pool.Exec(callCtx, `UPDATE price_rules SET input_price = 3 WHERE id = $1`, ruleID); err != nil {
		t.Fatal(err)
	}
	want("v2-b", "3", 2)

	// The admin usage listing (REST) shows the version beside the rule id.
	req, err := http.NewRequestWithContext(callCtx, "GET", "http://"+srv.HTTPAddr()+"/admin/usages?limit=10", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Items []struct {
			RequestID        string `json:"request_id"`
			PriceRuleID      *int64 `json:"price_rule_id"`
			PriceRuleVersion *int64 `json:"price_rule_version"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/usages = %d, %v", resp.StatusCode, err)
	}
	got := map[string]int64{}
	for _, u := range page.Items {
		if u.PriceRuleVersion != nil {
			got[u.RequestID] = *u.PriceRuleVersion
		}
	}
	if w := map[string]int64{"v1-a": 1, "v2-a": 2, "v2-b": 2}; !maps.Equal(got, w) {
		t.Errorf("listed price_rule_version = %v, want %v", got, w)
	}
}
