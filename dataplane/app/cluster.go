package app

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/vocab"
)

// checkClusterSlots refuses Redis Cluster mode while the keys one Lua script touches do not share a hash
// slot. On a cluster such a script fails with CROSSSLOT: admission would fail on every request (and the
// open failure policy admit everything without a reservation) and settlement acknowledgements would
// fail. It checks, for every shard, the key names the code builds with the shard's tag (docs/operations.md,
// "Redis Cluster"): the admission script's keys of one request (rate windows, hold marker, every scope's
// pending counter, hold set and cost mirror) and the settlement script's (the shard's outbox stream with
// the same keys). The shard tags put them in one slot unless the key prefix breaks the tag (an unbalanced
// "{"); with one shard (no tag) only a hash tag in the prefix co-locates them.
func checkClusterSlots(prefix string, shards int) error {
	var problems []string
	for _, tag := range admission.NewShards(shards).Tags() {
		keys := admission.Keys{Prefix: prefix, Tag: tag}
		names := []string{keys.RPM(1, 1), keys.TPM(1, 1), keys.Hold("request-1")}
		for _, s := range []vocab.Scope{vocab.ScopeOrg, vocab.ScopeTeam, vocab.ScopeUser, vocab.ScopeKey} {
			names = append(names, keys.PendingIn(s, 1, "p"), keys.UsedIn(s, 1, "p"), keys.Holds(s, 1, "p"), keys.ScopeRPM(s, 1, 1),
				keys.ScopeTPM(s, 1, 1))
		}
		names = append(names, settle.Streams{Prefix: prefix}.Outbox(tag))
		bySlot := map[int][]string{}
		for _, n := range names {
			bySlot[admission.KeySlot(n)] = append(bySlot[admission.KeySlot(n)], n)
		}
		if len(bySlot) == 1 {
			continue
		}
		var parts []string
		for slot, ks := range bySlot {
			parts = append(parts, fmt.Sprintf("slot %d: %s", slot, strings.Join(ks, ", ")))
		}
		sort.Strings(parts)
		problems = append(problems, fmt.Sprintf("the keys of shard %q span %d hash slots: %s", tag, len(bySlot), strings.Join(parts, "; ")))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("TOLLGATE_REDIS_CLUSTER: the keys one admission or settlement script touches must share a hash slot "+
		"(Redis Cluster refuses others with CROSSSLOT): %s; set TOLLGATE_REDIS_SHARDS above 1 (each shard's keys carry "+
		"its hash tag) with a key prefix without braces, or a prefix that is one hash tag such as '{tollgate}:' (every key "+
		"in one slot)", strings.Join(problems, " | "))
}
