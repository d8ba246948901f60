package proxy

import (
	"testing"

	"github.com/tollgate/tollgate/shared/usage"
)

// BenchmarkTextCollector is what a relayed alpha chat stream without upstream usage costs per event for
// local counting (the text collection; the usage accumulator runs after it).
func BenchmarkTextCollector(b *testing.B) {
	ev := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`)
	tc := textCollector{next: usage.NewStreamAccumulator("alpha_chat_completions", "stream_generate_content")}
	b.ReportAllocs()
	for b.Loop() {
		_ = tc.Observe(ev)
		if tc.b.Len() > 1<<20 {
			tc.b.Reset()
		}
	}
}
