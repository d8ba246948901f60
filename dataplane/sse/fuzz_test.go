package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func FuzzDecoder(f *testing.F) {
	for _, s := range []string{"data: x\n\n", "event: a\r\ndata: 1\r\n\r\n", ": c\rdata:\r\r", "data", "id: \x00\n", "data: [DONE]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder(bytes.NewReader(in))
		d.SetMaxEventSize(1 << 12)
		for range len(in) + 2 {
			if _, err := d.Next(); err != nil {
				return
			}
		}
		t.Fatalf("decoder produced more events than input bytes")
	})
}

// FuzzEncodeDecode: whatever is encoded decodes back (data line endings normalise to LF).
func FuzzEncodeDecode(f *testing.F) {
	f.Add("message_start", []byte(`{"type":"message_start"}`), "delta", []byte("a\nb"))
	f.Add("", []byte(""), "", []byte("\r\n\r"))
	f.Fuzz(func(t *testing.T, n1 string, d1 []byte, n2 string, d2 []byte) {
		var b bytes.Buffer
		if WriteEvent(&b, n1, d1) != nil || WriteEvent(&b, n2, d2) != nil {
			return // names with CR/LF/NUL are rejected
		}
		evs, err := decodeAll(t, &b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(evs) != 2 {
			t.Fatalf("decoded %d events, want 2", len(evs))
		}
		norm := func(b []byte) string {
			s := strings.ReplaceAll(string(b), "\r\n", "\n")
			return strings.ReplaceAll(s, "\r", "\n")
		}
		if evs[0].Name != n1 || norm(d1) != string(evs[0].Data) || evs[1].Name != n2 || norm(d2) != string(evs[1].Data) {
			t.Fatalf("round trip (%q,%q),(%q,%q) -> %+v", n1, d1, n2, d2, evs)
		}
	})
}

// FuzzDecoderRaw: with KeepRaw, the raw bytes of every call to Next, in order, are the input byte for byte
// (read whole or a byte at a time), and the events are those decoded without KeepRaw.
func FuzzDecoderRaw(f *testing.F) {
	for _, s := range []string{"data: x\n\n", "event: a\r\ndata: 1\r\n\r\n", ": c\rdata:\r\r", "data", ": k\n\ndata: y\n\n: tail\n", "data: [DONE]\r\n\r\n"} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, oneByte bool) {
		var r io.Reader = bytes.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		raw, plain := NewDecoder(r), NewDecoder(bytes.NewReader(in))
		raw.KeepRaw()
		var got []byte
		for {
			ev, err := raw.Next()
			got = append(got, raw.Raw()...)
			want, werr := plain.Next()
			if (err == nil) != (werr == nil) || (err == nil && (ev.Name != want.Name || !bytes.Equal(ev.Data, want.Data))) {
				t.Fatalf("raw decoder: %q %v, plain: %q %v", ev.Data, err, want.Data, werr)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("Next: %v", err)
				}
				break
			}
		}
		if !bytes.Equal(got, in) {
			t.Fatalf("raw bytes %q, want the input %q", got, in)
		}
	})
}

// FuzzLineEnd: lineEnd finds exactly what bytes.IndexAny(b, "\r\n") finds.
func FuzzLineEnd(f *testing.F) {
	for _, s := range []string{"", "abc", "a\nb", "a\rb", "a\r\nb", "ab\n\r", "\r", "\n", strings.Repeat("x", 100) + "\r" + strings.Repeat("y", 40) + "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lineEnd(b), bytes.IndexAny(b, "\r\n"); got != want {
			t.Fatalf("lineEnd(%q) = %d, want %d", b, got, want)
		}
	})
}
