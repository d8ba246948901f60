package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCreditReachesAdmission: a scope refused for being over its limit, whose data-plane cost_used
// mirror (qu:) holds the high settled total, is admitted again as soon as the snapshot carrying an
// operator's credit arrives — not after the mirror's 1 h TTL (docs/settlement.md, "Adjustment epochs").
// Real control plane, Postgres, Redis, data plane and mock upstream.
func TestCreditReachesAdmission(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stSeed(t, s)
	ten := s.tenant(t, "credit", "1000")
	org := fmt.Sprintf("org/%d", ten.org)
	mirror := s.prefix + "qu:org:" + fmt.Sprint(ten.org)
	adjust := func(amount, reason string) {
		s.admin(t, "POST", "/admin/quotas/"+org+"/adjustments", map[string]any{"amount": amount, "reason": reason}, nil)
		s.sync(t)
	}

	// A debit takes the org to just under its limit; a request still fits, and its settlement writes the
	// mirror: 999 + its cost.
	adjust("999", "debit for records lost in INC-7")
	a := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	s.waitUsages(t, ten.keyID, 1)
	waitMirror(t, s, mirror, func(v string) bool { return strings.HasPrefix(v, "999") })

	// The limit is lowered under the spend: refused.
	s.admin(t, "PUT", "/admin/quotas/"+org, map[string]any{"cost_limit": "999"}, nil)
	s.sync(t)
	r := s.send(context.Background(), "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	if r.err != nil || r.status != http.StatusPaymentRequired {
		t.Fatalf("over the limit: status %d %v, want 402; body %s", r.status, r.err, r.body)
	}

	// The debit was a mistake: credit it. The next request — on the snapshot that carries the credit,
	// with the mirror still holding 999 + cost — is admitted.
	adjust("-999", "reverse the INC-7 debit: the records were found")
	c := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	rows := s.waitUsages(t, ten.keyID, 3) // a, the refused request's rejected row, c
	stRow(t, rows, a.reqID)
	stRow(t, rows, c.reqID)

	// c's settlement answer, of the credit's epoch, replaces the mirror with the lowered total; later
	// requests are admitted on it as well.
	waitMirror(t, s, mirror, func(v string) bool { return !strings.HasPrefix(v, "999") })
	s.waitAllPendingZero(t)
	s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	s.waitUsages(t, ten.keyID, 4)
	s.waitAllPendingZero(t)
	s.checkQuotas(t, ten) // the debit and the credit cancel: cost_used = Σ usages.cost
}

// waitMirror polls a qu: mirror until ok accepts its value.
func waitMirror(t *testing.T, s *stack, key string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, _ := s.rdb.Get(context.Background(), key).Result()
		if v != "" && ok(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror %s = %q: not the expected value after 20 s", key, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
