package e2e

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/deploy/mockupstream"
	"github.com/tollgate/tollgate/shared/testkit"
)

// The rolling-restart test runs the real binaries (built once per test run) as child processes so that
// shutdown is what production sees: SIGTERM, the drain, the grace period, exit.

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// buildBinaries builds the control plane and data plane into a temporary directory once per test run.
func buildBinaries(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "tollgate-e2e-bin-")
		if binErr != nil {
			return
		}
		cmd := osexec.Command("go", "build", "-o", binDir+"/", "./controlplane/cmd/controlplane", "./dataplane/cmd/dataplane")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// child is one real binary running as a child process; restarts reuse its name, arguments and address.
type child struct {
	name string
	bin  string
	env  []string
	logs io.Writer
	// readyURL is its /readyz.
	readyURL string

	mu   sync.Mutex
	cmd  *osexec.Cmd
	exit chan error
}

func (c *child) start(t *testing.T) {
	t.Helper()
	cmd := osexec.Command(c.bin, "serve")
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdout = prefixWriter{c.name, c.logs}
	cmd.Stderr = prefixWriter{c.name, c.logs}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	exit := make(chan error, 1)
	go func() { exit <- cmd.Wait() }()
	c.mu.Lock()
	c.cmd, c.exit = cmd, exit
	c.mu.Unlock()
}

// terminate sends SIGTERM and returns a channel that yields the exit status.
func (c *child) terminate(t *testing.T) <-chan error {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", c.name, err)
	}
	return c.exit
}

// kill ends the child if it still runs (test cleanup).
func (c *child) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil && c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		<-c.exit
	}
}

// readyz returns /readyz's status, or 0 when nothing answers.
func (c *child) readyz() int {
	resp, err := http.Get(c.readyURL)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (c *child) waitReady(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); c.readyz() != http.StatusOK; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never became ready", c.name)
		}
	}
}

// stopObserved sends SIGTERM, watches /readyz until the listener closes and returns whether readiness
// answered 503 while the listener was still open (readiness dropped first), after a clean exit.
func (c *child) stopObserved(t *testing.T) bool {
	t.Helper()
	exit := c.terminate(t)
	saw503 := false
	for {
		select {
		case err := <-exit:
			if err != nil {
				t.Fatalf("%s exited with %v after SIGTERM, want a clean exit", c.name, err)
			}
			return saw503
		default:
		}
		if c.readyz() == http.StatusServiceUnavailable {
			saw503 = true
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// haproxy is a real HAProxy in front of the data planes, with a CSV stats page.
type haproxy struct {
	front, stats string
	proc         *child
}

func startHAProxy(t *testing.T, logs io.Writer, backends []string) *haproxy {
	t.Helper()
	bin, err := osexec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is not installed (Debian package haproxy; `make test` installs it: .ci/testtools)")
	}
	h := &haproxy{front: freeAddr(t), stats: freeAddr(t)}
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "    server dp%d %s check\n", i, b)
	}
	// Health checks every 100ms; two failures take a server out, two successes put it back. Only failed
	// connections are retried (on another server): a request that reached a data plane is never re-sent.
	cfg := fmt.Sprintf(`global
    maxconn 1000
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
    retry-on conn-failure
frontend clients
    bind %s
    default_backend dataplanes
frontend stats
    bind %s
    stats enable
    stats uri /stats
backend dataplanes
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 100ms fall 2 rise 2
%s`, h.front, h.stats, servers.String())
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := osexec.Command(bin, "-c", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	cmd := osexec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = prefixWriter{"haproxy", logs}, prefixWriter{"haproxy", logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exit := make(chan error, 1)
	go func() { exit <- cmd.Wait() }()
	h.proc = &child{name: "haproxy", cmd: cmd, exit: exit}
	t.Cleanup(h.proc.kill)
	return h
}

// status returns HAProxy's view of each data plane (UP, DOWN, ...) by server name.
func (h *haproxy) status() (map[string]string, error) {
	resp, err := http.Get("http://" + h.stats + "/stats;csv")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := csv.NewReader(bufio.NewReader(resp.Body))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var col = map[string]int{}
	for i, row := range rows {
		if i == 0 {
			for j, name := range row {
				col[strings.TrimPrefix(name, "# ")] = j
			}
			continue
		}
		if len(row) > col["status"] && row[col["pxname"]] == "dataplanes" && strings.HasPrefix(row[col["svname"]], "dp") {
			out[row[col["svname"]]] = row[col["status"]]
		}
	}
	return out, nil
}

// waitStatus waits until HAProxy reports server as want (e.g. UP), failing t after a minute.
func (h *haproxy) waitStatus(t *testing.T, server, want string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		st, err := h.status()
		if err == nil && strings.HasPrefix(st[server], want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy: %s is %q (err %v), want %s", server, st[server], err, want)
		}
	}
}

// rollLoad is continuous client load through the balancer: plain and streaming chat completions.
type rollLoad struct {
	url string
	key string

	mu        sync.Mutex
	succeeded []string // request ids of answers the client saw succeed completely
	failures  []string
	counts    [2]int // plain, streaming
}

const rollPlain = `{"model":"e2e-model","messages":[{"role":"user","content":"rolling restart"}]}`
const rollStream = `{"model":"e2e-model","stream":true,"messages":[{"role":"user","content":"rolling restart, streamed"}]}`

func (l *rollLoad) one(ctx context.Context, client *http.Client, stream bool) {
	body, hdr := rollPlain, map[string]string{}
	if stream {
		// Streams of ~20 events 40ms apart are in flight when a data plane is told to stop.
		body, hdr = rollStream, map[string]string{"x-mock-chunks": "20", "x-mock-chunk-delay-ms": "40"}
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+l.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		l.fail(err.Error())
		return
	}
	req.Header.Set("Authorization", "Bearer "+l.key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		l.fail(fmt.Sprintf("stream=%v: %v", stream, err))
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	id := resp.Header.Get("X-Request-Id")
	switch {
	case err != nil:
		l.fail(fmt.Sprintf("stream=%v %s: body cut: %v", stream, id, err))
	case resp.StatusCode != http.StatusOK:
		l.fail(fmt.Sprintf("stream=%v %s: %s %s", stream, id, resp.Status, raw))
	case stream && !strings.HasSuffix(strings.TrimSpace(string(raw)), "data: [DONE]"):
		l.fail(fmt.Sprintf("stream %s ended without [DONE]: %q", id, raw))
	case !stream && !strings.Contains(string(raw), `"chat.completion"`):
		l.fail(fmt.Sprintf("plain %s: unexpected body %q", id, raw))
	case id == "":
		l.fail("answer without X-Request-Id")
	default:
		l.mu.Lock()
		l.succeeded = append(l.succeeded, id)
		if stream {
			l.counts[1]++
		} else {
			l.counts[0]++
		}
		l.mu.Unlock()
	}
}

func (l *rollLoad) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, msg)
}

// run sends from workers plain and streaming loops until stop is closed (at most max requests each).
func (l *rollLoad) run(stop <-chan struct{}, workers int) (wait func()) {
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5000 { // bounded
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				l.one(ctx, client, w%3 != 0) // two streaming workers of three
				cancel()
			}
		}()
	}
	return wg.Wait
}

// TestRollingRestartBehindHAProxy restarts three data planes behind HAProxy one at a time with SIGTERM,
// then one of two control planes, under continuous plain and streaming load. Readiness drops before the
// listener closes, HAProxy takes the node out, in-flight streams finish; the client sees no error, and
// every answer it saw succeed has exactly one usage row (and there are no others).
func TestRollingRestartBehindHAProxy(t *testing.T) {
	bins := buildBinaries(t)
	c := newCluster(t)
	_, mockURL := startMock(t, mockupstream.Options{MaxRecords: -1})

	prefix := redisPrefix(t, "e2e-roll:")

	// Two control-plane replicas on one database.
	var cps []*child
	var grpcAddrs []string
	for i := range 2 {
		httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
		p := &child{name: fmt.Sprintf("cp%d", i), bin: filepath.Join(bins, "controlplane"), logs: c.logs,
			readyURL: "http://" + httpAddr + "/readyz", env: []string{
				"TOLLGATE_DATABASE_URL=" + c.db.URL, "TOLLGATE_ADMIN_TOKEN=" + c.adminTok, "TOLLGATE_SECRET_KEY=" + c.secret,
				"TOLLGATE_DP_TOKEN=" + c.dpToken, "TOLLGATE_CP_HTTP_ADDR=" + httpAddr, "TOLLGATE_CP_GRPC_ADDR=" + grpcAddr,
				"TOLLGATE_DRAIN_DELAY=1s", "TOLLGATE_SHUTDOWN_TIMEOUT=15s",
			}}
		p.start(t)
		t.Cleanup(p.kill)
		p.waitReady(t) // one at a time: the first applies the migrations
		cps = append(cps, p)
		grpcAddrs = append(grpcAddrs, grpcAddr)
	}
	c.seed()
	rev := exec(t, c.db.Pool, `UPDATE providers SET base_url = $1 WHERE id = 1`, mockURL)

	// Three data planes sharing Redis (one prefix: one fleet), each knowing both control planes.
	var dps []*child
	var backends []string
	for i := range 3 {
		addr := freeAddr(t)
		d := &child{name: fmt.Sprintf("dp%d", i), bin: filepath.Join(bins, "dataplane"), logs: c.logs,
			readyURL: "http://" + addr + "/readyz", env: []string{
				"TOLLGATE_REDIS_URL=" + RedisURL, "TOLLGATE_REDIS_KEY_PREFIX=" + prefix, "TOLLGATE_DP_HTTP_ADDR=" + addr,
				"TOLLGATE_CP_ENDPOINTS=" + strings.Join(grpcAddrs, ","), "TOLLGATE_DP_TOKEN=" + c.dpToken,
				"TOLLGATE_NODE_ID=" + fmt.Sprintf("dp%d", i), "TOLLGATE_DRAIN_DELAY=1s", "TOLLGATE_SHUTDOWN_TIMEOUT=15s",
			}}
		d.start(t)
		t.Cleanup(d.kill)
		dps = append(dps, d)
		backends = append(backends, addr)
	}
	for _, d := range dps {
		d.waitReady(t)
	}
	waitVersion(t, dps, rev)
	lb := startHAProxy(t, c.logs, backends)
	for i := range dps {
		lb.waitStatus(t, fmt.Sprintf("dp%d", i), "UP")
	}

	load := &rollLoad{url: lb.front, key: "tg-e2e-key"}
	stop := make(chan struct{})
	wait := load.run(stop, 6)
	loadStarted := func() int { load.mu.Lock(); defer load.mu.Unlock(); return len(load.succeeded) }
	testkit.WaitFor(t, "load flowing", func() bool { return loadStarted() >= 20 })

	for i, d := range dps {
		name := fmt.Sprintf("dp%d", i)
		before := loadStarted()
		downSeen := make(chan bool, 1)
		go func() { // the balancer takes the node out while it drains
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if st, err := lb.status(); err == nil && strings.HasPrefix(st[name], "DOWN") {
					downSeen <- true
					return
				}
			}
			downSeen <- false
		}()
		if !d.stopObserved(t) {
			t.Errorf("%s: /readyz never answered 503 between SIGTERM and the listener closing", name)
		}
		if !<-downSeen {
			t.Errorf("haproxy never marked %s DOWN while it drained", name)
		}
		d.start(t)
		d.waitReady(t)
		lb.waitStatus(t, name, "UP")
		testkit.WaitFor(t, "load after restarting "+name, func() bool { return loadStarted() >= before+20 })
	}

	// A control-plane replica restarts; meanwhile a change made through the survivor reaches every data
	// plane and settlement keeps landing.
	exitCP := cps[0].terminate(t)
	if err := <-exitCP; err != nil {
		t.Fatalf("cp0 exited with %v after SIGTERM", err)
	}
	rev = exec(t, c.db.Pool, `INSERT INTO route_aliases (alias, route_id) VALUES ('e2e-roll-alias', 1)`)
	waitVersion(t, dps, rev)
	before := loadStarted()
	testkit.WaitFor(t, "load while cp0 is down", func() bool { return loadStarted() >= before+20 })
	cps[0].start(t)
	cps[0].waitReady(t)
	exitCP = cps[1].terminate(t)
	if err := <-exitCP; err != nil {
		t.Fatalf("cp1 exited with %v after SIGTERM", err)
	}
	rev = exec(t, c.db.Pool, `DELETE FROM route_aliases WHERE alias = 'e2e-roll-alias'`)
	waitVersion(t, dps, rev)
	before = loadStarted()
	testkit.WaitFor(t, "load while cp1 is down", func() bool { return loadStarted() >= before+20 })

	close(stop)
	wait()
	load.mu.Lock()
	defer load.mu.Unlock()
	if len(load.failures) > 0 {
		t.Errorf("%d client errors during the rolling restart (want none), first: %s", len(load.failures), load.failures[0])
	}
	if load.counts[0] == 0 || load.counts[1] == 0 {
		t.Fatalf("load did not cover both kinds: plain %d, streaming %d", load.counts[0], load.counts[1])
	}
	t.Logf("client saw %d plain and %d streaming answers succeed", load.counts[0], load.counts[1])

	// Every success has exactly one usage row, and there are no other rows.
	want := map[string]bool{}
	for _, id := range load.succeeded {
		if want[id] {
			t.Fatalf("request id %s answered twice", id)
		}
		want[id] = true
	}
	var rows map[string]int
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rows = usageCounts(t, c)
		if len(rows) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	for id := range want {
		if rows[id] != 1 {
			t.Errorf("request %s: %d usage rows, want 1", id, rows[id])
		}
	}
	for id, n := range rows {
		if !want[id] {
			t.Errorf("usage row(s) for %s (%d) that the client never saw succeed", id, n)
		}
	}
}

// waitVersion waits until every data plane's /readyz reports snapshot version >= v.
func waitVersion(t *testing.T, dps []*child, v int64) {
	t.Helper()
	for _, d := range dps {
		testkit.WaitFor(t, fmt.Sprintf("%s at snapshot %d", d.name, v), func() bool {
			resp, err := http.Get(d.readyURL)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var body struct {
				V string `json:"snapshot_version"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				return false
			}
			var got int64
			_, err = fmt.Sscan(body.V, &got)
			return err == nil && got >= v
		})
	}
}

// usageCounts returns the number of usage rows per request id.
func usageCounts(t *testing.T, c *cluster) map[string]int {
	t.Helper()
	rows, err := c.db.Pool.Query(context.Background(), `SELECT request_id, count(*) FROM usages GROUP BY request_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return out
}
