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

// Interaction is one line of ../shared/wire/realwire.jsonl (its README describes the fields): a request
// recorded against a real provider, the provider's answer, and the usage the answer must bill.
type Interaction struct {
	ID           string            `json:"id"`
	Dialect      string            `json:"dialect"`
	Stream       bool              `json:"stream"`
	Request      json.RawMessage   `json:"request"`
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

// Usage is the usage the answer must bill: its token categories and, when the corpus gives one, its served
// tier lower-cased as recorded.
func (x *Interaction) Usage() usage.Usage {
	e := x.Expected
	u := usage.Usage{Input: e.Input, Output: e.Output, CacheRead: e.CacheRead, CacheCreation5m: e.Cache5m,
		CacheCreation30m: e.Cache30m, CacheCreation1h: e.Cache1h, ImageOutput: e.ImageOutput}
	if e.Tier != nil {
		u.ReportedTier = strings.ToLower(*e.Tier)
	}
	return u
}

// Corpus reads every interaction of the recorded provider traffic; a missing or unreadable corpus fails the
// test.
func Corpus(t testing.TB) []*Interaction {
	t.Helper()
	path := Shared(t, "wire", "realwire.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the real-wire corpus: %v", err)
	}
	defer f.Close()
	var out []*Interaction
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		x := &Interaction{}
		if err := json.Unmarshal(sc.Bytes(), x); err != nil {
			t.Fatalf("%s line %d: %v", path, len(out)+1, err)
		}
		out = append(out, x)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("the real-wire corpus: %v", err)
	}
	return out
}

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
	for _, x := range Corpus(t) {
		if x.Dialect != dialect || x.Status != http.StatusOK {
			continue
		}
		a := WireAnswer{Stream: x.Stream, Body: []byte(x.ResponseBody), Header: http.Header{}, Want: x.Usage()}
		for k, v := range x.Headers {
			a.Header.Set(k, v)
		}
		if x.Stream {
			streams = append(streams, a)
		} else {
			bodies = append(bodies, a)
		}
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
