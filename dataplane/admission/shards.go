package admission

import (
	"strconv"
	"strings"
)

// Redis Cluster sharding (docs/operations.md, "Redis Cluster"). Every key one request touches — its
// scopes' pending counters, hold sets and cost mirrors, its rate windows, its hold marker — and the outbox
// stream its settlement record goes to carry one hash tag, its organisation's shard tag, so every
// admission, refund and settlement script finds its keys in one hash slot. An organisation's shard is its
// id modulo the number of shards; shard i's tag is chosen so that its slot lies in the i-th of n equal
// ranges of the slot space, so the shards spread evenly over however many masters own those ranges.
//
// One shard (the default on a single Redis) means no tag at all: the key names of the releases before
// sharding, unchanged.

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// MaxShards bounds the number of shards (config.RedisShards).
const MaxShards = 1024

// Shards maps organisations to their shard tags. The zero value is one shard (no tag).
type Shards struct{ tags []string }

// NewShards returns n shards (n <= 1: one, untagged; at most MaxShards).
func NewShards(n int) Shards {
	if n <= 1 {
		return Shards{}
	}
	n = min(n, MaxShards)
	tags := make([]string, n)
	for i := range tags {
		tags[i] = ShardTag(i, n)
	}
	return Shards{tags: tags}
}

// ShardTag is the hash tag of shard i of n (n > 1): "s<i>.<k>" for the smallest k >= 0 whose slot lies in
// [i*16384/n, (i+1)*16384/n).
func ShardTag(i, n int) string {
	lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n
	base := "s" + strconv.Itoa(i) + "."
	for k := 0; ; k++ {
		tag := base + strconv.Itoa(k)
		if s := KeySlot(tag); lo <= s && s < hi {
			return tag
		}
	}
}

// N is the number of shards.
func (s Shards) N() int { return max(len(s.tags), 1) }

// Tags lists every shard's tag ("" for one shard).
func (s Shards) Tags() []string {
	if len(s.tags) == 0 {
		return []string{""}
	}
	return s.tags
}

// Tag is the tag of an organisation's shard: its id modulo N ("" for one shard).
func (s Shards) Tag(orgID int64) string {
	if len(s.tags) == 0 {
		return ""
	}
	i := orgID % int64(len(s.tags))
	if i < 0 {
		i = -i
	}
	return s.tags[i]
}

// KeySlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of the key, or of its hash tag — the bytes
// between the first "{" and the next "}" when that is not empty — modulo 16384.
func KeySlot(key string) int {
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
	return int(crc) % clusterSlots
}
