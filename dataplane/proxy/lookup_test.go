package proxy

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// fakeCosts is a CostLookup over the records a test's requests settled (the control plane's rows) and the
// markers they wrote; down makes every call fail.
type fakeCosts struct {
	mu      sync.Mutex
	rows    map[string]*settlementv1.SettlementRecord // settled, by request id
	markers map[string]int64
	down    bool
}

func (f *fakeCosts) Settled(_ context.Context, keyID int64, id string) (*settlementv1.RequestCost, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, false, errors.New("control plane down")
	}
	r, ok := f.rows[id]
	if !ok || r.GetApiKeyId() != keyID {
		return nil, false, nil
	}
	return &settlementv1.RequestCost{RequestId: id, Cost: r.GetCost(), PriceRuleId: r.GetPriceRuleId(), PriceRuleVersion: r.GetPriceRuleVersion(),
		Source: r.GetSource(), EndState: r.GetEndState(), HttpStatus: r.GetHttpStatus(), LogicalModel: r.GetLogicalModel(),
		Operation: r.GetOperation(), Tokens: r.GetTokens(), ServedTier: r.GetRequestedTier()}, true, nil
}

func (f *fakeCosts) Made(_ context.Context, _, keyID int64, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, errors.New("redis down")
	}
	return f.markers[id] == keyID, nil
}

func (f *fakeCosts) Mark(_ context.Context, _, keyID int64, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.markers[id] = keyID
	return nil
}

// secondKey adds key 8 ("other-key") in the same org.
func secondKey(s *snapshotv1.Snapshot) {
	kh := sha256.Sum256([]byte("other-key"))
	s.ApiKeys = append(s.ApiKeys, &configv1.ApiKey{Id: 8, UserId: 5, OrgId: 6, KeyHash: kh[:], Enabled: true})
}

func lookup(t *testing.T, front *httptest.Server, id string, auth [2]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", front.URL+"/v1/requests/"+id+"/cost", nil)
	req.Header.Set(auth[0], auth[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// The lookup answers pending while the request is known to its key but not settled, then the settled row;
// another key's request and an unknown id get the same 404; the control plane down is a 503.
func TestCostLookup(t *testing.T) {
	// A key without limits or quotas: admission makes no Redis round trip, the marker is written on its own.
	unlimited := func(s *snapshotv1.Snapshot) { s.ApiKeys[0].RpmLimit, s.Quotas = 0, nil }
	b, front, _ := setupMock(t, costCells, secondKey, unlimited)
	costs := &fakeCosts{rows: map[string]*settlementv1.SettlementRecord{}, markers: map[string]int64{}}
	b.h.o.Costs = costs
	path, body := costRequest("alpha_chat", false, "chat")
	resp := postTo(t, front, path, body, map[string]string{"x-mock-usage": "cached"})
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	r := oneRecord(t, b)
	mine := [2]string{"Authorization", "Bearer client-key"}

	deadline := time.Now().Add(5 * time.Second)
	for {
		costs.mu.Lock()
		_, marked := costs.markers[id]
		costs.mu.Unlock()
		if marked || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, hdr, got := lookup(t, front, id, mine)
	if code != 200 || hdr.Get("Retry-After") != "1" || got != `{"object":"request.cost","request_id":"`+id+`","status":"pending"}` {
		t.Fatalf("before settlement: %d %v %s, want pending with Retry-After 1", code, hdr, got)
	}

	costs.mu.Lock()
	costs.rows[id] = r
	costs.mu.Unlock()
	code, _, got = lookup(t, front, id, mine)
	if code != 200 || !strings.Contains(got, `"status":"settled","cost":"`+r.GetCost()+`","price_rule_id":9,"price_rule_version":5`) ||
		!strings.Contains(got, `"usage_source":"upstream"`) || r.GetCost() != resp.Header.Get(hdrCost) {
		t.Fatalf("settled: %d %s; record cost %s, header %s", code, got, r.GetCost(), resp.Header.Get(hdrCost))
	}

	// Another key, in every dialect's auth place: the same 404 as an id never issued, in the key's dialect.
	for _, auth := range [][2]string{{"Authorization", "Bearer other-key"}, {"X-Api-Key", "other-key"}, {"X-Goog-Api-Key", "other-key"}} {
		oc, oh, ob := lookup(t, front, id, auth)
		uc, uh, ub := lookup(t, front, "req_00000000000000000000000000000000", auth)
		if oc != 404 || oc != uc || ob != ub || oh.Get("Content-Type") != uh.Get("Content-Type") {
			t.Fatalf("%s: other key's %d %s vs unknown %d %s: must be identical 404s", auth[0], oc, ob, uc, ub)
		}
		if auth[0] == "X-Api-Key" && !strings.Contains(ob, `"type":"error"`) || auth[0] == "X-Goog-Api-Key" && !strings.Contains(ob, `"status":"NOT_FOUND"`) {
			t.Fatalf("%s: 404 not in the key's dialect: %s", auth[0], ob)
		}
	}
	if c, _, _ := lookup(t, front, id, [2]string{"Authorization", "Bearer nope"}); c != 401 {
		t.Fatalf("unknown key: %d, want 401", c)
	}

	costs.mu.Lock()
	costs.down = true
	costs.mu.Unlock()
	if c, h, _ := lookup(t, front, id, mine); c != 503 || h.Get("Retry-After") == "" {
		t.Fatalf("control plane down: %d Retry-After %q, want 503 with Retry-After", c, h.Get("Retry-After"))
	}
}

// A key whose costs are not disclosed gets the lookup answered as an unknown path.
func TestCostLookupOffIsUnknownPath(t *testing.T) {
	off := func(s *snapshotv1.Snapshot) { s.GatewaySettings = &configv1.GatewaySettings{CostDisclosure: false} }
	b, front, _ := setupMock(t, costCells, off)
	b.h.o.Costs = &fakeCosts{rows: map[string]*settlementv1.SettlementRecord{}, markers: map[string]int64{"req_1": 4}}
	code, _, got := lookup(t, front, "req_1", [2]string{"Authorization", "Bearer client-key"})
	if code != 404 || !strings.Contains(got, "no such endpoint") {
		t.Fatalf("%d %s, want the unknown-path 404", code, got)
	}
}
