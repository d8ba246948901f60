package snapshot

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

// keyIndex finds API keys by the sha256 of their secret and by id without maps: a data plane keeps a
// million keys, and a map entry per key (plus an allocation per key) doubled the heap they take. The
// keys lie in one slice ordered by hash; a lookup narrows to a bucket by the hash's first bits (sha256 is
// uniform, so about 16 keys a bucket) and binary-searches it.
type keyIndex struct {
	hashes [][sha256.Size]byte // ordered; hashes[i] is the hash of keys[i]
	keys   []APIKey
	// buckets[b] is the first index whose hash's top bucketBits bits are at least b; nil when bucketBits
	// is 0 (few keys: the whole slice is searched).
	buckets    []uint32
	bucketBits uint8
	// ids holds the index of every key's current entry (not a previous hash's), ordered by key id.
	ids []int32
}

func hashTop(h *[sha256.Size]byte) uint32 {
	return uint32(h[0])<<24 | uint32(h[1])<<16 | uint32(h[2])<<8 | uint32(h[3])
}

func (x *keyIndex) byHash(h *[sha256.Size]byte) *APIKey {
	lo, hi := 0, len(x.hashes)
	if x.buckets != nil {
		b := hashTop(h) >> (32 - x.bucketBits)
		lo, hi = int(x.buckets[b]), int(x.buckets[b+1])
	}
	i := lo + sort.Search(hi-lo, func(i int) bool { return bytes.Compare(x.hashes[lo+i][:], h[:]) >= 0 })
	if i == hi || x.hashes[i] != *h {
		return nil
	}
	return &x.keys[i]
}

func (x *keyIndex) byID(id int64) *APIKey {
	i, ok := slices.BinarySearchFunc(x.ids, id, func(j int32, id int64) int { return cmp.Compare(x.keys[j].ID, id) })
	if !ok {
		return nil
	}
	return &x.keys[x.ids[i]]
}

// keySort orders the entries being compiled by hash, then by their position in the snapshot (seq; a
// key's own hash before its previous hash), so a duplicate hash follows the entry it duplicates.
type keySort struct {
	x      *keyIndex
	seq    []int32
	fields []bool // previous_key_hash entries
}

func (s keySort) Len() int { return len(s.seq) }
func (s keySort) Less(i, j int) bool {
	if c := bytes.Compare(s.x.hashes[i][:], s.x.hashes[j][:]); c != 0 {
		return c < 0
	}
	if s.seq[i] != s.seq[j] {
		return s.seq[i] < s.seq[j]
	}
	return !s.fields[i] && s.fields[j]
}
func (s keySort) Swap(i, j int) {
	s.x.hashes[i], s.x.hashes[j] = s.x.hashes[j], s.x.hashes[i]
	s.x.keys[i], s.x.keys[j] = s.x.keys[j], s.x.keys[i]
	s.seq[i], s.seq[j] = s.seq[j], s.seq[i]
	s.fields[i], s.fields[j] = s.fields[j], s.fields[i]
}

func (c *Compiled) compileKeys(in []*configv1.ApiKey, errs []error) []error {
	n, size := 0, 0
	for _, kk := range in {
		n++
		size += len(kk.GetName()) + len(kk.GetPrefix())
		if len(kk.GetPreviousKeyHash()) > 0 {
			n++
			size += len(kk.GetPreviousPrefix())
		}
	}
	// The keys' strings share one buffer instead of the decoded message's allocation per string.
	var buf strings.Builder
	buf.Grow(size)
	str := func(s string) string {
		if s == "" {
			return ""
		}
		start := buf.Len()
		buf.WriteString(s)
		return buf.String()[start:]
	}
	sets := map[string]*modelSet{}
	x := &c.keys
	x.hashes, x.keys = make([][sha256.Size]byte, 0, n), make([]APIKey, 0, n)
	s := keySort{x: x, seq: make([]int32, 0, n), fields: make([]bool, 0, n)}
	add := func(seq int, previous bool, hash []byte, k APIKey) {
		x.hashes = append(x.hashes, [sha256.Size]byte(hash))
		x.keys = append(x.keys, k)
		s.seq, s.fields = append(s.seq, int32(seq)), append(s.fields, previous)
	}
	for i, kk := range in {
		if err := CheckAPIKey(kk); err != nil {
			errs = append(errs, err)
			continue
		}
		k := APIKey{
			ID: kk.GetId(), UserID: kk.GetUserId(), OrgID: kk.GetOrgId(), TeamID: kk.GetTeamId(), Name: str(kk.GetName()),
			Prefix: str(kk.GetPrefix()), Enabled: kk.GetEnabled(), RPMLimit: kk.GetRpmLimit(), TPMLimit: kk.GetTpmLimit(),
			models: internModels(sets, kk.GetAllowedModels()), direct: c.DirectAddressing || kk.GetAllowDirectAddressing(),
		}
		if kk.GetExpiresAt() != nil {
			k.ExpiresAt = kk.GetExpiresAt().AsTime()
		}
		add(i, false, kk.GetKeyHash(), k)
		if len(kk.GetPreviousKeyHash()) > 0 {
			// The replaced key of a rotation: the same key until the grace period ends (or the key's own
			// expiry, when sooner), checked by Usable with the data plane's clock.
			prev := k
			prev.Prefix, prev.Previous = str(kk.GetPreviousPrefix()), true
			end := kk.GetPreviousExpiresAt().AsTime()
			if prev.ExpiresAt.IsZero() || end.Before(prev.ExpiresAt) {
				prev.ExpiresAt = end
			}
			add(i, true, kk.GetPreviousKeyHash(), prev)
		}
	}
	sort.Sort(s)
	// A hash already used by an earlier entry fails the snapshot; the entry is dropped.
	kept := 0
	for i := range x.hashes {
		if kept > 0 && x.hashes[i] == x.hashes[kept-1] {
			kk, field := in[s.seq[i]], "key_hash"
			if s.fields[i] {
				field = "previous_key_hash"
			}
			errs = append(errs, &ElementError{Resource: "api key", ID: kk.GetId(), Name: kk.GetPrefix(), Field: field,
				Message: fmt.Sprintf("already used by api key %d", x.keys[kept-1].ID)})
			continue
		}
		x.hashes[kept], x.keys[kept], s.seq[kept], s.fields[kept] = x.hashes[i], x.keys[i], s.seq[i], s.fields[i]
		kept++
	}
	x.hashes, x.keys = slices.Clip(x.hashes[:kept]), slices.Clip(x.keys[:kept])
	x.buildBuckets()
	// By id: the current entries, the latest in the snapshot winning a repeated id.
	for i := range x.keys {
		if !x.keys[i].Previous {
			x.ids = append(x.ids, int32(i))
		}
	}
	slices.SortFunc(x.ids, func(a, b int32) int {
		return cmp.Or(cmp.Compare(x.keys[a].ID, x.keys[b].ID), cmp.Compare(s.seq[b], s.seq[a]))
	})
	x.ids = slices.Clip(slices.CompactFunc(x.ids, func(a, b int32) bool { return x.keys[a].ID == x.keys[b].ID }))
	return errs
}

// buildBuckets sizes the bucket table to about 16 keys a bucket (at most 1<<16 buckets).
func (x *keyIndex) buildBuckets() {
	n := len(x.hashes)
	if n < 64 {
		return
	}
	x.bucketBits = uint8(min(16, bits.Len(uint(n))-4))
	x.buckets = make([]uint32, 1<<x.bucketBits+1)
	i := 0
	for b := range x.buckets {
		for i < n && hashTop(&x.hashes[i])>>(32-x.bucketBits) < uint32(b) {
			i++
		}
		x.buckets[b] = uint32(i)
	}
}

// internModels returns the compiled set of an allowed_models list, shared by the keys with the same list
// (sets is the snapshot's), or nil for an empty list (every model).
func internModels(sets map[string]*modelSet, models []string) *modelSet {
	if len(models) == 0 {
		return nil
	}
	var id strings.Builder
	for _, m := range models {
		id.WriteString(strconv.Itoa(len(m)))
		id.WriteByte(':')
		id.WriteString(m)
	}
	if ms, ok := sets[id.String()]; ok {
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
	sets[id.String()] = ms
	return ms
}
