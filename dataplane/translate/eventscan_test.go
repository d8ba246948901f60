package translate

import (
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
)

// eventScanSeeds are upstream events the fast paths read, and near variants that must go to the general
// decoder (escapes, other case, duplicates, unknown members, nulls, invalid UTF-8, numbers out of shape).
var eventScanSeeds = []string{
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tok1 "}}`,
	`{ "type" : "content_block_delta" , "index" : 3 , "delta" : { "type" : "thinking_delta" , "thinking" : "a\nb\"c\u00e9\ud83d\ude00" } }`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"k\":"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"s"}}`,
	`{"type":"content_block_delta","Index":1,"delta":{"type":"text_delta","text":"x"}}`,
	`{"type":"content_block_delta","index":1,"index":2,"delta":{"type":"text_delta","text":"x"}}`,
	`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}`,
	`{"type":"content_block_delta","index":1.5,"delta":{"type":"text_delta","text":"x"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\xff"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\ud800"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":null}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}} x`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}`,
	`{"type":"message_stop"}`,
	`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"tok ","logprobs":[],"obfuscation":"ab"}`,
	`{"type":"response.function_call_arguments.delta","output_index":2,"delta":"{\"a\""}`,
	`{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":0,"delta":"r"}`,
	`{"type":"response.output_text.delta","output_index":0,"delta":"x","logprobs":[{"token":"x"}]}`,
	`{"type":"response.output_text.delta","output_index":0,"Delta":"x"}`,
	`{"delta":"x","output_index":0}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732752000,"model":"m","system_fingerprint":null,"service_tier":"default","choices":[{"index":0,"delta":{"role":"assistant","content":"tok "},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x"}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"think","content":null,"refusal":"no"},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":1,"delta":{"content":"x"}}]}`,
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":"x"}},{"index":0,"delta":{"content":"y"}}]}`,
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`,
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`,
	`{"id":"chatcmpl-1","model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	`{"id":"chat\u0063mpl","model":"m","choices":[{"index":0,"delta":{"content":"x"}}]}`,
	`{"error":{"message":"boom"}}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"tok1 "}]},"index":0}],"usageMetadata":{"promptTokenCount":10,"totalTokenCount":10},"modelVersion":"g","responseId":"r"}`,
	`{"candidates": [{"content": {"parts": [{"text": "think \"x\"", "thought": true}], "role": "model"}, "index": 0}], "usageMetadata": {"promptTokenCount": 3, "thoughtsTokenCount": 7, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 3}]}, "modelVersion": "g", "responseId": "r", "createTime": "2026-11-28T00:00:00Z"}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"index":0}],"usageMetadata":null}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"finishReason":"STOP","index":0}]}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"x"},{"text":"y"}]},"index":0}]}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"x","thoughtSignature":"s"}]},"index":0}]}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"index":0}],"usageMetadata":{"promptTokenCount":"x"}}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"index":0}],"usageMetadata":{"promptTokenCount":1}}}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},"index":0}]}`,
	`{"type":"content_block_stop","index":1}`,
	`{"type":"ping"}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"citations_delta","citation":{"cited_text":"x"}}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"a","Text":"b"}}`,
	`{"\u0074ype":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"esc name"}}`,
	`{"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}}`,
	`{"type":"response.function_call_arguments.done","output_index":1,"arguments":"{\"a\":1}"}`,
	`{"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
	`{"type":null,"output_index":0,"delta":"x"}`,
	`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"c","name":"f"}}`,
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"f","arguments":""}},{"index":2,"function":{"arguments":"{}"}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":null,"function":null}]}}]}`,
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[null]}}]}`,
	`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":1},"completion_tokens_details":{"reasoning_tokens":2}}}`,
	`{"id":"chatcmpl-1","choices":null,"usage":{"prompt_tokens":1,"prompt_tokens_details":null,"completion_tokens_details":{"Reasoning_Tokens":2}}}`,
	`{"id":"chatcmpl-1","model":"m","service_tier":null,"error":null,"choices":[{"index":0,"delta":null,"finish_reason":"length"}]}`,
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":"x","Content":"y"}}]}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"c1","name":"f","args":{ "k" : [1, 2] }}},{"functionCall":{"name":"g","args":null}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15,"promptTokensDetails":[{"modality":"TEXT","tokenCount":7},{"modality":"IMAGE","tokenCount":3}]}}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"index":1,"finishReason":"STOP"},{"index":0,"content":{"parts":[{"text":"y","thought":true,"thoughtSignature":"sig"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":null,"thought":true,"thoughtSignature":"sig"},{"thoughtSignature":"s2"}]},"index":0}],"promptFeedback":null}`,
	`{"candidates":[],"promptFeedback":{"blockReason":"SAFETY"}}`,
	`{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]},"index":0}]}`,
	`{"candidates":[{"content":null,"finishReason":"MAX_TOKENS","index":0,"safetyRatings":[{"category":"x"}]}],"usageMetadata":{"promptTokenCount":1,"PromptTokenCount":2}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a","thin\u212aing":"b"}}`,
	"{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"a\",\"thin\u212aing\":\"b\"}}",
}

type scanDecoder interface {
	canon.StreamDecoder
	Fast(data []byte, out []canon.Event) ([]canon.Event, bool)
}

// slowOf is d's general decoder, which its fast path must agree with.
func slowOf(d scanDecoder) func([]byte, []canon.Event) ([]canon.Event, error) {
	switch d := d.(type) {
	case *beta.Decoder:
		return d.General
	case *alpha.RespDecoder:
		return func(b []byte, o []canon.Event) ([]canon.Event, error) { return d.General("", b, o) }
	case *alpha.ChatDecoder:
		return d.General
	case *gamma.Decoder:
		return d.General
	}
	panic("unknown decoder")
}

// checkEventScan: whenever a fast path reads an event, the general decoder reads the same events from it and
// leaves the decoder in the same state. It reports which decoders' fast paths read it: letters b (beta), r
// (alpha responses), c (alpha chat), g (gamma).
func checkEventScan(t *testing.T, data []byte) (fastRead string) {
	for i, mk := range []func() scanDecoder{
		func() scanDecoder { return &beta.Decoder{Signed: map[int]bool{}} },
		func() scanDecoder { return &alpha.RespDecoder{ArgsSeen: map[int]bool{}, Summary: map[int]int{}} },
		func() scanDecoder { return &alpha.ChatDecoder{} },
		func() scanDecoder { return &gamma.Decoder{Cur: -1} },
	} {
		fd, sd := mk(), mk()
		got, ok := fd.Fast(append([]byte(nil), data...), nil)
		if !ok {
			continue
		}
		fastRead += string("brcg"[i])
		want, err := slowOf(sd)(append([]byte(nil), data...), nil)
		if err != nil {
			t.Fatalf("%T read %q fast, the general decoder fails: %v", fd, data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%T %q:\nfast    %+v\ngeneral %+v", fd, data, got, want)
		}
		clearEv(fd)
		clearEv(sd)
		if !reflect.DeepEqual(fd, sd) {
			t.Fatalf("%T %q: state after the fast path %+v, after the general decoder %+v", fd, data, fd, sd)
		}
	}
	return fastRead
}

// clearEv forgets the reused event struct and scratch slices, which hold nothing between events.
func clearEv(d scanDecoder) {
	switch d := d.(type) {
	case *beta.Decoder:
		d.Ev = beta.StreamEvent{}
	case *alpha.RespDecoder:
		d.Ev = alpha.RespStreamEvent{}
	case *alpha.ChatDecoder:
		d.Ev, d.Calls = alpha.ChatChunk{}, nil
	case *gamma.Decoder:
		d.Ev, d.Items, d.Modalities = gamma.Response{}, nil, nil
	}
}

// TestEventScanMatchesDecoder: the fast paths read the shapes they handle with the general decoder's results
// and leave every variant they cannot decide to it. Every decoder tries every seed: a chat or gamma fast
// path also reads another dialect's event (its members are unknown to it, so skipped, as the general
// decoder skips them).
func TestEventScanMatchesDecoder(t *testing.T) {
	// which fast paths read each seed: b beta, r alpha responses, c alpha chat, g gamma (an alpha chat usage
	// chunk, like every event carrying usage but gamma's chunks, is left to the general decoder, which bills it)
	want := []string{
		"bcg", "bcg", "bcg", "bcg", "cg", "cg", "", "cg", "", "",
		"bcg", "", "", "brcg", "rcg", "rcg", "rcg", "rcg", "cg", "cg",
		"cg", "bcg", "bcg", "bg", "bcg", "bcg", "g", "bcg", "", "bcg",
		"bcg", "bcg", "bcg", "bcg", "bcg", "bc", "", "bcg", "brcg", "brcg",
		"bcg", "cg", "bcg", "brcg", "brcg", "brcg", "cg", "bcg", "bcg", "bcg",
		"bg", "g", "g", "cg", "bg", "bcg", "bcg", "bcg", "bc", "bc",
		"bc", "cg", "cg",
	}
	if len(want) != len(eventScanSeeds) {
		t.Fatalf("%d expectations for %d seeds", len(want), len(eventScanSeeds))
	}
	for i, s := range eventScanSeeds {
		if got := checkEventScan(t, []byte(s)); got != want[i] {
			t.Errorf("seed %d %s: read by the fast paths %q, want %q", i, s, got, want[i])
		}
	}
}

// FuzzEventScan: for any event, a fast path either declines or agrees with the general decoder.
func FuzzEventScan(f *testing.F) {
	for _, s := range eventScanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkEventScan(t, data) })
}
