package translate

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/shared/vocab"
)

// within reports whether s's bytes lie inside b.
func within(s string, b []byte) bool {
	if len(s) == 0 || len(b) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(b))
}

// TestLentBodyIsNotCopied: with ClientRequest.Lent the decoded request points into the caller's body (no
// copy); without it the translator decodes from its own copy, so the caller may overwrite its body as soon
// as Request returns and the translator's later output is unchanged.
func TestLentBodyIsNotCopied(t *testing.T) {
	for _, c := range allKinds {
		for _, d := range allKinds {
			if c == d {
				continue
			}
			p := Pair{Op: vocab.OpGenerateContent, Kind: c, DestOp: vocab.OpGenerateContent, DestKind: d}
			body := benchRequest(c)
			for _, lent := range []bool{true, false} {
				tr, err := New(p, canon.Options{})
				if err != nil {
					t.Fatal(err)
				}
				mine := bytes.Clone(body)
				up, err := tr.Request(ClientRequest{Body: mine, Model: "up", Lent: lent})
				if err != nil {
					t.Fatalf("%v: %v", p, err)
				}
				// the canonical form is released once the upstream body is written: decode it again as Request did
				st := canon.NewState(canon.Options{})
				st.Client, st.Upstream, st.Lent = c, d, lent
				r, err := codecFor(c).DecodeRequest(mine, st)
				if err != nil {
					t.Fatalf("%v: %v", p, err)
				}
				inBody := false
				for _, m := range r.Messages {
					for _, pt := range m.Parts {
						inBody = inBody || within(pt.Text, mine)
					}
				}
				if inBody != lent {
					t.Errorf("%v lent=%v: decoded text points into the caller's body = %v", p, lent, inBody)
				}
				if lent {
					continue
				}
				want := bytes.Clone(up.Body)
				for i := range mine {
					mine[i] = 'X' // the caller reuses its buffer
				}
				tr2, _ := New(p, canon.Options{})
				up2, err := tr2.Request(ClientRequest{Body: body, Model: "up"})
				if err != nil || !bytes.Equal(up2.Body, want) {
					t.Errorf("%v: translation not reproducible (%v)", p, err)
				}
				for _, m := range r.Messages {
					for _, pt := range m.Parts {
						if bytes.Contains([]byte(pt.Text), []byte("XXXX")) {
							t.Fatalf("%v: the translator's request changed when the caller reused its body", p)
						}
					}
				}
			}
		}
	}
}

// TestPartSize: the canonical part every message has stays small (the rarely set fields are behind
// part.x): the request decoders allocate one arena of parts per request, so its size is per-request garbage.
func TestPartSize(t *testing.T) {
	if n := unsafe.Sizeof(canon.Part{}); n > 144 {
		t.Fatalf("part is %d bytes, want ≤ 144", n)
	}
	p := canon.Part{Type: canon.PartImage}.WithExtra(canon.PartExtra{})
	if p.X != nil {
		t.Fatal("withExtra of no extra fields keeps a pointer")
	}
	q := p.WithExtra(canon.PartExtra{URL: "u"})
	x := q.Get()
	x.URL = "v"
	if r := q.WithExtra(x); q.Get().URL != "u" || r.Get().URL != "v" || p.Get().URL != "" {
		t.Fatal("copies of a part share what one of them sets")
	}
}

// benchBodies are the benchmark requests by kind, built once.
var benchBodies = sync.OnceValue(func() map[vocab.Kind][]byte {
	m := map[vocab.Kind][]byte{}
	for _, k := range allKinds {
		m[k] = benchRequest(k)
	}
	return m
})

// dirtyStore is request storage that held the benchmark request of kind k and was reset, as the pool
// hands it to the next request.
func dirtyStore(k vocab.Kind) *canon.ReqStore {
	st := canon.NewState(testOptions())
	st.Client, st.Upstream = k, vocab.KindBetaMessages
	store := new(canon.ReqStore)
	if _, err := codecFor(k).(canon.PooledDecoder).DecodeInto(benchBodies()[k], st, store); err != nil {
		panic(err)
	}
	store.Reset() // as release does, without handing it to the pool: the caller keeps it
	return store
}

// TestReleasedStoreIsReused: Request builds the canonical request in pooled storage and releases it once
// the upstream body is written; the storage is cleared, reused by the next request (of another size and
// kind), and the bodies already returned never change (they are buffers of their own).
func TestReleasedStoreIsReused(t *testing.T) {
	var bodies [][]byte
	var copies [][]byte
	for round := range 2 {
		for _, c := range allKinds {
			for _, d := range allKinds {
				if c == d {
					continue
				}
				body := benchRequest(c)
				if round == 1 {
					body = []byte(strings.Replace(string(body), "lazy dog", "lazy cat", 3)) // other bodies, same shapes
				}
				tr, err := New(Pair{Op: vocab.OpGenerateContent, Kind: c, DestOp: vocab.OpGenerateContent, DestKind: d}, canon.Options{})
				if err != nil {
					t.Fatal(err)
				}
				up, err := tr.Request(ClientRequest{Body: body, Model: "up", Lent: true})
				if err != nil {
					t.Fatalf("%s -> %s: %v", c, d, err)
				}
				if tr.st.Req.Messages != nil {
					t.Fatalf("%s -> %s: the canonical messages outlive Request", c, d)
				}
				bodies = append(bodies, up.Body)
				copies = append(copies, bytes.Clone(up.Body))
			}
		}
	}
	for i := range bodies {
		if !bytes.Equal(bodies[i], copies[i]) {
			t.Fatalf("upstream body %d changed after later requests reused the storage", i)
		}
	}
	s := dirtyStore(vocab.KindGammaGenerateContent)
	for _, p := range s.Parts[:cap(s.Parts)] {
		if p.Text != "" || p.ResultParts != nil || p.X != nil {
			t.Fatal("released storage still holds a part")
		}
	}
	for _, m := range s.Msgs[:cap(s.Msgs)] {
		if m.Parts != nil {
			t.Fatal("released storage still holds a message")
		}
	}
}
