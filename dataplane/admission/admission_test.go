package admission_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/shared/vocab"
)

type bundle struct {
	rdb    *redis.Client
	prefix string
	keys   admission.Keys
	a      *admission.Admitter
	now    atomic.Pointer[time.Time]
}

func setup(t testing.TB, opts admission.Options) *bundle {
	t.Helper()
	rdb, prefix := admissiontest.Redis(t)
	b := &bundle{rdb: rdb, prefix: prefix, keys: admission.Keys{Prefix: prefix}}
	start := time.Date(2026, 11, 21, 1, 0, 10, 0, time.UTC)
	b.now.Store(&start)
	opts.Prefix = prefix
	if opts.Timeout == 0 { // not a deadline test: a loaded machine must not make it one
		opts.Timeout = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return *b.now.Load() }
	}
	b.a = admission.New(rdb, opts)
	return b
}

func (b *bundle) pending(t testing.TB, s vocab.Scope, id int64) int64 {
	t.Helper()
	v, err := b.rdb.Get(context.Background(), b.keys.Pending(s, id)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var threeScopes = []admission.ScopeQuota{
	{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1000},
	{Scope: vocab.ScopeTeam, ID: 2, LimitMicros: 500},
	{Scope: vocab.ScopeUser, ID: 3, LimitMicros: 10_000},
}

func TestAdmitAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	h, err := b.a.Admit(ctx, admission.Request{KeyID: 9, EstimateMicros: 300, Scopes: threeScopes})
	if err != nil {
		t.Fatalf("Admit = %v", err)
	}
	want := admission.Hold{Micros: 300, KeyID: 9, Window: b.now.Load().Unix() / 60, At: *b.now.Load(),
		Scopes: []admission.ScopeRef{{Scope: vocab.ScopeOrg, ID: 1}, {Scope: vocab.ScopeTeam, ID: 2}, {Scope: vocab.ScopeUser, ID: 3}}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("Admit = %+v, want %+v", h, want)
	}
	for _, s := range threeScopes {
		if got := b.pending(t, s.Scope, s.ID); got != 300 {
			t.Errorf("pending %s = %d, want 300", s.Scope, got)
		}
		ttl := b.rdb.TTL(ctx, b.keys.Pending(s.Scope, s.ID)).Val()
		if ttl <= 14*time.Minute || ttl > 15*time.Minute {
			t.Errorf("pending %s TTL = %v, want 15m", s.Scope, ttl)
		}
	}
	// The team (limit 500) cannot take another 300: nothing is reserved anywhere.
	_, err = b.a.Admit(ctx, admission.Request{KeyID: 9, EstimateMicros: 300, Scopes: threeScopes})
	var qe *admission.QuotaError
	if !errors.Is(err, admission.ErrQuotaExceeded) || !errors.As(err, &qe) || qe.Scope != vocab.ScopeTeam || qe.ID != 2 {
		t.Fatalf("second Admit = %v, want quota exceeded on team 2", err)
	}
	for _, s := range threeScopes {
		if got := b.pending(t, s.Scope, s.ID); got != 300 {
			t.Errorf("after refusal pending %s = %d, want 300 (nothing reserved)", s.Scope, got)
		}
	}
	// Exactly at the limit is admitted: 300 + 200 <= 500.
	h2, err := b.a.Admit(ctx, admission.Request{KeyID: 9, EstimateMicros: 200, Scopes: threeScopes})
	if err != nil {
		t.Fatalf("Admit at the limit = %v", err)
	}
	for _, h := range []admission.Hold{h, h2} {
		if err := b.a.Refund(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range threeScopes {
		if got := b.pending(t, s.Scope, s.ID); got != 0 {
			t.Errorf("after refunds pending %s = %d, want 0", s.Scope, got)
		}
	}
}

func TestAdmitZeroEstimateReservesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	h, err := b.a.Admit(ctx, admission.Request{KeyID: 1, EstimateMicros: 0, Scopes: threeScopes})
	if err != nil {
		t.Fatalf("Admit = %v", err)
	}
	if h.Micros != 0 || len(h.Scopes) != 0 {
		t.Errorf("Admit(0) hold = %+v, want nothing reserved", h)
	}
	if keys := admissiontest.Keys(t, b.rdb, b.prefix); len(keys) != 0 {
		t.Errorf("Admit(0) wrote %v", keys)
	}
	// A scope already over its limit refuses even a zero estimate.
	over := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 5, LimitMicros: 100, SnapshotUsedMicros: 101}}
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 1, Scopes: over}); !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Errorf("Admit(0) on an exhausted scope = %v, want ErrQuotaExceeded", err)
	}
}

func TestAdmitUsedIsMirrorWithSnapshotFloor(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	scope := func(snap int64) []admission.ScopeQuota {
		return []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 7, LimitMicros: 1000, SnapshotUsedMicros: snap}}
	}
	// No mirror: the snapshot's cost_used counts.
	if _, err := b.a.Admit(ctx, admission.Request{EstimateMicros: 100, Scopes: scope(950)}); !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Errorf("snapshot used 950 + 100 = %v, want refused", err)
	}
	// A newer, larger mirror counts over the snapshot.
	b.rdb.Set(ctx, b.keys.Used(vocab.ScopeOrg, 7), 920, time.Minute)
	if _, err := b.a.Admit(ctx, admission.Request{EstimateMicros: 100, Scopes: scope(0)}); !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Errorf("mirror used 920 + 100 = %v, want refused", err)
	}
	h, err := b.a.Admit(ctx, admission.Request{EstimateMicros: 80, Scopes: scope(0)})
	if err != nil {
		t.Errorf("mirror used 920 + 80 = %v, want admitted", err)
	}
	_ = b.a.Refund(ctx, h)
}

func TestAdmitRateLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	req := admission.Request{KeyID: 4, RPMLimit: 2, EstimateMicros: 10, Scopes: threeScopes[:1]}
	var holds []admission.Hold
	for i := range 2 {
		h, err := b.a.Admit(ctx, req)
		if err != nil {
			t.Fatalf("request %d = %v", i, err)
		}
		holds = append(holds, h)
	}
	_, err := b.a.Admit(ctx, req)
	var rl *admission.RateLimitError
	if !errors.As(err, &rl) || rl.Limit != "rpm" || rl.RetryAfter != 50*time.Second {
		t.Fatalf("third request = %v, want rpm limited, retry after 50s", err)
	}
	if got := b.pending(t, vocab.ScopeOrg, 1); got != 20 {
		t.Errorf("pending after a rate-limited request = %d, want 20", got)
	}
	next := b.now.Load().Add(time.Minute)
	b.now.Store(&next)
	if _, err := b.a.Admit(ctx, req); err != nil {
		t.Errorf("next minute = %v, want admitted", err)
	}

	// TPM: 60 + 60 > 100 refuses; an empty window admits even an oversized request.
	tpm := admission.Request{KeyID: 5, TPMLimit: 100, EstimateTokens: 60}
	if _, err := b.a.Admit(ctx, tpm); err != nil {
		t.Fatal(err)
	}
	if _, err := b.a.Admit(ctx, tpm); !errors.As(err, &rl) || rl.Limit != "tpm" {
		t.Errorf("second 60 tokens = %v, want tpm limited", err)
	}
	big := admission.Request{KeyID: 6, TPMLimit: 100, EstimateTokens: 500}
	if h, err := b.a.Admit(ctx, big); err != nil || h.Tokens != 500 {
		t.Errorf("oversized request in an empty window = %+v, %v; want admitted counting 500", h, err)
	}
	for _, h := range holds {
		_ = b.a.Refund(ctx, h)
	}
}

func TestAdmitConcurrentNeverOverReserves(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 11, LimitMicros: 10_000}, {Scope: vocab.ScopeUser, ID: 12, LimitMicros: 1_000_000}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.a.Admit(ctx, admission.Request{EstimateMicros: 300, Scopes: scopes}); err == nil {
				admitted.Add(1)
			} else if !errors.Is(err, admission.ErrQuotaExceeded) {
				t.Errorf("Admit = %v", err)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 33 { // floor(10000 / 300)
		t.Errorf("admitted %d, want 33", admitted.Load())
	}
	if got := b.pending(t, vocab.ScopeUser, 12); got != 33*300 {
		t.Errorf("user pending = %d, want %d (all-or-nothing)", got, 33*300)
	}
}

func TestHoldEncoding(t *testing.T) {
	t.Parallel()
	holds := []admission.Hold{
		{},
		{KeyID: 3, Window: 29000000, Tokens: 40},
		{Micros: 123, KeyID: 1, Window: 2, Tokens: 3, Scopes: []admission.ScopeRef{{Scope: vocab.ScopeOrg, ID: 1}, {Scope: vocab.ScopeTeam, ID: 2}, {Scope: vocab.ScopeUser, ID: 3}}},
		{Micros: 9, KeyID: 1, Window: 2, Scopes: []admission.ScopeRef{{Scope: vocab.ScopeOrg, ID: 1}}, RequestID: "req_0123abcd"},
		{Micros: 9, KeyID: 1, Window: 2, Tokens: 5, RequestID: "req_1", Expiring: true, At: time.UnixMilli(1795737600123),
			Scopes: []admission.ScopeRef{{Scope: vocab.ScopeOrg, ID: 1, Period: "d1795737600"}, {Scope: vocab.ScopeKey, ID: 4},
				{Scope: vocab.ScopeTeam, ID: 2, Period: "m1793491200"}, {Scope: vocab.ScopeUser, ID: 3}},
			RateScopes: []admission.ScopeRef{{Scope: vocab.ScopeTeam, ID: 2}, {Scope: vocab.ScopeOrg, ID: 1}}},
		{KeyID: 1, Window: 2, At: time.UnixMilli(1)},
	}
	for _, h := range holds {
		s := admission.EncodeHold(h)
		got, err := admission.DecodeHold(s)
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Errorf("DecodeHold(EncodeHold(%+v) = %q) = %+v, %v", h, s, got, err)
		}
	}
	for _, bad := range []string{"", "v2;1;1;1;1;", "v1;1;1;1;1;", "v2;1;1;1;1;org:1;", "v2;1;1;1;1;org:1;a:b",
		"v2;0;1;1;1;;req_1", "v1;1;1;1;1;org:1;req_1", "v2;1;1;1;1;org:1;" + strings.Repeat("a", 65), "v1;-1;1;1;1;org:1", "v1;1;1;1;1;org:0",
		"v1;1;1;1;1;galaxy:1", "v1;1;1;1;1;org:1,org:2,org:3,org:4,org:5", "v1;x;1;1;1;org:1",
		"v1;1;1;1;1;org:1:d5", "v3;1;1;1;1;org:1:x5;req_1;5;1;", "v3;1;1;1;1;org:1:d5;;5;1;", "v3;1;1;1;1;org:1;req_1;0;1;",
		"v3;1;1;1;1;org:1;req_1;5;2;", "v3;1;1;1;1;org:1;req_1;5;1;team:1:d5", "v3;1;1;1;1;org:1:;req_1;5;1;"} {
		if h, err := admission.DecodeHold(bad); err == nil {
			t.Errorf("DecodeHold(%q) = %+v, want error", bad, h)
		}
	}
}

func FuzzDecodeHold(f *testing.F) {
	f.Add("v1;123;1;2;3;org:1,team:2,user:3")
	f.Add("v1;0;0;0;0;")
	f.Add("v1;;;;;")
	f.Add("v2;5;1;2;3;org:1;req_00ff")
	f.Add("v3;5;1;2;3;org:1:d1795737600,key:4;req_00ff;1795737600123;1;team:2")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := admission.DecodeHold(s)
		if err != nil {
			return
		}
		if h.Micros < 0 || len(h.Scopes) > 4 || (h.Micros > 0 && len(h.Scopes) == 0) ||
			(h.RequestID != "" && (!admission.ValidRequestID(h.RequestID) || h.Micros == 0)) {
			t.Fatalf("DecodeHold(%q) = %+v: invariant broken", s, h)
		}
		back, err := admission.DecodeHold(admission.EncodeHold(h))
		if err != nil || !reflect.DeepEqual(back, h) {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
		want := 5
		switch {
		case !h.At.IsZero():
			want = 9
		case h.RequestID != "":
			want = 6
		}
		if strings.Count(admission.EncodeHold(h), ";") != want {
			t.Fatalf("EncodeHold(%+v) has the wrong shape", h)
		}
	})
}

// BenchmarkAdmit measures one admission round trip (Lua via EVALSHA) with three quota scopes and both
// rate limits.
func BenchmarkAdmit(b *testing.B) {
	bb := setup(b, admission.Options{Now: time.Now})
	ctx := context.Background()
	scopes := []admission.ScopeQuota{
		{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1 << 60},
		{Scope: vocab.ScopeTeam, ID: 2, LimitMicros: 1 << 60},
		{Scope: vocab.ScopeUser, ID: 3, LimitMicros: 1 << 60},
	}
	req := admission.Request{KeyID: 1, RPMLimit: 1 << 40, TPMLimit: 1 << 50, EstimateTokens: 100, EstimateMicros: 250, Scopes: scopes}
	b.ReportAllocs()
	b.Run("ping-baseline", func(b *testing.B) {
		for b.Loop() {
			if err := bb.rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := bb.a.Admit(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := bb.a.Admit(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// TestAdmitUnavailablePause: after a failed Redis call, Admit answers ErrUnavailable at once, without
// trying Redis, for a second; then it tries again and, Redis being back, admits.
func TestAdmitUnavailablePause(t *testing.T) {
	t.Parallel()
	_, prefix := admissiontest.Redis(t)
	proxy := admissiontest.NewProxy(t)
	opts, err := redis.ParseURL(proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries, opts.DialTimeout = 0, 200*time.Millisecond
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	a := admission.New(rdb, admission.Options{Prefix: prefix})
	ctx := context.Background()
	req := admission.Request{KeyID: 1, EstimateMicros: 10, Scopes: threeScopes}
	if _, err := a.Admit(ctx, req); err != nil {
		t.Fatalf("admit with Redis up: %v", err)
	}
	proxy.Down()
	_, err = a.Admit(ctx, req)
	if err == nil || errors.Is(err, admission.ErrUnavailable) {
		t.Fatalf("first admit in the outage = %v, want the Redis error itself", err)
	}
	if _, err := a.Admit(ctx, req); !errors.Is(err, admission.ErrUnavailable) {
		t.Fatalf("admit right after a failure = %v, want ErrUnavailable without trying Redis", err)
	}
	proxy.Up()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := a.Admit(ctx, req)
		if err == nil {
			break
		}
		if !errors.Is(err, admission.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("admit after the pause = %v, want success once Redis is back", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A request that goes away mid-call does not start a pause.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Admit(cancelled, req); err == nil {
		t.Fatal("admit with a cancelled context succeeded")
	}
	if _, err := a.Admit(ctx, req); err != nil {
		t.Fatalf("admit after a cancelled request = %v, want no pause", err)
	}
}

// An exhausted scope refuses every request it would charge, a zero estimate included: used (or used plus
// what is held) at the limit leaves no room, so an output-only price (estimate 0) is not served for free
// past the limit (issue 15, item 3a).
func TestAdmitZeroEstimateRefusedOnExhaustedScope(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	atLimit := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 7, LimitMicros: 100, SnapshotUsedMicros: 100}}
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 1, Scopes: atLimit}); !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Errorf("Admit(0) with used = limit: %v, want ErrQuotaExceeded", err)
	}
	// Held estimates fill the rest of the limit: a zero estimate is refused too.
	room := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 8, LimitMicros: 100, SnapshotUsedMicros: 40}}
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 1, EstimateMicros: 60, Scopes: room}); err != nil {
		t.Fatalf("Admit(60) = %v", err)
	}
	if _, err := b.a.Admit(ctx, admission.Request{KeyID: 1, Scopes: room}); !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Errorf("Admit(0) with used+pending = limit: %v, want ErrQuotaExceeded", err)
	}
	// Below the limit a zero estimate is admitted and reserves nothing.
	below := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 9, LimitMicros: 100, SnapshotUsedMicros: 99}}
	if h, err := b.a.Admit(ctx, admission.Request{KeyID: 1, Scopes: below}); err != nil || h.Micros != 0 {
		t.Errorf("Admit(0) below the limit = %+v, %v; want admitted, nothing held", h, err)
	}
}
