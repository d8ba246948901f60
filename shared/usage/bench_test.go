package usage

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/shared/vocab"
)

// stream100 builds a realistic 100-event stream (data payloads) for one dialect.
func stream100(kind vocab.Kind) [][]byte {
	var ev []string
	switch kind {
	case vocab.KindGammaGenerateContent:
		for i := 0; i < 100; i++ {
			ev = append(ev, fmt.Sprintf(`{"candidates":[{"content":{"role":"model","parts":[{"text":"token %d "}]},"index":0}],"usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1024,"candidatesTokenCount":%d,"totalTokenCount":%d},"modelVersion":"g-1-flash-001","responseId":"q3Xk"}`, i, i+1, 1201+i))
		}
	}
	out := make([][]byte, len(ev))
	for i, e := range ev {
		out[i] = []byte(e)
	}
	return out
}

func BenchmarkStreamUsage(b *testing.B) {
	cases := []struct {
		name string
		kind vocab.Kind
		op   vocab.Operation
	}{
		{"gamma", vocab.KindGammaGenerateContent, vocab.OpStreamGenerateContent},
	}
	hdr := http.Header{}
	hdr.Set(GammaTierHeader, "standard")
	for _, c := range cases {
		events := stream100(c.kind)
		var bytes int64
		for _, e := range events {
			bytes += int64(len(e))
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(bytes)
			for b.Loop() {
				acc := NewStreamAccumulator(c.kind, c.op)
				acc.ObserveHeader(hdr)
				for _, e := range events {
					if err := acc.Observe(e); err != nil {
						b.Fatal(err)
					}
				}
				if _, found := acc.Result(); !found {
					b.Fatal("no usage found")
				}
			}
		})
	}
}
