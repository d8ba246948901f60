package mockupstream

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const gammaBody = `{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`

func TestGammaGenerate(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	r := b.post(t, "/v1beta/models/g-1-flash:generateContent", gammaBody, "x-mock-chunks", "3")
	if got := r.header.Get(TierHeader); got != "standard" {
		t.Errorf("%s = %q, want standard", TierHeader, got)
	}
	m := decodeJSON(t, r.body)
	c := obj(t, arr(t, m, "candidates")[0])
	if str(t, c, "finishReason") != "STOP" || str(t, c, "content", "role") != "model" {
		t.Errorf("candidate = %v", c)
	}
	if text := str(t, obj(t, arr(t, c, "content", "parts")[0]), "text"); len(strings.Fields(text)) != 3 {
		t.Errorf("text = %q", text)
	}
	prompt := (len(gammaBody) + 3) / 4
	if num(t, m, "usageMetadata", "promptTokenCount") != prompt || num(t, m, "usageMetadata", "candidatesTokenCount") != 3 ||
		num(t, m, "usageMetadata", "totalTokenCount") != prompt+3 {
		t.Errorf("usageMetadata = %v", m["usageMetadata"])
	}
	if str(t, m, "modelVersion") != "g-1-flash" || str(t, m, "responseId") == "" {
		t.Errorf("modelVersion/responseId = %v", m)
	}
	// thinking and cache
	body := `{"contents":[{"role":"user","parts":[{"text":"hello"}]}],"generationConfig":{"maxOutputTokens":2,` +
		`"thinkingConfig":{"thinkingBudget":1024,"includeThoughts":true}},"serviceTier":"SERVICE_TIER_FLEX"}`
	r = b.post(t, "/v1beta/models/g-1-flash:generateContent", body, "x-mock-usage", "cached")
	m = decodeJSON(t, r.body)
	if r.header.Get(TierHeader) != "flex" {
		t.Errorf("tier = %q, want flex", r.header.Get(TierHeader))
	}
	c = obj(t, arr(t, m, "candidates")[0])
	parts := arr(t, c, "content", "parts")
	if str(t, c, "finishReason") != "MAX_TOKENS" || len(parts) != 2 || get(t, obj(t, parts[0]), "thought") != true {
		t.Errorf("thinking candidate = %v", c)
	}
	u := obj(t, m["usageMetadata"])
	p := (len(body) + 3) / 4
	if num(t, u, "thoughtsTokenCount") != 4 || num(t, u, "candidatesTokenCount") != 2 ||
		num(t, u, "cachedContentTokenCount") != p/2 || num(t, u, "totalTokenCount") != p+2+4 {
		t.Errorf("usage = %v", u)
	}
}

// parseGammaArray decodes the JSON-array framing and checks the separators.
func parseGammaArray(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	if !strings.HasPrefix(string(body), "[{") || !strings.HasSuffix(string(body), "}]") ||
		(strings.Count(string(body), ",\r\n{") == 0 && strings.Count(string(body), "\n") > 0) {
		t.Fatalf("bad array framing: %q", body)
	}
	var out []map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("decode array stream: %v\n%s", err, body)
	}
	return out
}

func TestGammaStream(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	check := func(t *testing.T, chunks []map[string]any) {
		t.Helper()
		if len(chunks) != 4 {
			t.Fatalf("chunks = %d, want 4", len(chunks))
		}
		var text strings.Builder
		for i, ch := range chunks {
			c := obj(t, arr(t, ch, "candidates")[0])
			text.WriteString(str(t, obj(t, arr(t, c, "content", "parts")[0]), "text"))
			if got := num(t, ch, "usageMetadata", "candidatesTokenCount"); got != i+1 {
				t.Errorf("chunk %d candidatesTokenCount = %d, want cumulative %d", i, got, i+1)
			}
			_, hasFinish := c["finishReason"]
			if hasFinish != (i == len(chunks)-1) {
				t.Errorf("chunk %d finishReason presence = %v", i, hasFinish)
			}
		}
		if len(strings.Fields(text.String())) != 4 {
			t.Errorf("text = %q", text.String())
		}
	}
	t.Run("sse", func(t *testing.T) {
		r := b.post(t, "/v1beta/models/g-1:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"service_tier":"priority"}`,
			"x-mock-chunks", "4")
		if r.header.Get(TierHeader) != "priority" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("headers = %v", r.header)
		}
		var chunks []map[string]any
		for _, e := range parseSSE(t, r.body) {
			if e.name != "" {
				t.Errorf("gamma sse has event line %q", e.name)
			}
			chunks = append(chunks, e.json(t))
		}
		check(t, chunks)
	})
	t.Run("array", func(t *testing.T) {
		r := b.post(t, "/v1beta/models/g-1:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"service_tier":"priority"}`,
			"x-mock-chunks", "4", "x-mock-downgrade", "1")
		if r.header.Get(TierHeader) != "standard" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("headers = %v", r.header)
		}
		check(t, parseGammaArray(t, r.body))
	})
	t.Run("aggregate usage only on the last chunk", func(t *testing.T) {
		r := b.post(t, "/v1beta/models/g-1:streamGenerateContent", gammaBody, "x-mock-chunks", "3", "x-mock-usage", "aggregate")
		chunks := parseGammaArray(t, r.body)
		for i, ch := range chunks {
			if has(ch, "usageMetadata") != (i == len(chunks)-1) {
				t.Errorf("chunk %d usage presence wrong: %v", i, ch)
			}
		}
	})
	t.Run("function call", func(t *testing.T) {
		body := `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"name":"get_weather",` +
			`"parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"}}}}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`
		chunks := parseGammaArray(t, b.post(t, "/v1beta/models/g-1:streamGenerateContent", body).body)
		if len(chunks) != 1 {
			t.Fatalf("chunks = %v", chunks)
		}
		c := obj(t, arr(t, chunks[0], "candidates")[0])
		fc := obj(t, obj(t, arr(t, c, "content", "parts")[0])["functionCall"])
		if str(t, fc, "name") != "get_weather" || str(t, fc, "args", "city") != "mock" || str(t, c, "finishReason") != "STOP" {
			t.Errorf("function call chunk = %v", c)
		}
	})
}

func TestGammaCountEmbed(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	m := decodeJSON(t, b.post(t, "/v1beta/models/g-1:countTokens", gammaBody).body)
	if num(t, m, "totalTokens") != (len(gammaBody)+3)/4 {
		t.Errorf("countTokens = %v", m)
	}
	m = decodeJSON(t, b.post(t, "/v1beta/models/g-1:countTokens", `{"generateContentRequest":{"model":"models/g-1","contents":[]}}`,
		"x-mock-usage", "cached").body)
	if num(t, m, "cachedContentTokenCount") == 0 {
		t.Errorf("cached countTokens = %v", m)
	}
	m = decodeJSON(t, b.post(t, "/v1beta/models/e-1:embedContent", `{"content":{"parts":[{"text":"hello"}]},"outputDimensionality":8}`).body)
	if len(arr(t, m, "embedding", "values")) != 8 || has(m, "usageMetadata") {
		t.Errorf("embedContent = %v", m)
	}
	m = decodeJSON(t, b.post(t, "/v1beta/models/e-1:batchEmbedContents",
		`{"requests":[{"model":"models/e-1","content":{"parts":[{"text":"a"}]}},{"model":"models/e-1","content":{"parts":[{"text":"bbbbb"}]}}]}`,
		"x-mock-usage", "full").body)
	embs := arr(t, m, "embeddings")
	if len(embs) != 2 || len(arr(t, obj(t, embs[0]), "values")) != 16 || num(t, m, "usageMetadata", "promptTokenCount") != 3 {
		t.Errorf("batchEmbedContents = %v", m)
	}
	if r := b.call(t, http.MethodPost, "/v1beta/models/g-1:frobnicate", gammaBody); r.status != 404 ||
		str(t, decodeJSON(t, r.body), "error", "status") != "NOT_FOUND" {
		t.Errorf("unknown method = %d %s", r.status, r.body)
	}
	if r := b.call(t, http.MethodPost, "/v1beta/models/g-1:generateContent", `{"contents":[]}`); r.status != 400 ||
		str(t, decodeJSON(t, r.body), "error", "status") != "INVALID_ARGUMENT" {
		t.Errorf("empty contents = %d %s", r.status, r.body)
	}
}
