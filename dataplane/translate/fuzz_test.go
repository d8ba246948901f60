package translate

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

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
