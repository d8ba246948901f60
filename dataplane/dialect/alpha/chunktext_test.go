package alpha

import (
	"bytes"
	"encoding/json"
	"testing"
)

// collectSlow is the reference: decoding the chunk into chatDeltaText with encoding/json.
func collectSlow(data []byte) string {
	var d chatDeltaText
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

// TestCollectFastAgrees: the fast path reads exactly what decoding into chatDeltaText reads, or leaves the
// chunk to it.
func TestCollectFastAgrees(t *testing.T) {
	for _, c := range chunks {
		if got, ok := appendChunkTextFast(nil, []byte(c)); ok {
			if want := collectSlow([]byte(c)); string(got) != want {
				t.Errorf("%s: fast %q, encoding/json %q", c, got, want)
			}
		}
	}
	for _, c := range chunks[:3] {
		if _, ok := appendChunkTextFast(nil, []byte(c)); !ok {
			t.Errorf("%s: not collected by the fast path", c)
		}
	}
}

func FuzzCollectFastAgrees(f *testing.F) {
	for _, c := range chunks {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, ok := appendChunkTextFast(nil, b); ok {
			if want := collectSlow(b); string(got) != want {
				t.Fatalf("%q: fast %q, encoding/json %q", b, got, want)
			}
		}
	})
}

// BenchmarkTextCollectorJSON is the reference: the same event decoded into chatDeltaText by encoding/json.
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
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		var ok bool
		if dst, ok = appendChunkTextFast(dst[:0], ev); !ok {
			b.Fatal("declined")
		}
	}
}

// TestChunkText: what ChunkText hands over is the chunk's text, whichever reader read it.
func TestChunkText(t *testing.T) {
	for _, c := range chunks {
		var got []byte
		_ = ChunkText([]byte(c), nil, func(b []byte) { got = append(got, b...) })
		want := collectSlow([]byte(c))
		if !bytes.Contains([]byte(c), []byte(`"delta"`)) {
			want = ""
		}
		if string(got) != want {
			t.Errorf("%s: %q, want %q", c, got, want)
		}
	}
}
