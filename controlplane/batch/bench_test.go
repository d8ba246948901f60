package batch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/controlplane/batch"
)

// BenchmarkSettleBatchResults reads and settles one alpha batch of 5,000 result lines per iteration (real
// Postgres, the results served on loopback): lines/s is the watcher's settlement throughput for one batch.
func BenchmarkSettleBatchResults(b *testing.B) {
	const lines = 5000
	e := newEnv(b)
	b.ResetTimer()
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		bigAlphaBatch(e, fmt.Sprintf("batch_bench_%d", i), lines)
		w := e.watcher("cp-bench", batch.Options{})
		b.StartTimer()
		start := time.Now()
		if _, err := w.Once(e.ctx); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(lines*b.N)/total.Seconds(), "lines/s")
}
