package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/admission"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/period"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

func compileSnap(t *testing.T, s *snapshotv1.Snapshot) *snapshot.Compiled {
	t.Helper()
	c, err := snapshot.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (b *bundle) advance(d time.Duration) {
	t := b.now.Load().Add(d)
	b.now.Store(&t)
}

func (b *bundle) pendingIn(t *testing.T, s vocab.Scope, id int64, periodID string) int64 {
	t.Helper()
	v, _ := b.rdb.Get(context.Background(), b.keys.PendingIn(s, id, periodID)).Int64()
	return v
}

// TestLeakedHoldExpiresOnBusyScope: a hold whose data plane died (never refunded) stops counting once the
// pending TTL has passed, although other requests keep reserving on — and refreshing the keys of — the
// same scope; its late refund then subtracts nothing (issue 15, 3b). Before expiring holds, every
// reservation refreshed the counter's TTL and the leaked amount counted for as long as traffic went on.
func TestLeakedHoldExpiresOnBusyScope(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{PendingTTL: time.Minute})
	ctx := context.Background()
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1000}}
	leaked, err := b.a.Admit(ctx, admission.Request{ID: "req_leaked", EstimateMicros: 600, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	// Traffic every 10 s for 50 s: each admitted and refunded (settled) normally, each refreshing the TTL.
	for i := 0; i < 5; i++ {
		b.advance(10 * time.Second)
		h, err := b.a.Admit(ctx, admission.Request{ID: "req_busy" + string(rune('a'+i)), EstimateMicros: 300, Scopes: scopes})
		if err != nil {
			t.Fatalf("busy request %d: %v", i, err)
		}
		if err := b.a.Refund(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	// 59 s after the leak it still counts: 600 + 500 > 1000.
	b.advance(9 * time.Second)
	if _, err := b.a.Admit(ctx, admission.Request{ID: "req_before", EstimateMicros: 500, Scopes: scopes}); !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Fatalf("59 s after the leak: Admit = %v, want ErrQuotaExceeded (the hold still counts)", err)
	}
	if ttl := b.rdb.TTL(ctx, b.keys.Pending(vocab.ScopeOrg, 1)).Val(); ttl <= 0 {
		t.Fatalf("pending counter TTL %s: the key itself must still be alive (kept by traffic)", ttl)
	}
	// Past its own expiry it no longer counts, though the counter key was refreshed by the traffic.
	b.advance(2 * time.Second)
	h, err := b.a.Admit(ctx, admission.Request{ID: "req_after", EstimateMicros: 500, Scopes: scopes})
	if err != nil {
		t.Fatalf("61 s after the leak: Admit = %v, want admitted (the leaked hold expired)", err)
	}
	if got := b.pending(t, vocab.ScopeOrg, 1); got != 500 {
		t.Fatalf("pending = %d, want 500 (only the live hold)", got)
	}
	// The leaked request's record arrives after all (a very late settlement): nothing more is subtracted.
	if err := b.a.Refund(ctx, leaked); err != nil {
		t.Fatal(err)
	}
	if got := b.pending(t, vocab.ScopeOrg, 1); got != 500 {
		t.Fatalf("after the expired hold's refund, pending = %d, want 500", got)
	}
	if err := b.a.Refund(ctx, h); err != nil {
		t.Fatal(err)
	}
	if got := b.pending(t, vocab.ScopeOrg, 1); got != 0 {
		t.Fatalf("after every refund, pending = %d, want 0", got)
	}
	if n := b.rdb.ZCard(ctx, b.keys.Holds(vocab.ScopeOrg, 1, "")).Val(); n != 0 {
		t.Fatalf("%d holds left in the set", n)
	}
}

// TestKeyScopeQuota: a key's own quota (scope "key") is a fourth scope beside org, team and user
// (QuotaScopes finds it in the snapshot): checked, reserved on and named in the hold and the refusal.
func TestKeyScopeQuota(t *testing.T) {
	t.Parallel()
	limit, big := "0.001", "1000" // 1000 micros for the key
	cur := compileSnap(t, &snapshotv1.Snapshot{Version: 1,
		ApiKeys: []*configv1.ApiKey{
			{Id: 7, UserId: 100, OrgId: 1, Prefix: "tg_a", KeyHash: make32(1), Enabled: true},
			{Id: 8, UserId: 100, OrgId: 1, Prefix: "tg_b", KeyHash: make32(2), Enabled: true},
		},
		Quotas: []*configv1.Quota{{Scope: "key", ScopeId: 7, CostLimit: &limit, CostUsed: "0.0008"}, {Scope: "org", ScopeId: 1, CostLimit: &big, CostUsed: "0"},
			{Scope: "user", ScopeId: 100, CostUsed: "0"}}})
	b := setup(t, admission.Options{Snapshot: func() *snapshot.Compiled { return cur }})
	ctx := context.Background()
	scopes := admission.QuotaScopes(cur, cur.KeyByID(7), nil)
	if len(scopes) != 2 || scopes[0].Scope != vocab.ScopeOrg || scopes[1].Scope != vocab.ScopeKey || scopes[1].LimitMicros != 1000 {
		t.Fatalf("QuotaScopes = %+v, want the org and the key (the user's quota has no limit)", scopes)
	}
	org := admission.QuotaScopes(cur, cur.KeyByID(8), nil)
	h, err := b.a.Admit(ctx, admission.Request{ID: "req_k1", KeyID: 7, EstimateMicros: 150, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Scopes) != 2 || h.Scopes[1] != (admission.ScopeRef{Scope: vocab.ScopeKey, ID: 7}) {
		t.Fatalf("hold scopes %+v, want org then key 7", h.Scopes)
	}
	if got := b.pending(t, vocab.ScopeKey, 7); got != 150 {
		t.Fatalf("key pending = %d", got)
	}
	var qe *admission.QuotaError
	if _, err := b.a.Admit(ctx, admission.Request{ID: "req_k2", KeyID: 7, EstimateMicros: 100, Scopes: scopes}); !errors.As(err, &qe) || qe.Scope != vocab.ScopeKey || qe.ID != 7 {
		t.Fatalf("second request = %v, want the key's quota exceeded", err)
	}
	// Another key of the same org is not limited by key 7's budget.
	if _, err := b.a.Admit(ctx, admission.Request{ID: "req_k3", KeyID: 8, EstimateMicros: 100, Scopes: org}); err != nil {
		t.Fatalf("key 8 = %v", err)
	}
	decoded, err := admission.DecodeHold(admission.EncodeHold(h))
	if err != nil || decoded.Scopes[1].Scope != vocab.ScopeKey {
		t.Fatalf("hold round trip: %+v, %v", decoded, err)
	}
}

// TestScopeRateLimits: RPM and TPM limits of a team's and an org's quota apply to all their keys
// together; a key's own limits still apply; a refusal names the scope and counts nothing.
func TestScopeRateLimits(t *testing.T) {
	t.Parallel()
	team := int64(20)
	cur := compileSnap(t, &snapshotv1.Snapshot{Version: 1,
		ApiKeys: []*configv1.ApiKey{
			{Id: 1, UserId: 100, OrgId: 10, TeamId: &team, Prefix: "tg_a", KeyHash: make32(1), Enabled: true},
			{Id: 2, UserId: 101, OrgId: 10, TeamId: &team, Prefix: "tg_b", KeyHash: make32(2), Enabled: true},
			{Id: 3, UserId: 102, OrgId: 10, Prefix: "tg_c", KeyHash: make32(3), Enabled: true},
		},
		Quotas: []*configv1.Quota{
			{Scope: "team", ScopeId: 20, CostUsed: "0", RpmLimit: 2},
			{Scope: "org", ScopeId: 10, CostUsed: "0", TpmLimit: 1000},
		}})
	b := setup(t, admission.Options{Snapshot: func() *snapshot.Compiled { return cur }})
	ctx := context.Background()
	if !admission.ScopeRateLimited(cur, cur.KeyByID(3)) {
		t.Fatal("key 3's org has a tpm limit: ScopeRateLimited must say so")
	}
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 1, EstimateTokens: 300}); err != nil {
		t.Fatal(err)
	}
	h, err := b.a.Admit(ctx, admission.Request{KeyID: 2, EstimateTokens: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.RateScopes) != 1 || h.RateScopes[0] != (admission.ScopeRef{Scope: vocab.ScopeOrg, ID: 10}) || h.Tokens != 300 {
		t.Fatalf("hold %+v: want the org's token window to correct at settlement", h)
	}
	var rl *admission.RateLimitError
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 1, EstimateTokens: 300}); !errors.As(err, &rl) || rl.Scope != vocab.ScopeTeam || rl.ID != 20 || rl.Limit != "rpm" {
		t.Fatalf("third request of the team = %v, want the team's rpm", err)
	}
	// Key 3 is outside the team, inside the org: 600 tokens counted + 300 fits; + 300 more does not.
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 3, EstimateTokens: 300}); err != nil {
		t.Fatalf("key outside the team = %v", err)
	}
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 3, EstimateTokens: 300}); !errors.As(err, &rl) || rl.Scope != vocab.ScopeOrg || rl.Limit != "tpm" {
		t.Fatalf("org over its tpm = %v, want the org's tpm", err)
	}
	// The key's own limit is still a limiter, named as the key.
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 3, RPMLimit: 1, EstimateTokens: 1}); err == nil {
		if _, err := b.a.Admit(ctx, admission.Request{KeyID: 3, RPMLimit: 1, EstimateTokens: 1}); !errors.As(err, &rl) || rl.Scope != vocab.ScopeKey || rl.ID != 3 {
			t.Fatalf("key's own rpm = %v", err)
		}
	}
	// A new minute opens new windows.
	b.advance(time.Minute)
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 1, EstimateTokens: 300}); err != nil {
		t.Fatalf("next minute = %v", err)
	}
}

func make32(b byte) []byte {
	out := make([]byte, 32)
	out[0] = b
	return out
}

// TestPeriodBoundaryAdmission: a daily quota's spend counts in its day only. Across midnight (the
// admitter's clock) admission uses the new period's keys, where the snapshot's spend of the old day does
// not count, while the old day's holds stay (and are refunded) in the old day's keys.
func TestPeriodBoundaryAdmission(t *testing.T) {
	t.Parallel()
	paris, err := period.LoadZone("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	day1 := period.Of(period.Daily, paris, time.Date(2026, 11, 27, 12, 0, 0, 0, paris))
	limit := "0.001"
	cur := compileSnap(t, &snapshotv1.Snapshot{Version: 1, Quotas: []*configv1.Quota{{Scope: "org", ScopeId: 1, CostLimit: &limit,
		CostUsed: "0.0009", Period: "daily", TimeZone: "Europe/Paris", PeriodId: day1.ID()}}})
	b := setup(t, admission.Options{Snapshot: func() *snapshot.Compiled { return cur }})
	start := day1.End.Add(-2 * time.Second) // 23:59:58 in Paris
	b.now.Store(&start)
	ctx := context.Background()
	q, _ := cur.Quota(vocab.ScopeOrg, 1)
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: q.LimitMicros}}
	h1, err := b.a.Admit(ctx, admission.Request{ID: "req_d1", EstimateMicros: 50, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	if h1.Scopes[0].Period != day1.ID() || !h1.At.Equal(start) {
		t.Fatalf("hold %+v, want period %s admitted at %s", h1, day1.ID(), start)
	}
	if _, err := b.a.Admit(ctx, admission.Request{ID: "req_d1b", EstimateMicros: 100, Scopes: scopes}); !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Fatalf("900 used + 50 held + 100 on day 1 = %v, want ErrQuotaExceeded", err)
	}
	b.advance(3 * time.Second) // 00:00:01: day 2
	day2 := period.Of(period.Daily, paris, *b.now.Load())
	h2, err := b.a.Admit(ctx, admission.Request{ID: "req_d2", EstimateMicros: 900, Scopes: scopes})
	if err != nil {
		t.Fatalf("day 2 = %v, want admitted (day 1's spend and holds do not count)", err)
	}
	if h2.Scopes[0].Period != day2.ID() || day2.ID() == day1.ID() {
		t.Fatalf("day 2 hold period %q, day 1 %q", h2.Scopes[0].Period, day1.ID())
	}
	if got := b.pendingIn(t, vocab.ScopeOrg, 1, day1.ID()); got != 50 {
		t.Fatalf("day 1 pending %d, want 50", got)
	}
	if got := b.pendingIn(t, vocab.ScopeOrg, 1, day2.ID()); got != 900 {
		t.Fatalf("day 2 pending %d, want 900", got)
	}
	// Day 1's request settles after midnight: its refund leaves day 2 alone.
	if err := b.a.Refund(ctx, h1); err != nil {
		t.Fatal(err)
	}
	if got := b.pendingIn(t, vocab.ScopeOrg, 1, day1.ID()); got != 0 {
		t.Fatalf("day 1 pending after refund %d", got)
	}
	if got := b.pendingIn(t, vocab.ScopeOrg, 1, day2.ID()); got != 900 {
		t.Fatalf("day 2 pending after day 1's refund %d", got)
	}
}
