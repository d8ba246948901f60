package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/settlement"
	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// TestBatchesListing: GET /admin/batches (and gRPC ListBatches) lists registered batches with their
// reservation, what is still held, the exact settled cost and line counts; open=true leaves settled batches
// out; GET /admin/usages?batch_id= lists a batch's line rows with batch_id and custom_id.
func TestBatchesListing(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	id := func(path string, body map[string]any) int64 {
		var v struct {
			ID int64 `json:"id"`
		}
		b.must(t, http.StatusCreated, "POST", path, body, &v)
		return v.ID
	}
	org := id("/admin/orgs", map[string]any{"name": "acme"})
	user := id("/admin/users", map[string]any{"org_id": org, "name": "ada"})
	key := id("/admin/api-keys", map[string]any{"user_id": user, "name": "bulk"})
	pid := b.provider(t, "alpha-1", "alpha")
	cred := id(fmt.Sprintf("/admin/providers/%d/credentials", pid), map[string]any{"secret": "sk-x"})

	svc := settlement.New(b.db.Pool, nil, nil)
	register := func(providerBatchID string, lines ...string) int64 {
		req := &settlementv1.RegisterBatchRequest{ProviderId: pid, CredentialId: cred, ProviderBatchId: providerBatchID,
			Dialect: "alpha", Endpoint: "/v1/chat/completions", ApiKeyId: key, UserId: user, OrgId: org,
			UpstreamModel: "a-1", ExpiresAt: timestamppb.New(time.Now().Add(24 * time.Hour))}
		for _, l := range lines {
			req.Lines = append(req.Lines, &settlementv1.BatchLine{CustomId: l, UpstreamModel: "a-1", EstimateMicros: 2500})
			req.ReservedMicros += 2500
		}
		res, err := svc.RegisterBatch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res.GetBatch().GetBatchId()
	}
	open := register("batch_open", "l1", "l2", "l3")
	done := register("batch_done", "m1")
	settle := func(batchID int64, custom, cost string) {
		o, k := org, key
		if _, err := store.SettleUsages(ctx, b.db.Pool, []store.UsageRow{{RequestID: store.BatchLineRequestID(batchID, custom),
			OrgID: &o, APIKeyID: &k, Operation: "generate_content", InboundKind: "alpha_chat_completions", Cost: cost,
			Source: "upstream", EndState: "completed", CreatedAt: time.Now(), BatchID: &batchID, CustomID: custom,
			BatchLineState: store.LineSucceeded}}); err != nil {
			t.Fatal(err)
		}
	}
	settle(open, "l1", "0.0012")
	settle(open, "l2", "0.0008")
	settle(done, "m1", "0.5")
	if err := store.CloseBatch(ctx, b.db.Pool, done); err != nil {
		t.Fatal(err)
	}

	var page struct {
		Items []struct {
			ID              int64      `json:"id"`
			ProviderBatchID string     `json:"provider_batch_id"`
			ReservedMicros  int64      `json:"reserved_micros"`
			HeldMicros      int64      `json:"held_micros"`
			SettledCost     string     `json:"settled_cost"`
			LineCount       int64      `json:"line_count"`
			LinesSucceeded  int64      `json:"lines_succeeded"`
			Status          string     `json:"status"`
			SettledAt       *time.Time `json:"settled_at"`
		} `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", "/admin/batches?open=true", nil, &page)
	if len(page.Items) != 1 {
		t.Fatalf("open batches: %+v", page.Items)
	}
	got := page.Items[0]
	if got.ID != open || got.ReservedMicros != 7500 || got.HeldMicros != 2500 || got.SettledCost != "0.002" ||
		got.LineCount != 3 || got.LinesSucceeded != 2 || got.Status != "validating" || got.SettledAt != nil {
		t.Errorf("open batch: %+v", got)
	}
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/batches?org_id=%d", org), nil, &page)
	if len(page.Items) != 2 || page.Items[0].ID != done || page.Items[0].HeldMicros != 0 || page.Items[0].SettledAt == nil {
		t.Errorf("all batches: %+v", page.Items)
	}
	b.refuses(t, []refusal{
		{"bad open", "GET", "/admin/batches?open=maybe", nil, 400, ""},
		{"bad org", "GET", "/admin/batches?org_id=-1", nil, 400, ""},
		{"unknown parameter", "GET", "/admin/batches?provider=1", nil, 400, ""},
	})

	var usages struct {
		Items []struct {
			BatchID  int64  `json:"batch_id"`
			CustomID string `json:"custom_id"`
		} `json:"items"`
	}
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/usages?batch_id=%d", open), nil, &usages)
	if len(usages.Items) != 2 || usages.Items[0].BatchID != open || usages.Items[0].CustomID != "l2" || usages.Items[1].CustomID != "l1" {
		t.Errorf("usages of the open batch: %+v", usages.Items)
	}

	// Spend analytics: the batch dimension, grouped and filtered (none = requests).
	hour := time.Now().UTC().Truncate(time.Hour)
	span := fmt.Sprintf("since=%s&until=%s", hour.Format(time.RFC3339), hour.Add(time.Hour).Format(time.RFC3339))
	var spend struct {
		Rows []struct {
			Group map[string]any `json:"group"`
			Cost  string         `json:"cost"`
		} `json:"rows"`
		Total struct {
			Cost string `json:"cost"`
		} `json:"total"`
	}
	b.must(t, http.StatusOK, "GET", "/admin/spend?"+span+"&group_by=batch", nil, &spend)
	costs := map[string]string{}
	for _, r := range spend.Rows {
		costs[fmt.Sprint(r.Group["batch"])] = r.Cost
	}
	if costs[fmt.Sprint(open)] != "0.002" || costs[fmt.Sprint(done)] != "0.5" || spend.Total.Cost != "0.502" {
		t.Errorf("spend by batch: %+v (total %s)", spend.Rows, spend.Total.Cost)
	}
	b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/spend?%s&batch=%d", span, done), nil, &spend)
	if spend.Total.Cost != "0.5" {
		t.Errorf("spend of batch %d: %s", done, spend.Total.Cost)
	}
	b.must(t, http.StatusOK, "GET", "/admin/spend?"+span+"&batch=none", nil, &spend)
	if spend.Total.Cost != "0" {
		t.Errorf("spend of requests: %s", spend.Total.Cost)
	}

	c, _ := b.grpcClient(t)
	res, err := c.ListBatches(withToken(bootstrapToken), &adminv1.ListBatchesRequest{OpenOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetItems()) != 1 || res.GetItems()[0].GetHold().GetHeldMicros() != 2500 || res.GetItems()[0].GetHold().GetSettledCost() != "0.002" ||
		res.GetItems()[0].GetDialect() != "alpha" || res.GetItems()[0].GetEndpoint() != "/v1/chat/completions" {
		t.Errorf("gRPC ListBatches: %v", res.GetItems())
	}
	us, err := c.ListUsages(withToken(bootstrapToken), &adminv1.ListUsagesRequest{BatchId: &done})
	if err != nil {
		t.Fatal(err)
	}
	if len(us.GetItems()) != 1 || us.GetItems()[0].GetCustomId() != "m1" || us.GetItems()[0].GetBatchId() != done {
		t.Errorf("gRPC ListUsages by batch: %v", us.GetItems())
	}
}
