package settle

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestRetriedBatchRefundsOnce runs the acknowledge-and-refund step twice for the same entries, as happens
// when a batch is retried or two forwarders race on a claimed entry: the hold is refunded once.
func TestRetriedBatchRefundsOnce(t *testing.T) {
	t.Parallel()
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	now := time.Now()
	adm := admission.New(rdb, admission.Options{Prefix: prefix, Now: func() time.Time { return now }})
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1e9}}
	rec := NewRecorder(rdb, prefix)
	var window int64
	for _, id := range []string{"a", "b"} {
		h, err := adm.Admit(ctx, admission.Request{KeyID: 1, TPMLimit: 1e6, EstimateTokens: 40, EstimateMicros: 400, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		window = h.Window
		// Actual usage 100 tokens against the 40 estimated.
		r := &settlementv1.SettlementRecord{RequestId: id, Tokens: &settlementv1.TokenCounts{Input: 70, Output: 30}}
		if err := rec.Append(ctx, r, h); err != nil {
			t.Fatal(err)
		}
	}
	// A third hold that stays pending: the refunds must not eat into it.
	if _, err := adm.Admit(ctx, admission.Request{KeyID: 1, EstimateMicros: 400, Scopes: scopes}); err != nil {
		t.Fatal(err)
	}
	f, err := NewForwarder(rdb, ForwarderOptions{Prefix: prefix, NodeID: "n1", ControlPlane: cpclient.Options{Endpoints: []string{"127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ensureGroup(ctx, f.outboxes[0]); err != nil {
		t.Fatal(err)
	}
	msgs, err := f.readGroup(ctx, f.outboxes[0], ">", 10, -1)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("read = %d entries, %v", len(msgs), err)
	}
	var entries []entry
	for _, m := range msgs {
		r, h, err := DecodeEntry(m.Values)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, entry{id: m.ID, rec: r, hold: h})
	}
	resp := &settlementv1.SettleResponse{Quotas: []*configv1.Quota{{Scope: "org", ScopeId: 1, CostUsed: "0.0012345"}}}
	keys := admission.Keys{Prefix: prefix}
	for range 2 {
		if err := f.finish(ctx, entries, resp); err != nil {
			t.Fatal(err)
		}
		if got := rdb.Get(ctx, keys.Pending(vocab.ScopeOrg, 1)).Val(); got != "400" {
			t.Errorf("pending after refund = %s, want 400 (only the third hold)", got)
		}
	}
	if got := rdb.Get(ctx, keys.Used(vocab.ScopeOrg, 1)).Val(); got != "1235" {
		t.Errorf("mirror = %s, want 1235 micros", got)
	}
	if got := rdb.Get(ctx, keys.TPM(1, window)).Val(); got != "200" {
		t.Errorf("TPM window = %s, want 200 (estimates 2×40 corrected to actual 2×100, once)", got)
	}
	// An older, smaller answer never lowers the mirror.
	old := &settlementv1.SettleResponse{Quotas: []*configv1.Quota{{Scope: "org", ScopeId: 1, CostUsed: "0.001"}}}
	if err := f.finish(ctx, nil, old); err != nil {
		t.Fatal(err)
	}
	if got := rdb.Get(ctx, keys.Used(vocab.ScopeOrg, 1)).Val(); got != "1235" {
		t.Errorf("mirror after an older answer = %s, want 1235", got)
	}
	if n := rdb.XLen(ctx, Streams{Prefix: prefix}.Outbox("")).Val(); n != 0 {
		t.Errorf("outbox holds %d entries, want 0", n)
	}
}

func TestCostUsedMicros(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false}, {"1", 1_000_000, false}, {"0.0000005", 1, false}, {"0.00000049", 0, false},
		{"12.3456785", 12_345_679, false}, {"0.000123456789012345678901234567", 123, false},
		{"9223372036854.775807", 1<<63 - 1, false}, {"99999999999999999999", 1<<63 - 1, false},
		{"", 0, true}, {"-1", 0, true}, {"-0", 0, true}, {"1.", 0, true}, {".5", 0, true}, {"1e3", 0, true}, {"NaN", 0, true},
	}
	for _, tt := range tests {
		got, err := costUsedMicros(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("costUsedMicros(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestCompareIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"1-0", "1-0", 0}, {"1-1", "1-0", 1}, {"9-0", "10-0", -1}, {"1700000000000-5", "1700000000000-12", -1}, {"0-0", "1-0", -1},
	}
	for _, tt := range tests {
		if got := compareIDs(tt.a, tt.b); got != tt.want {
			t.Errorf("compareIDs(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestMirrorAdjustmentEpochRule runs settle.lua's mirror update against real Redis: within an adjustment
// epoch the mirror keeps the largest answer; an answer of a newer epoch replaces it even when lower (an
// operator's credit); one of an older epoch (computed before the adjustment) changes nothing.
func TestMirrorAdjustmentEpochRule(t *testing.T) {
	t.Parallel()
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	f, err := NewForwarder(rdb, ForwarderOptions{Prefix: prefix, NodeID: "n1", ControlPlane: cpclient.Options{Endpoints: []string{"127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	mirror := admission.Keys{Prefix: prefix}.Used(vocab.ScopeTeam, 5)
	steps := []struct {
		used  string
		epoch int64
		want  string
	}{
		{"0.000950", 0, "950"},   // first answer, never adjusted: the plain form
		{"0.000900", 0, "950"},   // a late, smaller answer of the same epoch: kept
		{"0.000960", 0, "960"},   // a larger one: raised
		{"0.0001", 1, "100:1"},   // after a credit: replaced although lower
		{"0.000970", 0, "100:1"}, // an answer computed before the credit, arriving late: ignored
		{"0.00012", 1, "120:1"},  // settlement after the credit: counts
		{"0.00011", 1, "120:1"},  // older answer of the same epoch: kept
		{"0.002", 3, "2000:3"},   // a debit two adjustments later
		{"0.0001", 2, "2000:3"},  // an epoch in between: ignored
		{"0.0000005", 4, "1:4"},  // rounding to micros, newer epoch
		{"0.000001", -1, "1:4"},  // a negative epoch counts as 0: ignored
	}
	for i, s := range steps {
		resp := &settlementv1.SettleResponse{Quotas: []*configv1.Quota{{Scope: "team", ScopeId: 5, CostUsed: s.used, AdjustEpoch: s.epoch}}}
		if err := f.finish(ctx, nil, resp); err != nil {
			t.Fatal(err)
		}
		if got := rdb.Get(ctx, mirror).Val(); got != s.want {
			t.Errorf("step %d (%s at epoch %d): mirror = %q, want %q", i, s.used, s.epoch, got, s.want)
		}
	}
	if ttl := rdb.TTL(ctx, mirror).Val(); ttl <= 0 {
		t.Errorf("mirror TTL = %v, want refreshed", ttl)
	}
}

// FuzzMirrorUpdate runs settle.lua's mirror update (real Redis) over arbitrary previous mirror contents:
// the script never fails (a failure would block the batch's refunds), and an answer of an epoch newer than
// anything parsable there replaces the mirror.
func FuzzMirrorUpdate(f *testing.F) {
	for _, s := range []string{"950", "950:1", "junk", ":", "1:", ":1", "-5", "-5:2", "1e400", "nan", "0x10", "1:2:3", "\x00"} {
		f.Add(s)
	}
	rdb, prefix := admissiontest.Redis(f)
	fw, err := NewForwarder(rdb, ForwarderOptions{Prefix: prefix, NodeID: "n1", ControlPlane: cpclient.Options{Endpoints: []string{"127.0.0.1:1"}}})
	if err != nil {
		f.Fatal(err)
	}
	var n int64
	f.Fuzz(func(t *testing.T, prev string) {
		ctx := context.Background()
		n++
		key := admission.Keys{Prefix: prefix}.Used(vocab.ScopeUser, n)
		if err := rdb.Set(ctx, key, prev, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		resp := &settlementv1.SettleResponse{Quotas: []*configv1.Quota{{Scope: "user", ScopeId: n, CostUsed: "0.000007", AdjustEpoch: 1 << 52}}}
		if err := fw.finish(ctx, nil, resp); err != nil {
			t.Fatalf("previous mirror %q: %v", prev, err)
		}
		if m := regexp.MustCompile(`^([0-9]+):([0-9]+)$`).FindStringSubmatch(prev); m != nil {
			if e, _ := strconv.ParseFloat(m[2], 64); e >= 1<<52 {
				return // an epoch at least as new: the answer may be ignored
			}
		}
		if got := rdb.Get(ctx, key).Val(); got != "7:4503599627370496" {
			t.Fatalf("previous mirror %q: mirror = %q, want 7:4503599627370496", prev, got)
		}
	})
}
