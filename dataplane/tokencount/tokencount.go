// Package tokencount counts tokens locally, for settling a request whose upstream reported no usage
// (a stream that broke or was dropped before its usage event). It is a compiled feature: the default
// build embeds the o200k_base and cl100k_base vocabularies (github.com/tiktoken-go/tokenizer, compiled
// into the binary, no download at run time); building with the tag notokenizer leaves them out, and
// then every count reports ErrUnsupported so settlement falls back to the admission estimate.
//
// Accuracy (docs/settlement.md): alpha dialects are counted with the model family's own encoding
// (o200k_base for gpt-4o, gpt-4.1, gpt-5 and the o-series; cl100k_base for gpt-4 and gpt-3.5; o200k_base
// otherwise) — exact for text, and for alpha_chat_completions including the per-message framing; images,
// audio and tool schemas are not counted. beta and gamma use other, unpublished tokenizers: their counts
// are an o200k_base approximation of the same text.
package tokencount

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// MaxExactBytes bounds the text counted token by token (the tokenizer runs at a few MB/s); the tokens of
// a longer text are extrapolated from its first MaxExactBytes.
const MaxExactBytes = 256 << 10

// ErrUnsupported means local counting is not compiled into this binary (tag notokenizer).
var ErrUnsupported = errors.New("local token counting not compiled in (built with notokenizer)")

// Encoding names the vocabulary used for a kind and model and whether the count is exact for that
// dialect (alpha) or an approximation (beta, gamma).
func Encoding(kind vocab.Kind, model string) (encoding string, exact bool) {
	if kind.Family() != vocab.KindAlpha {
		return "o200k_base", false
	}
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "chatgpt-4o"), strings.HasPrefix(m, "gpt-4.1"),
		strings.HasPrefix(m, "gpt-5"), strings.HasPrefix(m, "o1"), strings.HasPrefix(m, "o3"), strings.HasPrefix(m, "o4"):
		return "o200k_base", true
	case strings.HasPrefix(m, "gpt-4"), strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"),
		strings.HasPrefix(m, "text-embedding-ada"), strings.HasPrefix(m, "text-embedding-3"):
		return "cl100k_base", true
	}
	return "o200k_base", true
}

// CountText counts the tokens of text (e.g. the output relayed to the client) for kind and model.
func CountText(kind vocab.Kind, model, text string) (int64, error) {
	enc, _ := Encoding(kind, model)
	n, err := countBounded(enc, text)
	if err != nil {
		return 0, err
	}
	return int64(n), nil
}

// CountPrompt counts the prompt tokens of a request body of kind: the text of its messages, system
// prompt or instructions, and tool-call arguments and results. alpha_chat_completions adds the chat
// framing (3 tokens per message, 1 per name, 3 to prime the reply).
func CountPrompt(kind vocab.Kind, model string, body []byte) (int64, error) {
	if !Supported() {
		return 0, ErrUnsupported
	}
	enc, _ := Encoding(kind, model)
	var root any
	if err := json.Unmarshal(body, &root); err != nil {
		return 0, fmt.Errorf("count prompt: request body: %w", err)
	}
	obj, _ := root.(map[string]any)
	if kind == vocab.KindAlphaChatCompletions && obj != nil {
		if msgs, ok := obj["messages"].([]any); ok {
			total := 3
			for _, m := range msgs {
				mo, _ := m.(map[string]any)
				total += 3
				if role, ok := mo["role"].(string); ok {
					n, err := countBounded(enc, role)
					if err != nil {
						return 0, err
					}
					total += n
				}
				if name, ok := mo["name"].(string); ok {
					n, err := countBounded(enc, name)
					if err != nil {
						return 0, err
					}
					total += n + 1
				}
				var texts []string
				collect(mo, "", &texts)
				for _, t := range texts {
					n, err := countBounded(enc, t)
					if err != nil {
						return 0, err
					}
					total += n
				}
			}
			return int64(total), nil
		}
	}
	var texts []string
	collect(root, "", &texts)
	var total int64
	for _, t := range texts {
		n, err := countBounded(enc, t)
		if err != nil {
			return 0, err
		}
		total += int64(n)
	}
	return total, nil
}

// Count returns the local usage of a request: the prompt counted from its body as input, the relayed
// output text as output. exact reports whether the dialect is counted exactly (see Encoding).
func Count(kind vocab.Kind, model string, requestBody []byte, output string) (u usage.Usage, exact bool, err error) {
	in, err := CountPrompt(kind, model, requestBody)
	if err != nil {
		return usage.Usage{}, false, err
	}
	out, err := CountText(kind, model, output)
	if err != nil {
		return usage.Usage{}, false, err
	}
	_, exact = Encoding(kind, model)
	return usage.Usage{Input: in, Output: out}, exact, nil
}

// ResponseText returns the output text of a buffered generation answer of any dialect (alpha chat message
// content and tool-call arguments, alpha responses output text, beta content blocks, gamma parts), in
// document order within each object, for counting it when the upstream reported no usage.
func ResponseText(body []byte) (string, error) {
	var root any
	if err := json.Unmarshal(body, &root); err != nil {
		return "", fmt.Errorf("response text: %w", err)
	}
	var texts []string
	collect(root, "", &texts)
	return strings.Join(texts, ""), nil
}

// countBounded counts text exactly up to MaxExactBytes and extrapolates beyond.
func countBounded(enc, text string) (int, error) {
	if len(text) <= MaxExactBytes {
		return count(enc, text)
	}
	cut := MaxExactBytes
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	n, err := count(enc, text[:cut])
	if err != nil || cut == 0 {
		return n, err
	}
	return int(int64(n) * int64(len(text)) / int64(cut)), nil
}

// textKeys are the object keys whose string values (or arrays of strings) are prompt text.
var textKeys = map[string]bool{
	"text": true, "content": true, "input": true, "instructions": true, "system": true, "arguments": true,
	"output": true, "prompt": true, "query": true, "documents": true,
}

// skipKeys are subtrees that never hold countable text (media, ids, cache control, signatures).
var skipKeys = map[string]bool{
	"image_url": true, "input_image": true, "source": true, "inlineData": true, "fileData": true, "input_audio": true,
	"file": true, "image": true, "data": true, "cache_control": true, "thoughtSignature": true, "signature": true,
	"tools": true, "tool_choice": true, "toolConfig": true, "generationConfig": true, "safetySettings": true,
	"metadata": true, "response_format": true, "text_format": true, "reasoning": true, "model": true,
}

// collect appends the prompt text strings found under v (reached through key) to out.
func collect(v any, key string, out *[]string) {
	switch x := v.(type) {
	case string:
		if textKeys[key] && x != "" {
			*out = append(*out, x)
		}
	case []any:
		for _, e := range x {
			collect(e, key, out)
		}
	case map[string]any:
		for k, e := range x {
			if skipKeys[k] {
				continue
			}
			collect(e, k, out)
		}
	}
}
