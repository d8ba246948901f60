package snapshotbuild

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// BenchmarkKeyCreationDelta is the control plane's cost of one key creation at 100,000 keys: the delta
// read (store.ReadSnapshotChanges), the diff and merge into the held snapshot (makeDelta) and the
// delta's encoding. The commit of the key itself and the consistency gate (ApplyDelta) are outside the
// timer. Reports the encoded delta's size as wire-B/op.
//
//	go test -run '^$' -bench BenchmarkKeyCreationDelta -benchmem ./controlplane/snapshotbuild/
func BenchmarkKeyCreationDelta(b *testing.B) {
	const keys = 100_000
	db := storetest.New(b)
	ctx := context.Background()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secret.New(key)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO orgs (name) VALUES ('bench')`,
		`INSERT INTO teams (org_id, name) VALUES (1, 'bench')`,
		`INSERT INTO users (org_id, team_id, name) VALUES (1, 1, 'bench')`,
		fmt.Sprintf(`INSERT INTO api_keys (user_id, name, key_hash, prefix)
			SELECT 1, 'bench-' || i, sha256(('bench-' || i)::bytea), 'tg-bench' FROM generate_series(1, %d) i`, keys),
		`ANALYZE api_keys`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	held, err := store.ReadSnapshot(ctx, db.Pool, box)
	if err != nil {
		b.Fatal(err)
	}
	if len(held.GetApiKeys()) != keys {
		b.Fatalf("%d keys held, want %d", len(held.GetApiKeys()), keys)
	}
	bounds := &snapshotv1.SettlementBounds{}
	var wire int
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO api_keys (user_id, name, key_hash, prefix)
			VALUES (1, 'new-' || $1::text, sha256(('new-' || $1::text)::bytea), 'tg-new')`, fmt.Sprint(i)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ch, err := store.ReadSnapshotChanges(ctx, db.Pool, box, store.Since{Base: held.GetVersion()})
		if err != nil {
			b.Fatal(err)
		}
		d, next := makeDelta(held, ch, timestamppb.Now(), bounds)
		msg, err := proto.Marshal(&snapshotv1.WatchResponse{Delta: d})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(d.GetUpsertApiKeys()) != 1 {
			b.Fatalf("delta upserts %d keys, want 1", len(d.GetUpsertApiKeys()))
		}
		wire += len(msg)
		held = next
		b.StartTimer()
	}
	b.ReportMetric(float64(wire)/float64(b.N), "wire-B/op")
}
