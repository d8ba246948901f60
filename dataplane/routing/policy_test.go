package routing

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/httperr"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

func hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// policySnapshot: provider "strict" denies unpriced models, "open" allows them; only "priced" models have
// a rule (a global contains rule). Route "mixed" tries strict's unpriced model first, then open's.
func policySnapshot(t *testing.T, direct bool) *snapshot.Compiled {
	t.Helper()
	s := &snapshotv1.Snapshot{
		Version:     1,
		ModelPolicy: &configv1.ModelPolicy{UnpricedPolicy: "allow", DirectAddressing: direct},
		Providers: []*configv1.Provider{
			{Id: 1, Name: "strict", ChannelType: "alpha", BaseUrl: "http://a", Enabled: true, UnpricedPolicy: "deny"},
			{Id: 2, Name: "open", ChannelType: "alpha", BaseUrl: "http://b", Enabled: true, UnpricedPolicy: "allow"},
		},
		PriceRules: []*configv1.PriceRule{{Id: 1, MatchType: "contains", ModelMatch: "priced", InputPrice: "1", OutputPrice: "2",
			CacheReadPrice: "0", CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0",
			ImageOutputPrice: "0", Enabled: true}},
		Routes: []*configv1.Route{
			{Id: 1, Name: "mixed", Enabled: true, Members: []*configv1.RouteMember{
				{ProviderId: 1, UpstreamModelId: "free-model", Priority: 1, Enabled: true},
				{ProviderId: 2, UpstreamModelId: "free-model", Priority: 2, Enabled: true},
			}},
			{Id: 2, Name: "strict-only", Enabled: true, Members: []*configv1.RouteMember{
				{ProviderId: 1, UpstreamModelId: "free-model", Priority: 1, Enabled: true},
			}},
		},
		ApiKeys: []*configv1.ApiKey{
			{Id: 1, KeyHash: hash("plain"), Enabled: true},
			{Id: 2, KeyHash: hash("direct"), Enabled: true, AllowDirectAddressing: true},
			{Id: 3, KeyHash: hash("glob"), Enabled: true, AllowedModels: []string{"gpt-4o*", "open/*"}, AllowDirectAddressing: true},
		},
	}
	c, err := snapshot.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func names(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Provider.Name+"/"+c.UpstreamModel)
	}
	return out
}

func TestPricedDropsDeniedUnpricedCandidates(t *testing.T) {
	snap := policySnapshot(t, true)
	sel := New(nil)
	tests := []struct {
		model string
		want  []string
		deny  bool
	}{
		// strict's unpriced candidate is never tried; open's (allow) stays, served at cost 0.
		{"mixed", []string{"open/free-model"}, false},
		{"strict-only", nil, true},
		{"strict/free-model", nil, true},
		{"strict/priced-model", []string{"strict/priced-model"}, false},
		{"open/free-model", []string{"open/free-model"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			s, err := sel.Select(snap, tt.model, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Priced(snap, tt.model, s.Candidates, time.Now())
			if tt.deny {
				var he *httperr.Error
				if !errors.As(err, &he) || he.Status != http.StatusForbidden || he.Code != httperr.CodeModelUnpriced || he.Param != "model" {
					t.Fatalf("Priced = %v, %v; want a 403 %s", got, err, httperr.CodeModelUnpriced)
				}
				return
			}
			if err != nil || fmt.Sprint(names(got)) != fmt.Sprint(tt.want) {
				t.Fatalf("Priced = %v, %v; want %v", names(got), err, tt.want)
			}
		})
	}
}

func TestPricedAllowByDefault(t *testing.T) {
	// A snapshot without policy (an older control plane): every provider allows unpriced models.
	snap, err := snapshot.Compile(&snapshotv1.Snapshot{Version: 1, Providers: []*configv1.Provider{
		{Id: 1, Name: "p", ChannelType: "alpha", BaseUrl: "http://a", Enabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(nil).Select(snap, "p/anything", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Priced(snap, "p/anything", s.Candidates, time.Now()); err != nil || len(got) != 1 {
		t.Fatalf("Priced = %v, %v; want the candidate kept", got, err)
	}
}

func TestPermittedDirectAddressing(t *testing.T) {
	for _, direct := range []bool{true, false} {
		snap := policySnapshot(t, direct)
		plain, withDirect, glob := snap.LookupKey("plain"), snap.LookupKey("direct"), snap.LookupKey("glob")
		route := snap.Route("mixed")
		// A route is never affected by the switch.
		if !Permitted(plain, "mixed", route) {
			t.Errorf("direct=%v: a route refused", direct)
		}
		if got := Permitted(plain, "open/free-model", nil); got != direct {
			t.Errorf("direct=%v: plain key on provider/model = %v", direct, got)
		}
		if !Permitted(withDirect, "open/free-model", nil) {
			t.Errorf("direct=%v: a key allowing direct addressing refused", direct)
		}
		// allowed_models patterns still apply to direct addressing.
		if !Permitted(glob, "open/x", nil) || Permitted(glob, "strict/x", nil) {
			t.Errorf("direct=%v: glob key: open/x %v strict/x %v", direct, Permitted(glob, "open/x", nil), Permitted(glob, "strict/x", nil))
		}
	}
}

func TestPermittedPatterns(t *testing.T) {
	snap := policySnapshot(t, true)
	glob := snap.LookupKey("glob")
	for model, want := range map[string]bool{"gpt-4o": true, "gpt-4o-mini": true, "gpt-4": false, "xgpt-4o": false, "mixed": false} {
		if got := Permitted(glob, model, snap.Route(model)); got != want {
			t.Errorf("Permitted(glob, %q) = %v, want %v", model, got, want)
		}
	}
}
