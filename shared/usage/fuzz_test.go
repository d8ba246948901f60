package usage

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/shared/vocab"
)

// checkUsage fails when an extractor produced a negative category.
func checkUsage(t *testing.T, u Usage) {
	t.Helper()
	for i, n := range u.Counts() {
		if n < 0 {
			t.Fatalf("category %d = %d, want >= 0 (%+v)", i, n, u)
		}
	}
}

var bodySeeds = []string{
	alphaChatBody, alphaResponsesBody, alphaImageBody, alphaEmbeddingBody, rerankBody, gammaBody,
	`{"usage":{"prompt_tokens":"12","completion_tokens":3.0,"completion_tokens_details":{"image_tokens":-4}}}`,
	`{"usageMetadata":{"promptTokenCount":9223372036854775807,"toolUsePromptTokenCount":9223372036854775807}}`,
	`{"usage":null}`, `null`, `[]`, `{`, `"x"`, ``,
}

func fuzzBody(f *testing.F, fn func([]byte) (Usage, bool, error)) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		u, _, err := fn(body)
		if err != nil {
			return
		}
		checkUsage(t, u)
	})
}

func FuzzFromGamma(f *testing.F) {
	fuzzBody(f, func(b []byte) (Usage, bool, error) {
		h := http.Header{}
		h.Set(GammaTierHeader, string(b[:min(len(b), 8)]))
		return FromGamma(b, h)
	})
}

func FuzzFromGammaEmbedding(f *testing.F) {
	fuzzBody(f, func(b []byte) (Usage, bool, error) { return FromGammaEmbedding(b, nil) })
}

// fuzzStream feeds the newline-separated payloads of one input to a fresh accumulator; a
// payload that fails must not change the result.
func fuzzStream(f *testing.F, kind vocab.Kind, op vocab.Operation, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		acc := NewStreamAccumulator(kind, op)
		acc.ObserveHeader(http.Header{"X-Gamma-Service-Tier": {string(in[:min(len(in), 6)])}})
		for _, ev := range bytes.Split(in, []byte("\n")) {
			before, beforeFound := acc.Result()
			if err := acc.Observe(ev); err != nil {
				if after, afterFound := acc.Result(); after != before || afterFound != beforeFound {
					t.Fatalf("failed Observe(%q) changed the result: %+v → %+v", ev, before, after)
				}
			}
		}
		u, _ := acc.Result()
		checkUsage(t, u)
	})
}

func joined(t string) string {
	var b bytes.Buffer
	for _, d := range sse(nil, t) {
		b.Write(d)
		b.WriteByte('\n')
	}
	return b.String()
}

func FuzzGammaStream(f *testing.F) {
	fuzzStream(f, vocab.KindGammaGenerateContent, vocab.OpStreamGenerateContent, joined(gammaStream), gammaBody)
}
