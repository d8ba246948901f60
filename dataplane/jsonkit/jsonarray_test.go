package jsonkit

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tollgate/tollgate/dataplane/sse"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestJSONArrayDecoder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		err  error
	}{
		{"gamma framing", "[{\"a\":1}\n,\r\n{\"b\":\"]}[\\\"\"}\n]", []string{`{"a":1}`, `{"b":"]}[\""}`}, nil},
		{"whitespace keepalive", "[\n\n  \n{\"a\":[1,{}]}  \n , {\"c\":2}\n\n]\n", []string{`{"a":[1,{}]}`, `{"c":2}`}, nil},
		{"empty", " [ ] ", nil, nil},
		{"scalars", "[1, \"x\", true,null]", []string{"1", `"x"`, "true", "null"}, nil},
		{"bare object", "{\"error\":{\"code\":500}}", []string{`{"error":{"code":500}}`}, nil},
		{"cut", "[{\"a\":1},{\"b\":", []string{`{"a":1}`}, io.ErrUnexpectedEOF},
		{"cut before close", "[{\"a\":1}", []string{`{"a":1}`}, io.ErrUnexpectedEOF},
		{"garbage", "x", nil, ErrJSONArraySyntax},
		{"missing comma", "[{} {}]", []string{"{}"}, ErrJSONArraySyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewJSONArrayDecoder(iotest.OneByteReader(strings.NewReader(tt.in)))
			var got []string
			var err error
			for {
				var el []byte
				el, err = d.Next()
				if err != nil {
					break
				}
				got = append(got, string(el))
			}
			if tt.err == nil && !errors.Is(err, io.EOF) || tt.err != nil && !errors.Is(err, tt.err) {
				t.Fatalf("Next() final error = %v, want %v", err, tt.err)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("elements = %q, want %q", got, tt.want)
			}
		})
	}
	d := NewJSONArrayDecoder(strings.NewReader("[" + strings.Repeat(" ", 10) + "{\"x\":\"" + strings.Repeat("y", 100) + "\"}]"))
	d.SetMaxElementSize(50)
	if _, err := d.Next(); !errors.Is(err, sse.ErrEventTooLarge) {
		t.Fatalf("oversized element: %v, want sse.ErrEventTooLarge", err)
	}
}

func FuzzJSONArrayDecoder(f *testing.F) {
	for _, s := range []string{"[{\"a\":1},\r\n{\"b\":2}]", "[]", "{\"error\":1}", "[\"\\\"]", "[1,2", "[[[[", "]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewJSONArrayDecoder(bytes.NewReader(in))
		d.SetMaxElementSize(1 << 12)
		for range len(in) + 2 {
			el, err := d.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrJSONArraySyntax) && !errors.Is(err, sse.ErrEventTooLarge) {
					t.Fatalf("unexpected error class: %v", err)
				}
				return
			}
			if len(el) == 0 {
				t.Fatal("empty element")
			}
		}
		t.Fatal("more elements than input bytes")
	})
}

func BenchmarkJSONArrayDecoder(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := range 500 {
		if i > 0 {
			buf.WriteString(",\r\n")
		}
		fmt.Fprintf(&buf, `{"candidates":[{"content":{"role":"model","parts":[{"text":"token %d"}]},"index":0}],"modelVersion":"g-1"}`, i)
	}
	buf.WriteByte(']')
	in := buf.Bytes()
	b.ReportAllocs()
	r := bytes.NewReader(in)
	d := NewJSONArrayDecoder(r)
	for i := 0; i < b.N; i++ {
		if _, err := d.Next(); errors.Is(err, io.EOF) {
			r.Reset(in)
			d = NewJSONArrayDecoder(r)
			if _, err := d.Next(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
