package mockupstream

import (
	"net/http"
	"strings"
	"testing"
)

const betaBody = `{"model":"b-1","max_tokens":100,"messages":[{"role":"user","content":"hello"}]`

func TestBetaMessagesPlain(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	r := b.post(t, "/v1/messages", betaBody+`}`, "anthropic-version", betaVersion, "x-mock-chunks", "4")
	m := decodeJSON(t, r.body)
	if str(t, m, "type") != "message" || str(t, m, "role") != "assistant" || str(t, m, "model") != "b-1" ||
		str(t, m, "stop_reason") != "end_turn" || get(t, m, "stop_sequence") != nil {
		t.Errorf("message = %v", m)
	}
	if !strings.HasPrefix(str(t, m, "id"), "msg_") || r.header.Get("request-id") == "" {
		t.Errorf("id %q request-id %q", m["id"], r.header.Get("request-id"))
	}
	blk := obj(t, arr(t, m, "content")[0])
	if str(t, blk, "type") != "text" || len(strings.Fields(str(t, blk, "text"))) != 4 {
		t.Errorf("content = %v", blk)
	}
	want := (len(betaBody) + 1 + 3) / 4
	if got := num(t, m, "usage", "input_tokens"); got != want {
		t.Errorf("input_tokens = %d, want %d", got, want)
	}
	if num(t, m, "usage", "output_tokens") != 4 || str(t, m, "usage", "service_tier") != "standard" ||
		num(t, m, "usage", "cache_read_input_tokens") != 0 || num(t, m, "usage", "cache_creation_input_tokens") != 0 {
		t.Errorf("usage = %v", m["usage"])
	}
	if has(m, "usage", "total_tokens") || has(m, "usage", "speed") {
		t.Errorf("usage has total_tokens or speed: %v", m["usage"])
	}
	// speed fast echoed; max_tokens cut
	m = decodeJSON(t, b.post(t, "/v1/messages", `{"model":"b-1","max_tokens":2,"speed":"fast","messages":[{"role":"user","content":"hi"}]}`,
		"anthropic-version", betaVersion).body)
	if str(t, m, "usage", "speed") != "fast" || str(t, m, "stop_reason") != "max_tokens" || num(t, m, "usage", "output_tokens") != 2 {
		t.Errorf("fast/max_tokens message = %v", m)
	}
}

func TestBetaMessagesCachedUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	body := betaBody + `}`
	m := decodeJSON(t, b.post(t, "/v1/messages", body, "anthropic-version", betaVersion, "x-mock-usage", "cached").body)
	prompt := (len(body) + 3) / 4
	in, cr, cw := num(t, m, "usage", "input_tokens"), num(t, m, "usage", "cache_read_input_tokens"),
		num(t, m, "usage", "cache_creation_input_tokens")
	if cr != prompt/2 || cw != prompt/4 || in+cr+cw != prompt {
		t.Errorf("usage = %v, want read %d write %d summing to %d", m["usage"], prompt/2, prompt/4, prompt)
	}
	if num(t, m, "usage", "cache_creation", "ephemeral_5m_input_tokens") != cw {
		t.Errorf("cache_creation = %v", get(t, m, "usage", "cache_creation"))
	}
}

func TestBetaMessagesStream(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	body := betaBody + `,"stream":true,"service_tier":"auto","thinking":{"type":"enabled","budget_tokens":1024}}`
	evs := parseSSE(t, b.post(t, "/v1/messages", body, "anthropic-version", betaVersion, "x-mock-chunks", "3",
		"x-mock-served-tier", "priority").body)
	want := "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_delta," +
		"content_block_delta,content_block_delta,content_block_stop,content_block_start,content_block_delta," +
		"content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if got := strings.Join(names(evs), ","); got != want {
		t.Fatalf("events = %s\nwant %s", got, want)
	}
	start := evs[0].json(t)
	if str(t, start, "message", "usage", "service_tier") != "priority" || num(t, start, "message", "usage", "output_tokens") != 1 {
		t.Errorf("message_start = %v", start)
	}
	inTok := num(t, start, "message", "usage", "input_tokens")
	var thinking, text, sig strings.Builder
	for _, e := range evs {
		m := e.json(t)
		if str(t, m, "type") != e.name {
			t.Errorf("type %v != event %s", m["type"], e.name)
		}
		if e.name != "content_block_delta" {
			continue
		}
		switch str(t, m, "delta", "type") {
		case "thinking_delta":
			thinking.WriteString(str(t, m, "delta", "thinking"))
		case "signature_delta":
			sig.WriteString(str(t, m, "delta", "signature"))
		case "text_delta":
			text.WriteString(str(t, m, "delta", "text"))
			if num(t, m, "index") != 1 {
				t.Errorf("text delta index = %v", m["index"])
			}
		}
	}
	if thinking.Len() == 0 || sig.Len() == 0 || len(strings.Fields(text.String())) != 3 {
		t.Errorf("thinking %q sig %q text %q", thinking.String(), sig.String(), text.String())
	}
	md := evs[len(evs)-2].json(t)
	if str(t, md, "delta", "stop_reason") != "end_turn" || num(t, md, "usage", "output_tokens") != 7 ||
		num(t, md, "usage", "input_tokens") != inTok || num(t, md, "usage", "output_tokens_details", "thinking_tokens") != 4 {
		t.Errorf("message_delta = %v", md)
	}
}

func TestBetaToolUseStream(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	body := betaBody + `,"tools":[{"name":"get_weather","input_schema":` + toolSchema + `}],"tool_choice":{"type":"any"}`
	m := decodeJSON(t, b.post(t, "/v1/messages", body+`}`, "anthropic-version", betaVersion).body)
	blk := obj(t, arr(t, m, "content")[0])
	if str(t, m, "stop_reason") != "tool_use" || str(t, blk, "type") != "tool_use" ||
		!strings.HasPrefix(str(t, blk, "id"), "toolu_") || str(t, blk, "input", "city") != "mock" {
		t.Errorf("tool_use message = %v", m)
	}
	evs := parseSSE(t, b.post(t, "/v1/messages", body+`,"stream":true}`, "anthropic-version", betaVersion).body)
	var partial strings.Builder
	var name string
	for _, e := range evs {
		m := e.json(t)
		switch e.name {
		case "content_block_start":
			name = str(t, m, "content_block", "name")
			if str(t, m, "content_block", "type") != "tool_use" || len(obj(t, get(t, m, "content_block", "input"))) != 0 {
				t.Errorf("content_block_start = %v", m)
			}
		case "content_block_delta":
			if str(t, m, "delta", "type") != "input_json_delta" {
				t.Errorf("delta = %v", m)
			}
			partial.WriteString(str(t, m, "delta", "partial_json"))
		case "message_delta":
			if str(t, m, "delta", "stop_reason") != "tool_use" {
				t.Errorf("stop_reason = %v", m)
			}
		}
	}
	if name != "get_weather" || partial.String() != `{"city":"mock","days":1}` {
		t.Errorf("tool stream name %q args %q", name, partial.String())
	}
}

func TestBetaRequiresVersionAndCountTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	r := b.call(t, http.MethodPost, "/v1/messages", betaBody+`}`)
	m := decodeJSON(t, r.body)
	if r.status != 400 || str(t, m, "type") != "error" || str(t, m, "error", "type") != "invalid_request_error" {
		t.Errorf("without anthropic-version = %d %v", r.status, m)
	}
	r = b.call(t, http.MethodPost, "/v1/messages/count_tokens", `{"model":"b-1","messages":[]}`)
	if r.status != 400 {
		t.Errorf("count_tokens without version = %d", r.status)
	}
	body := `{"model":"b-1","messages":[{"role":"user","content":"hello"}]}`
	m = decodeJSON(t, b.post(t, "/v1/messages/count_tokens", body, "anthropic-version", betaVersion).body)
	if num(t, m, "input_tokens") != (len(body)+3)/4 || len(m) != 1 {
		t.Errorf("count_tokens = %v", m)
	}
	r = b.call(t, http.MethodPost, "/v1/messages", `{"model":"b-1","messages":[{"role":"user","content":"x"}]}`,
		"anthropic-version", betaVersion)
	if r.status != 400 || !strings.Contains(string(r.body), "max_tokens") {
		t.Errorf("missing max_tokens = %d %s", r.status, r.body)
	}
}
