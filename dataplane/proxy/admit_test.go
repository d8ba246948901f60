package proxy

import (
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

func okUpstream(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"object":"chat.completion","usage":{"prompt_tokens":1,"completion_tokens":1}}`))
}

// A billable request on a key whose org has a limit reaches admission even when its estimate is 0 (an
// output-only price) and the key has no rate limit, carrying the limited scope: admission refuses it
// once the scope is exhausted (issue 15, item 3a).
func TestAdmitZeroEstimateStillChecksLimitedScopes(t *testing.T) {
	b := setup(t, okUpstream, func(s *snapshotv1.Snapshot) {
		s.PriceRules[0].InputPrice = "0"
		s.ApiKeys[0].RpmLimit = 0
	})
	if rec := b.post(t, `{"model":"chat","messages":[]}`); rec.Code != 200 {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	a := b.adm.reqs
	if len(a) != 1 || a[0].EstimateMicros != 0 || len(a[0].Scopes) != 1 || a[0].Scopes[0].ID != 6 {
		t.Fatalf("admission requests %+v, want one with estimate 0 and the org scope", a)
	}
	// No limited scope and no rate limit: the fast path, no admission call.
	b = setup(t, okUpstream, func(s *snapshotv1.Snapshot) {
		s.PriceRules[0].InputPrice = "0"
		s.ApiKeys[0].RpmLimit = 0
		s.Quotas = nil
	})
	if rec := b.post(t, `{"model":"chat","messages":[]}`); rec.Code != 200 {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	if len(b.adm.reqs) != 0 {
		t.Errorf("admission requests %+v, want none (nothing limited)", b.adm.reqs)
	}
}

// The reserved estimate covers whichever usable candidate serves: with a cheap first candidate and a
// pricier failover, the estimate is the pricier one's (issue 15, item 3c).
func TestAdmitEstimateCoversPricierFailover(t *testing.T) {
	const body = `{"model":"chat","messages":[{"role":"user","content":"a prompt long enough to cost something"}]}`
	two := func(s *snapshotv1.Snapshot) {
		r := proto.Clone(s.PriceRules[0]).(*configv1.PriceRule)
		r.Id, r.ModelMatch, r.InputPrice = 10, "m-2", "50"
		s.PriceRules = append(s.PriceRules, r)
		s.Routes[0].Members = append(s.Routes[0].Members,
			&configv1.RouteMember{ProviderId: 1, UpstreamModelId: "m-2", Priority: 2, Weight: 1, Enabled: true})
	}
	estimateOf := func(mutate func(*snapshotv1.Snapshot)) int64 {
		b := setup(t, okUpstream, mutate)
		if rec := b.post(t, body); rec.Code != 200 {
			t.Fatalf("answer %d %s", rec.Code, rec.Body)
		}
		if len(b.adm.reqs) != 1 {
			t.Fatalf("admission requests %+v", b.adm.reqs)
		}
		return b.adm.reqs[0].EstimateMicros
	}
	cheap := estimateOf(func(*snapshotv1.Snapshot) {})
	pricey := estimateOf(func(s *snapshotv1.Snapshot) {
		s.PriceRules[0].InputPrice = "50"
	})
	both := estimateOf(two)
	if cheap <= 0 || pricey <= cheap {
		t.Fatalf("estimates cheap %d pricey %d: the fixture does not price the two apart", cheap, pricey)
	}
	if both != pricey {
		t.Errorf("estimate with a pricier failover = %d, want the pricier candidate's %d (cheap alone %d)", both, pricey, cheap)
	}
}
