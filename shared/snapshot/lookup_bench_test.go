package snapshot

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// BenchmarkKeyLookups looks keys up by secret (hash) and by id among 100,000 and 1,000,000 keys:
//
//	go test -run '^$' -bench KeyLookups -count 5 ./shared/snapshot/
func BenchmarkKeyLookups(b *testing.B) {
	for _, n := range []int{100000, 1000000} {
		msg := &snapshotv1.Snapshot{}
		if err := proto.Unmarshal(manyKeysWire(b, n), msg); err != nil {
			b.Fatal(err)
		}
		c, err := Compile(msg)
		if err != nil {
			b.Fatal(err)
		}
		msg = nil
		secrets := make([]string, 4096)
		ids := make([]int64, len(secrets))
		for i := range secrets {
			j := 1 + (i*7919)%n
			secrets[i], ids[i] = fmt.Sprintf("key-%d", j), int64(100+j)
		}
		b.Run(fmt.Sprintf("hash/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if c.LookupKey(secrets[i%len(secrets)]) == nil {
					b.Fatal("nil")
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("id/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if c.KeyByID(ids[i%len(ids)]) == nil {
					b.Fatal("nil")
				}
				i++
			}
		})
	}
}
