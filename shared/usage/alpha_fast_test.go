package usage

import (
	"testing"
)

// alphaBodies are alpha response bodies, ordinary and odd, for comparing the two decoders.
var alphaBodies = []string{
	`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"one two three four five six seven eight"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":0}},"service_tier":"default"}`,
	`{"object":"response","status":"completed","service_tier":"flex","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":60,"cache_write_tokens":10},"output_tokens":7,"output_tokens_details":{"image_tokens":3},"total_tokens":107,"speed":"fast"}}`,
	`{"data":[{"b64_json":"AAAA"}],"usage":{"input_tokens":"50","output_tokens":4160.0}}`,
	`{"object":"list","data":[{"embedding":[0.1,0.2]}],"usage":{"prompt_tokens":8,"total_tokens":8}}`,
	`{"results":[{"index":0,"relevance_score":0.9}],"usage":{"total_tokens":33}}`,
	`{"choices":[]}`, `{}`, ` { "usage" : null , "service_tier" : null } `, `{"usage":{}}`,
	`{"usage":{"prompt_tokens":-5,"completion_tokens":null}}`,
	`{"usage":{"prompt_tokens":"x"}}`, `{"usage":12}`, `{"usage":"none"}`, `{"usage":[1]}`,
	`{"Usage":{"prompt_tokens":3}}`, `{"USAGE":{"prompt_tokens":3},"Service_Tier":"flex"}`,
	`{"us\u0061ge":{"prompt_tokens":3}}`, `{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`,
	`{"service_tier":"a","service_tier":"scale"}`, `{"service_tier":5,"usage":{"prompt_tokens":1}}`,
	`{"service_tier":"\u0066lex","usage":{"prompt_tokens":1}}`, `{"choices":[{"message":{"usage":{"prompt_tokens":9}}}]}`,
	`[{"usage":{"prompt_tokens":1}}]`, `"usage"`, ``, `{"usage":{"prompt_tokens":1}`, `{"usage":{"prompt_tokens":1}} x`,
	`{"a":tru,"usage":{"prompt_tokens":1}}`, `{"usage":{"prompt_tokens":1e3}}`, `{"usage":{"prompt_tokens":12.5}}`,
	`{"usage":{"Prompt_Tokens":3}}`, `{"usage":{"prompt_tokens":3,"prompt_tokens":null}}`, `{"usage":{"pr\u006fmpt_tokens":3}}`,
	`{"usage":{"prompt_tokens_details":null,"completion_tokens_details":{"image_tokens":2,"audio_tokens":1}}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":{"cache_write_tokens":2}}}`,
	`{"usage":{"prompt_tokens_details":{"Cached_Tokens":1}}}`, `{"usage":{"prompt_tokens_details":[1]}}`,
	`{"usage":{"output_tokens_details":{"image_tokens":"7","IMAGE_TOKENS":1}}}`, `{"usage":{"input_tokens_details":5}}`,
	`{"usage":{"service_tier":"priority","speed":"fast","total_tokens":"9"}}`, `{"usage":{"speed":{"x":1}}}`,
	`{"usage":{"prompt_tokens":{"a":1}}}`, `{"usage":{"completion_tokens":[1]}}`, `{"usage":{"total_tokens":true}}`,
	`{"id":"chatcmpl-3abf8fad63dbbd24","object":"chat.completion","created":1760000000,"model":"m-1","service_tier":"default","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant","content":"Amet consectetur adipiscing elit sed do eiusmod tempor.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":16,"completion_tokens":8,"total_tokens":24,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
}

// TestDecodeAlphaFastAgrees: whenever the fast decoder answers, it answers exactly what encoding/json
// over the whole body answers.
func TestDecodeAlphaFastAgrees(t *testing.T) {
	for _, b := range alphaBodies {
		full, fullFound, err := decodeAlphaFull([]byte(b), "t")
		fast, fastFound, ok := decodeAlphaFast([]byte(b))
		if !ok {
			continue
		}
		if err != nil {
			t.Errorf("%s: fast path answered, full path failed: %v", b, err)
			continue
		}
		if fast != full || fastFound != fullFound {
			t.Errorf("%s: fast %+v %v, full %+v %v", b, fast, fastFound, full, fullFound)
		}
	}
	// The ordinary bodies must take the fast path.
	for _, b := range append(alphaBodies[:5:5], alphaBodies[len(alphaBodies)-1]) {
		if _, _, ok := decodeAlphaFast([]byte(b)); !ok {
			t.Errorf("%s: not decoded by the fast path", b)
		}
	}
}

func FuzzDecodeAlphaFastAgrees(f *testing.F) {
	for _, b := range alphaBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		full, fullFound, err := decodeAlphaFull(b, "t")
		fast, fastFound, ok := decodeAlphaFast(b)
		if ok && (err != nil || fast != full || fastFound != fullFound) {
			t.Fatalf("%q: fast %+v %v, full %+v %v %v", b, fast, fastFound, full, fullFound, err)
		}
	})
}
