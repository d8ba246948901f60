package proxy

import (
	"encoding/json"
	"flag"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/tollgate/tollgate/dataplane/translate"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestAmbiguousBodiesRefused: a body whose decision fields (model, stream, stream_options.include_usage,
// the tier fields) a last-key-wins or case-insensitive upstream could read differently from the gateway is
// refused with a 400 in the caller's dialect, and nothing reaches the upstream or is recorded.
func TestAmbiguousBodiesRefused(t *testing.T) {
	var calls atomic.Int32
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"chat.completion","usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	})
	for name, body := range map[string]string{
		"duplicate model":              `{"model":"chat","model":"other","messages":[]}`,
		"duplicate stream":             `{"model":"chat","stream":false,"stream":true,"messages":[]}`,
		"escaped duplicate model":      `{"model":"chat","mod\u0065l":"other","messages":[]}`,
		"case variant stream":          `{"model":"chat","Stream":true,"messages":[]}`,
		"case variant model":           `{"model":"chat","MODEL":"other","messages":[]}`,
		"long s stream":                `{"model":"chat","\u017ftream":true,"messages":[]}`,
		"duplicate tier":               `{"model":"chat","service_tier":"auto","service_tier":"priority","messages":[]}`,
		"nested duplicate":             `{"model":"chat","stream":true,"stream_options":{"include_usage":false,"include_usage":true},"messages":[]}`,
		"nested case variant":          `{"model":"chat","stream":true,"stream_options":{"Include_Usage":true},"messages":[]}`,
		"duplicate deep in messages":   `{"model":"chat","messages":[{"role":"user","content":"a","content":"b"}]}`,
		"invalid utf-8":                "{\"model\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
		"array body":                   `[{"model":"chat","messages":[]}]`,
		"trailing garbage":             `{"model":"chat","messages":[]} {"model":"other"}`,
		"stream as string":             `{"model":"chat","stream":"true","messages":[]}`,
		"stream as number":             `{"model":"chat","stream":1,"messages":[]}`,
		"bad literal":                  `{"model":"chat","stream":tru,"messages":[]}`,
		"leading zero number":          `{"model":"chat","max_tokens":01,"messages":[]}`,
		"model as number":              `{"model":7,"messages":[]}`,
		"stream_options as string":     `{"model":"chat","stream":true,"stream_options":"x","messages":[]}`,
		"tier as object":               `{"model":"chat","service_tier":{"x":1},"messages":[]}`,
		"lone surrogate escape in key": `{"model":"chat","\ud800":1,"messages":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			before, recs := calls.Load(), len(b.rec.recs)
			rec := b.post(t, body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), `"invalid_request_error"`) {
				t.Errorf("answer not in the alpha dialect: %s", rec.Body)
			}
			if calls.Load() != before || len(b.rec.recs) != recs {
				t.Errorf("refused body reached the upstream or was recorded")
			}
		})
	}
}

// TestEscapedDecisionKeysRead: a decision key written with JSON escapes is read with its decoded name, as
// every JSON decoder upstream reads it.
func TestEscapedDecisionKeysRead(t *testing.T) {
	var seen atomic.Value
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		buf := new(strings.Builder)
		_, _ = io.Copy(buf, r.Body)
		seen.Store(buf.String())
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n"))
	})
	rec := b.post(t, `{"mod\u0065l":"chat","str\u0065am":true,"messages":[]}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got := seen.Load().(string); got != `{"stream_options":{"include_usage":true},"mod\u0065l":"m-1","str\u0065am":true,"messages":[]}` {
		t.Errorf("upstream body %s", got)
	}
	if len(b.rec.recs) != 1 || b.rec.recs[0].GetOperation() != "stream_generate_content" || b.rec.recs[0].GetTokens().GetOutput() != 4 {
		t.Fatalf("records %v", b.rec.recs)
	}
}

// exactReading is what a last-key-wins decoder with exact member names (Python's json, JavaScript's
// JSON.parse, encoding/json into a map) reads from a body.
func exactReading(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("forwarded body %q is not a JSON object to encoding/json: %v", body, err)
	}
	return m
}

// foldedReading is what Go's encoding/json reads into a struct: last key wins, names matched ignoring case.
type foldedReading struct {
	Model         *string `json:"model"`
	Stream        *bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Speed            *string `json:"speed"`
	ServiceTier      *string `json:"service_tier"`
	ServiceTierCamel *string `json:"serviceTier"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// decisionSeeds are bodies the gateway once read differently from upstreams, and ordinary ones.
var decisionSeeds = []string{
	`{"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"service_tier":"flex"}`,
	`{"model":"chat","model":"other"}`, `{"model":"chat","stream":false,"stream":true}`, `{"mod\u0065l":"x","model":"chat"}`,
	`{"model":"chat","Stream":true}`, `{"model":"chat","\u017ftream":true}`, `{"model":"chat","MODEL":"o"}`,
	`{"model":"chat","stream":true,"stream_options":{"include_usage":false,"Include_usage":true}}`,
	`{"model":"chat","service_tier":"auto","service_t\u0069er":"priority"}`, `{"model":"chat","speed":"fast","SPEED":"slow"}`,
	`{"model":"chat","serviceTier":"flex","servicetier":"priority"}`, `{"model":"chat","stream":"true"}`, `{"model":"chat","stream":1}`,
	`{"model":"chat"} {"model":"other"}`, `[{"model":"chat"}]`, "{\"model\":\"chat\",\"x\":\"\xff\"}", `{"model":"chat","x":"\ud800"}`,
	`{"model":"chat","max_tokens":1e3}`, `{"model":"chat","max_tokens":01}`, `{"model":"c\u0068at"}`, `{"model":null,"stream":null}`,
	`{"model":"chat","stream_options":null,"speed":null}`, ` {"stream" : true , "model" : "chat" } `,
	`{"model":"chat","stream":true,"stream_options":{}}`, `{"model":"chat","stream":true,"stream_options":{ "x" : 1 }}`,
	`{"model":"chat","stream":true,"stream_options":{"include_usage":null}}`, `{"stream_options":{"include_usage":false},"model":"chat"}`,
	"{\t\"model\":\"chat\"}", `{"stream_options" : null , "model":"chat"}`,
}

// FuzzGatewayReadsWhatUpstreamReads is the differential proof of issue 13 item 1: for any body the gateway
// accepts, what it decided on (model, stream, include_usage, the requested tier) equals what a last-key-wins
// decoder — exact names, and Go's case-folding struct decoding — reads from the bytes sent upstream: the
// patched body on a passthrough cell, the translator's body on a transform_to cell.
func FuzzGatewayReadsWhatUpstreamReads(f *testing.F) {
	for _, s := range decisionSeeds {
		f.Add([]byte(s), "m-1")
	}
	f.Add([]byte(`{"model":"chat"}`), "q\"uote\\ü")
	// transform_to pairs (client kind → destination kind); the operations follow the client's stream flag.
	pairs := [][2]vocab.Kind{
		{vocab.KindAlphaChatCompletions, vocab.KindBetaMessages}, {vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses},
		{vocab.KindBetaMessages, vocab.KindAlphaChatCompletions}, {vocab.KindAlphaResponses, vocab.KindAlphaChatCompletions},
	}
	var translated atomic.Int64
	f.Cleanup(func() {
		// Checked on the seed corpus run (go test); a -fuzz run counts in its worker processes.
		if fz := flag.Lookup("test.fuzz"); (fz == nil || fz.Value.String() == "") && translated.Load() == 0 {
			f.Error("no body reached a translator: the transform_to half of the proof did not run")
		}
	})
	f.Fuzz(func(t *testing.T, body []byte, upstreamModel string) {
		req, err := jsonkit.ParseRequest(body)
		if err != nil {
			return // refused with a 400: nothing is forwarded
		}
		model, err := bodyModel(body, req)
		if err != nil {
			return // refused: no usable model
		}
		class := Class{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaChatCompletions, ModelInBody: true}.WithStream(req.Stream)
		tier := tierOf(req)
		if admitted := requestedTier(body); admitted != tier {
			t.Fatalf("admission reads tier %q, settlement %q", admitted, tier)
		}

		// The gateway's own reading agrees with the decoders on the client's body.
		in := exactReading(t, body)
		if in["model"] != model {
			t.Fatalf("gateway model %q, decoder %v", model, in["model"])
		}

		// Passthrough: the patched body.
		out := req.AppendForwarded(nil, body, upstreamModel, true, false)
		m := exactReading(t, out)
		var want string
		_ = json.Unmarshal(jsonkit.AppendString(nil, upstreamModel), &want)
		if m["model"] != want {
			t.Fatalf("upstream reads model %v, gateway sent %q", m["model"], want)
		}
		if (m["stream"] == true) != class.Stream {
			t.Fatalf("upstream reads stream %v, gateway decided %v", m["stream"], class.Stream)
		}
		so, _ := m["stream_options"].(map[string]any)
		if (so["include_usage"] == true) != req.IncludeUsage {
			t.Fatalf("upstream reads include_usage %v, gateway %v", so["include_usage"], req.IncludeUsage)
		}
		exactTier := tierOf(jsonkit.Request{Speed: strOf(m["speed"]), ServiceTier: strOf(m["service_tier"]), ServiceTierCamel: strOf(m["serviceTier"])})
		if exactTier != tier {
			t.Fatalf("upstream reads tier %q, gateway priced %q", exactTier, tier)
		}
		var fr foldedReading
		if err := json.Unmarshal(out, &fr); err != nil {
			t.Fatalf("Go struct decoding refuses a body the gateway forwarded: %v", err)
		}
		if str(fr.Model) != want || (fr.Stream != nil && *fr.Stream) != class.Stream ||
			(fr.StreamOptions != nil && fr.StreamOptions.IncludeUsage != nil && *fr.StreamOptions.IncludeUsage) != req.IncludeUsage ||
			tierOf(jsonkit.Request{Speed: str(fr.Speed), ServiceTier: str(fr.ServiceTier), ServiceTierCamel: str(fr.ServiceTierCamel)}) != tier {
			t.Fatalf("case-folding decoder reads %+v; gateway decided model %q stream %v include_usage %v tier %q",
				fr, want, class.Stream, req.IncludeUsage, tier)
		}

		// Passthrough of an alpha chat stream: the body also asks for usage (AppendForwarded). The upstream reads
		// include_usage true and everything else as the client sent it; Go's folding decoder agrees.
		asked := req.AppendForwarded(nil, body, upstreamModel, true, true)
		am := exactReading(t, asked)
		aso, _ := am["stream_options"].(map[string]any)
		if aso["include_usage"] != true {
			t.Fatalf("upstream reads include_usage %v from %s", aso["include_usage"], asked)
		}
		for k, v := range m {
			if k == "stream_options" {
				continue
			}
			if !reflect.DeepEqual(am[k], v) {
				t.Fatalf("member %q reads %v after asking for usage, %v before", k, am[k], v)
			}
		}
		if len(am) != len(m) && !(len(am) == len(m)+1 && m["stream_options"] == nil) {
			t.Fatalf("asking for usage changed the members: %v -> %v", m, am)
		}
		for k, v := range so {
			if k != "include_usage" && !reflect.DeepEqual(aso[k], v) {
				t.Fatalf("stream_options.%s reads %v after asking for usage, %v before", k, aso[k], v)
			}
		}
		var afr foldedReading
		if err := json.Unmarshal(asked, &afr); err != nil {
			t.Fatalf("Go struct decoding refuses a body asking for usage: %v", err)
		}
		if str(afr.Model) != want || (afr.Stream != nil && *afr.Stream) != class.Stream || afr.StreamOptions == nil ||
			afr.StreamOptions.IncludeUsage == nil || !*afr.StreamOptions.IncludeUsage {
			t.Fatalf("case-folding decoder reads %+v from %s", afr, asked)
		}
		if again, err := jsonkit.ParseRequest(asked); err != nil || !again.IncludeUsage {
			t.Fatalf("the gateway refuses or misreads its own edit %s: %v", asked, err)
		}

		// transform_to: the translator's body names the upstream model the gateway priced and permitted.
		if upstreamModel == "" || !utf8.ValidString(upstreamModel) {
			return
		}
		for _, kinds := range pairs {
			p := translate.Pair{Op: class.Op, Kind: kinds[0], DestOp: class.Op, DestKind: kinds[1]}
			tr, err := translate.New(p, translate.Options{})
			if err != nil {
				continue // no such translation (e.g. identity without a stream to synthesise)
			}
			up, err := tr.Request(translate.ClientRequest{Body: body, Model: upstreamModel, Stream: class.Stream})
			if err != nil {
				continue // refused by the translator: a 400, nothing forwarded
			}
			translated.Add(1)
			um := exactReading(t, up.Body)
			if um["model"] != upstreamModel {
				t.Fatalf("%s: upstream reads model %v, gateway chose %q", p, um["model"], upstreamModel)
			}
			if (um["stream"] == true) != class.Stream {
				t.Fatalf("%s: upstream reads stream %v, gateway decided %v", p, um["stream"], class.Stream)
			}
		}
	})
}

func strOf(v any) string { s, _ := v.(string); return s }
