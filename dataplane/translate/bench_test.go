package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/vocab"
)

// benchRequest builds a ~10 KB request of kind k: a system prompt, a tool, and 16 turns with a tool call.
func benchRequest(k vocab.Kind) []byte {
	para := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)
	var body any
	switch k {
	case vocab.KindAlphaChatCompletions:
		msgs := []any{map[string]any{"role": "system", "content": "You are terse."}}
		for i := range 16 {
			msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("%d %s", i, para)},
				map[string]any{"role": "assistant", "content": para, "tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]any{"name": "get_weather", "arguments": `{"city":"Oslo","days":3}`}}}},
				map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call_%d", i), "content": `{"temp_c":4}`})
		}
		body = map[string]any{"model": "m", "messages": msgs, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": schema}}},
			"max_completion_tokens": 512, "stream": true, "stream_options": map[string]any{"include_usage": true}}
	case vocab.KindAlphaResponses:
		in := []any{}
		for i := range 16 {
			in = append(in, map[string]any{"role": "user", "content": fmt.Sprintf("%d %s", i, para)},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": para}}},
				map[string]any{"type": "function_call", "call_id": fmt.Sprintf("call_%d", i), "name": "get_weather", "arguments": `{"city":"Oslo","days":3}`},
				map[string]any{"type": "function_call_output", "call_id": fmt.Sprintf("call_%d", i), "output": `{"temp_c":4}`})
		}
		body = map[string]any{"model": "m", "instructions": "You are terse.", "input": in, "tools": []any{map[string]any{"type": "function", "name": "get_weather", "parameters": schema}}, "stream": true}
	case vocab.KindBetaMessages:
		msgs := []any{}
		for i := range 16 {
			msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("%d %s", i, para)},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": para},
					map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", i), "name": "get_weather", "input": map[string]any{"city": "Oslo", "days": 3}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%d", i), "content": `{"temp_c":4}`}}})
		}
		body = map[string]any{"model": "b", "max_tokens": 512, "system": "You are terse.", "messages": msgs, "tools": []any{map[string]any{"name": "get_weather", "input_schema": schema}}, "stream": true}
	default:
		cs := []any{}
		for i := range 16 {
			cs = append(cs, map[string]any{"role": "user", "parts": []any{map[string]any{"text": fmt.Sprintf("%d %s", i, para)}}},
				map[string]any{"role": "model", "parts": []any{map[string]any{"text": para}, map[string]any{"functionCall": map[string]any{"name": "get_weather", "args": map[string]any{"city": "Oslo", "days": 3}}}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "get_weather", "response": map[string]any{"output": map[string]any{"temp_c": 4}}}}}})
		}
		body = map[string]any{"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "You are terse."}}}, "contents": cs,
			"tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "get_weather", "parametersJsonSchema": schema}}}}}
	}
	b, _ := json.Marshal(body)
	return b
}

// BenchmarkTranslateRequest: one ~10 KB client request converted to the upstream request, per pair, with
// the body lent as the proxy lends it (ClientRequest.Lent: no copy).
func BenchmarkTranslateRequest(b *testing.B) {
	for _, c := range allKinds {
		body := benchRequest(c)
		for _, d := range allKinds {
			if c == d {
				continue
			}
			b.Run(fmt.Sprintf("%s_to_%s", c, d), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					tr, _ := New(Pair{Op: vocab.OpStreamGenerateContent, Kind: c, DestOp: vocab.OpStreamGenerateContent, DestKind: d}, canon.Options{})
					if _, err := tr.Request(ClientRequest{Body: body, Model: "up", Stream: true, GammaSSE: true, Lent: true}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchStream builds a 500-event upstream stream of kind k: 450 text deltas then a tool call whose
// arguments arrive in fragments (gamma: whole function calls), then the terminal events.
func benchStream(k vocab.Kind) []byte {
	var w bytes.Buffer
	ev := func(name string, v any) {
		b, _ := json.Marshal(v)
		_ = sse.WriteEvent(&w, name, b)
	}
	n := 0
	switch k {
	case vocab.KindAlphaChatCompletions:
		chunk := func(delta any, fin any) {
			ev("", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}})
			n++
		}
		for i := range 450 {
			chunk(map[string]any{"content": fmt.Sprintf("tok%d ", i)}, nil)
		}
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function", "function": map[string]any{"name": "f", "arguments": ""}}}}, nil)
		for n < 497 {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `{"k":1}`[:1]}}}}, nil)
		}
		chunk(map[string]any{}, "tool_calls")
		ev("", map[string]any{"id": "chatcmpl-1", "choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 500, "total_tokens": 510}})
		w.WriteString("data: [DONE]\n\n")
	case vocab.KindAlphaResponses:
		ev("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1", "model": "m"}})
		for i := range 450 {
			ev("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": fmt.Sprintf("tok%d ", i)})
		}
		ev("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 1, "item": map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}})
		for range 46 {
			ev("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{"})
		}
		ev("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 1, "item": map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f"}})
		ev("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "status": "completed", "output": []any{},
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 500, "total_tokens": 510}}})
	case vocab.KindBetaMessages:
		ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "model": "b", "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for i := range 447 {
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": fmt.Sprintf("tok%d ", i)}})
		}
		ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "f", "input": map[string]any{}}})
		for range 46 {
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": "{"}})
		}
		ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 1})
		ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": 500}})
		ev("message_stop", map[string]any{"type": "message_stop"})
	default:
		for i := range 495 {
			ev("", map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": fmt.Sprintf("tok%d ", i)}}}, "index": 0}},
				"usageMetadata": map[string]any{"promptTokenCount": 10, "totalTokenCount": 10}, "modelVersion": "g", "responseId": "r"})
		}
		for range 4 {
			ev("", map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "f", "args": map[string]any{"k": 1}}}}}, "index": 0}}})
		}
		ev("", map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": ""}}}, "finishReason": "STOP", "index": 0}},
			"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 500, "totalTokenCount": 510}})
	}
	return w.Bytes()
}

func countEvents(raw []byte) int {
	d := sse.NewDecoder(bytes.NewReader(raw))
	n := 0
	for {
		if _, err := d.Next(); err != nil {
			return n
		}
		n++
	}
}

// BenchmarkTranslateStream: a 500-event upstream stream converted to the client's stream, per pair. One op
// is the whole stream; ns/event and allocs/event are reported.
func BenchmarkTranslateStream(b *testing.B) {
	for _, up := range allKinds {
		raw := benchStream(up)
		events := countEvents(raw)
		for _, c := range allKinds {
			if c == up {
				continue
			}
			b.Run(fmt.Sprintf("%s_to_%s", up, c), func(b *testing.B) {
				b.ReportAllocs()
				req := clientRequestFor(c, true)
				for i := 0; i < b.N; i++ {
					tr, _ := New(Pair{Op: vocab.OpStreamGenerateContent, Kind: c, DestOp: vocab.OpStreamGenerateContent, DestKind: up}, canon.Options{})
					if _, err := tr.Request(ClientRequest{Body: req, Model: "up", Stream: true, GammaSSE: true}); err != nil {
						b.Fatal(err)
					}
					if err := tr.NewStream(io.Discard).Pump(bytes.NewReader(raw), false, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
				b.ReportMetric(float64(events), "events")
			})
		}
	}
}

// BenchmarkSynthesize: one buffered upstream response replayed as the client's stream.
func BenchmarkSynthesize(b *testing.B) {
	body := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"b","content":[{"type":"text","text":"` + strings.Repeat("word ", 400) + `"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"city":"Oslo"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":400}}`)
	for _, c := range allKinds {
		b.Run(string(c), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				tr, _ := New(Pair{Op: vocab.OpStreamGenerateContent, Kind: c, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindBetaMessages}, canon.Options{})
				if _, err := tr.Request(ClientRequest{Body: clientRequestFor(c, true), Model: "up", Stream: true, GammaSSE: true}); err != nil {
					b.Fatal(err)
				}
				if err := tr.Synthesize(io.Discard, 200, nil, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadTokens walks the 10 KB benchmark request of each kind token by token with the JSON library's
// token reader (jsontext.Decoder.ReadToken, strings unquoted), against the hand reader validating and
// skipping the same body: the floor of a request decoder built on jsontext (see dataplane/jsonkit's doc).
func BenchmarkReadTokens(b *testing.B) {
	for _, k := range allKinds {
		body := benchRequest(k)
		b.Run("jsontext/"+string(k), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var r bytes.Reader
			dec := jsontext.NewDecoder(&r)
			for b.Loop() {
				r.Reset(body)
				dec.Reset(&r)
				for {
					tok, err := dec.ReadToken()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if tok.Kind() == '"' {
						_ = tok.String()
					}
				}
			}
		})
		b.Run("jsonkit/"+string(k), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := readAll(body, (*jsonkit.Reader).Skip); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
