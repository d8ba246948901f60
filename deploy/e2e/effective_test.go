package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store"
)

// TestScheduledPriceChangeAppliedAtTheInstant: a price change scheduled with effective_at reaches the
// data plane ahead of time inside the snapshot, and the data plane switches at the instant by itself — a
// request before it is billed at the old price and names version 1, a request after it the new price
// and version 2. No snapshot can arrive in between: the control plane is stopped before the instant and
// the data plane still serves the version it held (both usage rows carry it). The restarted control
// plane writes the version late, yet the history's ranges meet exactly at effective_at.
func TestScheduledPriceChangeAppliedAtTheInstant(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pa := s.provider(t, "eff-alpha", "alpha")
	s.route(t, "m-eff", stMember{pa, "m-eff", 0})
	oldPrices := stPrices{"2", "8", "0", "0", "0", "0", "0"}
	newPrices := stPrices{"5.5", "20", "0", "0", "0", "0", "0"}
	ruleID := s.priceRule(t, "m-eff", oldPrices, nil)
	ten := s.tenant(t, "eff", "1000")

	// The lead: admin.MinScheduleLead plus room for the request before the instant.
	at := time.Now().Add(admin.MinScheduleLead + 5*time.Second).UTC().Truncate(time.Microsecond)
	var sp store.ScheduledPriceRule
	s.admin(t, "PUT", fmt.Sprintf("/admin/price-rules/%d", ruleID), map[string]any{"provider_id": nil, "match_type": "exact",
		"model_match": "m-eff", "input_price": newPrices[0], "output_price": newPrices[1], "cache_read_price": "0",
		"cache_creation_5m_price": "0", "cache_creation_30m_price": "0", "cache_creation_1h_price": "0",
		"image_output_price": "0", "enabled": true, "pricing_tiers_json": []any{}, "effective_at": at}, &sp)
	if sp.Version != 2 {
		t.Fatalf("scheduled version %d, want 2", sp.Version)
	}
	s.sync(t)
	held, _ := s.dp.srv.Syncer.Version()
	if n := len(s.dp.srv.Syncer.Current().PriceTimeline.Instants()); n != 1 {
		t.Fatalf("the data plane's snapshot %d holds %d scheduled instants, want 1", held, n)
	}

	body := `{"model":"m-eff","messages":[{"role":"user","content":"hello there, how are you today?"}]}`
	before := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", body, stAlpha(ten)...)

	// Stop the control plane: from here on no snapshot can reach the data plane.
	old := s.controlPlane()
	grpcAddr := old.srv.GRPCAddr()
	old.stop()
	if now := time.Now(); !now.Before(at) {
		t.Fatalf("setup took until %v, past the instant %v: the test cannot place a request before it", now, at)
	}
	time.Sleep(time.Until(at) + 50*time.Millisecond)
	after := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", body, stAlpha(ten)...)
	if v, _ := s.dp.srv.Syncer.Version(); v != held {
		t.Fatalf("the data plane serves snapshot %d after the instant, want %d (no snapshot may arrive)", v, held)
	}

	s.restartCP(grpcAddr)
	rows := s.waitUsages(t, ten.keyID, 2)
	for _, c := range []struct {
		name    string
		reqID   string
		prices  stPrices
		version int64
		inForce func(time.Time) bool
	}{
		{"before the instant", before.reqID, oldPrices, 1, func(c time.Time) bool { return c.Before(at) }},
		{"after the instant", after.reqID, newPrices, 2, func(c time.Time) bool { return !c.Before(at) }},
	} {
		row := stRow(t, rows, c.reqID)
		if !c.inForce(row.CreatedAt) {
			t.Errorf("%s: created_at %v is on the wrong side of %v", c.name, row.CreatedAt, at)
		}
		if row.PriceRuleID == nil || *row.PriceRuleID != ruleID || row.PriceRuleVersion == nil || *row.PriceRuleVersion != c.version {
			t.Errorf("%s: price rule %v version %v, want %d version %d", c.name, deref(row.PriceRuleID), deref(row.PriceRuleVersion), ruleID, c.version)
		}
		tok := stRowTokens(row)
		if tok[0] == 0 || tok[1] == 0 {
			t.Errorf("%s: tokens %v, want input and output", c.name, tok)
		}
		if want := stCost(t, c.prices, tok); stRat(t, row.Cost).Cmp(want) != 0 {
			t.Errorf("%s: cost %s, want %s", c.name, row.Cost, want.FloatString(12))
		}
		if row.SnapshotVersion != held {
			t.Errorf("%s: snapshot_version %d, want %d (the one held before the instant)", c.name, row.SnapshotVersion, held)
		}
	}

	// The restarted control plane writes the version; the ranges meet exactly at the instant.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var h struct {
			Items []store.PriceRuleVersion `json:"items"`
		}
		s.admin(t, "GET", fmt.Sprintf("/admin/price-rules/%d/history", ruleID), nil, &h)
		if len(h.Items) == 2 {
			v1, v2 := h.Items[0], h.Items[1]
			if v1.ValidTo == nil || !v1.ValidTo.Equal(at) || !v2.ValidFrom.Equal(at) || v2.Version != 2 {
				t.Errorf("history %+v, want version 1 ending and version 2 starting at %v", h.Items, at)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history has %d versions 20s after the restart, want 2", len(h.Items))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var pending struct {
		Items []store.ScheduledPriceRule `json:"items"`
	}
	s.admin(t, "GET", "/admin/price-rules/scheduled", nil, &pending)
	if len(pending.Items) != 0 {
		t.Errorf("scheduled versions left after the instant: %+v", pending.Items)
	}
}

func deref(p *int64) any {
	if p == nil {
		return "null"
	}
	return *p
}
