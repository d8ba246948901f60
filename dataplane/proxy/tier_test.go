package proxy

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

func TestRequestedTier(t *testing.T) {
	t.Parallel()
	tests := []struct{ body, want string }{
		{`{"model":"m","service_tier":"flex"}`, "flex"},
		{`{"serviceTier":"FLEX"}`, "flex"},
		{`{"service_tier":"SERVICE_TIER_PRIORITY"}`, "priority"},
		{`{"speed":"fast","service_tier":"auto"}`, "fast"},
		{`{"speed":"standard","service_tier":"priority"}`, "priority"},
		{`{"speed":"standard"}`, "standard"},
		{`{"service_tier":"flex","serviceTier":"priority"}`, "flex"},
		{`{"service_tier":3}`, ""},
		{`{"service_tier":null}`, ""},
		{`{"model":"m"}`, ""},
		{`not json "service_tier"`, ""},
		{`{"service\u005ftier":"priority"}`, "priority"},
		{`{"service_tier":"flex","service_tier":"priority"}`, ""},
		{`{"Service_Tier":"priority"}`, ""},
		{`{"messages":[{"role":"user","content":"{\"service_tier\":\"flex\"}"}],"metadata":{"speed":"fast"}}`, ""},
		{`{"contents":[{"parts":[{"inlineData":{"data":"` + strings.Repeat("QUJD", 1<<16) + `"}}]}],"service_tier":"priority"}`, "priority"},
		{``, ""},
	}
	for _, tt := range tests {
		if got := requestedTier([]byte(tt.body)); got != tt.want {
			t.Errorf("requestedTier(%s) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func FuzzRequestedTier(f *testing.F) {
	for _, s := range []string{`{"speed":"fast","service_tier":"auto"}`, `{"serviceTier":"SERVICE_TIER_FLEX"}`, `{"service_tier":"a\u0062"}`, `x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := requestedTier(body)
		if got != canon.CleanTier(got) {
			t.Fatalf("RequestedTier = %q, not clean", got)
		}
		req, err := jsonkit.ParseRequest(body)
		if err != nil {
			if got != "" {
				t.Fatalf("tier %q from a refused body", got)
			}
			return
		}
		if want := tierOf(req); got != want { // the prefilter never changes the answer
			t.Fatalf("RequestedTier = %q, TierOf = %q", got, want)
		}
	})
}
