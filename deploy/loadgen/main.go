// Command loadgen is the data plane's load harness (docs/benchmarks.md, "Request path"). It has three
// subcommands:
//
//	loadgen run -url URL [-conns N] [-duration D] [-body JSON] [-H 'k: v']... [-stream] [-pid PID]...
//	    drive N keep-alive connections for D and report p50/p99 latency, p50/p99 time to first byte
//	    (streams), requests/s, and for every -pid its CPU time per request and RSS (from /proc).
//	loadgen floor -listen ADDR -target URL
//	    a bare httputil.ReverseProxy to target: the floor a gateway is compared with.
//	loadgen snapshot -listen ADDR -upstream URL -key KEY [-admission]
//	    a minimal control plane for benchmarks without Postgres: a SnapshotService serving one alpha provider
//	    at upstream (alpha chat clients passthrough, beta messages clients transform_to alpha chat), one
//	    route "chat" → m-1 and the API key KEY, and a SettlementService that acknowledges
//	    every record (so the data plane's forwarder runs its whole path: read the outbox, Settle, refund,
//	    acknowledge). With -admission the key has RPM/TPM limits and its org a quota, so every request
//	    runs the Redis admission script.
//	loadgen hostile -addr HOST:PORT [-conns N] [-key KEY] [-declared BYTES] [-send BYTES] [-trickle D] [-hold D] [-pid PID]...
//	    N connections that each declare a large body (default 32 MiB), send a little of it (4 KiB), then
//	    trickle a byte every D (3 s) for the hold; reports the target's RSS (start, peak, end) and how many
//	    connections the server answered and closed (docs/benchmarks.md "Memory under hostile clients").
//
// The whole memory measurement is deploy/loadgen/hostile.sh.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate/tollgate/dataplane/syncer"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: loadgen run|floor|snapshot|hostile [flags]")
	}
	switch args[0] {
	case "run":
		return runLoad(ctx, args[1:], out)
	case "floor":
		return runFloor(ctx, args[1:])
	case "snapshot":
		return runSnapshot(ctx, args[1:])
	case "hostile":
		return runHostile(ctx, args[1:], out)
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

type pids []int

func (p *pids) String() string { return fmt.Sprint(*p) }
func (p *pids) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("pid %q: %w", v, err)
	}
	*p = append(*p, n)
	return nil
}

// Result is one run's report (printed as one JSON line).
type Result struct {
	Label    string        `json:"label"`
	Conns    int           `json:"conns"`
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"`
	RPS      float64       `json:"rps"`
	P50ms    float64       `json:"p50_ms"`
	P99ms    float64       `json:"p99_ms"`
	TTFB50ms float64       `json:"ttfb_p50_ms,omitempty"`
	TTFB99ms float64       `json:"ttfb_p99_ms,omitempty"`
	Procs    []ProcMeasure `json:"procs,omitempty"`
}

// ProcMeasure is the CPU and memory of one target process over the run.
type ProcMeasure struct {
	PID          int     `json:"pid"`
	CPUms        float64 `json:"cpu_ms"`
	CPUPerReqUs  float64 `json:"cpu_per_req_us"`
	RSSStartMB   float64 `json:"rss_start_mb"`
	RSSEndMB     float64 `json:"rss_end_mb"`
	RSSPeakMB    float64 `json:"rss_peak_mb"`
	CoresAverage float64 `json:"cores_avg"`
	// SwitchesPerReq is the process's voluntary context switches (all its threads) per request: at one
	// connection, the wake-ups each request costs (a thread that blocks and is woken again).
	SwitchesPerReq float64 `json:"vcsw_per_req,omitempty"`
}

func runLoad(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	target := fs.String("url", "", "request URL")
	conns := fs.Int("conns", 1, "concurrent keep-alive connections")
	dur := fs.Duration("duration", 10*time.Second, "measured duration")
	warm := fs.Duration("warmup", time.Second, "unmeasured warm-up")
	body := fs.String("body", `{"model":"chat","messages":[{"role":"user","content":"hello"}]}`, "request body (POST)")
	stream := fs.Bool("stream", false, "read the response as a stream and record time to first byte")
	label := fs.String("label", "", "label in the report")
	var hdrs headers
	var targets pids
	fs.Var(&hdrs, "H", "request header 'Name: value' (repeatable)")
	fs.Var(&targets, "pid", "process whose CPU and RSS to measure (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" {
		return errors.New("run: -url is required")
	}
	tr := &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns, DisableCompression: true}
	client := &http.Client{Transport: tr}
	do := func() (lat, ttfb time.Duration, err error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, *target, strings.NewReader(*body))
		if err != nil {
			return 0, 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		for _, h := range hdrs {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		if *stream {
			var one [1]byte
			if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
				return 0, 0, err
			}
			ttfb = time.Since(start)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), ttfb, nil
	}
	worker := func(until time.Time, rec func(lat, ttfb time.Duration, err error)) {
		for time.Now().Before(until) && ctx.Err() == nil {
			lat, ttfb, err := do()
			rec(lat, ttfb, err)
		}
	}
	// Warm up the pools on both sides.
	var wg sync.WaitGroup
	wu := time.Now().Add(*warm)
	for range *conns {
		wg.Go(func() { worker(wu, func(time.Duration, time.Duration, error) {}) })
	}
	wg.Wait()

	before, peaks, stopPeaks := watchProcs(targets, 50*time.Millisecond)
	var mu sync.Mutex
	var lats, ttfbs []time.Duration
	errs := 0
	var firstErr error
	start := time.Now()
	until := start.Add(*dur)
	for range *conns {
		wg.Go(func() {
			var l, f []time.Duration
			e := 0
			var fe error
			worker(until, func(lat, ttfb time.Duration, err error) {
				if err != nil {
					e++
					if fe == nil {
						fe = err
					}
					return
				}
				l = append(l, lat)
				if *stream {
					f = append(f, ttfb)
				}
			})
			mu.Lock()
			lats, ttfbs, errs = append(lats, l...), append(ttfbs, f...), errs+e
			if firstErr == nil {
				firstErr = fe
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopPeaks()
	res := Result{Label: *label, Conns: *conns, Requests: len(lats), Errors: errs, RPS: float64(len(lats)) / elapsed.Seconds(),
		P50ms: pct(lats, 50), P99ms: pct(lats, 99)}
	if *stream {
		res.TTFB50ms, res.TTFB99ms = pct(ttfbs, 50), pct(ttfbs, 99)
	}
	for i, p := range targets {
		after := sampleProc(p)
		cpu := (after.cpuSec - before[i].cpuSec) * 1000
		m := ProcMeasure{PID: p, CPUms: round(cpu), RSSStartMB: round(before[i].rssMB), RSSEndMB: round(after.rssMB),
			RSSPeakMB: round(max(peaks[i], after.rssMB)), CoresAverage: round(cpu / 1000 / elapsed.Seconds())}
		if len(lats) > 0 {
			m.CPUPerReqUs = round(cpu * 1000 / float64(len(lats)))
			m.SwitchesPerReq = round((after.switches - before[i].switches) / float64(len(lats)))
		}
		res.Procs = append(res.Procs, m)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	fmt.Fprintln(out, string(b))
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "first error:", firstErr)
	}
	return nil
}

func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := min(len(d)-1, len(d)*p/100)
	return round(float64(d[i]) / float64(time.Millisecond))
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

type procSample struct {
	cpuSec   float64
	rssMB    float64
	switches float64 // voluntary context switches of the process's live threads
}

// sampleProc reads utime+stime (/proc/PID/stat, clock ticks of 1/100 s) and VmRSS (/proc/PID/status).
// watchProcs samples each target process now (before) and then every interval, keeping the peak RSS of
// each in peaks until stop returns.
func watchProcs(targets []int, interval time.Duration) (before []procSample, peaks []float64, stop func()) {
	before = make([]procSample, len(targets))
	for i, p := range targets {
		before[i] = sampleProc(p)
	}
	peaks = make([]float64, len(targets))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			for i, p := range targets {
				peaks[i] = max(peaks[i], sampleProc(p).rssMB)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return before, peaks, func() { close(done); wg.Wait() }
}

func sampleProc(pid int) procSample {
	var s procSample
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the parenthesised command name; utime and stime are fields 14 and 15.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 13 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				s.cpuSec = (ut + st) / 100
			}
		}
	}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				s.rssMB = kb / 1024
			}
		}
		f.Close()
	}
	s.switches = voluntarySwitches(pid)
	return s
}

// voluntarySwitches sums voluntary_ctxt_switches over /proc/PID/task/*/status.
func voluntarySwitches(pid int) float64 {
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n float64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				x, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				n += x
			}
		}
	}
	return n
}

func runFloor(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "listen address")
	target := fs.String("target", "http://127.0.0.1:9999", "upstream URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*target)
	if err != nil {
		return fmt.Errorf("floor: -target: %w", err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 512, ForceAttemptHTTP2: true, DisableCompression: true}
	rp.FlushInterval = -1 // flush every write, like the data plane's streams
	return serve(ctx, *listen, rp)
}

func serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Fprintln(os.Stderr, "listening on", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// snapshotServer serves one snapshot to every watcher, then holds the stream open.
type snapshotServer struct {
	snapshotv1.UnimplementedSnapshotServiceServer
	snap *snapshotv1.Snapshot
}

func (s *snapshotServer) Watch(_ *snapshotv1.WatchRequest, st grpc.ServerStreamingServer[snapshotv1.WatchResponse]) error {
	if err := st.SendHeader(metadata.Pairs(syncer.HeaderVersion, strconv.FormatInt(s.snap.GetVersion(), 10))); err != nil {
		return fmt.Errorf("send header: %w", err)
	}
	if err := st.Send(&snapshotv1.WatchResponse{Snapshot: s.snap}); err != nil {
		return fmt.Errorf("send snapshot: %w", err)
	}
	<-st.Context().Done()
	return nil
}

// settlementServer acknowledges every record as inserted.
type settlementServer struct {
	settlementv1.UnimplementedSettlementServiceServer
	mu      sync.Mutex
	records int
}

func (s *settlementServer) Settle(_ context.Context, req *settlementv1.SettleRequest) (*settlementv1.SettleResponse, error) {
	resp := &settlementv1.SettleResponse{Results: make([]*settlementv1.RecordResult, len(req.GetRecords()))}
	for i, r := range req.GetRecords() {
		resp.Results[i] = &settlementv1.RecordResult{RequestId: r.GetRequestId(), Inserted: true}
	}
	s.mu.Lock()
	s.records += len(req.GetRecords())
	s.mu.Unlock()
	return resp, nil
}

func runSnapshot(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9090", "gRPC listen address")
	up := fs.String("upstream", "http://127.0.0.1:9999", "provider base URL (the mock upstream)")
	key := fs.String("key", "tg-bench", "client API key")
	admit := fs.Bool("admission", false, "give the key rate limits and its org a quota (admission on)")
	settlement := fs.Bool("settlement", true, "serve SettlementService (off: the data plane's forwarder backs off and records stay in the outbox)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	kh := sha256.Sum256([]byte(*key))
	rules := []*configv1.RoutingRule{}
	for i, op := range []string{"generate_content", "stream_generate_content"} {
		rules = append(rules, &configv1.RoutingRule{Id: int64(i + 1), ProviderId: 1, Operation: op, Kind: "alpha_chat_completions",
			Implementation: "passthrough", Enabled: true})
		// beta messages clients reach the alpha provider translated (bench.sh transform mode)
		rules = append(rules, &configv1.RoutingRule{Id: int64(i + 3), ProviderId: 1, Operation: op, Kind: "beta_messages",
			Implementation: "transform_to", DestOperation: proto.String(op), DestKind: proto.String("alpha_chat_completions"), Enabled: true})
	}
	apiKey := &configv1.ApiKey{Id: 1, UserId: 1, OrgId: 1, Name: "bench", KeyHash: kh[:], Enabled: true}
	var quotas []*configv1.Quota
	if *admit {
		apiKey.RpmLimit, apiKey.TpmLimit = 1_000_000_000, 1_000_000_000_000
		quotas = append(quotas, &configv1.Quota{Scope: "org", ScopeId: 1, CostLimit: proto.String("1000000000"), CostUsed: "0"})
	}
	snap := &snapshotv1.Snapshot{
		Version: 1, BuiltAt: timestamppb.Now(),
		PriceRules: []*configv1.PriceRule{{Id: 1, MatchType: "exact", ModelMatch: "m-1", InputPrice: "2.5", OutputPrice: "10",
			CacheReadPrice: "1.25", CacheCreation_5MPrice: "0", CacheCreation_30MPrice: "0", CacheCreation_1HPrice: "0", ImageOutputPrice: "0", Enabled: true}},
		Providers: []*configv1.Provider{{Id: 1, Name: "mock", ChannelType: "alpha", BaseUrl: *up, Enabled: true,
			Credentials: []*configv1.Credential{{Id: 1, ProviderId: 1, Secret: "sk-mock", Weight: 1, Enabled: true}}}},
		RoutingRules: rules,
		Routes: []*configv1.Route{{Id: 1, Name: "chat", Strategy: "priority", Enabled: true,
			Members: []*configv1.RouteMember{{ProviderId: 1, UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}}},
		ApiKeys: []*configv1.ApiKey{apiKey},
		Quotas:  quotas,
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	gs := grpc.NewServer()
	snapshotv1.RegisterSnapshotServiceServer(gs, &snapshotServer{snap: snap})
	settled := &settlementServer{}
	if *settlement {
		settlementv1.RegisterSettlementServiceServer(gs, settled)
	}
	go func() {
		<-ctx.Done()
		gs.Stop()
		settled.mu.Lock()
		fmt.Fprintln(os.Stderr, "settled records:", settled.records)
		settled.mu.Unlock()
	}()
	fmt.Fprintln(os.Stderr, "snapshot and settlement services on", ln.Addr())
	if err := gs.Serve(ln); err != nil {
		return fmt.Errorf("serve gRPC: %w", err)
	}
	return nil
}
