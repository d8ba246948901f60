package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/dataplane/tokencount"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// CountLocally is the LocalUsageFunc backed by package tokencount: for a content-generation request whose
// upstream reported no usage it counts the prompt and the collected output text locally; found is false
// when the tokenizer is compiled out.
func CountLocally(kind vocab.Kind, op vocab.Operation, model string, reqBody []byte, output string) (usage.Usage, bool) {
	if !op.IsGeneration() || !tokencount.Supported() {
		return usage.Usage{}, false
	}
	u, _, err := tokencount.Count(kind, model, reqBody, output)
	if err != nil {
		return usage.Usage{}, false
	}
	return u, true
}

// includesUsage reports whether an alpha chat request asks for the final usage chunk
// (stream_options.include_usage).
func includesUsage(body []byte) bool {
	s, e, found, _ := vocab.TopLevelField(body, "stream_options")
	return found && vocab.IsTrue(body[s:e], "include_usage")
}

// textCollector wraps a stream's usage accumulator and keeps the text of alpha chat deltas (content and
// tool-call arguments), for local counting when the upstream reports no usage.
type textCollector struct {
	next usage.Accumulator
	b    strings.Builder
}

type chatDelta struct {
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

func (t *textCollector) ObserveHeader(h http.Header) { t.next.ObserveHeader(h) }

func (t *textCollector) Observe(data []byte) error {
	if bytes.Contains(data, []byte(`"delta"`)) {
		var d chatDelta
		if json.Unmarshal(data, &d) == nil {
			for _, c := range d.Choices {
				t.b.WriteString(c.Delta.Content)
				for _, tc := range c.Delta.ToolCalls {
					t.b.WriteString(tc.Function.Arguments)
				}
			}
		}
	}
	return t.next.Observe(data)
}

func (t *textCollector) Result() (usage.Usage, bool) { return t.next.Result() }
