package proxy

import (
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/shared/usage"
)

// collectSlow is the reference: decoding the chunk into chatDelta with encoding/json.
func collectSlow(data []byte) string {
	var d chatDelta
	out := ""
	if json.Unmarshal(data, &d) == nil {
		for _, c := range d.Choices {
			out += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				out += tc.Function.Arguments
			}
		}
	}
	return out
}

var chunks = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`,
	`{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b","tool_calls":[{"function":{"arguments":"x"}},null,{"function":null}]}}]}`,
	`{"choices":[{"delta":{}}]}`, `{"choices":[]}`, `{"choices":null}`, `{"choices":[null]}`, `{"choices":[{"delta":null}]}`,
	`{"choices":[{"delta":{"content":null}}]}`, `{"choices":[{"delta":{"content":"caf\u00e9 \"q\" \n"}}]}`,
	`{"choices":[{"delta":{"content":"\ud800"}}]}`, "{\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}",
	`{"choices":[{"delta":{"content":5}}]}`, `{"choices":[{"delta":{"content":["a"]}}]}`, `{"choices":{"delta":{}}}`,
	`{"choices":[{"delta":"x"}]}`, `{"choices":[1]}`, `{"choices":[{"delta":{"tool_calls":{}}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":7}}]}}]}`, `{"choices":[{"delta":{"tool_calls":[5]}}]}`,
	`{"Choices":[{"delta":{"content":"A"}}]}`, `{"choices":[{"Delta":{"content":"B"}}]}`, `{"choices":[{"delta":{"CONTENT":"C"}}]}`,
	`{"choices":[{"delta":{"content":"a","content":"b"}}]}`, `{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":"b"}}]}`,
	`{"ch\u006fices":[{"delta":{"content":"e"}}]}`, `{"choices":[{"delta":{"content":"a"}}]`, `[{"delta":{"content":"a"}}]`, `null`,
	` {"choices":[{"delta":{"content":"ws"}}]} `, `{"choices":[{"delta":{"content":"a"}}]} x`, `{"x":tru,"choices":[{"delta":{"content":"a"}}]}`,
}

// TestCollectFastAgrees: the fast path writes exactly what decoding into chatDelta writes, or leaves the
// chunk to it.
func TestCollectFastAgrees(t *testing.T) {
	for _, c := range chunks {
		var tc textCollector
		if tc.collectFast([]byte(c)) {
			if got, want := tc.b.String(), collectSlow([]byte(c)); got != want {
				t.Errorf("%s: fast %q, encoding/json %q", c, got, want)
			}
		} else if tc.b.Len() != 0 {
			t.Errorf("%s: fast path declined but wrote %q", c, tc.b.String())
		}
	}
	for _, c := range chunks[:3] {
		var tc textCollector
		if !tc.collectFast([]byte(c)) {
			t.Errorf("%s: not collected by the fast path", c)
		}
	}
}

func FuzzCollectFastAgrees(f *testing.F) {
	for _, c := range chunks {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var tc textCollector
		if tc.collectFast(b) {
			if got, want := tc.b.String(), collectSlow(b); got != want {
				t.Fatalf("%q: fast %q, encoding/json %q", b, got, want)
			}
		} else if tc.b.Len() != 0 {
			t.Fatalf("%q: declined but wrote %q", b, tc.b.String())
		}
	})
}

// BenchmarkTextCollector is what a relayed alpha chat stream without upstream usage costs per event for
// local counting (the text collection; the usage accumulator runs after it).
func BenchmarkTextCollector(b *testing.B) {
	ev := []byte(chunks[0])
	tc := textCollector{next: usage.NewStreamAccumulator("alpha_chat_completions", "stream_generate_content")}
	b.ReportAllocs()
	for b.Loop() {
		_ = tc.Observe(ev)
		if tc.b.Len() > 1<<20 {
			tc.b.Reset()
		}
	}
}

// BenchmarkTextCollectorJSON is the reference: the same event decoded into chatDelta by encoding/json.
func BenchmarkTextCollectorJSON(b *testing.B) {
	ev := []byte(chunks[0])
	b.ReportAllocs()
	for b.Loop() {
		_ = collectSlow(ev)
	}
}

// BenchmarkCollectFast is the fast path alone.
func BenchmarkCollectFast(b *testing.B) {
	ev := []byte(chunks[0])
	var tc textCollector
	b.ReportAllocs()
	for b.Loop() {
		if !tc.collectFast(ev) {
			b.Fatal("declined")
		}
		if tc.b.Len() > 1<<20 {
			tc.b.Reset()
		}
	}
}
