package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
)

// TestRedisHangDataPlane freezes the data plane's Redis (a redis-server of the test's own, SIGSTOPped:
// it keeps accepting connections and bytes and answers nothing) under traffic, through the real data
// plane and control plane, once per admission policy. Requests already past admission and waiting on the
// upstream, and new requests in every dialect, all answer while Redis is still frozen: under open they
// are served (admitted without a reservation); under closed the new ones are refused with 503 in the
// caller's dialect. /readyz answers while frozen too: ready-but-degraded under open, not ready under
// closed. Nothing is lost: once Redis continues, every request has exactly one usage row (the refused
// ones as rejected), quotas equal the sum of usages, and every pending hold is back to zero.
func TestRedisHangDataPlane(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			testRedisHang(t, policy)
		})
	}
}

func testRedisHang(t *testing.T, policy string) {
	s := newStack(t)
	srv := admissiontest.StartServer(t)
	s.dpRedisURL = srv.URL()
	s.dpEnv = map[string]string{"TOLLGATE_REDIS_TIMEOUT": "300ms", "TOLLGATE_ADMISSION_ON_REDIS_FAILURE": policy}
	_ = s.dp.stop()
	s.dp = s.startDP("dp-hang-" + policy)
	// The test's own checks (pending holds) read the data plane's Redis.
	s.rdb.Close()
	s.rdb = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	stSeed(t, s)
	ten := s.tenant(t, "hang-"+policy, "1000")
	s.sync(t)
	warm := s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	s.waitUsages(t, ten.keyID, 1)

	// In flight: admitted (holds reserved) and waiting on a slow upstream when Redis freezes.
	const inflight = 4
	var wg sync.WaitGroup
	slow := make([]response, inflight)
	frozenAtEnd := make([]bool, inflight)
	before := s.mock.Count()
	for i := range inflight {
		wg.Go(func() {
			slow[i] = s.send(context.Background(), "POST", "/v1/chat/completions", stChat, stAlpha(ten, "x-mock-latency-ms", "1500")...)
			frozenAtEnd[i] = srv.Stopped()
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.mock.Count() < before+inflight {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream saw %d of %d slow requests", s.mock.Count()-before, inflight)
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Stop()
	defer func() {
		if srv.Stopped() {
			srv.Cont()
		}
	}()

	// New requests in every dialect, concurrently, while frozen.
	type sent struct {
		name, path, body string
		hdr              []string
	}
	news := []sent{
		{"alpha", "/v1/chat/completions", stChat, stAlpha(ten)},
		{"alpha-stream", "/v1/chat/completions", stChatStream, stAlpha(ten)},
		{"beta", "/v1/messages", stBetaStream, stBeta(ten)},
		{"gamma", "/v1beta/models/g-1-flash:generateContent", stGammaBody, stGamma(ten)},
	}
	got := make([]response, len(news))
	newFrozen := make([]bool, len(news))
	var nwg sync.WaitGroup
	for i, n := range news {
		nwg.Go(func() {
			got[i] = s.send(context.Background(), "POST", n.path, n.body, n.hdr...)
			newFrozen[i] = srv.Stopped()
		})
	}
	waitGroup(t, &nwg, "new requests")
	ready, readyFrozen := readyz(t, s, srv)
	waitGroup(t, &wg, "in-flight requests")
	srv.Cont()

	for i, r := range slow {
		if r.err != nil || r.status != 200 || !frozenAtEnd[i] {
			t.Errorf("in-flight request %d: %d %v (answered while frozen: %v) %s", i, r.status, r.err, frozenAtEnd[i], r.body)
		}
	}
	for i, n := range news {
		r := got[i]
		if r.err != nil || !newFrozen[i] {
			t.Fatalf("%s during the freeze: %v (answered while frozen: %v)", n.name, r.err, newFrozen[i])
		}
		if policy == "open" {
			if r.status != 200 {
				t.Errorf("%s under open: %d %s, want 200 (admitted without a reservation)", n.name, r.status, r.body)
			}
			continue
		}
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("%s under closed: %d (Retry-After %q) %s, want 503 with Retry-After", n.name, r.status, r.header.Get("Retry-After"), r.body)
			continue
		}
		checkUnavailableShape(t, n.name, r.body)
	}
	if !readyFrozen {
		t.Error("/readyz answered only after Redis continued")
	}
	if want := map[string]int{"open": 200, "closed": 503}[policy]; ready.status != want {
		t.Errorf("/readyz while frozen under %s: %d %v, want %d", policy, ready.status, ready.body, want)
	}
	if st, _ := ready.body["redis"].(string); len(st) < 11 || st[:11] != "unavailable" {
		t.Errorf("/readyz redis detail %q while frozen, want unavailable", st)
	}

	// Nothing lost: one row per request, with the right end state.
	rows := s.waitUsages(t, ten.keyID, 1+inflight+len(news))
	stRow(t, rows, warm.reqID)
	for _, r := range slow {
		if row := stRow(t, rows, r.reqID); row.EndState != "completed" {
			t.Errorf("in-flight %s: end state %s, want completed", r.reqID, row.EndState)
		}
	}
	for i, n := range news {
		row := stRow(t, rows, got[i].reqID)
		wantEnd, wantStatus := "completed", int32(200)
		if policy == "closed" {
			wantEnd, wantStatus = "rejected", 503
		}
		if row.EndState != wantEnd || row.HTTPStatus != wantStatus {
			t.Errorf("%s: row end state %s status %d, want %s %d", n.name, row.EndState, row.HTTPStatus, wantEnd, wantStatus)
		}
	}
	s.checkQuotas(t, ten)
	s.waitAllPendingZero(t)
	time.Sleep(1100 * time.Millisecond) // past the one-second pauses: Redis is used again
	after := s.do(t, 200, "POST", "/v1/chat/completions", stChat, stAlpha(ten)...)
	rows = s.waitUsages(t, ten.keyID, 2+inflight+len(news))
	stRow(t, rows, after.reqID)
	s.checkQuotas(t, ten)
	s.waitAllPendingZero(t)
}

func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still waiting on the frozen Redis after 30s", what)
	}
}

type readyAnswer struct {
	status int
	body   map[string]any
}

// readyz reads the data plane's /readyz and whether Redis was still frozen when it answered.
func readyz(t *testing.T, s *stack, srv *admissiontest.Server) (readyAnswer, bool) {
	t.Helper()
	resp, err := http.Get("http://" + s.dp.srv.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return readyAnswer{resp.StatusCode, body}, srv.Stopped()
}

// checkUnavailableShape checks a 503 body is the dialect's own error shape (dataplane/httperr: alpha
// server_error with the gateway code, beta overloaded_error, gamma UNAVAILABLE).
func checkUnavailableShape(t *testing.T, name, body string) {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Errorf("%s: 503 body %s: %v", name, body, err)
		return
	}
	ok := v.Error.Message != ""
	switch name {
	case "alpha", "alpha-stream":
		ok = ok && v.Error.Type == "server_error" && v.Error.Code == "admission_unavailable"
	case "beta":
		ok = ok && v.Type == "error" && v.Error.Type == "overloaded_error"
	case "gamma":
		ok = ok && v.Error.Status == "UNAVAILABLE" && v.Error.Code == float64(503)
	}
	if !ok {
		t.Errorf("%s: 503 body %s is not the dialect's error shape", name, body)
	}
}
