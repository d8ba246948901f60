package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	cpapp "github.com/tollgate/tollgate/controlplane/app"
	cpconfig "github.com/tollgate/tollgate/controlplane/config"
	dpapp "github.com/tollgate/tollgate/dataplane/app"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/syncer"
	"github.com/tollgate/tollgate/shared/process"
)

// scaleRoleEnv names the process BenchmarkSnapshotScale re-executes the test binary as: "cp" (a control
// plane configured by the TOLLGATE_* environment, as the binary runs it) or "syncer" (a data plane's
// dataplane/syncer alone, on TOLLGATE_CP_ENDPOINTS with TOLLGATE_DP_TOKEN as TOLLGATE_NODE_ID).
const scaleRoleEnv = "TOLLGATE_SCALE_ROLE"

func runScaleRole(role string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch role {
	case "cp":
		err = runScaleCP(ctx)
	case "syncer":
		err = runScaleSyncer(ctx)
	default:
		err = fmt.Errorf("unknown %s %q", scaleRoleEnv, role)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		return 1
	}
	return 0
}

func runScaleCP(ctx context.Context) error {
	if path := os.Getenv("TOLLGATE_SCALE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	cfg, err := cpconfig.Load(nil, os.Getenv, io.Discard)
	if err != nil {
		return err
	}
	log, err := process.NewLogger(os.Stderr, cfg.LogLevel)
	if err != nil {
		return err
	}
	srv, err := cpapp.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

// runScaleSyncer runs one syncer with the data plane's collector setting (GOGC 200) and reports on
// stdout "v <version> <unix ns>" at every swap it serves; on stdin "mem" it answers "mem <live heap after
// two collections> <peak heap objects sampled every 2 ms since the last mem> <peak live heap marked by a
// collection, same samples> <VmHWM kB> <VmRSS kB>" and resets the peaks. Two collections, because
// buffers pooled in a sync.Pool (gRPC's receive buffers) survive one.
func runScaleSyncer(ctx context.Context) error {
	debug.SetGCPercent(dpapp.DefaultGCPercent)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := syncer.New(syncer.Options{
		ControlPlane: cpclient.Options{Endpoints: strings.Split(os.Getenv("TOLLGATE_CP_ENDPOINTS"), ","),
			Token: os.Getenv("TOLLGATE_DP_TOKEN")},
		NodeID: os.Getenv("TOLLGATE_NODE_ID"),
	}, log, prometheus.NewRegistry())
	if err != nil {
		return err
	}
	var outMu sync.Mutex
	out := func(format string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", a...)
	}
	go func() {
		var v int64
		for {
			if _, err := s.Wait(ctx, v+1); err != nil {
				return
			}
			now := time.Now().UnixNano()
			v, _ = s.Version()
			out("v %d %d", v, now)
		}
	}()
	var peak, peakLive atomic.Uint64
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			metrics.Read(sample)
			if n := sample[0].Value.Uint64(); n > peak.Load() {
				peak.Store(n)
			}
			if n := sample[1].Value.Uint64(); n > peakLive.Load() {
				peakLive.Store(n)
			}
		}
	}()
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if in.Text() != "mem" {
				continue
			}
			runtime.GC()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			hwm, rss := procStatusKB("VmHWM"), procStatusKB("VmRSS")
			out("mem %d %d %d %d %d", m.HeapAlloc, peak.Swap(m.HeapAlloc), peakLive.Swap(m.HeapAlloc), hwm, rss)
			_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM
		}
	}()
	return s.Run(ctx)
}

// procStatusKB reads a "kB" field of /proc/self/status (0 when absent).
func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var n int64
			_, _ = fmt.Sscanf(strings.TrimSpace(rest), "%d", &n)
			return n
		}
	}
	return 0
}
