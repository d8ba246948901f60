package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

func benchStream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"token %d of the stream\"}}\n\n", i)
	}
	return b.Bytes()
}

// BenchmarkDecoder reports the cost of decoding one 120-byte event (b.N events per run of 500).
func BenchmarkDecoder(b *testing.B) {
	in := benchStream(500)
	b.SetBytes(int64(len(in)) / 500)
	b.ReportAllocs()
	r := bytes.NewReader(in)
	d := NewDecoder(r)
	for i := 0; i < b.N; i++ {
		if _, err := d.Next(); errors.Is(err, io.EOF) {
			r.Reset(in)
			d = NewDecoder(r)
			if _, err := d.Next(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkWriteEvent(b *testing.B) {
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"token"}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := WriteEvent(io.Discard, "content_block_delta", data); err != nil {
			b.Fatal(err)
		}
	}
}
