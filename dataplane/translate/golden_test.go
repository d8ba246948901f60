package translate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/shared/vocab"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

var allKinds = []vocab.Kind{vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses, vocab.KindBetaMessages, vocab.KindGammaGenerateContent}

func testOptions() canon.Options {
	return canon.Options{NewID: func() string { return "T3st" }, Now: func() time.Time { return time.Unix(1760000000, 0) }}
}

func newT(t testing.TB, p Pair) *Translator {
	t.Helper()
	tr, err := New(p, testOptions())
	if err != nil {
		t.Fatalf("New(%v) = %v", p, err)
	}
	return tr
}

// golden compares got with testdata/golden/name, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s: %v (run go test -update)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run go test -update and review the diff)\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func indentJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return b
	}
	out.WriteByte('\n')
	return out.Bytes()
}

func fixtures(t testing.TB, dir, prefix string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("testdata", dir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+".") {
			b, err := os.ReadFile(filepath.Join("testdata", dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(e.Name(), prefix+".")] = b
		}
	}
	return out
}

func sortedKeys(m map[string][]byte) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func renderUpstream(up *canon.UpstreamRequest, err error) []byte {
	if err != nil {
		var b bytes.Buffer
		fmt.Fprintf(&b, "ERROR %v\n", err)
		if re := asRequestError(err); re != nil {
			fmt.Fprintf(&b, "status=%d field=%s\n", re.Status, re.Field)
		}
		return b.Bytes()
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\n", up.Method, up.Path)
	keys := make([]string, 0, len(up.Header))
	for k := range up.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(up.Header[k], ","))
	}
	b.WriteByte('\n')
	b.Write(indentJSON(up.Body))
	return b.Bytes()
}

func wantsStream(body []byte) bool {
	var s struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &s)
	return s.Stream
}

// TestGoldenRequest: client request -> upstream request, every pair, streaming and buffered upstreams.
func TestGoldenRequest(t *testing.T) {
	for _, client := range allKinds {
		fx := fixtures(t, "requests", string(client))
		for _, name := range sortedKeys(fx) {
			body := fx[name]
			// gamma selects streaming by its method, not the body: its basic fixture is run as a stream
			stream := wantsStream(body) || client == vocab.KindGammaGenerateContent && name == "basic.json"
			for _, dest := range allKinds {
				op := vocab.OpGenerateContent
				if stream {
					op = vocab.OpStreamGenerateContent
				}
				modes := []vocab.Operation{op}
				if stream {
					modes = append(modes, vocab.OpGenerateContent) // buffered upstream, synthesised stream
				}
				for _, destOp := range modes {
					if client == dest && destOp == op {
						continue // passthrough is not a translation
					}
					suffix := ""
					if destOp != op {
						suffix = ".buffered"
					}
					gname := fmt.Sprintf("request/%s__%s__%s%s.txt", client, dest, strings.TrimSuffix(name, ".json"), suffix)
					t.Run(gname, func(t *testing.T) {
						tr := newT(t, Pair{Op: op, Kind: client, DestOp: destOp, DestKind: dest})
						up, err := tr.Request(ClientRequest{Body: body, Model: "up-model", Stream: stream, GammaSSE: true})
						golden(t, gname, renderUpstream(up, err))
					})
				}
			}
		}
	}
}

func clientRequestFor(k vocab.Kind, stream bool) []byte {
	switch k {
	case vocab.KindAlphaChatCompletions:
		if stream {
			return []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
		}
		return []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	case vocab.KindAlphaResponses:
		return []byte(fmt.Sprintf(`{"model":"m","input":"hi","stream":%v}`, stream))
	case vocab.KindBetaMessages:
		return []byte(fmt.Sprintf(`{"model":"b","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stream":%v}`, stream))
	}
	return []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
}

// TestGoldenResponse: upstream buffered body -> client body.
func TestGoldenResponse(t *testing.T) {
	eachAnswer(t, func(up, client vocab.Kind, name string, answer []byte) {
		gname := fmt.Sprintf("response/%s__%s__%s", up, client, name)
		t.Run(gname, func(t *testing.T) {
			tr := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: up})
			if _, err := tr.Request(ClientRequest{Body: clientRequestFor(client, false), Model: "up-model"}); err != nil {
				t.Fatal(err)
			}
			out, err := tr.Response(answer)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			golden(t, gname, indentJSON(out))
		})
	})
}

// eachAnswer calls fn for every upstream answer of testdata/responses and every client it is translated for.
func eachAnswer(t testing.TB, fn func(up, client vocab.Kind, name string, answer []byte)) {
	for _, up := range allKinds {
		fx := fixtures(t, "responses", string(up))
		for _, name := range sortedKeys(fx) {
			for _, client := range allKinds {
				if client != up {
					fn(up, client, name, fx[name])
				}
			}
		}
	}
}

type flushCounter struct{ n int }

func (f *flushCounter) flush() { f.n++ }

// TestGoldenStream: upstream stream -> client stream, event by event.
func TestGoldenStream(t *testing.T) {
	for _, up := range allKinds {
		ents, _ := filepath.Glob(filepath.Join("testdata", "streams", string(up)+".*"))
		for _, path := range ents {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimPrefix(filepath.Base(path), string(up)+".")
			for _, client := range allKinds {
				if client == up {
					continue
				}
				variants := []bool{true}
				if client == vocab.KindGammaGenerateContent {
					variants = []bool{true, false}
				}
				for _, sseOut := range variants {
					framing := ""
					if client == vocab.KindGammaGenerateContent && !sseOut {
						framing = ".array"
					}
					gname := fmt.Sprintf("stream/%s__%s__%s%s.txt", up, client, name, framing)
					t.Run(gname, func(t *testing.T) {
						tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: client, DestOp: vocab.OpStreamGenerateContent, DestKind: up})
						if _, err := tr.Request(ClientRequest{Body: clientRequestFor(client, true), Model: "up-model", Stream: true, GammaSSE: sseOut}); err != nil {
							t.Fatal(err)
						}
						var out bytes.Buffer
						s := tr.NewStream(&out)
						fc := &flushCounter{}
						_ = s.Pump(bytes.NewReader(raw), strings.HasSuffix(path, ".json"), fc.flush)
						if fc.n == 0 {
							t.Error("Pump never flushed")
						}
						checkClientStream(t, client, sseOut, out.Bytes())
						golden(t, gname, out.Bytes())
					})
				}
			}
		}
	}
}

// TestGoldenSynthesize: buffered upstream body -> client stream (including same-kind cells).
func TestGoldenSynthesize(t *testing.T) {
	for _, up := range allKinds {
		fx := fixtures(t, "responses", string(up))
		for _, name := range sortedKeys(fx) {
			for _, client := range allKinds {
				gname := fmt.Sprintf("synth/%s__%s__%s.txt", up, client, strings.TrimSuffix(name, ".json"))
				t.Run(gname, func(t *testing.T) {
					tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: up})
					if _, err := tr.Request(ClientRequest{Body: clientRequestFor(client, true), Model: "up-model", Stream: true, GammaSSE: true}); err != nil {
						t.Fatal(err)
					}
					if tr.Mode() != ModeSynthesize {
						t.Fatalf("Mode() = %v, want ModeSynthesize", tr.Mode())
					}
					var out bytes.Buffer
					if err := tr.Synthesize(&out, 200, nil, fx[name]); err != nil {
						t.Fatal(err)
					}
					checkClientStream(t, client, true, out.Bytes())
					golden(t, gname, out.Bytes())
				})
			}
		}
	}
}

// TestGoldenError: upstream error bodies of every dialect -> every client dialect.
func TestGoldenError(t *testing.T) {
	ents, _ := filepath.Glob(filepath.Join("testdata", "errors", "*.json"))
	for _, path := range ents {
		raw, _ := os.ReadFile(path)
		base := filepath.Base(path)
		var status int
		fmt.Sscanf(strings.Split(base, ".")[1], "%d", &status)
		for _, client := range allKinds {
			gname := fmt.Sprintf("error/%s__%s.txt", strings.TrimSuffix(base, ".json"), client)
			t.Run(gname, func(t *testing.T) {
				dest := vocab.KindBetaMessages
				if client == vocab.KindBetaMessages {
					dest = vocab.KindAlphaChatCompletions
				}
				tr := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: dest})
				h := http.Header{}
				if status == 429 && strings.HasPrefix(base, "alpha") {
					h.Set("Retry-After", "7")
				}
				cr := tr.Error(status, h, raw)
				var b bytes.Buffer
				fmt.Fprintf(&b, "status=%d retry-after=%q\n", cr.Status, cr.Header.Get("Retry-After"))
				b.Write(indentJSON(cr.Body))
				golden(t, gname, b.Bytes())
			})
		}
	}
}

func readFixture(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
