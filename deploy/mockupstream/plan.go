package mockupstream

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// toolDef is a declared function tool, whatever the dialect's wrapping.
type toolDef struct {
	name   string
	params json.RawMessage
}

// toolMarker in a request body (e.g. in the last user message) asks for a tool call, like x-mock-tool-call.
var toolMarker = []byte("[[mock:tool_call]]")

// plan is the deterministic answer to a generate request, shared by every dialect.
type plan struct {
	words     []string // text deltas; joined they are the answer
	reasoning []string // thinking deltas (nil unless the request enabled reasoning)
	toolName  string   // non-empty in tool-call mode
	toolArgs  string   // compact JSON object
	truncated bool     // the token cap cut the answer

	prompt     int // all prompt tokens, cache included
	cacheRead  int
	cacheWrite int
	imageIn    int // prompt tokens attributed to images (usage variant image_tokens)
	output     int // all output tokens, reasoning included
	reasoningN int
}

// planFor builds the answer: maxTokens caps the text (0 = no cap); tools are the request's declared
// tools; forced says the request forces a tool call; thinking says reasoning is enabled.
func (x *exchange) planFor(maxTokens int, tools []toolDef, forced, thinking bool) *plan {
	p := &plan{prompt: max(tokensOf(len(x.body)), 1)}
	switch x.ctl.usage {
	case "cached":
		p.cacheRead = p.prompt / 2
		p.cacheWrite = p.prompt / 4
	case "image_tokens":
		p.imageIn = p.prompt / 4
	}
	if thinking {
		p.reasoning = lorem(x.hash>>7, 4)
		p.reasoningN = len(p.reasoning)
	}
	if len(tools) > 0 && (x.ctl.toolCall || forced || bytes.Contains(x.body, toolMarker)) {
		p.toolName = tools[0].name
		p.toolArgs = argsFor(tools[0].params)
		p.output = tokensOf(len(p.toolName)+len(p.toolArgs)) + p.reasoningN
		return p
	}
	n := x.ctl.chunks
	if maxTokens > 0 && n > maxTokens {
		n = maxTokens
		p.truncated = true
	}
	p.words = lorem(x.hash, n)
	if x.ctl.wordBytes > 0 {
		padWords(p.words, x.ctl.wordBytes)
	}
	p.output = n + p.reasoningN
	return p
}

// padWords pads every word to size bytes with '~'. The padded words share one string, so a 400 MB answer
// costs the mock a slice of string headers, not 400 MB (a buffered body is still joined in full).
func padWords(words []string, size int) {
	if len(words) == 0 {
		return
	}
	w := words[0]
	if len(w) < size {
		w += strings.Repeat("~", size-len(w))
	}
	for i := range words {
		words[i] = w
	}
}

func (p *plan) text() string { return strings.Join(p.words, "") }

func (p *plan) thinkingText() string { return strings.Join(p.reasoning, "") }

// argsFor derives deterministic arguments from a JSON schema: every property gets a value of its type.
func argsFor(schema json.RawMessage) string {
	var sc struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &sc) != nil || len(sc.Properties) == 0 {
		return "{}"
	}
	keys := make([]string, 0, len(sc.Properties))
	for k := range sc.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make(map[string]any, len(keys))
	for _, k := range keys {
		t, _ := sc.Properties[k].Type.(string)
		switch strings.ToLower(t) {
		case "integer", "number":
			args[k] = 1
		case "boolean":
			args[k] = true
		case "array":
			args[k] = []any{}
		case "object":
			args[k] = map[string]any{}
		default:
			args[k] = "mock"
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// argsObject returns the arguments as a JSON object value (beta input / gamma args).
func (p *plan) argsObject() json.RawMessage { return json.RawMessage(p.toolArgs) }

// tier helpers: the served tier for the requested one, after the x-mock-served-tier and x-mock-downgrade
// controls.

func (x *exchange) alphaTier(req string) string {
	if x.ctl.servedTier != "" {
		return x.ctl.servedTier
	}
	t := strings.ToLower(req)
	switch t {
	case "", "auto":
		t = "default"
	case "fast":
		t = "priority"
	}
	if x.ctl.downgrade && t == "priority" {
		t = "default"
	}
	return t
}

func (x *exchange) betaTier(req string) string {
	if x.ctl.servedTier != "" {
		return x.ctl.servedTier
	}
	t := strings.ToLower(req)
	switch t {
	case "", "auto", "standard_only":
		t = "standard"
	}
	if x.ctl.downgrade && t == "priority" {
		t = "standard"
	}
	return t
}

func (x *exchange) gammaTier(req string) string {
	if x.ctl.servedTier != "" {
		return x.ctl.servedTier
	}
	t := strings.TrimPrefix(strings.ToLower(req), "service_tier_")
	if t == "" || t == "unspecified" {
		t = "standard"
	}
	if x.ctl.downgrade && t == "priority" {
		t = "standard"
	}
	return t
}
