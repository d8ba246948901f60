package reconcile

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fuzzImport serves body for every admin page and checks what an importer accepts: an error, or a report
// whose rows are days of the window with non-negative counts and costs.
func fuzzImport(t *testing.T, imp Importer, from time.Time) {
	rep, err := imp.Import(context.Background(), from, from.Add(Day))
	if err != nil {
		return
	}
	for _, u := range rep.Usage {
		if !u.Day.Equal(from) || u.Requests < 0 {
			t.Fatalf("accepted row %+v", u)
		}
		for _, c := range u.Tokens.Categories() {
			if c.Value < 0 {
				t.Fatalf("accepted negative %s: %+v", c.Name, u)
			}
		}
	}
	for _, c := range rep.Costs {
		if !c.Day.Equal(from) || c.Cost == nil {
			t.Fatalf("accepted cost row %+v", c)
		}
	}
}

// pageTransport answers each endpoint's first page with body and any further page with an empty last one,
// in memory (a fuzz loop would spend its time in loopback sockets).
type pageTransport struct {
	body string
	mu   sync.Mutex
	seen map[string]bool
}

func (p *pageTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	first := !p.seen[r.URL.Path]
	p.seen[r.URL.Path] = true
	p.mu.Unlock()
	body := `{"data":[],"has_more":false}`
	if first {
		body = p.body
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

func fuzzFetcher(body string) *Fetcher {
	return &Fetcher{Attempts: 1, Client: &http.Client{Transport: &pageTransport{body: body, seen: map[string]bool{}}}}
}

var fuzzDay = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)

func FuzzOpenAIPage(f *testing.F) {
	f.Add(`{"object":"page","data":[{"object":"bucket","start_time":1796515200,"end_time":1796601600,"results":[{"object":"organization.usage.completions.result","input_tokens":10,"input_cached_tokens":4,"output_tokens":3,"num_model_requests":1,"project_id":"p","api_key_id":"k","model":"m","service_tier":"default","line_item":"m, input","amount":{"value":1.5e-5,"currency":"usd"}}]}],"has_more":false,"next_page":null}`)
	f.Add(`{"data":[{"start_time":1796515200,"results":[{"input_tokens":1,"input_cached_tokens":-5}]}],"has_more":false}`)
	f.Add(`{"data":[],"has_more":true,"next_page":""}`)
	f.Fuzz(func(t *testing.T, body string) {
		fuzzImport(t, &OpenAI{BaseURL: "http://provider.test", AdminKey: "k", Fetcher: fuzzFetcher(body)}, fuzzDay)
	})
}

func FuzzAnthropicPage(f *testing.F) {
	f.Add(`{"data":[{"starting_at":"2026-12-06T00:00:00Z","ending_at":"2026-12-07T00:00:00Z","results":[{"uncached_input_tokens":5,"cache_read_input_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":2,"ephemeral_1h_input_tokens":0},"output_tokens":3,"api_key_id":"k","workspace_id":"w","model":"m","service_tier":"standard","amount":"12.5","currency":"USD"}]}],"has_more":false,"next_page":null}`)
	f.Add(`{"data":[{"starting_at":"2026-12-06T00:00:00Z","results":[{"output_tokens":-1,"amount":"-3","currency":"USD"}]}],"has_more":false}`)
	f.Fuzz(func(t *testing.T, body string) {
		fuzzImport(t, &Anthropic{BaseURL: "http://provider.test", AdminKey: "k", Fetcher: fuzzFetcher(body)}, fuzzDay)
	})
}
