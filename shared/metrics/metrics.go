// Package metrics is a small, dependency-free Prometheus text-format registry: counters, gauges and
// histograms, optionally with one fixed set of label names per family. It owns nothing but the
// exposition; each component registers the families it reports.
package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds metric families and writes them in the Prometheus text format.
type Registry struct {
	mu       sync.Mutex
	families map[string]family
}

type family interface {
	write(w io.Writer, name string)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]family{}} }

func (r *Registry) register(name string, f family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.families[name]; dup {
		panic(fmt.Sprintf("metrics: %s registered twice", name))
	}
	r.families[name] = f
}

// Handler serves the registry at /metrics.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		r.Write(w)
	})
}

// Write writes every family, sorted by name.
func (r *Registry) Write(w io.Writer) {
	r.mu.Lock()
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	fams := make([]family, len(names))
	sort.Strings(names)
	for i, n := range names {
		fams[i] = r.families[n]
	}
	r.mu.Unlock()
	for i, f := range fams {
		f.write(w, names[i])
	}
}

// Counter is a monotonically increasing integer.
type Counter struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Value reads the counter.
func (c *Counter) Value() uint64 { return c.v.Load() }

// Gauge is a value that goes up and down (stored as float64 bits; gauges never carry money).
type Gauge struct{ bits atomic.Uint64 }

// Set stores v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Value reads the gauge.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// Add adds d.
func (g *Gauge) Add(d float64) {
	for {
		old := g.bits.Load()
		if g.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Histogram counts observations into fixed cumulative buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64
	count  atomic.Uint64
	sum    Gauge
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	if i < len(h.counts) {
		h.counts[i].Add(1)
	}
	h.count.Add(1)
	h.sum.Add(v)
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// DefBuckets are latency buckets in seconds.
var DefBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

type vec[M any] struct {
	help   string
	typ    string
	labels []string
	newM   func() *M
	mu     sync.RWMutex
	series map[string]*M
	writeM func(w io.Writer, name, labels string, m *M)
}

func (v *vec[M]) with(values ...string) *M {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: want %d label values, got %d", len(v.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	v.mu.RLock()
	m, ok := v.series[key]
	v.mu.RUnlock()
	if ok {
		return m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if m, ok = v.series[key]; !ok {
		m = v.newM()
		v.series[key] = m
	}
	return m
}

func (v *vec[M]) write(w io.Writer, name string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, v.help, name, v.typ)
	v.mu.RLock()
	keys := make([]string, 0, len(v.series))
	for k := range v.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var lb strings.Builder
		if len(v.labels) > 0 {
			vals := strings.Split(k, "\xff")
			for i, l := range v.labels {
				if i > 0 {
					lb.WriteByte(',')
				}
				lb.WriteString(l)
				lb.WriteString("=")
				lb.WriteString(strconv.Quote(vals[i]))
			}
		}
		v.writeM(w, name, lb.String(), v.series[k])
	}
	v.mu.RUnlock()
}

func braces(labels string) string {
	if labels == "" {
		return ""
	}
	return "{" + labels + "}"
}

// CounterVec is a counter family with labels.
type CounterVec struct{ v *vec[Counter] }

// With returns the counter for the label values, creating it.
func (c *CounterVec) With(values ...string) *Counter { return c.v.with(values...) }

// GaugeVec is a gauge family with labels.
type GaugeVec struct{ v *vec[Gauge] }

// With returns the gauge for the label values, creating it.
func (g *GaugeVec) With(values ...string) *Gauge { return g.v.with(values...) }

// HistogramVec is a histogram family with labels.
type HistogramVec struct{ v *vec[Histogram] }

// With returns the histogram for the label values, creating it.
func (h *HistogramVec) With(values ...string) *Histogram { return h.v.with(values...) }

// NewCounterVec registers a counter family.
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	v := &vec[Counter]{help: help, typ: "counter", labels: labels, newM: func() *Counter { return &Counter{} },
		series: map[string]*Counter{}, writeM: func(w io.Writer, name, l string, m *Counter) {
			fmt.Fprintf(w, "%s%s %d\n", name, braces(l), m.Value())
		}}
	r.register(name, v)
	return &CounterVec{v}
}

// NewCounter registers a counter without labels.
func (r *Registry) NewCounter(name, help string) *Counter { return r.NewCounterVec(name, help).With() }

// NewGaugeVec registers a gauge family.
func (r *Registry) NewGaugeVec(name, help string, labels ...string) *GaugeVec {
	v := &vec[Gauge]{help: help, typ: "gauge", labels: labels, newM: func() *Gauge { return &Gauge{} },
		series: map[string]*Gauge{}, writeM: func(w io.Writer, name, l string, m *Gauge) {
			fmt.Fprintf(w, "%s%s %s\n", name, braces(l), strconv.FormatFloat(m.Value(), 'g', -1, 64))
		}}
	r.register(name, v)
	return &GaugeVec{v}
}

// NewGauge registers a gauge without labels.
func (r *Registry) NewGauge(name, help string) *Gauge { return r.NewGaugeVec(name, help).With() }

// NewGaugeFunc registers a gauge whose value is read at scrape time.
func (r *Registry) NewGaugeFunc(name, help string, f func() float64) {
	r.register(name, gaugeFunc{help: help, f: f})
}

type gaugeFunc struct {
	help string
	f    func() float64
}

func (g gaugeFunc) write(w io.Writer, name string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, g.help, name, name, strconv.FormatFloat(g.f(), 'g', -1, 64))
}

// NewHistogramVec registers a histogram family with the given bucket upper bounds.
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	bounds := append([]float64(nil), buckets...)
	sort.Float64s(bounds)
	v := &vec[Histogram]{help: help, typ: "histogram", labels: labels,
		newM: func() *Histogram {
			return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds))}
		},
		series: map[string]*Histogram{},
		writeM: func(w io.Writer, name, l string, m *Histogram) {
			sep := ""
			if l != "" {
				sep = ","
			}
			var cum uint64
			for i, b := range m.bounds {
				cum += m.counts[i].Load()
				fmt.Fprintf(w, "%s_bucket{%s%sle=%q} %d\n", name, l, sep, strconv.FormatFloat(b, 'g', -1, 64), cum)
			}
			fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, l, sep, m.Count())
			fmt.Fprintf(w, "%s_sum%s %s\n", name, braces(l), strconv.FormatFloat(m.sum.Value(), 'g', -1, 64))
			fmt.Fprintf(w, "%s_count%s %d\n", name, braces(l), m.Count())
		}}
	r.register(name, v)
	return &HistogramVec{v}
}
