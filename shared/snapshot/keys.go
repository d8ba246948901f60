package snapshot

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

// The key index is split into shards so that a delta copies only the shards it touches (ApplyDelta): a
// data plane keeps a million keys, and copying them all per change would double its heap during every
// update. 4,096 shards by hash hold about 244 keys each at a million keys; a 1,000-key delta copies
// about 900 of them.
const (
	shardBits = 12
	numShards = 1 << shardBits
)

// keyIndex finds API keys by the sha256 of their secret and by id without maps: a map entry per key
// (plus an allocation per key) doubled the heap they take. The entries lie in hash shards (by the hash's
// top shardBits bits), each one slice ordered by hash with a small bucket table; the by-id index lies in
// id shards (by id modulo numShards), each naming an entry by its id and the first 4 bytes of its hash.
// Shards are never mutated once built: a new index shares every shard it did not change.
type keyIndex struct {
	// The shard tables hold shards by value (the bucket table inline), so a lookup reaches the shard's
	// slices without a pointer hop; a delta copies the tables (about 680 KiB) and shares the slices.
	hashShards []keyShard // numShards
	idShards   []idShard  // numShards
	// sets interns allowed_models lists (internModels); never mutated once the index is published.
	sets map[string]*modelSet
}

// keyShard holds the entries whose hash starts with one shardBits prefix.
type keyShard struct {
	hashes [][sha256.Size]byte // ordered; hashes[i] is the hash of keys[i]
	keys   []APIKey
	// buckets[b] is the first index whose hash's next bucketBits bits (after the shard's) are at least
	// b: about 15 entries a bucket at a million keys.
	buckets [1<<bucketBits + 1]uint32
}

const bucketBits = 4

// idRef names one entry (a key's current entry or a rotated key's previous one) of key id by the first
// 4 bytes of its hash. Entries sharing those 4 bytes are told apart by their key id.
type idRef struct {
	id  int64
	top uint32
}

// idShard holds the refs of the ids equal modulo numShards, ordered by id, then top, as two slices
// (12 bytes a ref instead of a padded 16).
type idShard struct {
	ids  []int64
	tops []uint32
}

// span returns the range of the shard's refs of id.
func (is *idShard) span(id int64) (i, j int) {
	i = sort.Search(len(is.ids), func(i int) bool { return is.ids[i] >= id })
	for j = i; j < len(is.ids) && is.ids[j] == id; j++ {
	}
	return i, j
}

func hashTop(h *[sha256.Size]byte) uint32 { return binary.BigEndian.Uint32(h[:4]) }

func shardOf(top uint32) int { return int(top >> (32 - shardBits)) }

func idShardOf(id int64) int { return int(uint64(id) % numShards) }

func newKeyIndex() keyIndex {
	return keyIndex{hashShards: make([]keyShard, numShards), idShards: make([]idShard, numShards), sets: map[string]*modelSet{}}
}

// search returns the range of the shard's entries whose bucket may hold a hash with prefix top.
func (sh *keyShard) search(top uint32) (lo, hi int) {
	b := top << shardBits >> (32 - bucketBits)
	return int(sh.buckets[b]), int(sh.buckets[b+1])
}

func (x *keyIndex) byHash(h *[sha256.Size]byte) *APIKey {
	top := hashTop(h)
	sh := &x.hashShards[shardOf(top)]
	lo, hi := sh.search(top)
	i := lo + sort.Search(hi-lo, func(i int) bool { return bytes.Compare(sh.hashes[lo+i][:], h[:]) >= 0 })
	if i == hi || sh.hashes[i] != *h {
		return nil
	}
	return &sh.keys[i]
}

// entry returns the shard and index of key id's entry whose hash starts with top (its previous hash's
// entry when previous is set), or nil.
func (x *keyIndex) entry(top uint32, id int64, previous bool) (*keyShard, int) {
	sh := &x.hashShards[shardOf(top)]
	lo, hi := sh.search(top)
	for i := lo + sort.Search(hi-lo, func(i int) bool { return hashTop(&sh.hashes[lo+i]) >= top }); i < hi && hashTop(&sh.hashes[i]) == top; i++ {
		if k := &sh.keys[i]; k.ID == id && k.Previous == previous {
			return sh, i
		}
	}
	return nil, 0
}

func (x *keyIndex) byID(id int64) *APIKey {
	is := &x.idShards[idShardOf(id)]
	i, j := is.span(id)
	for ; i < j; i++ {
		if sh, k := x.entry(is.tops[i], id, false); sh != nil {
			return &sh.keys[k]
		}
	}
	return nil
}

// index builds the shard's bucket table.
func (sh *keyShard) index() {
	n := len(sh.hashes)
	i := 0
	for b := range sh.buckets {
		for i < n && hashTop(&sh.hashes[i])<<shardBits>>(32-bucketBits) < uint32(b) {
			i++
		}
		sh.buckets[b] = uint32(i)
	}
}

// keyEntry is an entry being placed: its hash, its compiled key, and where it came from (seq: its
// position in the snapshot or delta; field: the hash field) to order duplicates and name them.
type keyEntry struct {
	hash  [sha256.Size]byte
	key   APIKey
	seq   int32
	field string
}

// sortEntries orders entries by hash, then seq, a key's own hash before its previous hash, so a duplicate
// hash follows the entry it duplicates.
func sortEntries(es []keyEntry) {
	slices.SortFunc(es, func(a, b keyEntry) int {
		return cmp.Or(bytes.Compare(a.hash[:], b.hash[:]), cmp.Compare(a.seq, b.seq), cmp.Compare(b2i(a.key.Previous), b2i(b.key.Previous)))
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// newShard builds a shard from entries ordered by sortEntries; a hash already used by an earlier entry
// is an error naming the later entry (nameOf gives its id and prefix), and that entry is dropped.
func newShard(es []keyEntry, nameOf func(keyEntry) (int64, string), errs []error) (keyShard, []error) {
	if len(es) == 0 {
		return keyShard{}, errs
	}
	sh := keyShard{hashes: make([][sha256.Size]byte, 0, len(es)), keys: make([]APIKey, 0, len(es))}
	for _, e := range es {
		if n := len(sh.hashes); n > 0 && sh.hashes[n-1] == e.hash {
			id, name := nameOf(e)
			errs = append(errs, &ElementError{Resource: "api key", ID: id, Name: name, Field: e.field,
				Message: fmt.Sprintf("already used by api key %d", sh.keys[n-1].ID)})
			continue
		}
		sh.hashes, sh.keys = append(sh.hashes, e.hash), append(sh.keys, e.key)
	}
	sh.index()
	return sh, errs
}

// newIDShard builds an id shard from refs (reordered in place).
func newIDShard(refs []idRef) idShard {
	if len(refs) == 0 {
		return idShard{}
	}
	slices.SortFunc(refs, func(a, b idRef) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.top, b.top)) })
	is := idShard{ids: make([]int64, len(refs)), tops: make([]uint32, len(refs))}
	for i, r := range refs {
		is.ids[i], is.tops[i] = r.id, r.top
	}
	return is
}

// keyCompiler compiles key messages into entries: strings share one buffer per compile instead of the
// decoded message's allocation per string, and model lists are interned into sets.
type keyCompiler struct {
	buf    strings.Builder
	sets   map[string]*modelSet
	cloned bool // sets is this compile's own map (copy on write of the held index's)
	direct bool // the gateway-wide direct-addressing switch
}

func (kc *keyCompiler) str(s string) string {
	if s == "" {
		return ""
	}
	start := kc.buf.Len()
	kc.buf.WriteString(s)
	return kc.buf.String()[start:]
}

// grow reserves the buffer for the strings of keys.
func (kc *keyCompiler) grow(keys []*configv1.ApiKey) {
	size := 0
	for _, kk := range keys {
		size += len(kk.GetName()) + len(kk.GetPrefix()) + len(kk.GetPreviousPrefix())
	}
	kc.buf.Grow(size)
}

// entries appends the entries of a checked key: its own, and its previous hash's during a rotation.
func (kc *keyCompiler) entries(es []keyEntry, seq int32, kk *configv1.ApiKey) []keyEntry {
	k := APIKey{
		ID: kk.GetId(), UserID: kk.GetUserId(), OrgID: kk.GetOrgId(), TeamID: kk.GetTeamId(), Name: kc.str(kk.GetName()),
		Prefix: kc.str(kk.GetPrefix()), Enabled: kk.GetEnabled(), RPMLimit: kk.GetRpmLimit(), TPMLimit: kk.GetTpmLimit(),
		models: kc.intern(kk.GetAllowedModels()), allowDirect: kk.GetAllowDirectAddressing(),
		direct: kc.direct || kk.GetAllowDirectAddressing(), costDisclosure: disclosureOf(kk),
	}
	if kk.GetExpiresAt() != nil {
		k.ExpiresAt = kk.GetExpiresAt().AsTime()
	}
	es = append(es, keyEntry{hash: [sha256.Size]byte(kk.GetKeyHash()), key: k, seq: seq, field: "key_hash"})
	if len(kk.GetPreviousKeyHash()) > 0 {
		// The replaced key of a rotation: the same key until the grace period ends (or the key's own
		// expiry, when sooner), checked by Usable with the data plane's clock.
		prev := k
		prev.Prefix, prev.Previous = kc.str(kk.GetPreviousPrefix()), true
		end := kk.GetPreviousExpiresAt().AsTime()
		if prev.ExpiresAt.IsZero() || end.Before(prev.ExpiresAt) {
			prev.ExpiresAt = end
		}
		es = append(es, keyEntry{hash: [sha256.Size]byte(kk.GetPreviousKeyHash()), key: prev, seq: seq, field: "previous_key_hash"})
	}
	return es
}

// intern returns the compiled set of an allowed_models list, shared by the keys with the same list, or
// nil for an empty list (every model). A set added to a held index's map goes into a copy of it.
func (kc *keyCompiler) intern(models []string) *modelSet {
	if len(models) == 0 {
		return nil
	}
	var id strings.Builder
	for _, m := range models {
		id.WriteString(strconv.Itoa(len(m)))
		id.WriteByte(':')
		id.WriteString(m)
	}
	if ms, ok := kc.sets[id.String()]; ok {
		return ms
	}
	ms := &modelSet{names: slices.Clone(models)}
	for _, m := range models {
		if IsModelPattern(m) {
			ms.patterns = append(ms.patterns, m)
			continue
		}
		if ms.allowed == nil {
			ms.allowed = make(map[string]struct{}, len(models))
		}
		ms.allowed[m] = struct{}{}
	}
	if !kc.cloned {
		kc.sets, kc.cloned = maps.Clone(kc.sets), true
	}
	kc.sets[id.String()] = ms
	return ms
}

func (c *Compiled) compileKeys(in []*configv1.ApiKey, errs []error) []error {
	x := newKeyIndex()
	kc := &keyCompiler{sets: x.sets, cloned: true, direct: c.DirectAddressing}
	kc.grow(in)
	// Entries are placed straight into per-shard groups (counted first, then one temporary array), and
	// each shard's slices are allocated at their final size.
	ok := make([]bool, len(in))
	var count [numShards]int32
	n := 0
	for i, kk := range in {
		if err := CheckAPIKey(kk); err != nil {
			errs = append(errs, err)
			continue
		}
		ok[i] = true
		for _, h := range [][]byte{kk.GetKeyHash(), kk.GetPreviousKeyHash()} {
			if len(h) > 0 {
				count[shardOf(hashTop((*[sha256.Size]byte)(h)))]++
				n++
			}
		}
	}
	var start [numShards + 1]int32
	for s := range numShards {
		start[s+1] = start[s] + count[s]
	}
	es := make([]keyEntry, n)
	next := start
	var one []keyEntry
	for i, kk := range in {
		if !ok[i] {
			continue
		}
		one = kc.entries(one[:0], int32(i), kk)
		for _, e := range one {
			s := shardOf(hashTop(&e.hash))
			es[next[s]] = e
			next[s]++
		}
	}
	nameOf := func(e keyEntry) (int64, string) { return in[e.seq].GetId(), in[e.seq].GetPrefix() }
	type seqRef struct {
		idRef
		seq int32
	}
	refs := make([][]seqRef, numShards)
	for s := range numShards {
		group := es[start[s]:start[s+1]]
		sortEntries(group)
		x.hashShards[s], errs = newShard(group, nameOf, errs)
		for _, e := range group {
			is := idShardOf(e.key.ID)
			refs[is] = append(refs[is], seqRef{idRef{id: e.key.ID, top: hashTop(&e.hash)}, e.seq})
		}
	}
	es = nil
	for s, rs := range refs {
		// A repeated id (ids are primary keys: only a hand-made snapshot has one): the latest key in the
		// snapshot answers by id, as its earlier entries stay found by hash only.
		slices.SortFunc(rs, func(a, b seqRef) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(b.seq, a.seq)) })
		out := make([]idRef, 0, len(rs))
		for i, r := range rs {
			if i == 0 || r.id != rs[i-1].id || r.seq == rs[i-1].seq {
				out = append(out, r.idRef)
			} else {
				rs[i].seq = rs[i-1].seq // keep skipping this id's older entries
			}
		}
		x.idShards[s] = newIDShard(out)
		refs[s] = nil
	}
	x.sets = kc.sets
	c.keys = x
	return errs
}
