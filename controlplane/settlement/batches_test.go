package settlement_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// TestRegisterBatchThroughTheControlPlane drives RegisterBatch and ListBatchHolds on the real control-plane
// server: guarded by the data-plane token, validated whole (every bad field named, nothing stored), idempotent
// by (provider, provider batch id), and the hold answered with its own expiry.
func TestRegisterBatchThroughTheControlPlane(t *testing.T) {
	t.Parallel()
	_, client, db := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var provider, cred int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO providers (name, channel_type, base_url) VALUES ('beta-1', 'beta', 'http://127.0.0.1:9')
		RETURNING id`).Scan(&provider); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `INSERT INTO credentials (provider_id, secret_ciphertext) VALUES ($1, '\x00') RETURNING id`, provider).Scan(&cred); err != nil {
		t.Fatal(err)
	}
	team := int64(4)
	expires := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	valid := &settlementv1.RegisterBatchRequest{NodeId: "dp-1", ProviderId: provider, CredentialId: cred, ProviderBatchId: "msgbatch_01",
		Dialect: "beta", ApiKeyId: 7, UserId: 3, TeamId: &team, OrgId: 1, UpstreamModel: "b-1", ExpiresAt: timestamppb.New(expires),
		AdmittedAt: timestamppb.New(time.Now()), ReservedMicros: 3500, Lines: []*settlementv1.BatchLine{
			{CustomId: "r1", UpstreamModel: "b-1", EstimateMicros: 1500}, {CustomId: "r2", UpstreamModel: "b-1", EstimateMicros: 2000}}}

	if _, err := client.RegisterBatch(ctx, valid); status.Code(err) != codes.Unauthenticated {
		t.Errorf("RegisterBatch without token = %v, want Unauthenticated", err)
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	res, err := client.RegisterBatch(authed, valid)
	if err != nil {
		t.Fatal(err)
	}
	h := res.GetBatch()
	if !res.GetCreated() || h.GetReservedMicros() != 3500 || h.GetHeldMicros() != 3500 || h.GetLineCount() != 2 ||
		h.GetApiKeyId() != 7 || h.GetTeamId() != 4 || h.GetSettled() || h.GetProgressSeq() <= 0 ||
		!h.GetHoldExpiresAt().AsTime().Equal(expires.Add(6*time.Hour)) {
		t.Errorf("registered: created %v, %v", res.GetCreated(), h)
	}

	// A retried registration answers the stored batch and changes nothing, even with other lines.
	again := proto.Clone(valid).(*settlementv1.RegisterBatchRequest)
	again.Lines, again.ReservedMicros = again.Lines[:1], 1500
	res2, err := client.RegisterBatch(authed, again)
	if err != nil {
		t.Fatal(err)
	}
	if res2.GetCreated() || res2.GetBatch().GetBatchId() != h.GetBatchId() || res2.GetBatch().GetReservedMicros() != 3500 {
		t.Errorf("repeated registration: created %v, %v", res2.GetCreated(), res2.GetBatch())
	}

	for _, c := range []struct {
		name, want string
		edit       func(r *settlementv1.RegisterBatchRequest)
	}{
		{"no expiry", "expires_at", func(r *settlementv1.RegisterBatchRequest) { r.ExpiresAt = nil }},
		{"unknown dialect", "dialect", func(r *settlementv1.RegisterBatchRequest) { r.Dialect = "delta" }},
		{"alpha without endpoint", "endpoint", func(r *settlementv1.RegisterBatchRequest) { r.Dialect = "alpha" }},
		{"repeated custom_id", "repeats", func(r *settlementv1.RegisterBatchRequest) { r.Lines[1].CustomId = "r1" }},
		{"NUL in custom_id", "lines[0].custom_id", func(r *settlementv1.RegisterBatchRequest) { r.Lines[0].CustomId = "a\x00b" }},
		{"reservation not the sum", "not the sum", func(r *settlementv1.RegisterBatchRequest) { r.ReservedMicros = 99 }},
		{"negative estimate", "estimate_micros", func(r *settlementv1.RegisterBatchRequest) { r.Lines[0].EstimateMicros = -1 }},
		{"no key", "api_key_id", func(r *settlementv1.RegisterBatchRequest) { r.ApiKeyId = 0 }},
		{"unknown credential", "register batch", func(r *settlementv1.RegisterBatchRequest) { r.CredentialId = 99999 }},
	} {
		r := proto.Clone(valid).(*settlementv1.RegisterBatchRequest)
		r.ProviderBatchId = "msgbatch_" + strings.ReplaceAll(c.name, " ", "_")
		c.edit(r)
		_, err := client.RegisterBatch(authed, r)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", c.name, err, c.want)
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM batches`).Scan(&n); err != nil || n != 1 {
		t.Errorf("batches stored: %d, %v; want 1", n, err)
	}

	holds, err := client.ListBatchHolds(authed, &settlementv1.ListBatchHoldsRequest{AfterSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(holds.GetBatches()) != 1 || holds.GetBatches()[0].GetBatchId() != h.GetBatchId() || holds.GetBatches()[0].GetHeldMicros() != 3500 {
		t.Errorf("holds: %v", holds.GetBatches())
	}
	if _, err := client.ListBatchHolds(authed, &settlementv1.ListBatchHoldsRequest{AfterSeq: -1}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("negative after_seq: %v", err)
	}
}
