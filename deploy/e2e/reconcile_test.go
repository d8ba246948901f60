package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/deploy/mockupstream"
)

// Reconciliation at full stack (issue 30, docs/reconciliation.md): client traffic through the real data
// plane — alpha and beta dialects, plain and streamed, cached usage, a beta client translated to an alpha
// provider, a failover — is settled by the real control plane; the mock provider bills exactly what it
// answered and serves its admin usage and cost reports; the control plane imports them and reconciles. Honest
// traffic reconciles to zero drift on every provider; cut streams (billed by nobody, estimated by the gateway)
// are attributed to local counting; each drift injected at the provider is found and attributed.

func TestReconciliationThroughTheDataPlane(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// The provider's prices and the gateway's rules agree in every category (alpha's cached answers write
	// 30-minute cache, beta's 5-minute): honest traffic costs the same on both sides.
	s.mock.SetPrices(map[string]mockupstream.Price{
		"m-1": {Input: "2", Output: "8", CacheRead: "0.5", Cache5m: "2.5", Cache30m: "3", Cache1h: "4", ImageOut: "30"},
		"b-1": {Input: "3", Output: "15", CacheRead: "0.3", Cache5m: "3.75", Cache30m: "4.5", Cache1h: "6"},
	})
	pa := s.provider(t, "rc-alpha", "alpha")
	pb := s.provider(t, "rc-beta", "beta")
	fo1 := s.provider(t, "rc-fo1", "alpha")
	fo2 := s.provider(t, "rc-fo2", "alpha")
	pcut := s.provider(t, "rc-cut", "alpha")
	s.route(t, "m-1", stMember{pa, "m-1", 0})
	s.route(t, "b-1", stMember{pb, "b-1", 0})
	s.route(t, "rc-xb", stMember{pa, "m-1", 0})
	s.route(t, "rc-fo", stMember{fo1, "m-1", 0}, stMember{fo2, "m-1", 1})
	s.route(t, "rc-cut", stMember{pcut, "m-1", 0})
	ruleM1 := s.priceRule(t, "m-1", stPrices{"2", "8", "0.5", "2.5", "3", "4", "30"}, nil)
	s.priceRule(t, "b-1", stPrices{"3", "15", "0.3", "3.75", "4.5", "6", "0"}, nil)
	names := map[int64]string{pa: "rc-alpha", pb: "rc-beta", fo1: "rc-fo1", fo2: "rc-fo2", pcut: "rc-cut"}
	// The cut provider's key is in a project of its own: a project's cost report covers every key in it.
	s.mock.SetProjects(map[string]string{"sk-rc-cut": "proj_cut"})
	for id, name := range names {
		var p struct {
			Credentials []struct {
				ID int64 `json:"id"`
			} `json:"credentials"`
		}
		s.admin(t, "GET", fmt.Sprintf("/admin/providers/%d", id), nil, &p)
		kind, project := "openai", mockupstream.ProjectID
		switch id {
		case pb:
			kind, project = "anthropic", mockupstream.WorkspaceID
		case pcut:
			project = "proj_cut"
		}
		s.admin(t, "PUT", fmt.Sprintf("/admin/reconciliation/credential-refs/%d", p.Credentials[0].ID),
			map[string]any{"key_ref": mockupstream.KeyID("sk-" + name), "project_ref": project}, nil)
		s.admin(t, "PUT", fmt.Sprintf("/admin/reconciliation/providers/%d", id),
			map[string]any{"kind": kind, "base_url": s.mockURL, "admin_key": "sk-admin", "tokens_abs": 0}, nil)
	}
	ten := s.tenant(t, "rc", "1000")
	s.sync(t)

	xb := `{"model":"rc-xb","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"translate me to alpha"}]}`
	fo := strings.Replace(stChat, `"m-1"`, `"rc-fo"`, 1)
	cut := strings.Replace(stChatStream, `"m-1"`, `"rc-cut"`, 1)
	requests := 0
	send := func(path, body string, hdr ...string) {
		t.Helper()
		s.do(t, 200, "POST", path, body, hdr...)
		requests++
	}
	for i := range 2 {
		send("/v1/chat/completions", stChat, stAlpha(ten)...)
		send("/v1/chat/completions", stChatUsage, stAlpha(ten, "x-mock-usage", "cached")...)
		send("/v1/responses", stRespBody, stAlpha(ten)...)
		send("/v1/messages", stBetaStream, stBeta(ten)...)
		send("/v1/messages", strings.Replace(stBetaStream, `"stream":true`, `"stream":false`, 1), stBeta(ten, "x-mock-usage", "cached")...)
		send("/v1/messages", xb, stBeta(ten)...)
		id := fmt.Sprintf("rc-fo-%d-%s", i, randomHex(4))
		send("/v1/chat/completions", fo, stAlpha(ten, "x-mock-fail-first", "1", "x-mock-fail-key", id)...)
		// The cut provider: one answer whole, one stream cut after three events (the gateway estimates it,
		// the provider bills nothing for it).
		send("/v1/chat/completions", strings.Replace(stChat, `"m-1"`, `"rc-cut"`, 1), stAlpha(ten)...)
		s.doCut(t, "POST", "/v1/chat/completions", cut, stAlpha(ten, "x-mock-disconnect-after", "3")...)
		requests++
	}
	rows := s.waitUsages(t, ten.keyID, requests)
	var estimated int
	for _, r := range rows {
		if r.Source != "upstream" {
			estimated++
		}
	}
	if estimated != 2 {
		t.Fatalf("%d ledger rows not from upstream usage, want the 2 cut streams", estimated)
	}

	day := time.Now().UTC().Format(time.DateOnly)
	reconcile := func(provider int64, ctl mockupstream.ReconcileControls) store.ReconcileRun {
		t.Helper()
		s.mock.SetReconcile(ctl)
		defer s.mock.SetReconcile(mockupstream.ReconcileControls{})
		var run store.ReconcileRun
		s.admin(t, "POST", "/admin/reconciliation/runs", map[string]any{"provider_id": provider, "day": day}, &run)
		return run
	}
	causes := func(run store.ReconcileRun) map[string]int {
		out := map[string]int{}
		for _, l := range run.Lines {
			out[l.Cause]++
		}
		return out
	}

	// Honest traffic: zero drift on every provider that answered whole.
	for _, id := range []int64{pa, pb, fo1, fo2} {
		run := reconcile(id, mockupstream.ReconcileControls{})
		if run.Status != "ok" || run.LedgerTokens != run.ProviderTokens || run.LedgerCost != run.ProviderCost {
			t.Errorf("%s: honest run %s, tokens %d/%d, cost %s/%s, causes %v", names[id], run.Status, run.LedgerTokens,
				run.ProviderTokens, run.LedgerCost, run.ProviderCost, causes(run))
		}
		if id != fo1 && run.LedgerTokens == 0 {
			t.Errorf("%s: no tokens reconciled", names[id])
		}
	}
	if run := reconcile(fo1, mockupstream.ReconcileControls{}); run.LedgerTokens != 0 || run.ProviderTokens != 0 {
		t.Errorf("rc-fo1 only failed: run %+v, want nothing on either side", run)
	}
	// Cut streams: the ledger estimated what the provider never billed: local counting, named.
	run := reconcile(pcut, mockupstream.ReconcileControls{})
	if c := causes(run); c["local_count"] != 1 || run.SourceEstimated+run.SourceLocal != 2 || run.LedgerTokens <= run.ProviderTokens {
		t.Errorf("rc-cut: causes %v, estimated %d local %d, tokens %d/%d", c, run.SourceEstimated, run.SourceLocal, run.LedgerTokens, run.ProviderTokens)
	}

	// Injected at the provider, found through the whole stack.
	run = reconcile(pb, mockupstream.ReconcileControls{UnderReport: &mockupstream.UnderReport{Category: "output", Percent: 20}})
	for _, l := range run.Lines {
		if l.Kind == "tokens" && (l.Cause != "tokens" || !strings.Contains(l.Detail, "output") || strings.Contains(l.Detail, "input")) {
			t.Errorf("beta output under-reported: line %+v", l)
		}
	}
	run = reconcile(pa, mockupstream.ReconcileControls{PriceMultiplier: map[string]string{"m-1": "1.25"}})
	c := causes(run)
	if c["price"] != 1 || c["tokens"]+c["cost"] != 0 {
		t.Errorf("price change: causes %v", c)
	}
	for _, l := range run.Lines {
		if l.Cause == "price" && !strings.Contains(l.Detail, fmt.Sprintf("price rule %d version 1", ruleM1)) {
			t.Errorf("price line %q does not name rule %d version 1", l.Detail, ruleM1)
		}
	}
	run = reconcile(fo2, mockupstream.ReconcileControls{LateDays: []string{day}})
	if c := causes(run); !run.Provisional || c["pending_late"] == 0 || c["missing_at_provider"] != 0 {
		t.Errorf("late day: provisional %v, causes %v", run.Provisional, c)
	}
	// A lost request: the provider drops its first bill, whichever provider answered it.
	first := s.mock.Bills()[0]
	lost := map[string]int64{}
	for id, name := range names {
		lost[mockupstream.KeyID("sk-"+name)] = id
	}
	run = reconcile(lost[mockupstream.KeyID(first.APIKey)], mockupstream.ReconcileControls{Drop: 1})
	if c := causes(run); run.Status != "drift" || c["tokens"]+c["local_count"] == 0 || run.LedgerTokens <= run.ProviderTokens {
		t.Errorf("lost request on %s: causes %v, tokens %d/%d", first.APIKey, c, run.LedgerTokens, run.ProviderTokens)
	}
}
