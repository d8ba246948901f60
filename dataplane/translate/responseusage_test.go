package translate

import (
	"bytes"
	"net/http"
	"testing"

	billed "github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// usageVariants are upstream answers built from body with its usage members spelt, repeated and placed
// as encoding/json still matches them (and one it does not: a nested usage).
func usageVariants(body []byte) [][]byte {
	out := [][]byte{body}
	i := bytes.IndexByte(body, '{')
	if i < 0 {
		return out
	}
	for _, pre := range []string{
		`"USAGE":{"prompt_tokens":1,"input_tokens":2},`,
		`"usage":{"completion_tokens":3,"output_tokens":4},"x":{"usage":{"input_tokens":9}},`,
		`"\u0075sage":{"prompt_tokens":5},"Service_Tier":"flex",`,
		`"ſervice_tier":"priority","usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2},`,
		`"usagemetadata":{"thoughtsTokenCount":3},"usage":null,`,
	} {
		v := append(append(append([]byte{}, body[:i+1]...), pre...), body[i+1:]...)
		j := bytes.LastIndexByte(v, '}')
		out = append(out, v, append(append([]byte{}, v[:j]...), `,"usage":{"input_tokens":11}}`...))
	}
	return out
}

// checkResponseUsage translates answer from up for client and requires ResponseUsage to agree with
// usage.FromBody on the answer whenever it answers (must: it has to answer).
func checkResponseUsage(t *testing.T, up, client vocab.Kind, answer []byte, must bool) {
	t.Helper()
	hdr := http.Header{}
	hdr.Set(billed.GammaTierHeader, "flex")
	tr := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: up})
	if _, err := tr.Request(ClientRequest{Body: clientRequestFor(client, false), Model: "up-model"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Response(answer); err != nil {
		if must {
			t.Fatalf("%s: %v", answer, err)
		}
		if _, _, ok := tr.ResponseUsage(hdr); ok {
			t.Fatalf("%s: usage after a failed Response", answer)
		}
		return
	}
	got, gotFound, ok := tr.ResponseUsage(hdr)
	want, wantFound, err := billed.FromBody(up, vocab.OpGenerateContent, answer, hdr)
	switch {
	case !ok && must:
		t.Fatalf("%s -> %s %s: no usage", up, client, answer)
	case ok && (err != nil || got != want || gotFound != wantFound):
		t.Fatalf("%s -> %s %s:\nResponseUsage %+v %v\nFromBody      %+v %v %v", up, client, answer, got, gotFound, want, wantFound, err)
	}
}

// TestResponseUsageIsFromBody: for the goldens' upstream answers (and variants of their usage members),
// ResponseUsage gives what usage.FromBody gives on the whole answer.
func TestResponseUsageIsFromBody(t *testing.T) {
	eachAnswer(t, func(up, client vocab.Kind, _ string, answer []byte) {
		for i, v := range usageVariants(answer) {
			checkResponseUsage(t, up, client, v, i == 0)
		}
	})
	tr := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: vocab.KindBetaMessages, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindAlphaChatCompletions})
	if _, _, ok := tr.ResponseUsage(nil); ok {
		t.Fatal("usage before Response")
	}
}

// FuzzResponseUsage: on any answer Response accepts, ResponseUsage agrees with usage.FromBody or
// declines.
func FuzzResponseUsage(f *testing.F) {
	for k, up := range allKinds {
		for _, answer := range fixtures(f, "responses", string(up)) {
			for _, v := range usageVariants(answer) {
				f.Add(uint8(k), v) // translated from up for the next kind
			}
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, answer []byte) {
		up := allKinds[int(k)%len(allKinds)]
		client := allKinds[(int(k)+1)%len(allKinds)]
		checkResponseUsage(t, up, client, answer, false)
	})
}
