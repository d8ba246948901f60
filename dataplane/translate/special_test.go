package translate

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/shared/vocab"
)

func TestGoldenEmbedding(t *testing.T) {
	cases := []struct {
		client, dest vocab.Kind
		req, resp    string
	}{
		{vocab.KindAlpha, vocab.KindGamma, "embed.alpha.single.json", "embed.gamma.resp.single.json"},
		{vocab.KindAlpha, vocab.KindGamma, "embed.alpha.batch.json", "embed.gamma.resp.batch.json"},
		{vocab.KindAlpha, vocab.KindGamma, "embed.alpha.tokens.json", ""},
		{vocab.KindGamma, vocab.KindAlpha, "embed.gamma.single.json", "embed.alpha.resp.single.json"},
		{vocab.KindGamma, vocab.KindAlpha, "embed.gamma.batch.json", "embed.alpha.resp.batch.json"},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("special/%s__%s__%s.txt", tc.client, tc.dest, tc.req)
		t.Run(name, func(t *testing.T) {
			tr := newT(t, Pair{Op: vocab.OpCreateEmbedding, Kind: tc.client, DestOp: vocab.OpCreateEmbedding, DestKind: tc.dest})
			up, err := tr.Request(ClientRequest{Body: readFixture(t, "special", tc.req), Model: "g-emb"})
			out := renderUpstream(up, err)
			if err == nil {
				resp, err := tr.Response(readFixture(t, "special", tc.resp))
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, "\n--- client response ---\n"...)
				out = append(out, indentJSON(resp)...)
			}
			golden(t, name, out)
		})
	}
}

func TestEmbeddingBase64(t *testing.T) {
	s, err := floatsBase64([]byte("[0.5, -0.25]"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := base64.StdEncoding.DecodeString(s)
	if len(b) != 8 || math.Float32frombits(binary.LittleEndian.Uint32(b)) != 0.5 || math.Float32frombits(binary.LittleEndian.Uint32(b[4:])) != -0.25 {
		t.Fatalf("floatsBase64 = %x", b)
	}
}

func TestGoldenCountTokens(t *testing.T) {
	reqs := map[vocab.Kind]string{
		vocab.KindAlpha: `{"model":"m","instructions":"Be terse.","input":[{"role":"user","content":"Hello"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
		vocab.KindBeta:  `{"model":"b","system":"Be terse.","messages":[{"role":"user","content":"Hello"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`,
		vocab.KindGamma: `{"generateContentRequest":{"model":"models/g","systemInstruction":{"parts":[{"text":"Be terse."}]},"contents":[{"role":"user","parts":[{"text":"Hello"}]}]}}`,
	}
	resps := map[vocab.Kind]string{
		vocab.KindAlpha: `{"object":"response.input_tokens","input_tokens":31}`,
		vocab.KindBeta:  `{"input_tokens":31}`,
		vocab.KindGamma: `{"totalTokens":31,"promptTokensDetails":[{"modality":"TEXT","tokenCount":31}]}`,
	}
	for _, c := range vocab.FamilyKinds {
		for _, d := range vocab.FamilyKinds {
			if c == d {
				if _, err := New(Pair{Op: vocab.OpCountTokens, Kind: c, DestOp: vocab.OpCountTokens, DestKind: d}, canon.Options{}); !errors.Is(err, ErrUnsupported) {
					t.Errorf("New(count_tokens %s->%s) = %v, want ErrUnsupported", c, d, err)
				}
				continue
			}
			name := fmt.Sprintf("special/count_tokens__%s__%s.txt", c, d)
			t.Run(name, func(t *testing.T) {
				tr := newT(t, Pair{Op: vocab.OpCountTokens, Kind: c, DestOp: vocab.OpCountTokens, DestKind: d})
				up, err := tr.Request(ClientRequest{Body: []byte(reqs[c]), Model: "up-model"})
				if err != nil {
					t.Fatal(err)
				}
				out := renderUpstream(up, nil)
				resp, err := tr.Response([]byte(resps[d]))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(resp, []byte("31")) {
					t.Errorf("count lost: %s", resp)
				}
				out = append(out, "\n--- client response ---\n"...)
				out = append(out, indentJSON(resp)...)
				golden(t, name, out)
			})
		}
	}
}
