package settle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestShardingUpgradeDrainsUntaggedOutbox is a rolling upgrade from one shard (the untagged key names of
// the releases before sharding) to 16: records an old data plane appended to the untagged outbox, with
// holds on the untagged counters, are delivered by a new data plane's forwarder, once, and their holds
// refunded where they were reserved; the new data plane's own requests go to the shards' streams.
func TestShardingUpgradeDrainsUntaggedOutbox(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rdb, prefix := admissiontest.Redis(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO quotas (scope, scope_id, cost_limit) VALUES ('org', 1, 1), ('org', 2, 1)`); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, db)
	old := newDataPlane(t, rdb, prefix, "dp-old", cp, admission.Options{}, settle.ForwarderOptions{})
	upgraded := newDataPlane(t, rdb, prefix, "dp-new", cp, admission.Options{Shards: 16}, settle.ForwarderOptions{})
	scopes := func(org int64) []admission.ScopeQuota {
		return []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: org, LimitMicros: 1_000_000}}
	}
	const n = 20
	for i := range n { // the old data plane's requests; its forwarder never runs (it was replaced)
		org := int64(1 + i%2)
		rid := fmt.Sprintf("req_old%d", i)
		h, err := old.adm.Admit(ctx, admission.Request{ID: rid, OrgID: org, KeyID: 1, EstimateMicros: 100, Scopes: scopes(org)})
		if err != nil || h.Tag != "" {
			t.Fatalf("old Admit = %+v, %v; want an untagged hold", h, err)
		}
		if err := old.rec.Append(ctx, outcomeRecord(rid, org, 0, 3, 120, vocab.EndCompleted), h); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := rdb.Get(ctx, admission.Keys{Prefix: prefix}.Pending(vocab.ScopeOrg, 1)).Int64(); v != n/2*100 {
		t.Fatalf("untagged qp:org:1 = %d before the upgrade, want %d", v, n/2*100)
	}
	upgraded.start()
	defer upgraded.stop()
	for i := range n { // the new data plane's requests
		org := int64(1 + i%2)
		rid := fmt.Sprintf("req_new%d", i)
		h, err := upgraded.adm.Admit(ctx, admission.Request{ID: rid, OrgID: org, KeyID: 1, EstimateMicros: 100, Scopes: scopes(org)})
		if err != nil || h.Tag != admission.NewShards(16).Tag(org) {
			t.Fatalf("new Admit = %+v, %v; want a hold tagged with org %d's shard", h, err, org)
		}
		if err := upgraded.rec.Append(ctx, outcomeRecord(rid, org, 0, 3, 120, vocab.EndCompleted), h); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitWithin(t, 30*time.Second, "every record stored", func() bool {
		var c int
		_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages`).Scan(&c)
		return c == 2*n
	})
	waitDrained(t, rdb, prefix, 10*time.Second) // the untagged stream
	for _, tag := range admission.NewShards(16).Tags() {
		testkit.WaitWithin(t, 10*time.Second, "shard stream "+tag+" empty", func() bool {
			l, err := rdb.XLen(ctx, settle.Streams{Prefix: prefix}.Outbox(tag)).Result()
			return err == nil && l == 0
		})
	}
	assertPendingZero(t, rdb, prefix) // untagged and tagged counters alike
	var used int64
	if err := db.Pool.QueryRow(ctx, `SELECT (sum(cost_used) * 1000000)::bigint FROM quotas`).Scan(&used); err != nil {
		t.Fatal(err)
	}
	if used != 2*n*120 {
		t.Errorf("cost_used total %d micros, want %d", used, 2*n*120)
	}
	assertLedgerConsistent(t, db)
}
