package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestAdmitKeyTTLs: an admission sets the marker's TTL (7 days), the pending counter's and hold set's
// (the pending TTL, refreshed by every reservation) and — when it creates a rate window, with the first
// count of its minute — the window's (2 minutes, from that first count: later counts do not refresh it).
// A refused admission creates no key at all: the counts it made first are undone.
func TestAdmitKeyTTLs(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	org := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1_000_000}}
	req := func(id string) admission.Request {
		return admission.Request{ID: id, KeyID: 3, RPMLimit: 100, TPMLimit: 10_000, EstimateTokens: 50, EstimateMicros: 10, Scopes: org}
	}
	h, err := b.a.Admit(ctx, req("req_ttl1"))
	if err != nil {
		t.Fatal(err)
	}
	rpm, tpm := b.keys.RPM(3, h.Window), b.keys.TPM(3, h.Window)
	near := func(key string, want, slack time.Duration) {
		t.Helper()
		if got := b.rdb.PTTL(ctx, key).Val(); got > want || got < want-slack {
			t.Errorf("TTL of %s = %v, want %v", key, got, want)
		}
	}
	near(b.keys.Hold("req_ttl1"), 7*24*time.Hour, 5*time.Second)
	near(rpm, 2*time.Minute, 5*time.Second)
	near(tpm, 2*time.Minute, 5*time.Second)
	near(b.keys.Pending(vocab.ScopeOrg, 1), 15*time.Minute, 5*time.Second)
	near(b.keys.Holds(vocab.ScopeOrg, 1, ""), 15*time.Minute, 5*time.Second)
	// Later counts in the window leave its TTL as the first count set it; reservations refresh the
	// pending counter's and the hold set's.
	for _, k := range []string{rpm, tpm, b.keys.Pending(vocab.ScopeOrg, 1), b.keys.Holds(vocab.ScopeOrg, 1, "")} {
		b.rdb.PExpire(ctx, k, 30*time.Second)
	}
	if _, err := b.a.Admit(ctx, req("req_ttl2")); err != nil {
		t.Fatal(err)
	}
	near(rpm, 30*time.Second, 5*time.Second)
	near(tpm, 30*time.Second, 5*time.Second)
	near(b.keys.Pending(vocab.ScopeOrg, 1), 15*time.Minute, 5*time.Second)
	near(b.keys.Holds(vocab.ScopeOrg, 1, ""), 15*time.Minute, 5*time.Second)
	if got := b.rdb.Get(ctx, rpm).Val(); got != "2" {
		t.Errorf("requests counted %s, want 2", got)
	}
	if got := b.rdb.Get(ctx, tpm).Val(); got != "100" {
		t.Errorf("tokens counted %s, want 100", got)
	}

	// Refused by the second scope's quota after the windows and the first scope were counted: every key
	// this call created is gone again.
	rdb, prefix := admissiontest.Redis(t)
	a := admission.New(rdb, admission.Options{Prefix: prefix, Timeout: 30 * time.Second})
	spent := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1000}, {Scope: vocab.ScopeUser, ID: 2, LimitMicros: 1000, SnapshotUsedMicros: 1000}}
	_, err = a.Admit(ctx, admission.Request{ID: "req_no", KeyID: 3, RPMLimit: 100, TPMLimit: 10_000, EstimateTokens: 50, EstimateMicros: 10, Scopes: spent})
	if !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Fatalf("Admit on a spent quota = %v", err)
	}
	// Only the request's cost-lookup marker stays: a refused request has a (rejected) record to look up.
	if keys := admissiontest.Keys(t, rdb, prefix); len(keys) != 1 || keys[0] != prefix+"rc:req_no" {
		t.Errorf("a refused admission left %v, want only its cost-lookup marker", keys)
	}
}
