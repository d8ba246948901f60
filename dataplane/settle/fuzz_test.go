package settle_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/settle"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
)

// FuzzDecodeEntry feeds arbitrary outbox fields to DecodeEntry: it must never panic, and whatever it
// accepts must be a record with a request id whose pending_micros matches a well-formed hold.
func FuzzDecodeEntry(f *testing.F) {
	team := int64(2)
	good, _ := proto.Marshal(&settlementv1.SettlementRecord{RequestId: "r1", OrgId: 1, TeamId: &team, UserId: 3, Cost: "0.5", PendingMicros: 250})
	f.Add(good, "v1;250;1;29000000;40;org:1,team:2,user:3")
	f.Add(good, "v1;0;0;0;0;")
	f.Add(good, "v2;250;1;29000000;40;org:1,team:2,user:3;r1")
	f.Add(good, "v2;250;1;29000000;40;org:1,team:2,user:3;r2")
	f.Add([]byte{0x0a, 0x00}, "v1;0;0;0;0;")
	f.Add([]byte("garbage"), "garbage")
	f.Fuzz(func(t *testing.T, rec []byte, hold string) {
		r, h, err := settle.DecodeEntry(map[string]any{"r": string(rec), "h": hold})
		if err != nil {
			return
		}
		if r.GetRequestId() == "" || r.GetPendingMicros() != h.Micros || h.Micros < 0 || len(h.Scopes) > 3 ||
			(h.RequestID != "" && h.RequestID != r.GetRequestId()) {
			t.Fatalf("DecodeEntry accepted an inconsistent entry: %v %+v", r, h)
		}
		if _, err := admission.DecodeHold(admission.EncodeHold(h)); err != nil {
			t.Fatalf("accepted hold does not round-trip: %v", err)
		}
	})
}
