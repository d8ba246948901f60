package snapshotbuild

import (
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

func ids(keys []*configv1.ApiKey) []int64 {
	out := make([]int64, len(keys))
	for i, k := range keys {
		out[i] = k.GetId()
	}
	return out
}

// TestMergeKeys: the merge keeps id order, reports only real changes, removes only held keys, and never
// changes what held shows (a published snapshot shares it), on both the append path and the general one.
func TestMergeKeys(t *testing.T) {
	k := func(id int64, name string) *configv1.ApiKey { return &configv1.ApiKey{Id: id, Name: name} }
	base := make([]*configv1.ApiKey, 0, 16) // spare capacity: the append path writes beyond len
	base = append(base, k(1, "a"), k(3, "c"), k(5, "e"))
	snapshotOf := func() []*configv1.ApiKey {
		out := make([]*configv1.ApiKey, len(base))
		for i, e := range base {
			out[i] = proto.Clone(e).(*configv1.ApiKey)
		}
		return out
	}
	before := snapshotOf()
	unchanged := func(t *testing.T) {
		t.Helper()
		if len(base) != len(before) {
			t.Fatalf("held length changed")
		}
		for i := range base {
			if !proto.Equal(base[i], before[i]) {
				t.Fatalf("held[%d] changed: %v, was %v", i, base[i], before[i])
			}
		}
	}
	for _, c := range []struct {
		name             string
		changed          []*configv1.ApiKey
		gone             []int64
		wantOut, wantUps []int64
		wantRemoves      []int64
	}{
		{name: "nothing", wantOut: []int64{1, 3, 5}},
		{name: "created (append)", changed: []*configv1.ApiKey{k(6, "f"), k(9, "i")}, wantOut: []int64{1, 3, 5, 6, 9}, wantUps: []int64{6, 9}},
		{name: "created again from the same held (a rejected build before)", changed: []*configv1.ApiKey{k(7, "g")},
			wantOut: []int64{1, 3, 5, 7}, wantUps: []int64{7}},
		{name: "inserted between", changed: []*configv1.ApiKey{k(2, "b")}, wantOut: []int64{1, 2, 3, 5}, wantUps: []int64{2}},
		{name: "updated and unchanged", changed: []*configv1.ApiKey{k(1, "a"), k(3, "C")}, wantOut: []int64{1, 3, 5}, wantUps: []int64{3}},
		{name: "removed, gone but never held", gone: []int64{2, 3, 8}, wantOut: []int64{1, 5}, wantRemoves: []int64{3}},
		{name: "all at once", changed: []*configv1.ApiKey{k(4, "d"), k(6, "f")}, gone: []int64{1, 5},
			wantOut: []int64{3, 4, 6}, wantUps: []int64{4, 6}, wantRemoves: []int64{1, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, ups, rems := mergeKeys(base, c.changed, c.gone)
			if !slices.Equal(ids(out), c.wantOut) || !slices.Equal(ids(ups), c.wantUps) || !slices.Equal(rems, c.wantRemoves) {
				t.Errorf("mergeKeys = %v, %v, %v; want %v, %v, %v", ids(out), ids(ups), rems, c.wantOut, c.wantUps, c.wantRemoves)
			}
			unchanged(t)
		})
	}
}

// mergeKeysStepwise is the merge as first written, one step per held key: the reference for
// TestMergeKeysMatchesStepwise.
func mergeKeysStepwise(held, changed []*configv1.ApiKey, gone []int64) (out, upserts []*configv1.ApiKey, removes []int64) {
	i, j, g := 0, 0, 0
	for i < len(held) || j < len(changed) {
		switch {
		case j == len(changed) || (i < len(held) && held[i].GetId() < changed[j].GetId()):
			h := held[i]
			i++
			for g < len(gone) && gone[g] < h.GetId() {
				g++
			}
			if g < len(gone) && gone[g] == h.GetId() {
				removes = append(removes, h.GetId())
				continue
			}
			out = append(out, h)
		case i == len(held) || changed[j].GetId() < held[i].GetId():
			out = append(out, changed[j])
			upserts = append(upserts, changed[j])
			j++
		default:
			if !proto.Equal(held[i], changed[j]) {
				upserts = append(upserts, changed[j])
			}
			out = append(out, changed[j])
			i++
			j++
		}
	}
	return out, upserts, removes
}

// TestMergeKeysMatchesStepwise: the run-copying merge gives what the step-by-step one gives (the same
// elements, not only the same ids) on random held keys, changes (new, changed, unchanged) and deletions
// (held, never held, also read present).
func TestMergeKeysMatchesStepwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 3))
	for round := range 2000 {
		var held, changed []*configv1.ApiKey
		var gone []int64
		for id := int64(1); id <= int64(rng.IntN(60)); id++ {
			inHeld := rng.IntN(3) > 0
			if inHeld {
				held = append(held, &configv1.ApiKey{Id: id, Name: "h"})
			}
			switch rng.IntN(8) {
			case 0:
				changed = append(changed, &configv1.ApiKey{Id: id, Name: "c"})
			case 1:
				changed = append(changed, &configv1.ApiKey{Id: id, Name: "h"}) // unchanged when held
			case 2:
				gone = append(gone, id)
			case 3:
				changed = append(changed, &configv1.ApiKey{Id: id, Name: "c"})
				gone = append(gone, id)
			}
		}
		out, ups, rems := mergeKeys(held, changed, gone)
		wOut, wUps, wRems := mergeKeysStepwise(held, changed, gone)
		if !slices.Equal(out, wOut) || !slices.Equal(ups, wUps) || !slices.Equal(rems, wRems) {
			t.Fatalf("round %d: held %v, changed %v, gone %v:\nmergeKeys = %v, %v, %v\nstepwise  = %v, %v, %v", round,
				ids(held), ids(changed), gone, ids(out), ids(ups), rems, ids(wOut), ids(wUps), wRems)
		}
	}
}

// TestDiffKindSkipsUnreadKinds: a kind not read again is held's own slice in the next snapshot, and is
// not compared element by element (no key is computed); a copy of it is compared and found unchanged.
func TestDiffKindSkipsUnreadKinds(t *testing.T) {
	prev := []*configv1.PriceRule{{Id: 1, ModelMatch: "a"}, {Id: 2, ModelMatch: "b"}}
	calls := 0
	key := func(e *configv1.PriceRule) int64 { calls++; return e.GetId() }
	if ups, rems := diffKind(prev, prev, key); len(ups) != 0 || len(rems) != 0 || calls != 0 {
		t.Fatalf("same slice: upserts %v, removes %v, %d keys computed; want none", ups, rems, calls)
	}
	if ups, rems := diffKind(prev, slices.Clone(prev), key); len(ups) != 0 || len(rems) != 0 || calls == 0 {
		t.Fatalf("copy: upserts %v, removes %v, %d keys computed; want none and a comparison", ups, rems, calls)
	}
}
