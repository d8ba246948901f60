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
// fail. It checks the key names the code builds, so it passes as soon as they carry a common hash tag
// (docs/operations.md, "Redis Cluster"): the admission script's keys of one request (rate windows, hold
// marker, every scope's pending counter and cost mirror) and the settlement script's (the outbox stream
// with the same record's keys).
func checkClusterSlots(prefix string) error {
	keys := admission.Keys{Prefix: prefix}
	names := []string{keys.RPM(1, 1), keys.TPM(1, 1), keys.Hold("request-1")}
	for _, s := range []vocab.Scope{vocab.ScopeOrg, vocab.ScopeTeam, vocab.ScopeUser} {
		names = append(names, keys.Pending(s, 1), keys.Used(s, 1))
	}
	names = append(names, settle.Streams{Prefix: prefix}.Outbox())
	bySlot := map[int][]string{}
	for _, n := range names {
		bySlot[keySlot(n)] = append(bySlot[keySlot(n)], n)
	}
	if len(bySlot) == 1 {
		return nil
	}
	var parts []string
	for slot, ks := range bySlot {
		parts = append(parts, fmt.Sprintf("slot %d: %s", slot, strings.Join(ks, ", ")))
	}
	sort.Strings(parts)
	return fmt.Errorf("TOLLGATE_REDIS_CLUSTER: the keys one admission or settlement script touches span %d hash slots "+
		"(Redis Cluster would refuse them with CROSSSLOT): %s; this build's key names carry no common hash tag, "+
		"run it against a single Redis (or Sentinel) until they do", len(bySlot), strings.Join(parts, "; "))
}

// keySlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of the key, or of its hash tag — the
// bytes between the first "{" and the next "}" when that is not empty — modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
