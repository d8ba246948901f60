package translate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/shared/vocab"
)

// unknownItems are alpha responses output items the translator does not carry: a recorded tool_search_call
// (its arguments an object, where a function_call's is a string) and an invented kind whose every member
// has a shape no known item uses. Neither may fail the answer (docs/translation.md "Output items the
// translator does not know").
var unknownItems = []string{
	`{"id":"tsc_1","type":"tool_search_call","status":"completed","arguments":{"query":"weather"},"call_id":null,"execution":"server"}`,
	`{"id":"tso_1","type":"tool_search_output","status":"completed","call_id":null,"execution":"server","tools":[{"type":"function","name":"get_weather"}]}`,
	`{"id":7,"type":"x_future_call","role":{"a":1},"status":5,"name":[1],"arguments":[true],"call_id":{},"content":"text","summary":3,"encrypted_content":false}`,
}

const knownCall = `{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`

func TestUnknownOutputItemsBuffered(t *testing.T) {
	body := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[` +
		strings.Join(unknownItems, ",") + `,` + knownCall +
		`],"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"total_tokens":120}}`
	for _, k := range allKinds {
		if k == vocab.KindAlphaResponses {
			continue
		}
		tr := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: k, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindAlphaResponses})
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(k, false), Model: "m"}); err != nil {
			t.Fatal(err)
		}
		out, err := tr.Response([]byte(body))
		if err != nil {
			t.Fatalf("%s: Response with unknown output items = %v", k, err)
		}
		s := string(out)
		if !strings.Contains(s, "get_weather") || !strings.Contains(s, "Paris") {
			t.Errorf("%s: the known function call is lost: %s", k, s)
		}
		if strings.Contains(s, "tool_search") || strings.Contains(s, "x_future") || strings.Contains(s, "query") {
			t.Errorf("%s: an unknown item reached the client: %s", k, s)
		}
		if !json.Valid(out) {
			t.Errorf("%s: client body is not JSON: %s", k, s)
		}
	}
}

func TestUnknownOutputItemsStream(t *testing.T) {
	var up strings.Builder
	ev := func(typ, data string) { up.WriteString("event: " + typ + "\ndata: " + data + "\n\n") }
	ev("response.created", `{"type":"response.created","response":{"id":"resp_1","model":"m","status":"in_progress","output":[]}}`)
	for i, it := range unknownItems {
		idx := string(rune('0' + i))
		ev("response.output_item.added", `{"type":"response.output_item.added","output_index":`+idx+`,"item":`+it+`}`)
		ev("response.output_item.done", `{"type":"response.output_item.done","output_index":`+idx+`,"item":`+it+`}`)
	}
	ev("response.output_item.added", `{"type":"response.output_item.added","output_index":3,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"get_weather","arguments":""}}`)
	ev("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","output_index":3,"delta":"{\"city\":\"Paris\"}"}`)
	ev("response.output_item.done", `{"type":"response.output_item.done","output_index":3,"item":`+knownCall+`}`)
	ev("response.completed", `{"type":"response.completed","response":{"id":"resp_1","model":"m","status":"completed","output":[`+
		strings.Join(unknownItems, ",")+`,`+knownCall+`],"usage":{"input_tokens":100,"output_tokens":20,"total_tokens":120}}}`)
	for _, k := range allKinds {
		if k == vocab.KindAlphaResponses {
			continue
		}
		tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: k, DestOp: vocab.OpStreamGenerateContent, DestKind: vocab.KindAlphaResponses})
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(k, true), Model: "m", Stream: true, GammaSSE: true}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s := tr.NewStream(&out)
		if err := s.Pump(strings.NewReader(up.String()), false, nil); err != nil {
			t.Fatalf("%s: Pump with unknown output items = %v; client got %s", k, err, out.String())
		}
		if u := s.Usage(); !u.Known || u.InputTotal != 100 || u.OutputTotal != 20 {
			t.Errorf("%s: Usage() = %+v", k, u)
		}
		o := out.String()
		if !strings.Contains(o, "get_weather") || strings.Contains(o, "tool_search") || strings.Contains(o, "x_future") {
			t.Errorf("%s: client stream %s", k, o)
		}
		checkClientStream(t, k, true, out.Bytes())
	}
}

// An upstream event the translator cannot read ends the client's stream with an in-stream error, and the
// rest of the upstream is still read for its usage: an upstream whose decoder bills (beta, gamma, alpha chat)
// bills the usage reported after the unreadable event.
func TestUnreadableEventStillBilled(t *testing.T) {
	sse := func(evs ...string) string {
		var b strings.Builder
		for _, e := range evs {
			b.WriteString(e + "\n\n")
		}
		return b.String()
	}
	for _, c := range []struct {
		dest     vocab.Kind
		upstream string
		input    int64
		output   int64
	}{
		{vocab.KindBetaMessages, sse(
			"event: message_start\ndata: "+`{"type":"message_start","message":{"id":"m","model":"b","content":[],"usage":{"input_tokens":30,"output_tokens":1}}}`,
			"event: content_block_start\ndata: "+`{"type":"content_block_start","index":"zero","content_block":{"type":"text","text":""}}`,
			"event: message_delta\ndata: "+`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}`,
			"event: message_stop\ndata: "+`{"type":"message_stop"}`), 30, 40},
		{vocab.KindGammaGenerateContent, sse(
			"data: "+`{"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":"zero"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":2}}`,
			"data: "+`{"candidates":[{"content":{"parts":[{"text":"b"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":40}}`), 30, 40},
		{vocab.KindAlphaChatCompletions, sse(
			"data: "+`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`,
			"data: "+`{"id":"c","model":"m","choices":[{"index":"zero","delta":{"content":"b"}}]}`,
			"data: "+`{"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":40}}`,
			"data: [DONE]"), 30, 40},
	} {
		tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindAlphaResponses, DestOp: vocab.OpStreamGenerateContent, DestKind: c.dest})
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(vocab.KindAlphaResponses, true), Model: "m", Stream: true}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s := tr.NewStream(&out)
		if err := s.Pump(strings.NewReader(c.upstream), false, nil); err == nil {
			t.Fatalf("%s: Pump read an unreadable event without error; client got %s", c.dest, out.String())
		}
		b, ok := s.Biller()
		if !ok {
			t.Fatalf("%s: the decoder does not bill", c.dest)
		}
		u, found, _ := b.Billed()
		if !found || u.Input != c.input || u.Output != c.output {
			t.Errorf("%s: billed %+v found %v, want input %d output %d (the usage after the unreadable event)", c.dest, u, found, c.input, c.output)
		}
	}
}

// TestUnreadableEventUsageStillBilled: an upstream event the translator cannot read (a member of a type it
// cannot carry) that itself carries the usage still bills that usage: the decoder reads the event's usage
// members as the passthrough relay reads them.
func TestUnreadableEventUsageStillBilled(t *testing.T) {
	for _, c := range []struct {
		dest     vocab.Kind
		upstream string
	}{
		{vocab.KindBetaMessages, "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"m","model":"b","content":[],"usage":{"input_tokens":30,"output_tokens":1}}}` + "\n\n" +
			"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":5},"usage":{"output_tokens":40}}` + "\n\n" +
			"event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n"},
		{vocab.KindBetaMessages, "event: message_start\ndata: " + `{"type":"message_start","index":"zero","message":{"id":"m","model":"b","content":[],"usage":{"input_tokens":30,"output_tokens":40}}}` + "\n\n"},
		{vocab.KindGammaGenerateContent, "data: " + `{"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":"zero","finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":40}}` + "\n\n"},
		{vocab.KindAlphaChatCompletions, "data: " + `{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n" +
			"data: " + `{"id":"c","model":"m","choices":[{"index":"zero","delta":{}}],"usage":{"prompt_tokens":30,"completion_tokens":40}}` + "\n\n" +
			"data: [DONE]\n\n"},
		{vocab.KindAlphaResponses, "event: response.completed\ndata: " + `{"type":"response.completed","output_index":"zero","response":{"id":"r","model":"m","status":"completed","output":[],` +
			`"usage":{"input_tokens":30,"output_tokens":40,"total_tokens":70}}}` + "\n\n"},
	} {
		client := vocab.KindAlphaResponses
		if c.dest == client {
			client = vocab.KindBetaMessages
		}
		tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: client, DestOp: vocab.OpStreamGenerateContent, DestKind: c.dest})
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(client, true), Model: "m", Stream: true}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s := tr.NewStream(&out)
		if err := s.Pump(strings.NewReader(c.upstream), false, nil); err == nil {
			t.Fatalf("%s: Pump read an unreadable event without error; client got %s", c.dest, out.String())
		}
		b, ok := s.Biller()
		if !ok {
			t.Fatalf("%s: the decoder does not bill", c.dest)
		}
		if u, found, _ := b.Billed(); !found || u.Input != 30 || u.Output != 40 {
			t.Errorf("%s: billed %+v found %v, want input 30 output 40 (the usage of the unreadable event)", c.dest, u, found)
		}
	}
}
