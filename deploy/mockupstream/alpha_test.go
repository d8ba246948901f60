package mockupstream

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"
	"testing"
)

func TestAlphaChatPlain(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	r := b.post(t, "/v1/chat/completions", chatBody, "x-mock-chunks", "5")
	m := decodeJSON(t, r.body)
	if got := str(t, m, "object"); got != "chat.completion" {
		t.Errorf("object = %q, want chat.completion", got)
	}
	if got := str(t, m, "model"); got != "m-1" {
		t.Errorf("model = %q, want m-1 (echoed)", got)
	}
	if got := str(t, m, "service_tier"); got != "default" {
		t.Errorf("service_tier = %q, want default", got)
	}
	if !strings.HasPrefix(str(t, m, "id"), "chatcmpl-") {
		t.Errorf("id = %q, want chatcmpl- prefix", str(t, m, "id"))
	}
	ch := obj(t, arr(t, m, "choices")[0])
	if got := str(t, ch, "finish_reason"); got != "stop" {
		t.Errorf("finish_reason = %q, want stop", got)
	}
	text := str(t, ch, "message", "content")
	if n := len(strings.Fields(text)); n != 5 {
		t.Errorf("content %q has %d words, want 5", text, n)
	}
	wantPrompt := (len(chatBody) + 3) / 4
	if got := num(t, m, "usage", "prompt_tokens"); got != wantPrompt {
		t.Errorf("prompt_tokens = %d, want %d", got, wantPrompt)
	}
	if got := num(t, m, "usage", "completion_tokens"); got != 5 {
		t.Errorf("completion_tokens = %d, want 5", got)
	}
	if got := num(t, m, "usage", "total_tokens"); got != wantPrompt+5 {
		t.Errorf("total_tokens = %d, want %d", got, wantPrompt+5)
	}
	if got := num(t, m, "usage", "prompt_tokens_details", "cached_tokens"); got != 0 {
		t.Errorf("cached_tokens = %d, want 0", got)
	}
	if got := num(t, m, "usage", "completion_tokens_details", "reasoning_tokens"); got != 0 {
		t.Errorf("reasoning_tokens = %d, want 0", got)
	}
	// deterministic
	r2 := b.post(t, "/v1/chat/completions", chatBody, "x-mock-chunks", "5")
	if !bytes.Equal(r.body, r2.body) {
		t.Errorf("same request gave different bodies:\n%s\n%s", r.body, r2.body)
	}
}

func TestAlphaChatStream(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	tests := []struct {
		name      string
		body      string
		wantUsage bool
	}{
		{"no usage", `{"model":"m-1","messages":[{"role":"user","content":"hi"}],"stream":true}`, false},
		{"include_usage", `{"model":"m-1","messages":[{"role":"user","content":"hi"}],"stream":true,` +
			`"stream_options":{"include_usage":true},"service_tier":"flex"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.post(t, "/v1/chat/completions", tt.body, "x-mock-chunks", "3")
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("Content-Type = %q, want text/event-stream", ct)
			}
			evs := parseSSE(t, r.body)
			if last := evs[len(evs)-1]; last.data != "[DONE]" || last.name != "" {
				t.Fatalf("last event = %+v, want data: [DONE]", last)
			}
			evs = evs[:len(evs)-1]
			var text strings.Builder
			var finish string
			var usage map[string]any
			id := ""
			for i, e := range evs {
				m := e.json(t)
				if id == "" {
					id = str(t, m, "id")
				} else if str(t, m, "id") != id {
					t.Errorf("chunk %d id differs", i)
				}
				if has(m, "usage") != tt.wantUsage {
					t.Errorf("chunk %d has usage key = %v, want %v", i, has(m, "usage"), tt.wantUsage)
				}
				choices := arr(t, m, "choices")
				if len(choices) == 0 {
					usage = obj(t, get(t, m, "usage"))
					continue
				}
				if u := m["usage"]; u != nil {
					t.Errorf("chunk %d usage = %v, want null", i, u)
				}
				c := obj(t, choices[0])
				if i == 0 && str(t, c, "delta", "role") != "assistant" {
					t.Errorf("first delta has no assistant role: %v", c)
				}
				if s, ok := obj(t, c["delta"])["content"].(string); ok {
					text.WriteString(s)
				}
				if fr, ok := c["finish_reason"].(string); ok {
					finish = fr
				}
			}
			if finish != "stop" {
				t.Errorf("finish_reason = %q, want stop", finish)
			}
			if n := len(strings.Fields(text.String())); n != 3 {
				t.Errorf("streamed text %q has %d words, want 3", text.String(), n)
			}
			if tt.wantUsage {
				if usage == nil {
					t.Fatal("no usage chunk")
				}
				if got := num(t, usage, "completion_tokens"); got != 3 {
					t.Errorf("completion_tokens = %d, want 3", got)
				}
				if num(t, usage, "total_tokens") != num(t, usage, "prompt_tokens")+3 {
					t.Errorf("total_tokens != prompt + completion: %v", usage)
				}
				if tier := str(t, evs[0].json(t), "service_tier"); tier != "flex" {
					t.Errorf("service_tier = %q, want flex", tier)
				}
			} else if usage != nil {
				t.Errorf("usage chunk without include_usage: %v", usage)
			}
		})
	}
}

func TestAlphaChatToolCall(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	body := `{"model":"m-1","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function",` +
		`"function":{"name":"get_weather","parameters":` + toolSchema + `}}]`
	// plain, via the control
	m := decodeJSON(t, b.post(t, "/v1/chat/completions", body+`}`, "x-mock-tool-call", "1").body)
	c := obj(t, arr(t, m, "choices")[0])
	if got := str(t, c, "finish_reason"); got != "tool_calls" {
		t.Errorf("finish_reason = %q, want tool_calls", got)
	}
	if get(t, c, "message", "content") != nil {
		t.Errorf("content = %v, want null", get(t, c, "message", "content"))
	}
	tc := obj(t, arr(t, c, "message", "tool_calls")[0])
	if str(t, tc, "function", "name") != "get_weather" || str(t, tc, "function", "arguments") != `{"city":"mock","days":1}` {
		t.Errorf("tool call = %v", tc)
	}
	if !strings.HasPrefix(str(t, tc, "id"), "call_") {
		t.Errorf("tool call id = %q, want call_ prefix", str(t, tc, "id"))
	}
	// without the control and tool_choice auto: text
	m = decodeJSON(t, b.post(t, "/v1/chat/completions", body+`}`).body)
	if got := str(t, obj(t, arr(t, m, "choices")[0]), "finish_reason"); got != "stop" {
		t.Errorf("finish_reason without control = %q, want stop", got)
	}
	// the marker in the last user message asks for a call too
	marked := strings.Replace(body, "weather?", "weather? [[mock:tool_call]]", 1) + `}`
	m = decodeJSON(t, b.post(t, "/v1/chat/completions", marked).body)
	if got := str(t, obj(t, arr(t, m, "choices")[0]), "finish_reason"); got != "tool_calls" {
		t.Errorf("finish_reason with marker = %q, want tool_calls", got)
	}
	// forced by tool_choice required, streamed as fragments
	r := b.post(t, "/v1/chat/completions", body+`,"tool_choice":"required","stream":true}`)
	var args strings.Builder
	var name, finish string
	frags := 0
	for _, e := range parseSSE(t, r.body) {
		if e.data == "[DONE]" {
			continue
		}
		ch := obj(t, arr(t, e.json(t), "choices")[0])
		if fr, ok := ch["finish_reason"].(string); ok {
			finish = fr
		}
		calls, _ := obj(t, ch["delta"])["tool_calls"].([]any)
		for _, raw := range calls {
			call := obj(t, raw)
			if num(t, call, "index") != 0 {
				t.Errorf("tool call index = %v", call["index"])
			}
			if n, ok := obj(t, call["function"])["name"].(string); ok {
				name = n
			}
			args.WriteString(str(t, call, "function", "arguments"))
			frags++
		}
	}
	if name != "get_weather" || args.String() != `{"city":"mock","days":1}` || finish != "tool_calls" {
		t.Errorf("streamed tool call = %q %q finish %q", name, args.String(), finish)
	}
	if frags < 3 {
		t.Errorf("argument fragments = %d, want several", frags)
	}
}

func TestAlphaChatLengthAndReasoning(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	m := decodeJSON(t, b.post(t, "/v1/chat/completions",
		`{"model":"m-1","messages":[{"role":"user","content":"x"}],"max_completion_tokens":2,"reasoning_effort":"low"}`).body)
	c := obj(t, arr(t, m, "choices")[0])
	if got := str(t, c, "finish_reason"); got != "length" {
		t.Errorf("finish_reason = %q, want length", got)
	}
	if got := num(t, m, "usage", "completion_tokens_details", "reasoning_tokens"); got != 4 {
		t.Errorf("reasoning_tokens = %d, want 4", got)
	}
	if got := num(t, m, "usage", "completion_tokens"); got != 6 {
		t.Errorf("completion_tokens = %d, want 6 (2 text + 4 reasoning)", got)
	}
}

func TestAlphaResponsesPlain(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	m := decodeJSON(t, b.post(t, "/v1/responses", `{"model":"m-1","input":"hi","service_tier":"flex"}`,
		"x-mock-chunks", "4").body)
	if str(t, m, "object") != "response" || str(t, m, "status") != "completed" || str(t, m, "service_tier") != "flex" {
		t.Errorf("response = %v", m)
	}
	out := arr(t, m, "output")
	item := obj(t, out[len(out)-1])
	if str(t, item, "type") != "message" || str(t, item, "role") != "assistant" {
		t.Errorf("item = %v", item)
	}
	text := str(t, obj(t, arr(t, item, "content")[0]), "text")
	if len(strings.Fields(text)) != 4 {
		t.Errorf("text = %q, want 4 words", text)
	}
	in, outTok := num(t, m, "usage", "input_tokens"), num(t, m, "usage", "output_tokens")
	if outTok != 4 || num(t, m, "usage", "total_tokens") != in+outTok {
		t.Errorf("usage = %v", m["usage"])
	}
	num(t, m, "usage", "input_tokens_details", "cached_tokens")
	num(t, m, "usage", "output_tokens_details", "reasoning_tokens")

	// max_output_tokens cut: incomplete
	m = decodeJSON(t, b.post(t, "/v1/responses", `{"model":"m-1","input":"hi","max_output_tokens":1}`).body)
	if str(t, m, "status") != "incomplete" || str(t, m, "incomplete_details", "reason") != "max_output_tokens" {
		t.Errorf("truncated response = %v", m)
	}
}

func TestAlphaResponsesStream(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	r := b.post(t, "/v1/responses", `{"model":"m-1","input":"hi","stream":true}`, "x-mock-chunks", "3")
	evs := parseSSE(t, r.body)
	want := []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.content_part.added", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.completed"}
	if got := names(evs); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events = %v, want %v", got, want)
	}
	var text strings.Builder
	for i, e := range evs {
		m := e.json(t)
		if str(t, m, "type") != e.name {
			t.Errorf("event %d type %q != event name %q", i, m["type"], e.name)
		}
		if num(t, m, "sequence_number") != i {
			t.Errorf("event %d sequence_number = %v", i, m["sequence_number"])
		}
		if e.name == "response.output_text.delta" {
			text.WriteString(str(t, m, "delta"))
		}
		if e.name != "response.completed" && has(m, "response") && get(t, m, "response", "usage") != nil {
			t.Errorf("usage before the terminal event in %s", e.name)
		}
	}
	done := evs[len(evs)-1].json(t)
	if got := str(t, done, "response", "status"); got != "completed" {
		t.Errorf("status = %q", got)
	}
	item := obj(t, arr(t, done, "response", "output")[0])
	if got := str(t, obj(t, arr(t, item, "content")[0]), "text"); got != text.String() {
		t.Errorf("final text %q != streamed %q", got, text.String())
	}
	if num(t, done, "response", "usage", "output_tokens") != 3 {
		t.Errorf("usage = %v", get(t, done, "response", "usage"))
	}
	if added := evs[2].json(t); len(arr(t, added, "item", "content")) != 0 {
		t.Errorf("output_item.added content not empty: %v", added)
	}
}

func TestAlphaResponsesToolStream(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	body := `{"model":"m-1","input":"weather?","stream":true,"reasoning":{"effort":"high"},` +
		`"tools":[{"type":"function","name":"get_weather","parameters":` + toolSchema + `}]}`
	evs := parseSSE(t, b.post(t, "/v1/responses", body, "x-mock-tool-call", "1").body)
	got := strings.Join(names(evs), ",")
	want := "response.created,response.in_progress,response.output_item.added,response.output_item.done," +
		"response.output_item.added,response.function_call_arguments.delta,response.function_call_arguments.delta," +
		"response.function_call_arguments.delta,response.function_call_arguments.done,response.output_item.done," +
		"response.completed"
	if got != want {
		t.Fatalf("events = %s\nwant %s", got, want)
	}
	var args strings.Builder
	for _, e := range evs {
		if e.name == "response.function_call_arguments.delta" {
			args.WriteString(str(t, e.json(t), "delta"))
		}
	}
	doneArgs := str(t, evs[8].json(t), "arguments")
	if args.String() != doneArgs || doneArgs != `{"city":"mock","days":1}` {
		t.Errorf("args deltas %q, done %q", args.String(), doneArgs)
	}
	final := evs[len(evs)-1].json(t)
	out := arr(t, final, "response", "output")
	if str(t, obj(t, out[0]), "type") != "reasoning" {
		t.Errorf("output[0] = %v, want reasoning", out[0])
	}
	fc := obj(t, out[1])
	if str(t, fc, "type") != "function_call" || str(t, fc, "name") != "get_weather" ||
		!strings.HasPrefix(str(t, fc, "call_id"), "call_") || !strings.HasPrefix(str(t, fc, "id"), "fc_") {
		t.Errorf("function_call item = %v", fc)
	}
	if num(t, final, "response", "usage", "output_tokens_details", "reasoning_tokens") != 4 {
		t.Errorf("reasoning tokens missing: %v", get(t, final, "response", "usage"))
	}
}

func TestAlphaCompactInputTokensConversations(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	body := `{"model":"m-1","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`
	m := decodeJSON(t, b.post(t, "/v1/responses/compact", body).body)
	out := arr(t, m, "output")
	if str(t, m, "object") != "response.compaction" || len(out) != 2 || str(t, obj(t, out[1]), "type") != "compaction" {
		t.Errorf("compact = %v", m)
	}
	num(t, m, "usage", "input_tokens")
	num(t, m, "usage", "total_tokens")

	m = decodeJSON(t, b.post(t, "/v1/responses/input_tokens", `{"model":"m-1","input":"hello"}`).body)
	if str(t, m, "object") != "response.input_tokens" || num(t, m, "input_tokens") != 8 {
		t.Errorf("input_tokens = %v", m)
	}

	m = decodeJSON(t, b.post(t, "/v1/conversations", `{"metadata":{"k":"v"}}`).body)
	id := str(t, m, "id")
	if !strings.HasPrefix(id, "conv_") || str(t, m, "object") != "conversation" || str(t, m, "metadata", "k") != "v" {
		t.Errorf("conversation = %v", m)
	}
	if m := decodeJSON(t, b.call(t, http.MethodGet, "/v1/conversations/"+id, "").body); str(t, m, "id") != id {
		t.Errorf("get conversation = %v", m)
	}
	if m := decodeJSON(t, b.call(t, http.MethodDelete, "/v1/conversations/"+id, "").body); get(t, m, "deleted") != true {
		t.Errorf("delete conversation = %v", m)
	}
	m = decodeJSON(t, b.post(t, "/v1/conversations/"+id+"/items", `{"items":[{"type":"message","role":"user","content":"x"}]}`).body)
	if str(t, m, "object") != "list" || len(arr(t, m, "data")) != 1 {
		t.Errorf("items = %v", m)
	}
	if r := b.call(t, http.MethodGet, "/v1/conversations/"+id+"/items/msg_1", ""); r.status != 200 {
		t.Errorf("get item status = %d", r.status)
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Models: []string{"m-1", "m-2"}})
	m := decodeJSON(t, b.call(t, http.MethodGet, "/v1/models", "").body)
	data := arr(t, m, "data")
	if str(t, m, "object") != "list" || len(data) != 2 || str(t, obj(t, data[0]), "object") != "model" {
		t.Errorf("alpha models = %v", m)
	}
	m = decodeJSON(t, b.call(t, http.MethodGet, "/v1/models/m-9", "").body)
	if str(t, m, "id") != "m-9" || str(t, m, "owned_by") != "system" {
		t.Errorf("alpha model = %v", m)
	}
	m = decodeJSON(t, b.call(t, http.MethodGet, "/v1/models", "", "anthropic-version", betaVersion).body)
	if get(t, m, "has_more") != false || str(t, m, "first_id") != "m-1" || str(t, m, "last_id") != "m-2" ||
		str(t, obj(t, arr(t, m, "data")[0]), "type") != "model" {
		t.Errorf("beta models = %v", m)
	}
	m = decodeJSON(t, b.call(t, http.MethodGet, "/v1/models/b-1", "", "anthropic-version", betaVersion).body)
	if str(t, m, "type") != "model" || str(t, m, "id") != "b-1" || str(t, m, "created_at") != "2025-10-09T08:53:20Z" {
		t.Errorf("beta model = %v", m)
	}
	m = decodeJSON(t, b.call(t, http.MethodGet, "/v1beta/models", "").body)
	if got := str(t, obj(t, arr(t, m, "models")[1]), "name"); got != "models/m-2" {
		t.Errorf("gamma models[1].name = %q", got)
	}
	m = decodeJSON(t, b.call(t, http.MethodGet, "/v1beta/models/g-1-flash", "").body)
	if str(t, m, "name") != "models/g-1-flash" || str(t, m, "baseModelId") != "g-1-flash" {
		t.Errorf("gamma model = %v", m)
	}
}

func TestAlphaEmbeddings(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	m := decodeJSON(t, b.post(t, "/v1/embeddings", `{"model":"emb-1","input":["hello world","abc"],"dimensions":4}`).body)
	data := arr(t, m, "data")
	if len(data) != 2 || str(t, m, "object") != "list" || str(t, m, "model") != "emb-1" {
		t.Fatalf("embeddings = %v", m)
	}
	floats := arr(t, obj(t, data[0]), "embedding")
	if len(floats) != 4 || num(t, obj(t, data[1]), "index") != 1 {
		t.Errorf("embedding = %v", data)
	}
	if num(t, m, "usage", "prompt_tokens") != 4 || num(t, m, "usage", "total_tokens") != 4 {
		t.Errorf("usage = %v, want 3+1 tokens", m["usage"])
	}
	m = decodeJSON(t, b.post(t, "/v1/embeddings", `{"model":"emb-1","input":"hello world","dimensions":4,"encoding_format":"base64"}`).body)
	raw, err := base64.StdEncoding.DecodeString(str(t, obj(t, arr(t, m, "data")[0]), "embedding"))
	if err != nil || len(raw) != 16 {
		t.Fatalf("base64 embedding: %v len %d", err, len(raw))
	}
	for i, f := range floats {
		got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		if float64(got) != f.(float64) && math.Abs(float64(got)-f.(float64)) > 1e-6 {
			t.Errorf("base64[%d] = %v, float = %v", i, got, f)
		}
	}
	m = decodeJSON(t, b.post(t, "/v1/embeddings", `{"model":"emb-1","input":[[1,2,3],[4]]}`).body)
	if num(t, m, "usage", "prompt_tokens") != 4 {
		t.Errorf("token-array usage = %v, want 4", m["usage"])
	}
}

func imageEditBody(t *testing.T, stream bool) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, v := range map[string]string{"prompt": "add a hat", "model": "img-1", "quality": "low"} {
		_ = w.WriteField(k, v)
	}
	if stream {
		_ = w.WriteField("stream", "true")
		_ = w.WriteField("partial_images", "2")
	}
	fw, err := w.CreateFormFile("image", "a.png")
	if err != nil {
		t.Fatalf("CreateFormFile: %v", err)
	}
	_, _ = fw.Write([]byte("PNGDATA"))
	_ = w.Close()
	return buf.String(), w.FormDataContentType()
}

func TestAlphaImages(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	m := decodeJSON(t, b.post(t, "/v1/images/generations", `{"model":"img-1","prompt":"a cat","n":2}`).body)
	if len(arr(t, m, "data")) != 2 || str(t, m, "size") != "1024x1024" || str(t, m, "quality") != "high" {
		t.Errorf("images = %v", m)
	}
	if num(t, m, "usage", "output_tokens_details", "image_tokens") != 8320 || num(t, m, "usage", "output_tokens") != 8320 {
		t.Errorf("usage = %v", m["usage"])
	}
	if num(t, m, "usage", "total_tokens") != num(t, m, "usage", "input_tokens")+8320 {
		t.Errorf("total mismatch: %v", m["usage"])
	}
	num(t, m, "usage", "input_tokens_details", "text_tokens")

	evs := parseSSE(t, b.post(t, "/v1/images/generations", `{"model":"img-1","prompt":"a cat","stream":true}`).body)
	if got := strings.Join(names(evs), ","); got != "image_generation.partial_image,image_generation.completed" {
		t.Errorf("stream events = %s", got)
	}
	if has(evs[0].json(t), "usage") {
		t.Errorf("usage on partial image")
	}
	if num(t, evs[1].json(t), "usage", "output_tokens_details", "image_tokens") != 4160 {
		t.Errorf("completed usage = %v", evs[1].data)
	}

	body, ct := imageEditBody(t, false)
	m = decodeJSON(t, b.post(t, "/v1/images/edits", body, "Content-Type", ct).body)
	if num(t, m, "usage", "input_tokens_details", "image_tokens") != 85 || num(t, m, "usage", "output_tokens") != 272 {
		t.Errorf("edit usage = %v", m["usage"])
	}
	body, ct = imageEditBody(t, true)
	evs = parseSSE(t, b.post(t, "/v1/images/edits", body, "Content-Type", ct).body)
	if got := strings.Join(names(evs), ","); got != "image_edit.partial_image,image_edit.partial_image,image_edit.completed" {
		t.Errorf("edit stream events = %s", got)
	}
	if num(t, evs[1].json(t), "partial_image_index") != 1 || num(t, evs[2].json(t), "usage", "total_tokens") == 0 {
		t.Errorf("edit stream = %v", evs)
	}
	if r := b.call(t, http.MethodPost, "/v1/images/edits", "{}"); r.status != 400 {
		t.Errorf("edit without multipart = %d, want 400", r.status)
	}
}

func TestAlphaRerank(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	body := `{"model":"rr-1","query":"capital of France","documents":["Berlin is in Germany.",` +
		`{"text":"Paris is the capital of France."},"Bananas."],"top_n":2,"return_documents":true}`
	for _, path := range []string{"/v1/rerank", "/rerank", "/v2/rerank"} {
		m := decodeJSON(t, b.post(t, path, body).body)
		res := arr(t, m, "results")
		if len(res) != 2 {
			t.Fatalf("%s results = %v", path, res)
		}
		first := obj(t, res[0])
		if num(t, first, "index") != 1 || str(t, first, "document", "text") != "Paris is the capital of France." {
			t.Errorf("%s best = %v", path, first)
		}
		scores := []float64{get(t, first, "relevance_score").(float64), get(t, obj(t, res[1]), "relevance_score").(float64)}
		if !sort.IsSorted(sort.Reverse(sort.Float64Slice(scores))) {
			t.Errorf("%s scores not descending: %v", path, scores)
		}
		if num(t, m, "usage", "total_tokens") <= 0 {
			t.Errorf("%s usage = %v", path, m["usage"])
		}
		if path == "/v2/rerank" && num(t, m, "meta", "billed_units", "search_units") != 1 {
			t.Errorf("v2 meta = %v", m["meta"])
		}
	}
}
