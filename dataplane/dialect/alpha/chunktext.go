package alpha

import (
	"bytes"
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// chatDeltaText is the part of an alpha chat chunk that local counting reads.
type chatDeltaText struct {
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
}

// ChunkText hands add the text of one alpha chat chunk (every choice's delta content and tool-call
// arguments, in order), for local counting when the upstream reports no usage: at once when the fast reader
// reads the chunk, piece by piece when encoding/json decodes it (the fast reader declined), nothing when
// neither reads it or it has no "delta". scratch is reused for the fast reader's text and returned.
func ChunkText(data, scratch []byte, add func(text []byte)) []byte {
	if !bytes.Contains(data, []byte(`"delta"`)) {
		return scratch
	}
	text, ok := appendChunkTextFast(scratch[:0], data)
	if ok {
		add(text)
		return text
	}
	var d chatDeltaText
	if json.Unmarshal(data, &d) == nil {
		for _, c := range d.Choices {
			add(jsonkit.StringBytes(c.Delta.Content))
			for _, tc := range c.Delta.ToolCalls {
				add(jsonkit.StringBytes(tc.Function.Arguments))
			}
		}
	}
	return text
}

// appendChunkTextFast appends the text of one alpha chat chunk exactly as decoding it into chatDeltaText
// would, without reflection: a validity pass, then a scan of choices[].delta.{content,
// tool_calls[].function.arguments}. It reports false whenever its answer could differ from encoding/json's
// — a field of the wrong type, a repeated field, a key encoding/json would match case-insensitively or
// after unescaping — and the caller then decodes the chunk with encoding/json (what was appended to dst
// is then to be dropped).
func appendChunkTextFast(dst, data []byte) ([]byte, bool) {
	if !json.Valid(data) {
		return dst, false
	}
	choices, ok := jsonkit.Member(data, "choices")
	if !ok {
		return dst, false
	}
	ok = jsonkit.EachElement(choices, func(choice []byte) bool {
		delta, ok := jsonkit.Member(choice, "delta")
		if !ok {
			return false
		}
		content, calls, ok := jsonkit.Members2(delta, "content", "tool_calls")
		if !ok {
			return false
		}
		if dst, ok = jsonkit.AppendText(dst, content); !ok {
			return false
		}
		return jsonkit.EachElement(calls, func(call []byte) bool {
			fn, ok := jsonkit.Member(call, "function")
			if !ok {
				return false
			}
			args, ok := jsonkit.Member(fn, "arguments")
			if !ok {
				return false
			}
			dst, ok = jsonkit.AppendText(dst, args)
			return ok
		})
	})
	return dst, ok
}
