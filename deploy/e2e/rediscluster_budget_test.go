package e2e

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	dpconfig "github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/shared/redistest"
)

// stNewRedisClusterStack is newStack with the data plane on a real Redis Cluster in cluster mode
// (default shards) whose admission fails closed: a script Redis Cluster refused (CROSSSLOT) would reach
// the client as a 503 instead of an unchecked admission.
func stNewRedisClusterStack(t *testing.T, rc *redistest.Cluster) (*stack, *redis.ClusterClient) {
	t.Helper()
	s := newStackWith(t, func(s *stack) {
		s.prefix, s.dpRedisURL = "e2e-rc:"+randomHex(6)+":", rc.URL()
		s.dpEnv = map[string]string{"TOLLGATE_REDIS_CLUSTER": "true", "TOLLGATE_ADMISSION_ON_REDIS_FAILURE": "closed"}
	})
	opts, err := redis.ParseClusterURL(rc.URL())
	if err != nil {
		t.Fatal(err)
	}
	crdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { crdb.Close() })
	return s, crdb
}

// clusterKeysPerMaster counts the keys matching pattern on every master.
func clusterKeysPerMaster(t *testing.T, crdb *redis.ClusterClient, pattern string) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	out := map[string][]string{}
	if err := crdb.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		out[m.Options().Addr] = keys
		mu.Unlock()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitClusterPendingZero waits until every qp: counter under prefix on every master is gone or 0.
func waitClusterPendingZero(t *testing.T, crdb *redis.ClusterClient, prefix string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = nil
		for _, keys := range clusterKeysPerMaster(t, crdb, prefix+"qp:*") {
			for _, k := range keys {
				if v, err := crdb.Get(context.Background(), k).Result(); err == nil && v != "0" {
					left = append(left, k+"="+v)
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending counters not back to 0 after 30s: %v", left)
		}
	}
}

// TestRedisClusterShardedBudget: six organisations' budgets through the gateway on a real Redis Cluster
// (three masters with a replica each) with the default 16 shards: each organisation's keys and outbox
// stream carry its shard's hash tag, so their load lands on more than one master. One client per
// organisation (all six at once) spends until refused (402), waiting after each answer until its hold is
// refunded — so admission sees the exact spend in the organisation's cost mirror, in its shard. Every
// answer is 200 or 402 (never a Redis failure: admission fails closed), every quota's cost_used equals the
// sum of its usage rows, and the refusal comes exactly at the limit: the spend is within one request's
// cost of it (admitted while spend + estimate <= limit, and an estimate is at most a request's cost).
func TestRedisClusterShardedBudget(t *testing.T) {
	rc := redistest.StartCluster(t, 3, 1)
	s, crdb := stNewRedisClusterStack(t, rc)
	stSeed(t, s)
	cal := s.tenant(t, "rc-cal", "1000")
	s.sync(t)
	first := s.do(t, http.StatusOK, "POST", "/v1/chat/completions", stChat, stAlpha(cal)...)
	cost := stRat(t, stRow(t, s.waitUsages(t, cal.keyID, 1), first.reqID).Cost)
	if cost.Sign() <= 0 {
		t.Fatalf("calibration request cost %s, want a positive cost", cost.FloatString(7))
	}
	limitText := new(big.Rat).Mul(cost, big.NewRat(21, 2)).FloatString(6) // ten and a half requests
	limit := stRat(t, limitText)
	var tenants []stTenant
	for i := range 6 {
		tenants = append(tenants, s.tenant(t, fmt.Sprintf("rc-org%d", i), limitText))
	}
	s.sync(t)
	shards := admission.NewShards(dpconfig.DefaultClusterShards)

	var mu sync.Mutex
	answers := map[int64][2]int{} // org: 200s, 402s
	var failures []string
	var wg sync.WaitGroup
	for _, ten := range tenants {
		pending := admission.Keys{Prefix: s.prefix, Tag: shards.Tag(ten.org)}.Pending("org", ten.org)
		wg.Go(func() {
			for range 40 {
				r := s.send(context.Background(), "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
				mu.Lock()
				a := answers[ten.org]
				switch {
				case r.err == nil && r.status == http.StatusOK:
					a[0]++
				case r.err == nil && r.status == http.StatusPaymentRequired:
					a[1]++
				default:
					failures = append(failures, fmt.Sprintf("org %d: %d %v %s", ten.org, r.status, r.err, r.body))
				}
				answers[ten.org] = a
				mu.Unlock()
				if r.status != http.StatusOK {
					return
				}
				// Settled: the hold is refunded (and the mirror refreshed) in the same script.
				for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if v, err := crdb.Get(context.Background(), pending).Int64(); err == redis.Nil || (err == nil && v == 0) {
						break
					}
					if time.Now().After(deadline) {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("org %d: %s not refunded within 20s", ten.org, pending))
						mu.Unlock()
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d answers neither 200 nor 402, first: %s", len(failures), failures[0])
	}
	for _, ten := range tenants {
		a := answers[ten.org]
		if a[0] == 0 || a[1] != 1 {
			t.Fatalf("org %d: %d admitted, %d refused; want admissions, then every client refused", ten.org, a[0], a[1])
		}
		rows := s.waitUsages(t, ten.keyID, a[0]+a[1])
		spent, maxCost := new(big.Rat), new(big.Rat)
		for _, r := range rows {
			c := stRat(t, r.Cost)
			spent.Add(spent, c)
			if c.Cmp(maxCost) > 0 {
				maxCost = c
			}
		}
		for _, sc := range ten.scopes() {
			var q struct {
				CostUsed string `json:"cost_used"`
			}
			s.admin(t, "GET", "/admin/quotas/"+sc[0]+"/"+sc[1], nil, &q)
			if stRat(t, q.CostUsed).Cmp(spent) != 0 {
				t.Errorf("quota %s/%s cost_used = %s, want the sum of its usage rows %s", sc[0], sc[1], q.CostUsed, spent.FloatString(7))
			}
		}
		over := new(big.Rat).Sub(spent, limit)
		t.Logf("org %d (shard %s): %d admitted, spent %s of %s", ten.org, shards.Tag(ten.org), a[0], spent.FloatString(7), limit.FloatString(7))
		if new(big.Rat).Abs(over).Cmp(maxCost) >= 0 {
			t.Errorf("org %d spent %s against limit %s: want the refusal within one request's cost (%s) of the limit",
				ten.org, spent.FloatString(7), limit.FloatString(7), maxCost.FloatString(7))
		}
	}
	waitClusterPendingZero(t, crdb, s.prefix)
	mirrors := clusterKeysPerMaster(t, crdb, s.prefix+"qu:*")
	holding := 0
	for _, keys := range mirrors {
		if len(keys) > 0 {
			holding++
		}
	}
	if holding < 2 {
		t.Errorf("cost mirrors of seven organisations on %d master(s), want at least two: %v", holding, mirrors)
	}
}
