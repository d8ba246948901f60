package dptoken

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestCheckScopes(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"settlement:write", "snapshot:read", "settlement:write"}, "[snapshot:read settlement:write]"},
		{[]string{"settlement:write"}, "[settlement:write]"},
		{nil, "error"},
		{[]string{"snapshot:read", "admin"}, "error"},
		{[]string{"Snapshot:Read"}, "error"},
	} {
		got, err := CheckScopes(tc.in)
		s := fmt.Sprint(got)
		if err != nil {
			s = "error"
		}
		if s != tc.want {
			t.Errorf("CheckScopes(%q) = %s (%v), want %s", tc.in, s, err, tc.want)
		}
	}
}

// TestBootstrapTokenHoldsBothScopes: without a database the bootstrap token is the only credential: it
// may do both, anything else is UNAUTHENTICATED.
func TestBootstrapTokenHoldsBothScopes(t *testing.T) {
	c := New(nil, "bootstrap-token-0123456789")
	call := func(header string, scope string) codes.Code {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", header))
		return status.Code(c.Authorize(scope)(ctx, "/x/y"))
	}
	for _, scope := range Scopes {
		if got := call("Bearer bootstrap-token-0123456789", scope); got != codes.OK {
			t.Errorf("bootstrap token, %s: %v", scope, got)
		}
		for _, h := range []string{"Bearer bootstrap-token-012345678", "bootstrap-token-0123456789", "Basic bootstrap-token-0123456789", "Bearer "} {
			if got := call(h, scope); got != codes.Unauthenticated {
				t.Errorf("%q, %s: %v, want Unauthenticated", h, scope, got)
			}
		}
	}
	if got := status.Code(New(nil, "").Authorize(ScopeSnapshotRead)(context.Background(), "/x")); got != codes.Unauthenticated {
		t.Errorf("no credentials configured: %v", got)
	}
}
