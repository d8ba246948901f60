package snapshotbuild

import (
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
