package jsonkit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseRequest(t *testing.T) {
	ok := []struct {
		body string
		want Request
	}{
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true},"service_tier":"flex","speed":"fast","serviceTier":"x"}`,
			Request{Model: [2]int{9, 12}, HasModel: true, Stream: true, IncludeUsage: true, ServiceTier: "flex", Speed: "fast", ServiceTierCamel: "x",
				StreamOptions: [2]int{44, 66}, HasStreamOptions: true, IncludeUsageAt: [2]int{61, 65}, HasIncludeUsage: true}},
		{` { "mod\u0065l" : "m" , "str\u0065am":false}`, Request{Model: [2]int{18, 21}, HasModel: true}},
		{`{"model":null,"stream":null,"stream_options":null,"speed":null}`, Request{StreamOptions: [2]int{45, 49}, HasStreamOptions: true}},
		{`{"service_tier":"pri\u006frity","x":{"model":1,"model2":[{"stream":"no"}]}}`, Request{ServiceTier: "priority"}},
		{`{"messages":[{"Role":"user","role":"user"}]}`, Request{}}, // case variants outside decision objects are the decoders' business
		{`{}`, Request{}},
	}
	for _, tt := range ok {
		got, err := ParseRequest([]byte(tt.body))
		if err != nil || got != tt.want {
			t.Errorf("ParseRequest(%s) = %+v, %v; want %+v", tt.body, got, err, tt.want)
		}
	}
	bad := map[string]string{
		`{"model":"a","model":"b"}`:                 "duplicate",
		`{"model":"a","mod\u0065l":"b"}`:            "duplicate",
		`{"x":{"a":1,"a":2}}`:                       "duplicate",
		`{"Model":"a"}`:                             "letter case",
		`{"model":"a","\u017ftream":true}`:          "letter case",
		`{"stream_options":{"INCLUDE_USAGE":true}}`: "letter case",
		`{"stream":"true"}`:                         "stream must be",
		`{"stream_options":{"include_usage":1}}`:    "include_usage must be",
		`{"stream_options":[]}`:                     "stream_options must be",
		`{"model":["a"]}`:                           "model must be",
		`{"speed":1}`:                               "speed must be",
		`[]`:                                        "JSON object",
		``:                                          "JSON object",
		`{"a":1} x`:                                 "not valid JSON",
		`{"a":1}{}`:                                 "not valid JSON",
		`{"a":tru}`:                                 "not valid JSON",
		`{"a":01}`:                                  "not valid JSON",
		`{"a":.5}`:                                  "not valid JSON",
		`{"a":"` + "\xff" + `"}`:                    "not valid JSON",
		`{"a":"\udc00"}`:                            "not valid JSON",
		`{"a":1,}`:                                  "not valid JSON",
		`{"a":"` + "\x01" + `"}`:                    "not valid JSON",
		`{"a":1` + strings.Repeat(" ", 3):           "not valid JSON",
		`{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`: "not valid JSON",
	}
	for body, want := range bad {
		_, err := ParseRequest([]byte(body))
		var be *BodyError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRequest(%.60s) = %v, want a BodyError containing %q", body, err, want)
		}
	}
}

// FuzzParseRequest: an accepted body is one JSON object to encoding/json too, and the gateway's reading of
// every decision member equals a last-key-wins decoder's.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m","stream":true,"stream_options":{"include_usage":true},"service_tier":"flex"}`,
		`{"model":"a","model":"b"}`, `{"mod\u0065l":"m"}`, `{"Stream":true}`, `{"stream":1}`, `[]`, `{"a":1} x`, `{"speed":"f\u0061st"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseRequest(body)
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("accepted %q, encoding/json: %v", body, err)
		}
		if req.HasModel {
			var model string
			if json.Unmarshal(body[req.Model[0]:req.Model[1]], &model) != nil || m["model"] != model {
				t.Fatalf("model range %q, decoder %v", body[req.Model[0]:req.Model[1]], m["model"])
			}
		} else if m["model"] != nil {
			t.Fatalf("no model read, decoder %v", m["model"])
		}
		so, _ := m["stream_options"].(map[string]any)
		if (m["stream"] == true) != req.Stream || (so["include_usage"] == true) != req.IncludeUsage {
			t.Fatalf("stream %v/%v include_usage %v/%v", req.Stream, m["stream"], req.IncludeUsage, so["include_usage"])
		}
		s := func(v any) string { x, _ := v.(string); return x }
		if s(m["speed"]) != req.Speed || s(m["service_tier"]) != req.ServiceTier || s(m["serviceTier"]) != req.ServiceTierCamel {
			t.Fatalf("tiers %+v, decoder %v", req, m)
		}
	})
}

// benchBody is a 10 KB chat request: a few messages with text, the usual decision members at the end.
func benchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"chat","messages":[`)
	for i := 0; b.Len() < 10<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"` + strings.Repeat("lorem ipsum dolor sit amet ", 12) + `\n\"quoted\" caf\u00e9"}`)
	}
	b.WriteString(`],"temperature":0.7,"max_tokens":1024,"stream":true,"stream_options":{"include_usage":true},"service_tier":"flex"}`)
	return []byte(b.String())
}

// BenchmarkParseRequest10KB is what reading a 10 KB body's decision members costs with full validation
// (docs/benchmarks.md "Request path"); BenchmarkOldScans10KB is what the code before it did for the same
// decisions — TopLevelField for "stream", "model" and "stream_options" (first match wins, nothing
// validated) and one member pass for the tier fields — for the ratio.
func BenchmarkParseRequest10KB(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if r, err := ParseRequest(body); err != nil || !r.Stream {
			b.Fatal(r, err)
		}
	}
}

// TestAppendForwarded: asking for usage edits the fewest bytes in each shape of stream_options, renaming
// replaces the model value only, and every other byte is kept.
func TestAppendForwarded(t *testing.T) {
	tests := []struct {
		body, model   string
		rename, usage bool
		want          string
	}{
		{` {"model":"a","x":1}`, "b", true, false, ` {"model":"b","x":1}`},
		{`{"model":"a"}`, "b\n\"", true, false, `{"model":"b\n\""}`},
		{`{"model":"a"}`, "b", false, true, `{"stream_options":{"include_usage":true},"model":"a"}`},
		{` { }`, "b", true, true, ` {"stream_options":{"include_usage":true} }`},
		{`{"stream_options":null,"model":"a"}`, "b", true, true, `{"stream_options":{"include_usage":true},"model":"b"}`},
		{`{"model":"a","stream_options":{ }}`, "b", true, true, `{"model":"b","stream_options":{"include_usage":true }}`},
		{`{"stream_options":{"x":1},"model":"a"}`, "b", true, true, `{"stream_options":{"include_usage":true,"x":1},"model":"b"}`},
		{`{"stream_options":{"include_usage":false},"model":"a"}`, "b", true, true, `{"stream_options":{"include_usage":true},"model":"b"}`},
		{`{"stream_options":{"include_usage":true},"model":"a"}`, "a", false, true, `{"stream_options":{"include_usage":true},"model":"a"}`},
	}
	for _, tt := range tests {
		req, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Fatalf("ParseRequest(%s): %v", tt.body, err)
		}
		if got := string(req.AppendForwarded([]byte("old"), []byte(tt.body), tt.model, tt.rename, tt.usage)); got != tt.want {
			t.Errorf("AppendForwarded(%s, %q, %v, %v) = %s, want %s", tt.body, tt.model, tt.rename, tt.usage, got, tt.want)
		}
	}
}
