package pricing

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/usage"
)

// BenchmarkResolve: 10,000 rules (half contains) over 9 providers; pairs already seen (the
// steady state of a data plane), so resolution is a memo hit and must not allocate.
func BenchmarkResolve(b *testing.B) {
	x := NewIndex(benchRules(10_000))
	keys := []struct {
		p int64
		m string
	}{{2, "model-0002"}, {4, "vendor/model-4999-preview"}, {8, "model-9998"}, {5, "no-such-model"}, {1, "model-1-model-9999-x"}}
	for _, k := range keys {
		x.Resolve(k.p, k.m)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		if x.Resolve(k.p, k.m) == nil && k.m != "no-such-model" {
			b.Fatal("no rule")
		}
		i++
	}
}

// BenchmarkResolveParallel is BenchmarkResolve from GOMAXPROCS goroutines.
func BenchmarkResolveParallel(b *testing.B) {
	x := NewIndex(benchRules(10_000))
	models := []string{"model-0003", "vendor/model-4999-preview", "model-9998", "no-such-model"}
	for _, m := range models {
		x.Resolve(4, m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			x.Resolve(4, models[i%len(models)])
			i++
		}
	})
}

// BenchmarkResolveUnseen: every lookup is a new model name (memo miss, contains search over
// 5,000 contains rules, memo insert). The cost an attacker can make a request pay.
func BenchmarkResolveUnseen(b *testing.B) {
	x := NewIndex(benchRules(10_000))
	names := make([]string, 4096)
	for i := range names {
		names[i] = fmt.Sprintf("vendor/model-%d-preview-%d", i%5000, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		x.Resolve(int64(i%9), names[i%len(names)]+fmt.Sprint(i/len(names)))
		i++
	}
}

func BenchmarkNewIndex(b *testing.B) {
	rules := benchRules(10_000)
	b.ReportAllocs()
	for b.Loop() {
		NewIndex(rules)
	}
}

// BenchmarkQuote prices all seven categories with a prompt tier and a service tier.
func BenchmarkQuote(b *testing.B) {
	r := tieredRule(b)
	u := usage.Usage{Input: 150_000, Output: 2_000, CacheRead: 40_000, CacheCreation5m: 10_000,
		CacheCreation30m: 1_000, CacheCreation1h: 5_000, ImageOutput: 1_290}
	b.ReportAllocs()
	for b.Loop() {
		if q := r.Quote(u, "priority"); q.Micros == 0 {
			b.Fatal("zero cost")
		}
	}
}

// BenchmarkResolveAndQuote is the settlement path: resolve against 10,000 rules, then price.
func BenchmarkResolveAndQuote(b *testing.B) {
	x := NewIndex(benchRules(10_000))
	u := usage.Usage{Input: 1_200, Output: 300, CacheRead: 1_024}
	x.Resolve(4, "vendor/model-4999-preview")
	b.ReportAllocs()
	for b.Loop() {
		r := x.Resolve(4, "vendor/model-4999-preview")
		if q := QuoteFor(r, u, "priority"); q.RuleID == 0 {
			b.Fatal("no rule")
		}
	}
}

// BenchmarkEstimateMicros is the admission estimate for a 16 KiB body.
func BenchmarkEstimateMicros(b *testing.B) {
	r := tieredRule(b)
	b.ReportAllocs()
	for b.Loop() {
		if EstimateMicros(r, 16<<10, "fast") == 0 {
			b.Fatal("zero estimate")
		}
	}
}

// BenchmarkResolveAt is BenchmarkResolve through a Timeline with scheduled changes at two instants,
// resolving at instants on both sides of them (the data plane's path: the request's admission time).
func BenchmarkResolveAt(b *testing.B) {
	tl := benchTimeline(b, 10_000)
	keys := []struct {
		p int64
		m string
	}{{2, "model-0002"}, {4, "vendor/model-4999-preview"}, {8, "model-9998"}, {5, "no-such-model"}, {1, "model-1-model-9999-x"}}
	ats := []time.Time{benchT.Add(-time.Minute), benchT.Add(time.Minute), benchT.Add(2 * time.Hour)}
	for _, at := range ats {
		for _, k := range keys {
			tl.ResolveAt(k.p, k.m, at)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		if tl.ResolveAt(k.p, k.m, ats[i%len(ats)]) == nil && k.m != "no-such-model" {
			b.Fatal("no rule")
		}
		i++
	}
}
