package testkit

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/shared/usage"
)

// WireAnswer is one successful (status 200) answer of ../shared/wire/realwire.jsonl: the recorded body
// (a stream's SSE or JSON-array body, or a buffered body) and response header, with the usage it must bill
// (its token categories and served tier, as ../shared/wire/README.md derives them).
type WireAnswer struct {
	Stream bool
	Body   []byte
	Header http.Header
	Want   usage.Usage
}

// RealWire returns the successful answers of dialect ("alpha_chat_completions", "beta_messages",
// "gamma_generate_content", ...) in the recorded provider traffic, and fails the test when there is not at
// least one stream and one buffered body.
func RealWire(t testing.TB, dialect string) (streams, bodies []WireAnswer) {
	t.Helper()
	f, err := os.Open(Shared(t, "wire", "realwire.jsonl"))
	if err != nil {
		t.Fatalf("the real-wire corpus: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var row struct {
			Dialect      string            `json:"dialect"`
			Stream       bool              `json:"stream"`
			Status       int               `json:"status"`
			Headers      map[string]string `json:"response_headers"`
			ResponseBody string            `json:"response_body"`
			Expected     struct {
				Input       int64   `json:"input_tokens"`
				Output      int64   `json:"output_tokens"`
				CacheRead   int64   `json:"cache_read_tokens"`
				Cache5m     int64   `json:"cache_creation_5m_tokens"`
				Cache30m    int64   `json:"cache_creation_30m_tokens"`
				Cache1h     int64   `json:"cache_creation_1h_tokens"`
				ImageOutput int64   `json:"image_output_tokens"`
				Tier        *string `json:"service_tier"`
			} `json:"expected"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("the real-wire corpus: %v", err)
		}
		if row.Dialect != dialect || row.Status != http.StatusOK {
			continue
		}
		e := row.Expected
		a := WireAnswer{Stream: row.Stream, Body: []byte(row.ResponseBody), Header: http.Header{},
			Want: usage.Usage{Input: e.Input, Output: e.Output, CacheRead: e.CacheRead, CacheCreation5m: e.Cache5m,
				CacheCreation30m: e.Cache30m, CacheCreation1h: e.Cache1h, ImageOutput: e.ImageOutput}}
		if e.Tier != nil {
			a.Want.ReportedTier = strings.ToLower(*e.Tier)
		}
		for k, v := range row.Headers {
			a.Header.Set(k, v)
		}
		if row.Stream {
			streams = append(streams, a)
		} else {
			bodies = append(bodies, a)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("the real-wire corpus: %v", err)
	}
	if len(streams) == 0 || len(bodies) == 0 {
		t.Fatalf("%d %s streams and %d bodies in the corpus, want some of each", len(streams), dialect, len(bodies))
	}
	return streams, bodies
}

// BodiesAndUsage splits answers into their bodies and the usage each must bill, index by index.
func BodiesAndUsage(answers []WireAnswer) (bodies [][]byte, want []usage.Usage) {
	for _, a := range answers {
		bodies, want = append(bodies, a.Body), append(want, a.Want)
	}
	return bodies, want
}
