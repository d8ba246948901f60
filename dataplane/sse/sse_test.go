package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func decodeAll(t testing.TB, r io.Reader) ([]Event, error) {
	t.Helper()
	d := NewDecoder(r)
	var out []Event
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		ev.Data = append([]byte(nil), ev.Data...)
		out = append(out, ev)
	}
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"lf", "event: a\ndata: 1\n\ndata: 2\n\n", []Event{{Name: "a", Data: []byte("1")}, {Data: []byte("2")}}},
		{"crlf", "event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n", []Event{{Name: "a", Data: []byte("1")}, {Data: []byte("2")}}},
		{"cr", "event: a\rdata: 1\r\rdata: 2\r\r", []Event{{Name: "a", Data: []byte("1")}, {Data: []byte("2")}}},
		{"multiline", "data: a\ndata: b\ndata:c\n\n", []Event{{Data: []byte("a\nb\nc")}}},
		{"comments", ": hello\n: keepalive\ndata: x\n\n: trailing\n", []Event{{Data: []byte("x")}}},
		{"no trailing blank line", "data: {\"a\":1}", []Event{{Data: []byte(`{"a":1}`)}}},
		{"no trailing blank line lf", "event: e\ndata: z\n", []Event{{Name: "e", Data: []byte("z")}}},
		{"empty data line", "data:\n\n", []Event{{Data: []byte("")}}},
		{"event without data is not dispatched", "event: ping\n\ndata: y\n\n", []Event{{Data: []byte("y")}}},
		{"blank lines only", "\n\n\r\n\r\n", nil},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\n", []Event{{Data: []byte("a"), ID: "7"}, {Data: []byte("b"), ID: "7"}}},
		{"field without colon", "data\n\n", []Event{{Data: []byte("")}}},
		{"one space stripped", "data:  two\n\n", []Event{{Data: []byte(" two")}}},
		{"retry ignored", "retry: 10\ndata: r\n\n", []Event{{Data: []byte("r")}}},
		{"done", "data: [DONE]\n\n", []Event{{Data: []byte("[DONE]")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "onebyte"} {
				var r io.Reader = strings.NewReader(tt.in)
				if mode == "onebyte" {
					r = iotest.OneByteReader(r)
				}
				got, err := decodeAll(t, r)
				if err != nil {
					t.Fatalf("%s: decode(%q) error %v", mode, tt.in, err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("%s: decode(%q) = %d events %q, want %d", mode, tt.in, len(got), got, len(tt.want))
				}
				for i := range got {
					if got[i].Name != tt.want[i].Name || !bytes.Equal(got[i].Data, tt.want[i].Data) || got[i].ID != tt.want[i].ID {
						t.Errorf("%s: event %d = %+v, want %+v", mode, i, got[i], tt.want[i])
					}
				}
			}
		})
	}
}

// A CR line ending at the end of the available bytes must not block the event.
func TestDecoderCRDoesNotBlock(t *testing.T) {
	pr, pw := io.Pipe()
	d := NewDecoder(pr)
	done := make(chan Event)
	go func() {
		ev, _ := d.Next()
		done <- ev
	}()
	_, _ = pw.Write([]byte("data: live\r\r"))
	ev := <-done
	if string(ev.Data) != "live" {
		t.Fatalf("Next() = %q, want live", ev.Data)
	}
	_ = pw.Close()
}

func TestDecoderMaxSize(t *testing.T) {
	big := "data: " + strings.Repeat("x", 2000) + "\n\n"
	d := NewDecoder(strings.NewReader(big))
	d.SetMaxEventSize(1000)
	if _, err := d.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("Next() error = %v, want ErrEventTooLarge", err)
	}
	many := strings.Repeat("data: 0123456789\n", 200) + "\n"
	d = NewDecoder(strings.NewReader(many))
	d.SetMaxEventSize(1000)
	if _, err := d.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("Next() multi-line error = %v, want ErrEventTooLarge", err)
	}
	d = NewDecoder(strings.NewReader(big))
	if ev, err := d.Next(); err != nil || len(ev.Data) != 2000 {
		t.Fatalf("default max: Next() = %d bytes, %v", len(ev.Data), err)
	}
}

func TestEncoderRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := WriteEvent(&b, "message_start", []byte(`{"type":"message_start"}`)); err != nil {
		t.Fatal(err)
	}
	if err := WriteComment(&b, "keepalive"); err != nil {
		t.Fatal(err)
	}
	if err := WriteEvent(&b, "", []byte("line1\nline2\r\nline3")); err != nil {
		t.Fatal(err)
	}
	if err := WriteEventID(&b, "x", "42", []byte("y")); err != nil {
		t.Fatal(err)
	}
	want := "event: message_start\ndata: {\"type\":\"message_start\"}\n\n: keepalive\ndata: line1\ndata: line2\ndata: line3\n\nid: 42\nevent: x\ndata: y\n\n"
	if b.String() != want {
		t.Fatalf("encoded %q, want %q", b.String(), want)
	}
	evs, err := decodeAll(t, &b)
	if err != nil || len(evs) != 3 || string(evs[1].Data) != "line1\nline2\nline3" || evs[2].ID != "42" {
		t.Fatalf("decode = %+v, %v", evs, err)
	}
	if err := WriteEvent(&b, "bad\nname", nil); !errors.Is(err, ErrBadField) {
		t.Fatalf("WriteEvent(bad name) = %v, want ErrBadField", err)
	}
}

// TestDecoderRepeatedNameAllocatesNothing: a stream that repeats its event names (every beta and alpha
// responses stream) decodes with no allocation per event once its buffers have grown; names still change.
func TestDecoderRepeatedNameAllocatesNothing(t *testing.T) {
	in := append(benchStream(200), "event: message_stop\ndata: {}\n\ndata: [DONE]\n\n"...)
	r := bytes.NewReader(in)
	d := NewDecoder(r)
	allocs := testing.AllocsPerRun(100, func() {
		if ev, err := d.Next(); err != nil || ev.Name != "content_block_delta" {
			t.Fatalf("event %q, %v", ev.Name, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per event with a repeated name, want 0", allocs)
	}
	for range 200 - 101 { // AllocsPerRun decoded 101
		_, _ = d.Next()
	}
	if ev, _ := d.Next(); ev.Name != "message_stop" {
		t.Errorf("name %q after a change, want message_stop", ev.Name)
	}
	if ev, _ := d.Next(); ev.Name != "" {
		t.Errorf("name %q of an unnamed event, want none", ev.Name)
	}
}
