package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/telemetry"
	"github.com/tollgate/tollgate/shared/testkit"

	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/controlplane/store"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// TestSnapshotsAcrossReplicas runs 2 control planes and 3 data planes: dp1 prefers cp1, dp2 prefers cp2
// and dp3 knows only cp2.
func TestSnapshotsAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	base := c.seed()
	cp1 := c.startCP("cp1", "")
	cp2 := c.startCP("cp2", "")
	cp2Addr := cp2.srv.GRPCAddr()

	// A data plane that reaches no control plane is alive but not ready.
	lonely := c.startDP("lonely", []string{"127.0.0.1:1"})
	if code, _ := lonely.readyz(t); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before any snapshot = %d, want 503", code)
	}

	dp1 := c.startDP("dp1", []string{cp1.srv.GRPCAddr(), cp2Addr})
	dp2 := c.startDP("dp2", []string{cp2Addr, cp1.srv.GRPCAddr()})
	dp3 := c.startDP("dp3", []string{cp2Addr})
	dps := []*dp{dp1, dp2, dp3}
	for _, d := range dps {
		if got := inputPrice(t, d.wait(t, base)); got != "1.25" {
			t.Fatalf("%s input price = %s, want 1.25", d.name, got)
		}
		d.wantReady(t, base)
	}
	if dp3.srv.Syncer.Endpoint() != cp2Addr || dp1.srv.Syncer.Endpoint() != cp1.srv.GRPCAddr() {
		t.Fatalf("dp1 watches %q, dp3 watches %q; want cp1 and cp2", dp1.srv.Syncer.Endpoint(), dp3.srv.Syncer.Endpoint())
	}

	t.Log("a price change committed through replica 1's admin API reaches every data plane, also those watching replica 2")
	v1 := c.adminPut(cp1, "/admin/price-rules/1", `{"id": 1, "provider_id": 1, "match_type": "exact",
		"model_match": "up-model", "input_price": "2.5", "output_price": "10", "cache_read_price": "0.125",
		"cache_creation_5m_price": "1.5", "cache_creation_30m_price": "1.75", "cache_creation_1h_price": "2",
		"image_output_price": "40", "enabled": true}`)
	if v1 <= base {
		t.Fatalf("revision %d after the admin change, want > %d", v1, base)
	}
	for _, d := range dps {
		if got := inputPrice(t, d.wait(t, v1)); got != "2.5" {
			t.Fatalf("%s input price = %s after the change, want 2.5", d.name, got)
		}
		d.wantReady(t, v1)
	}

	t.Log("each replica's snapshot status names the data planes watching it and the version each holds")
	var status struct {
		PublishedVersion int64 `json:"published_version"`
		DataPlanes       []struct {
			NodeID  string `json:"node_id"`
			Version int64  `json:"version"`
		} `json:"data_planes"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code := c.adminREST(t, cp2, http.MethodGet, "/admin/snapshot-status", nil, &status); code != http.StatusOK {
			t.Fatalf("GET /admin/snapshot-status = %d", code)
		}
		got := fmt.Sprint(status.DataPlanes)
		if got == fmt.Sprintf("[{dp2 %d} {dp3 %d}]", v1, v1) && status.PublishedVersion == v1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cp2 snapshot status: published %d, data planes %s; want dp2 and dp3 at %d", status.PublishedVersion, got, v1)
		}
		time.Sleep(20 * time.Millisecond)
	}

	t.Log("replicas publish the same version for the same state")
	sameSnapshot(t, cp1.srv.Watch.Latest(), cp2.srv.Watch.Latest())

	t.Log("a snapshot that fails to compile is not published; data planes keep the old one")
	bad := exec(t, cp1.srv.Pool, `INSERT INTO price_rules (match_type, model_match, input_price, output_price, cache_read_price,
		cache_creation_5m_price, cache_creation_30m_price, cache_creation_1h_price, image_output_price, pricing_tiers_json)
		VALUES ('contains', 'up', 1, 1, 1, 1, 1, 1, 1, '[{"min_prompt_tokens": 1000, "multiplier": "not-a-decimal"}]')`)
	for _, p := range []*cp{cp1, cp2} {
		waitMetric(t, p, fmt.Sprintf("tollgate_snapshot_rejected_version %d", bad))
		if got := p.srv.Watch.Latest().GetVersion(); got != v1 {
			t.Fatalf("%s publishes version %d after a snapshot that fails to compile, want %d", p.name, got, v1)
		}
	}
	time.Sleep(300 * time.Millisecond) // room for a wrong publish to arrive
	for _, d := range dps {
		if d.version() != v1 {
			t.Fatalf("%s serves version %d, want %d kept", d.name, d.version(), v1)
		}
		d.wantReady(t, v1)
	}
	fixed := exec(t, cp2.srv.Pool, `DELETE FROM price_rules WHERE pricing_tiers_json::text LIKE '%not-a-decimal%'`)
	for _, d := range dps {
		d.wait(t, fixed)
	}

	t.Log("a control plane stops: data planes keep their version and stay ready; it returns: they catch up")
	cp2.stop()
	testkit.WaitFor(t, "dp2 moved to cp1", func() bool { return dp2.srv.Syncer.Endpoint() == cp1.srv.GRPCAddr() })
	v2 := exec(t, cp1.srv.Pool, `UPDATE price_rules SET input_price = 3.75 WHERE id = 1`)
	for _, d := range []*dp{dp1, dp2} {
		if got := inputPrice(t, d.wait(t, v2)); got != "3.75" {
			t.Fatalf("%s input price = %s, want 3.75", d.name, got)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if dp3.version() != fixed || dp3.srv.Syncer.Endpoint() != "" {
		t.Fatalf("dp3 (only cp2, which is down) serves %d via %q, want %d via none", dp3.version(), dp3.srv.Syncer.Endpoint(), fixed)
	}
	dp3.wantReady(t, fixed)
	if got := inputPrice(t, dp3.srv.Syncer.Current()); got != "2.5" {
		t.Fatalf("dp3 input price = %s while cut off, want the last known 2.5", got)
	}

	cp2 = c.startCP("cp2-restarted", cp2Addr)
	if got := inputPrice(t, dp3.wait(t, v2)); got != "3.75" {
		t.Fatalf("dp3 input price = %s after cp2 returned, want 3.75", got)
	}
	dp3.wantReady(t, v2)
	testkit.WaitFor(t, "cp2 publishes v2", func() bool { return cp2.srv.Watch.Latest().GetVersion() == v2 })
	sameSnapshot(t, cp1.srv.Watch.Latest(), cp2.srv.Watch.Latest())
}

// sameSnapshot fails unless two replicas' snapshots are equal apart from built_at and quota cost_used
// (settlement moves cost_used without a new revision).
func sameSnapshot(t *testing.T, a, b *snapshotv1.Snapshot) {
	t.Helper()
	if a.GetVersion() != b.GetVersion() {
		t.Fatalf("replicas publish versions %d and %d for the same state", a.GetVersion(), b.GetVersion())
	}
	a, b = proto.Clone(a).(*snapshotv1.Snapshot), proto.Clone(b).(*snapshotv1.Snapshot)
	for _, s := range []*snapshotv1.Snapshot{a, b} {
		s.BuiltAt = nil
		for _, q := range s.GetQuotas() {
			q.CostUsed = ""
		}
	}
	if !proto.Equal(a, b) {
		t.Fatalf("replicas publish different snapshots for version %d", a.GetVersion())
	}
}

// adminPut sends an admin REST PUT to the control plane and returns the revision after it.
func (c *cluster) adminPut(p *cp, path, body string) int64 {
	c.t.Helper()
	c.admin(c.t, p, http.MethodPut, path, json.RawMessage(body), nil, http.StatusOK)
	rev, err := store.Revision(context.Background(), p.srv.Pool)
	if err != nil {
		c.t.Fatal(err)
	}
	return rev
}

func waitMetric(t *testing.T, p *cp, line string) {
	t.Helper()
	testkit.WaitFor(t, p.name+" metric "+line, func() bool {
		b, err := telemetry.Text(p.srv.Metrics)
		return err == nil && strings.Contains(b, line+"\n")
	})
}
