package admission_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestScriptsEquivalentToBefore drives the current scripts and those of the release before
// (testdata/*_before.lua, through the same Go code) with the same random sequence of admissions —
// repeated and released request ids, unmarked holds, zero estimates, scopes listed twice, rate limits,
// quota refusals — refunds, cost mirror updates, leaked holds and clock jumps past the pending TTL and
// across minutes, on two key prefixes of the real Redis. Every answer (hold or error) must be the same,
// and so must every key: value, hold set members and scores, TTL (within a second) — except a rate window's
// TTL, which now runs from the window's first count instead of its last (admit.lua), so only its presence
// is compared.
func TestScriptsEquivalentToBefore(t *testing.T) {
	t.Parallel()
	b := setup(t, admission.Options{})
	ctx := context.Background()
	clock := func() time.Time { return *b.now.Load() }
	opts := func(p string) admission.Options {
		return admission.Options{Prefix: b.prefix + p, Now: clock, PendingTTL: time.Minute, Timeout: 30 * time.Second}
	}
	old := admission.New(newBeforeScripts(t, b.rdb), opts("o:"))
	cur := admission.New(b.rdb, opts("n:"))
	rng := rand.New(rand.NewPCG(7, 11))
	pool := []admission.ScopeQuota{
		{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 6000},
		{Scope: vocab.ScopeTeam, ID: 2, LimitMicros: 4000, SnapshotUsedMicros: 500},
		{Scope: vocab.ScopeUser, ID: 3, LimitMicros: 20_000, SnapshotUsedMicros: 100, SnapshotEpoch: 1},
		{Scope: vocab.ScopeKey, ID: 4, LimitMicros: 2500},
		{Scope: vocab.ScopeUser, ID: 5, LimitMicros: 1000, SnapshotUsedMicros: 900}, // refuses most estimates
	}
	type pair struct{ o, n admission.Hold }
	var held []pair
	var ids []string
	// The two scripts' keys are written one after the other, so their TTLs may differ by the real time a
	// step takes: on a loaded machine, seconds. The comparison allows the slowest step's time.
	var slowest time.Duration
	for step := range 1500 {
		stepStart := time.Now()
		switch op := rng.IntN(20); {
		case op < 12: // admission
			req := admission.Request{KeyID: int64(1 + rng.IntN(2)), EstimateTokens: int64(rng.IntN(4) * 100)}
			switch rng.IntN(3) {
			case 0:
				req.RPMLimit = 4
			case 1:
				req.TPMLimit = 500
			}
			if rng.IntN(5) > 0 {
				req.EstimateMicros = int64(rng.IntN(8)) * 100
			}
			for _, i := range rng.Perm(len(pool))[:rng.IntN(len(pool)+1)] {
				req.Scopes = append(req.Scopes, pool[i])
			}
			if len(req.Scopes) > 0 && rng.IntN(15) == 0 {
				req.Scopes = append(req.Scopes, req.Scopes[0]) // listed twice
			}
			switch r := rng.IntN(10); {
			case r < 7:
				req.ID = fmt.Sprintf("req_%d", step)
				ids = append(ids, req.ID)
			case r < 9 && len(ids) > 0:
				req.ID = ids[rng.IntN(len(ids))] // a repeated copy of an earlier call
			}
			ho, eo := old.Admit(ctx, req)
			hn, en := cur.Admit(ctx, req)
			if !sameError(eo, en) || !reflect.DeepEqual(ho, hn) {
				t.Fatalf("step %d: %+v\nbefore: %+v, %v\nnow:    %+v, %v", step, req, ho, eo, hn, en)
			}
			if eo == nil && ho.Micros > 0 {
				held = append(held, pair{ho, hn})
			}
		case op < 16 && len(held) > 0: // refund (settled or released); some holds leak
			i := rng.IntN(len(held))
			p := held[i]
			held = append(held[:i], held[i+1:]...)
			if err := errors.Join(old.Refund(ctx, p.o), cur.Refund(ctx, p.n)); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(4) == 0 { // refunded twice
				if err := errors.Join(old.Refund(ctx, p.o), cur.Refund(ctx, p.n)); err != nil {
					t.Fatal(err)
				}
			}
		case op < 17: // the forwarder refreshes the org's cost_used mirror
			v := fmt.Sprint(rng.IntN(5000))
			if rng.IntN(3) == 0 {
				v += ":1"
			}
			for _, p := range []string{"o:", "n:"} {
				b.rdb.Set(ctx, admission.Keys{Prefix: b.prefix + p}.Used(vocab.ScopeOrg, 1), v, time.Hour)
			}
		default: // time passes: seconds, sometimes past the pending TTL
			d := time.Duration(rng.IntN(20)) * time.Second
			if rng.IntN(6) == 0 {
				d = 61 * time.Second
			}
			b.advance(d)
		}
		slowest = max(slowest, time.Since(stepStart))
		if step%10 == 9 {
			compareKeys(t, b.rdb, b.prefix+"o:", b.prefix+"n:", slowest)
		}
	}
	compareKeys(t, b.rdb, b.prefix+"o:", b.prefix+"n:", slowest)
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// compareKeys fails unless the keys under the two prefixes are the same, with the same contents and TTLs
// (rate windows: present, with some TTL; the others within skew, the most real time that can separate
// the two writes, and a second of rounding).
func compareKeys(t *testing.T, rdb *redis.Client, a, b string, skew time.Duration) {
	t.Helper()
	ctx := context.Background()
	dump := func(prefix string) map[string]string {
		out := map[string]string{}
		var keys []string
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for _, k := range keys {
			name := strings.TrimPrefix(k, prefix)
			if strings.HasPrefix(name, "rc:") {
				continue // the cost-lookup marker is new in this release (docs/cost.md); TestAdmitWritesCostMarker
			}
			var v string
			switch typ := rdb.Type(ctx, k).Val(); typ {
			case "string":
				v = rdb.Get(ctx, k).Val()
			case "zset":
				zs := rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
				sort.Slice(zs, func(i, j int) bool { return fmt.Sprint(zs[i].Member) < fmt.Sprint(zs[j].Member) })
				v = fmt.Sprint(zs)
			default:
				v = typ
			}
			ttl := rdb.PTTL(ctx, k).Val()
			if strings.HasPrefix(name, "rl:") || strings.HasPrefix(name, "rs:") {
				v += fmt.Sprintf(" ttl>0:%v", ttl > 0)
			} else {
				v += fmt.Sprintf(" ttl:%d", ttl.Round(time.Second)/time.Second)
			}
			out[name] = v
		}
		return out
	}
	// A key's TTL is read in dump(a) and again in dump(b), which starts only after dump(a) has read every
	// key: the real time the two dumps take separates the two readings, so it adds to the skew.
	dumpStart := time.Now()
	da, db := dump(a), dump(b)
	skew += time.Since(dumpStart)
	for k, va := range da {
		if vb := db[k]; va != vb {
			// TTLs are set and read one after the other: allow a second (rounding) plus skew between them.
			if strings.TrimRight(va, "0123456789") == strings.TrimRight(vb, "0123456789") && ttlNear(va, vb, 1+int(skew.Seconds()+0.999)) {
				continue
			}
			t.Fatalf("key %s: before %q, now %q", k, va, vb)
		}
	}
	for k, vb := range db {
		if _, ok := da[k]; !ok {
			t.Fatalf("key %s only now: %q", k, vb)
		}
	}
}

func ttlNear(a, b string, within int) bool {
	var x, y int
	_, e1 := fmt.Sscanf(a[strings.LastIndex(a, "ttl:"):], "ttl:%d", &x)
	_, e2 := fmt.Sscanf(b[strings.LastIndex(b, "ttl:"):], "ttl:%d", &y)
	return e1 == nil && e2 == nil && x-y <= within && y-x <= within
}
