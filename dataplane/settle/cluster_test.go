package settle_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/redistest"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// scriptSlots is a go-redis hook that records, for every script call (EVAL, EVALSHA), the hash slots of
// the keys it was given, by script.
type scriptSlots struct {
	mu    sync.Mutex
	calls map[string][][]string // script sha (or body) -> the key lists of its calls
}

func (h *scriptSlots) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptSlots) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.record(c)
		}
		return next(ctx, cmds)
	}
}

func (h *scriptSlots) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *scriptSlots) record(cmd redis.Cmder) {
	if n := cmd.Name(); n != "evalsha" && n != "eval" {
		return
	}
	args := cmd.Args()
	nk, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil {
		return
	}
	script := fmt.Sprint(args[1])
	if cmd.Name() == "eval" {
		script = settleScriptName(script)
	}
	keys := make([]string, nk)
	for i := range keys {
		keys[i] = fmt.Sprint(args[3+i])
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string][][]string{}
	}
	h.calls[script] = append(h.calls[script], keys)
}

// settleScriptName names an EVAL's script by its first line (an EVALSHA that found no script).
func settleScriptName(body string) string {
	first, _, _ := strings.Cut(body, "\n")
	return first
}

// TestClusterShardedSettlement runs admission, immediate refunds, the outbox and the forwarder (with the
// real SettlementService on Postgres) for twelve organisations on a real three-master Redis Cluster with
// 16 shards. Every script call — admission, refund, settlement — gets keys of one hash slot (computed
// for each call, and checked against the cluster's CLUSTER KEYSLOT); the organisations' keys land on
// every master; every record is stored once, every scope's cost_used is exact, and every hold is
// refunded.
func TestClusterShardedSettlement(t *testing.T) {
	t.Parallel()
	rc := redistest.StartCluster(t, 3, 0)
	opts, err := redis.ParseClusterURL(rc.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { rdb.Close() })
	slots := &scriptSlots{}
	rdb.AddHook(slots)
	db := storetest.New(t)
	ctx := context.Background()
	const orgs, perOrg, cost, est = 12, 10, 150, 100
	for o := int64(1); o <= orgs; o++ {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', $1, 1), ('team', $2, 1),
			('user', $3, 1), ('key', $4, 1)`, o, 100+o, 200+o, 300+o); err != nil {
			t.Fatal(err)
		}
	}
	cp := startControlPlane(t, db)
	prefix := "t:"
	dp := newDataPlane(t, rdb, prefix, "dp-c", cp, admission.Options{Shards: 16}, settle.ForwarderOptions{BatchSize: 7})
	dp.start()
	defer dp.stop()

	recorded := 0
	for o := int64(1); o <= orgs; o++ {
		scopes := []admission.ScopeQuota{
			{Scope: vocab.ScopeOrg, ID: o, LimitMicros: 1_000_000},
			{Scope: vocab.ScopeTeam, ID: 100 + o, LimitMicros: 1_000_000},
			{Scope: vocab.ScopeUser, ID: 200 + o, LimitMicros: 1_000_000},
			{Scope: vocab.ScopeKey, ID: 300 + o, LimitMicros: 1_000_000},
		}
		for i := range perOrg {
			rid := fmt.Sprintf("req_c%d_%d", o, i)
			rec := outcomeRecord(rid, o, 100+o, 200+o, cost, vocab.EndCompleted)
			rec.ApiKeyId = 300 + o
			if i == perOrg-1 { // no admission at all: the record goes to its organisation's shard
				if err := dp.rec.Append(ctx, rec, admission.Hold{}); err != nil {
					t.Fatal(err)
				}
				recorded++
				continue
			}
			h, err := dp.adm.Admit(ctx, admission.Request{ID: rid, OrgID: o, KeyID: 300 + o, RPMLimit: 1000, TPMLimit: 1_000_000,
				EstimateTokens: 10, EstimateMicros: est, Scopes: scopes})
			if err != nil {
				t.Fatalf("org %d: Admit = %v", o, err)
			}
			if h.Tag == "" || h.Micros != est {
				t.Fatalf("org %d: hold %+v, want a tagged hold of %d", o, h, est)
			}
			if i == 0 { // never dispatched: refunded at once
				if err := dp.adm.Refund(ctx, h); err != nil {
					t.Fatalf("Refund = %v", err)
				}
				continue
			}
			if err := dp.rec.Append(ctx, rec, h); err != nil {
				t.Fatal(err)
			}
			recorded++
		}
	}
	testkit.WaitWithin(t, 60*time.Second, "every record stored", func() bool {
		var n int
		_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages`).Scan(&n)
		return n == recorded
	})
	streams := []string{settle.Streams{Prefix: prefix}.Outbox("")}
	for _, tag := range admission.NewShards(16).Tags() {
		streams = append(streams, settle.Streams{Prefix: prefix}.Outbox(tag))
	}
	testkit.WaitWithin(t, 30*time.Second, "every outbox stream empty", func() bool {
		for _, s := range streams {
			if n, err := rdb.XLen(ctx, s).Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})

	// Every script call's keys share a slot; the three scripts were all exercised.
	slots.mu.Lock()
	calls := slots.calls
	slots.mu.Unlock()
	if len(calls) < 3 {
		t.Errorf("%d distinct scripts ran, want admission, refund and settlement", len(calls))
	}
	checked := 0
	for script, lists := range calls {
		for _, keys := range lists {
			first := admission.KeySlot(keys[0])
			for _, k := range keys[1:] {
				if s := admission.KeySlot(k); s != first {
					t.Fatalf("script %.12s: keys %q span slots %d and %d", script, keys, first, s)
				}
			}
		}
		for _, k := range lists[len(lists)-1] { // and the slot computation is the cluster's
			want, err := rdb.ClusterKeySlot(ctx, k).Result()
			if err != nil || int64(admission.KeySlot(k)) != want {
				t.Fatalf("KeySlot(%q) = %d, CLUSTER KEYSLOT %d (%v)", k, admission.KeySlot(k), want, err)
			}
			checked++
		}
	}
	t.Logf("%d scripts, %d keys checked against CLUSTER KEYSLOT", len(calls), checked)

	// The organisations' keys are spread over the masters: each master holds rate windows and mirrors.
	var mu sync.Mutex
	perMaster := map[string]int{}
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		for _, pattern := range []string{prefix + "rl:*", prefix + "qu:*"} {
			keys, err := m.Keys(ctx, pattern).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			perMaster[m.Options().Addr] += len(keys)
			mu.Unlock()
		}
		pending, err := m.Keys(ctx, prefix+"qp:*").Result()
		if err != nil {
			return err
		}
		for _, k := range pending {
			if v, err := m.Get(ctx, k).Result(); err == nil && v != "0" {
				t.Errorf("pending counter %s = %s after everything settled, want 0", k, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	holding := 0
	for _, n := range perMaster {
		if n > 0 {
			holding++
		}
	}
	t.Logf("rate windows and mirrors per master: %v", perMaster)
	if holding < 2 {
		t.Errorf("keys of %d organisations on %d master(s), want them spread over at least two: %v", orgs, holding, perMaster)
	}
	for o := int64(1); o <= orgs; o++ {
		var used int64
		if err := db.Pool.QueryRow(ctx, `SELECT (cost_used * 1000000)::bigint FROM quotas WHERE scope = 'org' AND scope_id = $1`, o).Scan(&used); err != nil {
			t.Fatal(err)
		}
		if want := int64(perOrg-1) * cost; used != want {
			t.Errorf("org %d cost_used = %d micros, want %d", o, used, want)
		}
	}
	assertLedgerConsistent(t, db)
}
