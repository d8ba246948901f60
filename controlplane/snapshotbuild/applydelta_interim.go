package snapshotbuild

import (
	"fmt"

	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// ApplyDelta is the consistency gate of a delta: it turns the compiled form of held.Version into the
// compiled form of d.Version, refusing a delta whose base is not held.Version or whose result does not
// compile — exactly what a data plane does with the same delta. next is the proto-level merge of the
// held snapshot and d (what a full snapshot of d.Version carries).
//
// INTERIM: correct but slow (it compiles next whole, the cost of a full snapshot). At merge with the data
// plane's half, set it to
//
//	func(held *snapshot.Compiled, d *snapshotv1.SnapshotDelta, _ *snapshotv1.Snapshot) (*snapshot.Compiled, error) {
//		return snapshot.ApplyDelta(held, d)
//	}
//
// and delete interimApplyDelta.
var ApplyDelta = interimApplyDelta

func interimApplyDelta(held *snapshot.Compiled, d *snapshotv1.SnapshotDelta, next *snapshotv1.Snapshot) (*snapshot.Compiled, error) {
	if held == nil || held.Version != d.GetBaseVersion() {
		var v int64
		if held != nil {
			v = held.Version
		}
		return nil, fmt.Errorf("delta %d → %d does not apply to version %d", d.GetBaseVersion(), d.GetVersion(), v)
	}
	if next.GetVersion() != d.GetVersion() {
		return nil, fmt.Errorf("delta %d → %d: merged snapshot has version %d", d.GetBaseVersion(), d.GetVersion(), next.GetVersion())
	}
	return snapshot.Compile(next)
}
