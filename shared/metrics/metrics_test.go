package metrics

import (
	"strings"
	"sync"
	"testing"
)

func TestExposition(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("tg_requests_total", "Requests.", "dialect", "code")
	g := r.NewGauge("tg_snapshot_version", "Version.")
	h := r.NewHistogramVec("tg_latency_seconds", "Latency.", []float64{0.1, 1}, "op")
	r.NewGaugeFunc("tg_up", "Up.", func() float64 { return 1 })
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.With("alpha", "200").Inc()
		}()
	}
	wg.Wait()
	c.With("beta", "4\"02").Add(2)
	g.Set(42)
	h.With("gen").Observe(0.05)
	h.With("gen").Observe(0.5)
	h.With("gen").Observe(5)
	var b strings.Builder
	r.Write(&b)
	out := b.String()
	for _, want := range []string{
		`tg_requests_total{dialect="alpha",code="200"} 50`,
		`tg_requests_total{dialect="beta",code="4\"02"} 2`,
		"# TYPE tg_snapshot_version gauge\ntg_snapshot_version 42\n",
		`tg_latency_seconds_bucket{op="gen",le="0.1"} 1`,
		`tg_latency_seconds_bucket{op="gen",le="1"} 2`,
		`tg_latency_seconds_bucket{op="gen",le="+Inf"} 3`,
		`tg_latency_seconds_count{op="gen"} 3`,
		"tg_up 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
}

func TestDuplicateRegistrationPanics(t *testing.T) {
	r := NewRegistry()
	r.NewCounter("x", "x")
	defer func() {
		if recover() == nil {
			t.Fatal("second registration of x did not panic")
		}
	}()
	r.NewGauge("x", "x")
}
