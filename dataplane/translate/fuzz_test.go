package translate

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

func seedFiles(f *testing.F, glob string, add func([]byte)) {
	paths, _ := filepath.Glob(filepath.Join("testdata", glob))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			add(b)
		}
	}
}

func kindAt(i uint8) vocab.Kind { return allKinds[int(i)%len(allKinds)] }

// FuzzTranslateRequest: any body through any pair never panics, and success yields valid JSON.
func FuzzTranslateRequest(f *testing.F) {
	seedFiles(f, "requests/*.json", func(b []byte) {
		for i := range uint8(4) {
			f.Add(b, i, i+1, true)
		}
	})
	f.Fuzz(func(t *testing.T, body []byte, c, d uint8, stream bool) {
		client, dest := kindAt(c), kindAt(d)
		op := vocab.OpGenerateContent
		if stream {
			op = vocab.OpStreamGenerateContent
		}
		destOp := op
		if client == dest {
			destOp = vocab.OpGenerateContent
			if !stream {
				return
			}
		}
		tr, err := New(Pair{Op: op, Kind: client, DestOp: destOp, DestKind: dest}, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		up, err := tr.Request(ClientRequest{Body: body, Model: "m", Stream: stream, GammaSSE: c%2 == 0})
		if err != nil {
			_ = tr.ErrorBody(err)
			return
		}
		if !json.Valid(up.Body) {
			t.Fatalf("upstream body is not JSON: %s", up.Body)
		}
	})
}

// FuzzTranslateStream: any upstream bytes as a stream, a buffered body or an error body never panic.
func FuzzTranslateStream(f *testing.F) {
	seedFiles(f, "streams/*", func(b []byte) {
		for i := range uint8(4) {
			f.Add(b, i, i+1, false)
		}
	})
	seedFiles(f, "responses/*.json", func(b []byte) { f.Add(b, uint8(0), uint8(1), true) })
	f.Fuzz(func(t *testing.T, data []byte, u, c uint8, array bool) {
		up, client := kindAt(u), kindAt(c)
		if up == client {
			client = kindAt(c + 1)
		}
		tr, err := New(Pair{Op: vocab.OpStreamGenerateContent, Kind: client, DestOp: vocab.OpStreamGenerateContent, DestKind: up}, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(client, true), Model: "m", Stream: true, GammaSSE: !array}); err != nil {
			t.Fatal(err)
		}
		_ = tr.NewStream(io.Discard).Pump(bytes.NewReader(data), array, nil)
		s := tr.NewStream(io.Discard)
		_ = s.FeedJSON(data)
		_ = s.Finish()
		_ = tr.Synthesize(io.Discard, 200, nil, data)
		_, _ = tr.Response(data)
		_ = tr.Error(500, nil, data)
	})
}

// FuzzAppendString: the direct string encoder matches encoding/json (HTML escaping off).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\n\r\t\x00\x1f", "<>&", "\u2028\u2029", "héllo 🌍", "\xff", "abcdefg\xffhij\xe2\x80", "0123456789abcdef\u2028x\x7f\"<"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := jsonkit.AppendString(nil, s)
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		if want := bytes.TrimSuffix(b.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// FuzzValidJSON: validJSON (the hand-written reader where it applies) agrees with json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"city":"Oslo","days":3}`, `{"a":[1,2.5e3,-0,true,null]}`, `{"a":1,}`, `[01]`, ` "x" `, `"\ud800"`,
		"\"\xff\"", `{"a":"b"}x`, `[[[[]]]]`, `1.`, `-`, `"a\u0041"`, "\"\x7f\"", `{}`, `nul`,
		`[ ]`, `{ "a" : [ 1 , { } , "x" ] } `, `{"a":1 "b":2}`, `[1,]`, `{"a"}`, `-01`, `1e+`, `0.5E-3`, `[}`, `{]`, `[1]]`,
		`{"a":{"b":{"c":[true,false,null]}}}`, strings.Repeat("[", 64) + strings.Repeat("]", 64),
		strings.Repeat("[", 65) + strings.Repeat("]", 65), strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := jsonkit.ValidJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}
