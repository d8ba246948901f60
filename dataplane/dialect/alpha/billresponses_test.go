package alpha

import (
	"bytes"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// relayStreamBilled bills an SSE stream as the passthrough does: each event read by ReadResponsesRelay and,
// when the reader found usage members, by b.ObserveRelay.
func relayStreamBilled(b Billing, stream []byte) (usage.Usage, bool) {
	dec := sse.NewDecoder(bytes.NewReader(stream))
	var rel jsonkit.Relay
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		ReadResponsesRelay(ev.Data, &rel)
		if rel.HasUsage {
			b.ObserveRelay(&rel)
		}
	}
	return b.Usage()
}

// respDecoderBilled bills an SSE responses stream as a translated stream is billed: by the translator's
// decoder (canon.Biller), every event decoded once; a stream it cannot read stops after the refused event.
func respDecoderBilled(t *testing.T, stream []byte) (usage.Usage, bool) {
	d := Responses{}.NewDecoder(&canon.State{})
	b, ok := d.(canon.Biller)
	if !ok {
		t.Fatal("the responses stream decoder does not bill from its decoding (canon.Biller)")
	}
	dec := sse.NewDecoder(bytes.NewReader(stream))
	var out []canon.Event
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		var derr error
		if out, derr = d.Decode(ev.Name, bytes.TrimSpace(ev.Data), out[:0]); derr != nil {
			break
		}
	}
	u, found, _ := b.Billed()
	return u, found
}

// TestResponsesBillingOnRealWire checks every real alpha responses answer is billed what it must be: a
// stream by the relay billing (ResponsesBilling), a buffered answer by BillBody, whole and of the usage
// members jsonkit.BodyScanner keeps of it (the passthrough's reading of a buffered answer).
func TestResponsesBillingOnRealWire(t *testing.T) {
	streams, bodies := testkit.RealWire(t, "alpha_responses")
	for i, s := range streams {
		if got, found := relayStreamBilled(ResponsesBilling(), s.Body); !found || got != s.Want {
			t.Fatalf("stream %d: relay billing %+v found %v, want %+v\n%.2000s", i, got, found, s.Want, s.Body)
		}
		if got, found := respDecoderBilled(t, s.Body); !found || got != s.Want {
			t.Fatalf("stream %d: decoder bills %+v found %v, want %+v\n%.2000s", i, got, found, s.Want, s.Body)
		}
	}
	for i, b := range bodies {
		got, found, err := BillBody(vocab.KindAlphaResponses, vocab.OpGenerateContent, b.Body)
		if err != nil || !found || got != b.Want {
			t.Fatalf("body %d: BillBody %+v found %v err %v, want %+v\n%.2000s", i, got, found, err, b.Want, b.Body)
		}
		if r, err := (Responses{}).DecodeResponse(b.Body, &canon.State{}); err != nil || r.Billed == nil || *r.Billed != b.Want {
			t.Fatalf("body %d: the decoding bills %+v (err %v), want %+v", i, r, err, b.Want)
		}
		var sc jsonkit.BodyScanner
		_, _ = sc.Write(b.Body)
		if red := sc.Reduced(); red != nil {
			if got, found, err := BillBody(vocab.KindAlphaResponses, vocab.OpGenerateContent, red); err != nil || !found || got != b.Want {
				t.Fatalf("body %d: BillBody of the kept members %+v found %v err %v, want %+v", i, got, found, err, b.Want)
			}
		}
	}
}

// The responses stream bills the response object's usage and service_tier (a top-level usage is not a
// responses member); an image stream bills the events' top-level usage, its output tokens being image
// output unless image_tokens gives the subset.
func TestRelayResponsesAndImageBillingRules(t *testing.T) {
	resp := "event: response.created\ndata: " + `{"type":"response.created","response":{"id":"r","service_tier":"auto","usage":null}}` + "\n\n" +
		"event: response.output_text.delta\ndata: " + `{"type":"response.output_text.delta","delta":"hi","usage":{"input_tokens":999}}` + "\n\n" +
		"event: response.completed\ndata: " + `{"type":"response.completed","response":{"id":"r","service_tier":"flex","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],` +
		`"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":130}}}` + "\n\n"
	if got, found := relayStreamBilled(ResponsesBilling(), []byte(resp)); !found || got != (usage.Usage{Input: 60, CacheRead: 40, Output: 30, ReportedTier: "flex"}) {
		t.Errorf("responses stream: %+v found %v", got, found)
	}
	cut := resp[:bytes.Index([]byte(resp), []byte("event: response.completed"))]
	if got, found := relayStreamBilled(ResponsesBilling(), []byte(cut)); found || got != (usage.Usage{ReportedTier: "auto"}) {
		t.Errorf("responses stream cut before completed: %+v found %v, want the tier alone", got, found)
	}
	for _, tt := range []struct {
		name   string
		b      Billing
		events []string
		want   usage.Usage
	}{
		{"responses incomplete", ResponsesBilling(), []string{
			`{"type":"response.incomplete","response":{"status":"incomplete","service_tier":"flex","usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":512}}}`},
			usage.Usage{Input: 60, CacheRead: 40, Output: 512, ReportedTier: "flex"}},
		{"responses failed", ResponsesBilling(), []string{
			`{"type":"response.created","response":{"status":"in_progress","service_tier":"auto","usage":null}}`,
			`{"type":"response.failed","response":{"status":"failed","service_tier":"default","usage":{"input_tokens":100,"output_tokens":0}}}`},
			usage.Usage{Input: 100, ReportedTier: "default"}},
		{"image edit", ImageBilling(), []string{`{"type":"image_edit.partial_image","b64_json":"..."}`,
			`{"type":"image_edit.completed","usage":{"input_tokens":70,"output_tokens":1000,"output_tokens_details":{"image_tokens":900}}}`},
			usage.Usage{Input: 70, Output: 100, ImageOutput: 900}},
	} {
		var stream string
		for _, e := range tt.events {
			stream += "data: " + e + "\n\n"
		}
		if got, found := relayStreamBilled(tt.b, []byte(stream)); !found || got != tt.want {
			t.Errorf("%s: %+v found %v, want %+v", tt.name, got, found, tt.want)
		}
	}
	img := "event: image_generation.partial_image\ndata: " + `{"type":"image_generation.partial_image","b64_json":"AAAA"}` + "\n\n" +
		"event: image_generation.completed\ndata: " + `{"type":"image_generation.completed","b64_json":"AAAA","usage":{"input_tokens":50,"output_tokens":4160,"total_tokens":4210}}` + "\n\n"
	if got, found := relayStreamBilled(ImageBilling(), []byte(img)); !found || got != (usage.Usage{Input: 50, ImageOutput: 4160}) {
		t.Errorf("image stream: %+v found %v", got, found)
	}
	sub := bytes.Replace([]byte(img), []byte(`"total_tokens":4210`), []byte(`"output_tokens_details":{"image_tokens":4000}`), 1)
	if got, found := relayStreamBilled(ImageBilling(), sub); !found || got != (usage.Usage{Input: 50, Output: 160, ImageOutput: 4000}) {
		t.Errorf("image stream with image_tokens: %+v found %v", got, found)
	}
}

func TestBillBodyRules(t *testing.T) {
	tests := []struct {
		name  string
		kind  vocab.Kind
		op    vocab.Operation
		body  string
		want  usage.Usage
		found bool
	}{
		{"responses: cached and cache-written leave input", vocab.KindAlphaResponses, vocab.OpGenerateContent,
			`{"service_tier":"default","usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":500,"cache_write_tokens":300},"output_tokens":7}}`,
			usage.Usage{Input: 1200, CacheRead: 500, CacheCreation30m: 300, Output: 7, ReportedTier: "default"}, true},
		{"responses without usage", vocab.KindAlphaResponses, vocab.OpGenerateContent, `{"service_tier":"flex","output":[]}`, usage.Usage{ReportedTier: "flex"}, false},
		{"chat", vocab.KindAlphaChatCompletions, vocab.OpGenerateContent, `{"usage":{"prompt_tokens":3,"completion_tokens":2}}`, usage.Usage{Input: 3, Output: 2}, true},
		{"image: output is image output", vocab.KindAlpha, vocab.OpCreateImage,
			`{"data":[{"b64_json":"AAAA"}],"usage":{"input_tokens":50,"output_tokens":4160,"input_tokens_details":{"text_tokens":50}}}`,
			usage.Usage{Input: 50, ImageOutput: 4160}, true},
		{"image edit: the image_tokens subset", vocab.KindAlpha, vocab.OpEditImage,
			`{"usage":{"input_tokens":50,"output_tokens":4200,"output_tokens_details":{"image_tokens":4160}}}`,
			usage.Usage{Input: 50, Output: 40, ImageOutput: 4160}, true},
		{"image: a text subset stays output", vocab.KindAlpha, vocab.OpCreateImage,
			`{"usage":{"input_tokens":50,"output_tokens":4160,"output_tokens_details":{"text_tokens":160,"image_tokens":4000}}}`,
			usage.Usage{Input: 50, Output: 160, ImageOutput: 4000}, true},
		{"image without usage", vocab.KindAlpha, vocab.OpCreateImage, `{"data":[]}`, usage.Usage{}, false},
		{"embedding: prompt_tokens", vocab.KindAlpha, vocab.OpCreateEmbedding, `{"data":[],"usage":{"prompt_tokens":8,"total_tokens":9}}`, usage.Usage{Input: 8}, true},
		{"embedding: total_tokens without prompt_tokens", vocab.KindAlpha, vocab.OpCreateEmbedding, `{"usage":{"total_tokens":9}}`, usage.Usage{Input: 9}, true},
		{"embedding: input_tokens is the prompt", vocab.KindAlpha, vocab.OpCreateEmbedding, `{"usage":{"input_tokens":7,"total_tokens":9}}`, usage.Usage{Input: 7}, true},
		{"rerank: total_tokens first", vocab.KindAlpha, vocab.OpRerank, `{"results":[],"usage":{"prompt_tokens":5,"total_tokens":6}}`, usage.Usage{Input: 6}, true},
		{"rerank: prompt_tokens", vocab.KindAlpha, vocab.OpRerank, `{"usage":{"prompt_tokens":5}}`, usage.Usage{Input: 5}, true},
		{"rerank: search units only", vocab.KindAlpha, vocab.OpRerank, `{"usage":{"search_units":1}}`, usage.Usage{}, false},
		{"rerank: an empty usage object", vocab.KindAlpha, vocab.OpRerank, `{"usage":{}}`, usage.Usage{}, false},
		{"not billed: models", vocab.KindAlpha, vocab.OpListModels, `{"data":[]}`, usage.Usage{}, false},
	}
	for _, tt := range tests {
		got, found, err := BillBody(tt.kind, tt.op, []byte(tt.body))
		if err != nil || got != tt.want || found != tt.found {
			t.Errorf("%s: BillBody = %+v, %v, %v; want %+v, %v", tt.name, got, found, err, tt.want, tt.found)
		}
	}
	for _, op := range []vocab.Operation{vocab.OpCreateImage, vocab.OpCreateEmbedding, vocab.OpRerank} {
		if _, _, err := BillBody(vocab.KindAlpha, op, []byte(`{"usage":{"prompt_tokens":"x"}}`)); err == nil {
			t.Errorf("BillBody(%s) of a bad count = nil error, want one", op)
		}
	}
}
