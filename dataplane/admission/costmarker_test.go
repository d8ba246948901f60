package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Every admission writes the request's cost-lookup marker in its own round trip — admitted or refused,
// with or without a reservation — naming the key, for 24 hours (docs/cost.md, "Cost by request id").
func TestAdmitWritesCostMarker(t *testing.T) {
	b := setup(t, admission.Options{})
	ctx := context.Background()
	check := func(id string, want string) {
		t.Helper()
		v, err := b.rdb.Get(ctx, b.keys.RequestCost(id)).Result()
		if errors.Is(err, redis.Nil) {
			v = ""
		} else if err != nil {
			t.Fatal(err)
		}
		if v != want {
			t.Fatalf("marker of %s = %q, want %q", id, v, want)
		}
		if want != "" {
			ttl := b.rdb.TTL(ctx, b.keys.RequestCost(id)).Val()
			if ttl <= 23*time.Hour || ttl > 24*time.Hour {
				t.Fatalf("marker TTL %v, want 24h", ttl)
			}
		}
	}
	scopes := []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1000}}
	if _, err := b.a.Admit(ctx, admission.Request{ID: "req_a1", KeyID: 41, EstimateMicros: 10, Scopes: scopes}); err != nil {
		t.Fatal(err)
	}
	check("req_a1", "41")
	if _, err := b.a.Admit(ctx, admission.Request{ID: "req_a2", KeyID: 42, RPMLimit: 5}); err != nil {
		t.Fatal(err)
	}
	check("req_a2", "42") // no reservation: still marked
	_, err := b.a.Admit(ctx, admission.Request{ID: "req_a3", KeyID: 43, EstimateMicros: 5000, Scopes: scopes})
	if !errors.Is(err, admission.ErrQuotaExceeded) {
		t.Fatalf("err %v, want quota exceeded", err)
	}
	check("req_a3", "43") // refused: it has a (rejected) record too
	if _, err := b.a.Admit(ctx, admission.Request{ID: "bad id{x}", KeyID: 44, RPMLimit: 5}); err != nil {
		t.Fatal(err)
	}
	check("bad id{x}", "") // an id that is not a gateway id is not marked
}
