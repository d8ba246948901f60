package proxy

import "testing"

// BenchmarkTextCollector is what a relayed alpha chat stream without upstream usage costs per event for
// local counting (the text collection).
func BenchmarkTextCollector(b *testing.B) {
	ev := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`)
	tc := textCollector{on: true}
	b.ReportAllocs()
	for b.Loop() {
		tc.observe(ev)
		if tc.b.Len() > 1<<20 {
			tc.b.Reset()
		}
	}
}
