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
	case vocab.KindAlphaResponses:
		ev = append(ev, `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`,
			`{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`,
			`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"in_progress","content":[]}}`,
			`{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`)
		for i := 0; i < 92; i++ {
			ev = append(ev, fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"token %d ","logprobs":[]}`, i+4, i))
		}
		ev = append(ev, `{"type":"response.output_text.done","sequence_number":96,"item_id":"msg_1","output_index":0,"content_index":0,"text":"..."}`,
			`{"type":"response.content_part.done","sequence_number":97,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"...","annotations":[]}}`,
			`{"type":"response.output_item.done","sequence_number":98,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[]}}`,
			`{"type":"response.completed","sequence_number":99,"response":{"id":"resp_1","object":"response","status":"completed","service_tier":"default","output":[],"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":92,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1292}}}`)
	case vocab.KindGammaGenerateContent:
		for i := 0; i < 100; i++ {
			ev = append(ev, fmt.Sprintf(`{"candidates":[{"content":{"role":"model","parts":[{"text":"token %d "}]},"index":0}],"usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1024,"candidatesTokenCount":%d,"totalTokenCount":%d},"modelVersion":"g-1-flash-001","responseId":"q3Xk"}`, i, i+1, 1201+i))
		}
	case vocab.KindAlpha:
		for i := 0; i < 99; i++ {
			ev = append(ev, fmt.Sprintf(`{"type":"image_generation.partial_image","b64_json":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk%d","partial_image_index":%d,"created_at":1,"background":"opaque","output_format":"png","quality":"high","size":"1024x1024"}`, i, i))
		}
		ev = append(ev, `{"type":"image_generation.completed","b64_json":"...","created_at":1,"background":"opaque","output_format":"png","quality":"high","size":"1024x1024","usage":{"input_tokens":50,"input_tokens_details":{"text_tokens":40,"image_tokens":10},"output_tokens":4160,"total_tokens":4210}}`)
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
		{"alpha_responses", vocab.KindAlphaResponses, vocab.OpStreamGenerateContent},
		{"gamma", vocab.KindGammaGenerateContent, vocab.OpStreamGenerateContent},
		{"alpha_image", vocab.KindAlpha, vocab.OpCreateImage},
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

func BenchmarkFromBody(b *testing.B) {
	body := []byte(alphaResponsesBody)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := FromAlphaResponses(body); err != nil {
			b.Fatal(err)
		}
	}
}
