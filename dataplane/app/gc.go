package app

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGCPercent is the data plane's garbage-collector target (GOGC) when the operator sets none. The
// request path's live heap is small (the snapshot, pooled buffers, in-flight requests) while every request
// leaves its body's worth of garbage and more (a translated 10 KB request ~50–60 KB), so at Go's default of
// 100 a collection runs every few dozen requests (~10 % of the process's CPU at one connection). 200 halves
// that; 400 would halve it again but lets the heap reach five times the live heap, which at 128 connections
// (18–21 MB of live per-connection buffers) put the data plane at 127–138 MB RSS against 88 MB at 200
// (docs/benchmarks.md, "Memory at 128 connections"). defaultGC also bounds the heap with a soft memory
// limit below the container's, and the reclaimer (reclaim.go) returns a burst's heap once requests stop.
const DefaultGCPercent = 200

// memoryLimitShare is the share of the cgroup's memory limit given to the Go runtime as its soft memory
// limit (GOMEMLIMIT) when the operator sets none: near it the collector runs as often as it must, so the
// higher GOGC never costs an OOM kill the default would have avoided.
const memoryLimitShare = 0.8

// gcSettings are the collector defaults to apply; a zero field leaves the runtime's setting alone.
type gcSettings struct {
	percent int
	limit   int64 // bytes
}

// defaultGC decides the collector defaults: GOGC=DefaultGCPercent unless the operator set GOGC, and a soft
// memory limit of memoryLimitShare of the cgroup limit (when there is one) unless the operator set
// GOMEMLIMIT. An operator's GOGC=off keeps the collector off and sets no limit of ours either.
func defaultGC(getenv func(string) string, cgroupLimit func() (int64, bool)) gcSettings {
	var s gcSettings
	gogc := getenv("GOGC")
	if gogc == "" {
		s.percent = DefaultGCPercent
	}
	if getenv("GOMEMLIMIT") == "" && gogc != "off" {
		if n, ok := cgroupLimit(); ok {
			s.limit = int64(float64(n) * memoryLimitShare)
		}
	}
	return s
}

// applyGC sets the collector defaults decided by defaultGC and logs them.
func applyGC(s gcSettings, log *slog.Logger) {
	if s.percent != 0 {
		debug.SetGCPercent(s.percent)
	}
	if s.limit != 0 {
		debug.SetMemoryLimit(s.limit)
	}
	if s.percent != 0 || s.limit != 0 {
		log.Info("garbage collector defaults", "gogc", s.percent, "memory_limit_bytes", s.limit)
	}
}

// cgroupMemoryLimit reads the memory limit of the process's cgroup (v2, then v1); false when there is
// none or it cannot be read.
func cgroupMemoryLimit() (int64, bool) {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		return parseCgroupLimit(string(b))
	}
	return 0, false
}

// parseCgroupLimit reads a cgroup memory limit file's content: "max" (v2) or a value of 2^60 or more
// (v1's "unlimited") is no limit.
func parseCgroupLimit(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}
