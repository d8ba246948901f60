package translate

import (
	"bytes"
	"testing"
	"unsafe"

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
				tr, err := New(p, Options{})
				if err != nil {
					t.Fatal(err)
				}
				mine := bytes.Clone(body)
				up, err := tr.Request(ClientRequest{Body: mine, Model: "up", Lent: lent})
				if err != nil {
					t.Fatalf("%v: %v", p, err)
				}
				inBody := false
				for _, m := range tr.st.req.Messages {
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
				tr2, _ := New(p, Options{})
				up2, err := tr2.Request(ClientRequest{Body: body, Model: "up"})
				if err != nil || !bytes.Equal(up2.Body, want) {
					t.Errorf("%v: translation not reproducible (%v)", p, err)
				}
				for _, m := range tr.st.req.Messages {
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
	if n := unsafe.Sizeof(part{}); n > 144 {
		t.Fatalf("part is %d bytes, want ≤ 144", n)
	}
	p := part{Type: partImage}.withExtra(partExtra{})
	if p.x != nil {
		t.Fatal("withExtra of no extra fields keeps a pointer")
	}
	q := p.withExtra(partExtra{URL: "u"})
	x := q.get()
	x.URL = "v"
	if r := q.withExtra(x); q.get().URL != "u" || r.get().URL != "v" || p.get().URL != "" {
		t.Fatal("copies of a part share what one of them sets")
	}
}
