package app

import (
	"strings"
	"testing"
)

// TestClusterModeNeedsCoLocatedKeys: cluster mode is refused, naming the keys, while the scripts' keys
// span slots — one shard (untagged names) without a hash tag in the prefix, or a prefix whose unbalanced
// brace breaks the shard tags; several shards, or one with a hash-tagged prefix, are accepted.
func TestClusterModeNeedsCoLocatedKeys(t *testing.T) {
	err := checkClusterSlots("", 1)
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") || !strings.Contains(err.Error(), "qp:org:1") {
		t.Fatalf("untagged keys: %v, want a refusal naming the keys", err)
	}
	if err := checkClusterSlots("{tollgate}:", 1); err != nil {
		t.Fatalf("hash-tagged prefix: %v", err)
	}
	for _, prefix := range []string{"", "tollgate:", "{tollgate}:"} {
		if err := checkClusterSlots(prefix, 16); err != nil {
			t.Fatalf("16 shards, prefix %q: %v", prefix, err)
		}
	}
	if err := checkClusterSlots("a{b:", 16); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("prefix with an unbalanced brace: %v, want a refusal", err)
	}
}
